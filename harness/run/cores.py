"""CPU cores that builds and other tasks cannot take from a GPU lane while it times.

A lane's judge and candidate time a task while the host builds other solutions and
other lanes check theirs (DESIGN.md, Timing: "the timing judge and its candidate get
cores that builds and other tasks cannot take"). Nice values alone did not keep them
apart: on 4 H100s with 60 builds beside them a Triton JIT timed out and a LayerNorm read
`timing_mismatch` (issue 30). So each lane gets PER_LANE cores of its own (with their
SMT siblings, which share the core's pipeline), and everything else kbench starts
(builds and their compilers, judges waiting their turn, GPU health checks) gets the
rest. The split is an affinity set by kbench, never asked of the processes themselves:
- a build process is born on the rest: the build pool's threads are pinned there
  (pin_this_thread), and a process inherits the mask of the thread that starts it;
- a judge is born on the rest too (spawning_on), and while it waits its `import torch`
  and its candidate's take no lane's core; when its lane hands it a task, kbench moves
  the judge and everything it started to the lane's cores (pin_tree), before the task's
  spec is sent, so before any solution code runs in the candidate.
The judge watches its own scheduling while it times (judge/timing.py). The candidate and
a build run solution code and can widen their own masks (Landlock does not stop
sched_setaffinity); the split keeps honest neighbours apart, not hostile ones.

Where too few cores exist for PER_LANE per lane and MIN_REST for the rest (a 2-core CI
box), nothing is reserved and the run says so once. Runs in kbench's process; imports
nothing of ours.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

PER_LANE = 2  # cores per GPU lane: the judge's and the candidate's
MIN_REST = 2  # cores left for builds, judges started ahead and kbench itself, or nothing is reserved


@dataclass(frozen=True)
class CoreSplit:
    """Each lane's CPUs (by lane, in the order of the run's GPUs) and the rest's; no lane
    CPUs and `why_not` where nothing is reserved."""

    lanes: tuple[tuple[int, ...], ...] = ()
    rest: tuple[int, ...] = ()
    why_not: str = ""

    @property
    def reserved(self) -> bool:
        return bool(self.lanes) and all(self.lanes)

    def lane(self, index: int) -> tuple[int, ...]:
        """Lane `index`'s CPUs; () where nothing is reserved."""
        return self.lanes[index] if self.reserved and index < len(self.lanes) else ()

    def spare(self) -> tuple[int, ...]:
        """Where everything but a timing lane runs; () where nothing is reserved."""
        return self.rest if self.reserved else ()

    def describe(self, gpu_numbers: Iterable[int | str] | None = None) -> str:
        """The run-level line: which cores each GPU lane times on, or why none are reserved."""
        if not self.reserved:
            return f"cores: none reserved for timing ({self.why_not})"
        numbers = list(gpu_numbers) if gpu_numbers is not None else list(range(len(self.lanes)))
        per = "; ".join(f"GPU {n}: CPUs {cpu_list(cpus)}" for n, cpus in zip(numbers, self.lanes))
        return (f"cores: reserved for timing, {per}; builds and judges waiting their turn on CPUs "
                f"{cpu_list(self.rest)}")


def split(cpus: Iterable[int], lanes: int, siblings: Mapping[int, Iterable[int]] | None = None,
          per_lane: int = PER_LANE, min_rest: int = MIN_REST) -> CoreSplit:
    """`per_lane` physical cores for each of `lanes` lanes out of `cpus`, taken from the top
    (CPU 0 takes the host's interrupts and daemons: it stays with the rest), each with
    its SMT siblings (`siblings`: CPU -> the CPUs of its core, from sysfs), and at least
    `min_rest` cores left; else nothing reserved, and why."""
    available = sorted(set(cpus))
    cores = physical_cores(available, siblings or {})
    wanted = lanes * per_lane
    if lanes < 1:
        return CoreSplit(rest=tuple(available), why_not="no GPU lane")
    if len(cores) < wanted + min_rest:
        return CoreSplit(rest=tuple(available), why_not=(
            f"{_count(len(cores), 'core')} for {_count(lanes, 'GPU lane')}: too few for {per_lane} per lane and "
            f"{min_rest} for builds; lanes and builds share them, builds at a lower priority"))
    taken = cores[len(cores) - wanted:]
    by_lane = tuple(tuple(sorted(c for core in taken[i * per_lane:(i + 1) * per_lane] for c in core))
                    for i in range(lanes))
    rest = tuple(sorted(c for core in cores[:len(cores) - wanted] for c in core))
    return CoreSplit(by_lane, rest)


