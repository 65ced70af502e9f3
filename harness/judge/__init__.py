"""The TRUSTED side of a task: reference, comparison, timing, verdict.

Runs in the judge process (`python -m harness.judge`, started by run/launch.py,
one per task, or forked from a template that imported torch once: template.py),
which never imports solution code. It starts the candidate
process (harness.candidate) itself, lends it inputs, reads every output from
the candidate's memory while it is stopped, compares them with the reference
(check.py) and times both sides on its own clock (timing.py, with drain.py,
freeze.py, read.py); the verdict goes back on a pipe only it holds.

May import: records.py, shared/, build/load.py, discover/shapes.py. Never
candidate/: what the two sides share is shared/channel.py, the wire format
(template.py imports the candidate's modules by name, for the candidate it forks
to find them in memory; no judge code calls them).
"""
