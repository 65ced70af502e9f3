"""Confinement for the processes that run untrusted solutions.

Stdlib and ctypes only (no torch), so a child can call `restrict` before it
imports anything a solution could tamper with. Landlock needs no privileges
and no setup outside the process: the child shuts itself in, irrevocably, and
everything it starts afterwards inherits the walls. The prctl helpers make
sure nothing a solution starts outlives the task or is reachable by it.
"""
from __future__ import annotations

import ctypes
import os
import platform
import select
import signal
import stat
import subprocess
import sys
import time

# Landlock syscalls have the generic numbers on x86_64 and aarch64 alike; other
# architectures are not assumed (a wrong number would call another syscall).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_KNOWN_ARCH = {"x86_64", "aarch64"}
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1

# include/uapi/linux/landlock.h
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_REMOVE_DIR, _FS_REMOVE_FILE, _FS_MAKE_CHAR, _FS_MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
_FS_MAKE_REG, _FS_MAKE_SOCK, _FS_MAKE_FIFO, _FS_MAKE_BLOCK = 1 << 8, 1 << 9, 1 << 10, 1 << 11
_FS_MAKE_SYM, _FS_REFER, _FS_TRUNCATE = 1 << 12, 1 << 13, 1 << 14  # REFER: ABI 2, TRUNCATE: ABI 3
# _FS_IOCTL_DEV (1 << 15, ABI 5) is deliberately never handled: GPU drivers work through ioctls.
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

_FS_READ = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
_FS_WRITE_V1 = (_FS_WRITE_FILE | _FS_REMOVE_DIR | _FS_REMOVE_FILE | _FS_MAKE_CHAR | _FS_MAKE_DIR | _FS_MAKE_REG
                | _FS_MAKE_SOCK | _FS_MAKE_FIFO | _FS_MAKE_BLOCK | _FS_MAKE_SYM)
_FS_FILE_ONLY = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE  # the rights a rule on a file may hold

# include/uapi/linux/prctl.h
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER, _PR_SET_NO_NEW_PRIVS = 1, 4, 36, 38
_PR_SET_THP_DISABLE, _PR_CAPBSET_DROP = 41, 24
_CAPSET_NR = {"x86_64": 126, "aarch64": 91}
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

# The device files a confined process may write: what Python, torch and CUDA open
# read-write. Not all of /dev: a process running as root may open /dev/sda or
# /dev/mem for writing whatever Landlock says of the files on them, and a terminal
# (/dev/tty, /dev/pts) takes keystrokes injected with TIOCSTI.
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/shm")
_DEVICE_PREFIXES = ("nvidia",)  # /dev/nvidia0, nvidiactl, nvidia-uvm, nvidia-caps/, ...

# The exit code of a child that would have run solution code unconfined and was told
# not to (--require-sandbox): its parent names the cause instead of "exited with code 78".
REFUSED_EXIT = 78


class SandboxUnavailable(Exception):
    """The kernel has no Landlock (too old, disabled at boot, not Linux): the task runs unconfined."""


class _RulesetAttr(ctypes.Structure):
    # Grew with the ABI: 8 bytes up to ABI 3, 16 from ABI 4 (net), 24 from ABI 6 (scoped).
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the uapi header: 12 bytes, not 16
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
if _libc is not None:
    _libc.syscall.restype = ctypes.c_long  # not the default int: syscall(2) returns long


def _syscall(nr: int, *args) -> int:
    ret = _libc.syscall(ctypes.c_long(nr), *args)
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret


