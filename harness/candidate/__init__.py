"""The UNTRUSTED side: a process that imports one solution and runs what the judge asks.

Runs in the candidate process (`python -m harness.candidate`, started by the
judge, sandboxed before it imports torch). It never sees the reference model,
the comparison or the verdict; what it says (its own CUDA events, where its
outputs are, custom_share) is data the judge checks against what it reads and
measures itself. See serve.py.

May import: records.py, shared/, build/load.py. Never judge/.
"""
