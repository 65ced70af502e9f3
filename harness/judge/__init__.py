"""The TRUSTED side of a task: reference, comparison, statistics, verdict.

A judge process never imports solution code. It starts the candidate process
(harness.candidate), hands it inputs, checks what comes back with torch
functions the candidate never touched, times the reference itself and bounds
the candidate's self-reported samples by wall time it measures from outside.
"""