def _prctl(option: int, arg: int) -> None:
    if _libc is None:
        raise OSError("prctl needs Linux")
    z = ctypes.c_ulong(0)
    if _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), z, z, z) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none."""
    if _libc is None or platform.machine() not in _KNOWN_ARCH:
        return 0
    try:
        return _syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except OSError:  # ENOSYS (not built in), EOPNOTSUPP (disabled at boot)
        return 0


def device_files() -> list[str]:
    """The device files and folders a confined process may write (_DEVICES says why so few)."""
    try:
        found = [os.path.join("/dev", n) for n in sorted(os.listdir("/dev")) if n.startswith(_DEVICE_PREFIXES)]
    except OSError:
        found = []
    return [*_DEVICES, *found]


def drop_capabilities() -> bool:
    """Give up every capability, for this process and whatever it executes: a
    process running as root keeps, inside Landlock, the rights Landlock does not
    cover (loading a kernel module, raising its own priority above the tasks being
    timed, raw I/O, reading files by handle). The bounding set goes first (it needs
    CAP_SETPCAP, which the next step drops), so that a program it executes does not
    get root's capabilities back. False where this is not Linux on a known arch."""
    nr = _CAPSET_NR.get(platform.machine())
    if _libc is None or nr is None:
        return False
    for cap in range(64):  # past the last capability the kernel knows, the prctl says EINVAL
        try:
            _prctl(_PR_CAPBSET_DROP, cap)
        except OSError:
            if cap > 40:
                break
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable; two 32-bit halves each
    _syscall(nr, ctypes.byref(header), ctypes.byref(data))
    return True


def restrict(writable: list[str]) -> str:
    """Irrevocably confine the calling process and all it starts later: read and
    execute anywhere, write only beneath `writable` and a few device files
    (device_files), no capabilities, no TCP (ABI 4+), no
    signals or abstract unix sockets outside the sandbox (ABI 6+). Call it while
    the process has one thread: Landlock (before ABI 8) confines only the
    calling thread, and an unconfined sibling thread shares memory with the
    solution. Point TMPDIR (torch.compile, tempfile) and caches inside `writable`.
    Returns what was enforced, in words."""
    abi = landlock_abi()
    if abi < 1:
        raise SandboxUnavailable("Landlock is not available in this kernel")
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        raise RuntimeError(f"restrict() needs a single-threaded process (this one has {threads}); call it before importing torch")
    # Ask only for what this ABI knows: a newer right makes an older kernel refuse the whole ruleset.
    write = _FS_WRITE_V1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(_FS_READ | write, _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0,
                        _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = _syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    allowed = []
    try:
        # CUDA fails to initialise (error 304) unless it may write files of its own threads
        # under /proc/self/task (seen on an H100, driver 580). /proc/self resolves now, to
        # this process alone: /proc/sys and other processes stay read-only, and a process
        # started after restrict() cannot initialise CUDA.
        rules = ([("/", _FS_READ)] + [(p, write) for p in [*writable, *device_files()]]
                 + [("/proc/self/task", write & _FS_FILE_ONLY)])
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # a missing path needs no rule: nothing there to write to
            try:
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    access &= _FS_FILE_ONLY  # directory rights on a file rule are EINVAL
                rule = _PathBeneathAttr(access, fd)
                _syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                         ctypes.byref(rule), ctypes.c_uint32(0))
            finally:
                os.close(fd)
            if access & write:
                allowed.append(path)
        # Required by landlock_restrict_self without CAP_SYS_ADMIN; also stops setuid binaries gaining rights.
        _prctl(_PR_SET_NO_NEW_PRIVS, 1)
        _syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    caps = drop_capabilities()
    shown = [p for p in allowed if not p.startswith("/dev/")] + ["device files"]
    return (f"landlock ABI {abi}: writes only under {', '.join(shown)}; "
            f"{'no capabilities' if caps else 'capabilities kept (unknown arch)'}; "
            f"{'no TCP' if abi >= 4 else 'TCP allowed (ABI < 4)'}; "
            f"{'signals scoped' if abi >= 6 else 'signals not scoped (ABI < 6)'}")


