"""The run stage: a `kbench run` from the command line to the last report.

Runs in kbench's process, and in Dask workers for `--executor dask`.
pipeline.py is the run itself (the run folder, --resume, the build stage, the
tasks, the reports as they finish); executors.py says where tasks run (inline,
this host's GPU lanes, or dask_cluster.py, fed by dask_feed.py, with dask_worker.py
inside the workers); work.py is one task on the host that
runs it (its build, its judge); launch.py starts a judge process (python -m
harness.judge) and reads its result; early_judges.py, health.py, gpus.py and
roofline.py look after the GPUs; cores.py gives each GPU lane CPU cores that
builds and other tasks cannot take; clock.py, lock.py, task_seconds.py and
usage.py keep the run's own time, its folder's lock, the tasks' last times and
the user's mistakes.

May import every other stage folder (it drives them); nothing imports run/
except harness/api.py and the package's top.
"""
