"""Code that more than one kind of process runs: the bottom of kbench, above records.py.

Runs in kbench's process, the build processes, the judge and the candidate alike.

- sandbox.py (ctypes only): Landlock and prctl confinement, called by every child
  that runs solution code before it imports anything else.
- isolate.py: starting children (build, judge, probes) in their own process groups,
  logs capped, deaths named; kbench's process and the judge. templates.py: judges
  forked from a template process (harness/judge/template.py) rather than exec'd;
  forked.py: a forked child handled as a Popen (kbench's judges, a judge's candidate).
- channel.py: the wire format between the judge and the candidate (messages,
  tensors lent through file descriptors). The only candidate-facing code the judge
  shares.
- batches.py, locate.py, cuda_ipc.py: a timed batch of calls, where its outputs
  are, and CUDA IPC, run alike by the judge (the reference) and the candidate.
- precision.py, stats.py, cache_dir.py: --precision casts, statistics, the cache folder.

May import: records.py and each other. Nothing here imports a stage folder.
"""