def confine(writable: list[str], who: str) -> str | None:
    """restrict() for a child's __main__, before it imports anything a solution can
    reach. Returns what was enforced, or None where the kernel has no Landlock: then
    the child says so in its log and runs unconfined, unless kbench was told to
    refuse (--require-sandbox sets KBENCH_REQUIRE_SANDBOX=1), where it exits with
    REFUSED_EXIT before any solution code runs."""
    try:
        return restrict(writable)
    except SandboxUnavailable as e:
        if os.environ.get("KBENCH_REQUIRE_SANDBOX") == "1":
            print(f"[kbench] {who} refused to run unconfined: {e} (--require-sandbox)", flush=True)
            os._exit(REFUSED_EXIT)
        print(f"[kbench] {who} not sandboxed: {e}", flush=True)
        return None


def read_written(path, limit: int = 1 << 20) -> bytes | None:
    """The bytes of a file a confined process wrote, for kbench to parse: None unless it is a
    plain file (not a link, a FIFO, whose read would wait for ever, or a device) of at most
    `limit` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        chunks, left = [], limit + 1
        while left > 0 and (chunk := os.read(fd, left)):
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        return data if len(data) <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


def scratch_env(scratch: str) -> dict[str, str]:
    """Where a confined process's temporary files and caches go: beneath its one
    writable folder, since /tmp, $HOME and the user's caches are not writable there
    (tempfile, nvcc and gcc use TMPDIR; Triton, torch.compile and others their caches)."""
    return {"TMPDIR": scratch, "TRITON_CACHE_DIR": os.path.join(scratch, "triton"),
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(scratch, "inductor"),
            "XDG_CACHE_HOME": os.path.join(scratch, "cache"), "PYTHONDONTWRITEBYTECODE": "1"}


def set_parent_death_signal(expected_parent: int) -> None:
    """SIGKILL this process when its parent dies. The signal follows the parent
    *thread* that forked us, so fork from a thread that outlives the child."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != expected_parent:  # the parent died before the prctl: no signal will come
        os._exit(1)


def become_subreaper() -> None:
    """Orphaned descendants (double forks, setsid daemons) become our children
    instead of init's, so kill_descendants can find them."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def make_undumpable() -> None:
    """Same-uid, non-root processes can no longer ptrace us or open /proc/<pid>/mem or fd."""
    _prctl(_PR_SET_DUMPABLE, 0)


def make_dumpable() -> None:
    """Undo make_undumpable in a process forked from one that called it (the default
    after exec): a forked candidate's judge reads its memory through /proc/<pid>/mem."""
    _prctl(_PR_SET_DUMPABLE, 1)


def disable_huge_pages() -> None:
    """No transparent huge pages for this process and the ones it starts (inherited, kept
    across exec): whether a process's heap gets them is luck of alignment, and the two
    sides of a CPU task are timed against each other on memory-bound calls. Best
    effort: a kernel without the prctl keeps its default."""
    try:
        _prctl(_PR_SET_THP_DISABLE, 1)
    except OSError:
        pass


def _fields(line: str) -> list[str]:
    """The fields of a /proc/<pid>/stat line from the state on (field 3). The comm
    field before them is user-chosen and may hold spaces and ')', so they resume
    after the LAST ')'."""
    return line[line.rindex(")") + 1:].split()