def physical_cores(cpus: list[int], siblings: Mapping[int, Iterable[int]]) -> list[tuple[int, ...]]:
    """`cpus` grouped by physical core (SMT siblings together, only those in `cpus`), in
    the order of each core's lowest CPU."""
    seen: set[int] = set()
    cores = []
    for cpu in sorted(cpus):
        if cpu in seen:
            continue
        core = tuple(sorted({cpu, *(s for s in siblings.get(cpu, ()) if s in cpus)}))
        seen.update(core)
        cores.append(core)
    return cores


def for_run(lanes: int, enabled: bool = True) -> CoreSplit:
    """This process's CPUs (its affinity, as a container or `taskset` gave it) split for
    `lanes` GPU lanes; nothing reserved when `enabled` is off (--no-reserve-cores)."""
    cpus = os.sched_getaffinity(0)
    if not enabled:
        return CoreSplit(rest=tuple(sorted(cpus)), why_not="--no-reserve-cores")
    return split(cpus, lanes, sibling_map(cpus))


def sibling_map(cpus: Iterable[int]) -> dict[int, tuple[int, ...]]:
    """CPU -> the CPUs of its physical core, from sysfs; empty where it cannot be read."""
    found = {}
    for cpu in cpus:
        try:
            text = open(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list").read()
        except OSError:
            continue
        found[cpu] = parse_cpu_list(text)
    return found


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """'0-3,8,10-11' -> (0, 1, 2, 3, 8, 10, 11)."""
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return tuple(out)


def cpu_list(cpus: Iterable[int]) -> str:
    """(0, 1, 2, 3, 8, 10, 11) -> '0-3,8,10-11', as taskset and sysfs write them."""
    runs: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


# -- applying it -------------------------------------------------------------------

def pin_this_thread(cpus: Iterable[int]) -> None:
    """The calling thread (Linux: pid 0 is the thread) on `cpus`; threads and processes it
    starts from now on inherit it. Nothing where `cpus` is empty."""
    cpus = set(cpus)
    if cpus:
        os.sched_setaffinity(0, cpus)


@contextlib.contextmanager
def spawning_on(cpus: Iterable[int]) -> Iterator[None]:
    """Processes started by this thread inside the block are born on `cpus` (the calling
    thread's mask is what a fork copies), and the thread gets its own mask back after."""
    cpus = set(cpus)
    if not cpus:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def pin_tree(pid: int, cpus: Iterable[int], passes: int = 5) -> bool:
    """Every thread of `pid` and of every process under it on `cpus`. Called while none of
    them runs solution code (a judge and its candidate before the task's spec), and
    repeated until a pass finds nothing to move: a thread started meanwhile by one not
    moved yet is caught by the next pass, one started by a moved one inherits. True once
    all are on `cpus` (False if a pass limit was reached, or nothing was asked)."""
    want = set(cpus)
    if not want:
        return False
    for _ in range(passes):
        moved = 0
        for tid in _threads(_tree(pid)):
            try:
                if os.sched_getaffinity(tid) != want:
                    os.sched_setaffinity(tid, want)
                    moved += 1
            except OSError:  # gone meanwhile
                continue
        if not moved:
            return True
    return False


def _tree(pid: int) -> list[int]:
    """`pid` and every process under it: from each thread's `children` file where the
    kernel has them (CONFIG_PROC_CHILDREN: a few reads), else from the process table."""
    kids = _children_file if _HAS_CHILDREN_FILES else _children_table()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        if p not in out:
            out.append(p)
            todo.extend(kids(p))
    return out


_HAS_CHILDREN_FILES = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def _children_file(pid: int) -> list[int]:
    found = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:  # gone meanwhile: its children come to the judge, a subreaper, and the next pass
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found.extend(int(c) for c in f.read().split())
        except OSError:
            continue
    return found


def _children_table():
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    parent = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(parent, []).append(int(entry))
    return lambda pid: kids.get(pid, [])


def _threads(pids: list[int]) -> list[int]:
    tids = []
    for pid in pids:
        try:
            tids.extend(int(t) for t in os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return tids
