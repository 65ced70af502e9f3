"""The UNTRUSTED side: a process that imports one solution and runs what the judge asks.

It never sees the reference model, the comparison or the verdict, and what it
returns (outputs, sample times, projections, custom_share) is data the judge
bounds and checks. See serve.py.
"""