def _parse_stat(line: str) -> tuple[int, int, str]:
    """(pid, ppid, state) of one /proc/<pid>/stat line."""
    state, ppid = _fields(line)[:2]
    return int(line[: line.index("(")]), int(ppid), state


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_line(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read()
    except OSError:  # gone, or no /proc
        return None


_PF_EXITING = 0x4  # include/linux/sched.h: the task is in do_exit


def exiting(pid: int) -> bool:
    """Whether process `pid` is on its way out: in the kernel's exit path (a crash
    that is tearing down a large address space or a GPU context), a zombie, or
    gone. False for one that is alive, running, asleep or stopped."""
    line = _stat_line(pid)
    if not line or ")" not in line:
        return True
    fields = _fields(line)
    try:
        return fields[0] in ("Z", "X", "x") or bool(int(fields[6]) & _PF_EXITING)
    except (IndexError, ValueError):
        return False


def _all_stats() -> dict[int, list[str]]:
    """Every process's stat fields (from the state on), by pid; those gone since
    the listing are left out."""
    found = {}
    for name in os.listdir("/proc"):
        line = _stat_line(int(name)) if name.isdigit() else None
        if line and ")" in line:
            found[int(name)] = _fields(line)
    return found


def _cpu_of(fields: list[str], own: bool = True, reaped: bool = True) -> float:
    """CPU seconds of one process's stat fields: its own (all threads) and its reaped children's."""
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return ((utime + stime if own else 0) + (cutime + cstime if reaped else 0)) / _TICKS


def cpu_seconds(pid: int) -> float:
    """CPU seconds a process's own threads have used; 0 once gone. Counted in clock
    ticks (10 ms), so only sums over many readings mean much."""
    line = _stat_line(pid)
    return _cpu_of(_fields(line), reaped=False) if line else 0.0


def started_by(judge: int, candidate: int) -> float:
    """CPU seconds used by the processes a candidate started: its descendants (the
    ones it reaped included), and those it detached, which come to `judge` (a
    subreaper) outside the judge's own process group. The candidate's own threads
    are not counted."""
    stats = _all_stats()
    kids: dict[int, list[int]] = {}
    for pid, fields in stats.items():
        kids.setdefault(int(fields[1]), []).append(pid)
    group = lambda pid: stats[pid][2] if pid in stats else None  # noqa: E731 - the process group id
    todo = kids.get(candidate, []) + [p for p in kids.get(judge, []) if p != candidate and group(p) != group(judge)]
    # Children the candidate reaped took their time into its own line.
    total, seen = (_cpu_of(stats[candidate], own=False) if candidate in stats else 0.0), set()
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            total += _cpu_of(stats[pid])
            todo += kids.get(pid, [])
    return total


def _children_states(pid: int) -> list[tuple[int, str]]:
    return [(child, fields[0]) for child, fields in _all_stats().items() if int(fields[1]) == pid]


def children(pid: int) -> list[int]:
    """Pids whose parent is `pid`."""
    return [child for child, _ in _children_states(pid)]


def wait_exit(proc, timeout: float) -> bool:
    """Wait at most `timeout` s for `proc` (a Popen) to end, woken by the exit
    itself; True if it ended (and is reaped). Popen.wait(timeout) polls, at
    last every 50 ms, which on an H100 host added up to 50 ms to every task whose
    candidate took ~0.1 s to die (its CUDA context's teardown)."""
    if proc.poll() is not None:
        return True
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # before Linux 5.3, or not Linux: poll as Popen does
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        select.select([fd], [], [], max(0.0, timeout))  # readable once the process has exited
    finally:
        os.close(fd)
    return proc.poll() is not None


def kill_descendants(exclude: set[int] = frozenset(), deadline_s: float = 5.0) -> int:
    """SIGKILL and reap every child of ours not in `exclude`, pass after pass: as
    a subreaper, a killed child's own children come to us and die on the next
    pass. Race-free because a child's pid cannot be reused before we reap it.
    Returns how many live processes were killed (zombies are reaped, not counted)."""
    me, killed, end = os.getpid(), set(), time.monotonic() + deadline_s
    while True:
        left = [(p, s) for p, s in _children_states(me) if p not in exclude]
        if not left or time.monotonic() > end:
            return len(killed)
        for pid, state in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if state != "Z":
                killed.add(pid)
            try:
                os.waitpid(pid, os.WNOHANG)  # only pids we just killed: never a Popen the caller still waits on
            except ChildProcessError:
                pass  # reaped elsewhere, or SIGCHLD ignored
        time.sleep(0.01)
