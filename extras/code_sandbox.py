"""Run untrusted Python code against assert tests in a sandbox; the score is the fraction of asserts that pass.

    >>> run_tests("def add(a, b):\\n    return a + b", ["assert add(1, 2) == 3", "assert add(2, 2) == 5"])
    0.5

`run_code` runs code in the same sandbox, with the same limits, and returns what it printed (the `python` tool
of tools.py): the harness then sends the code's stdout and stderr to a file of their own, never to the report.

One run:
1. The trainer splits each assert (`split_assert`). An assert that compares computed values with a literal (`==`,
   `!=`, `<`, `in`, `is True`, `is None`, ..., either way round, chained), a bare `assert f(x)`, and `not` of
   either, becomes a `Check`: only its computed operands go to the sandbox, to be evaluated; the literals and the
   comparison stay in the trainer. Any other assert (`f(x) == g(y)`, `and` / `or`) goes as it is.
2. A fresh process starts `python -I -c HARNESS` inside the sandbox (below), in a new session, with a
   minimal environment (`ENV`: no HF_TOKEN, AWS_*, ...), and gets the code, the asserts, the limits and a
   random token on stdin (marshal).
3. The harness lowers its own rlimits (`Limits`: CPU seconds, address space, processes, file size, open files,
   no core files), joins a new session keyring, installs the seccomp filter, sends its stdin/stdout/stderr to
   /dev/null, and runs the code.
   Then, in the code's namespace, it evaluates each operand and reports "<token> value <i> <repr>" when the
   value is plain data (builtin types only, no subclasses; numpy values through `.tolist()`), and runs each
   other assert and reports "<token> pass <i>" if it passes. Code that raises or exits scores 0.
4. After `Limits.timeout` seconds the parent SIGKILLs the sandbox's whole process group. It reads the report as
   bytes, `ast.literal_eval`s each value and makes each check's comparison itself (`_grade`, `holds`): nothing
   the code defined runs in the trainer. A report with a line the harness would not write scores 0.
   Score = asserts passed / asserts. Asserts that passed before a timeout still count.

Forging a pass of a checked assert therefore needs the values the trainer compares with, which the sandbox never
sees: an object whose `__eq__` is always True is not plain data, a report line written with a token dug out of
the harness's memory is a second line for its job, and rewriting the jobs in the harness's memory changes only
what is evaluated (or the kind of line, which voids the report), never what the trainer compares it with.
Asserts that compare two computed values (`assert f(x) == g(y)`) or use `and` / `or` still run inside the sandbox,
where the code can subvert them.

Sandbox modes, strongest first; `sandbox_mode()` picks the first that runs a trivial job on this machine
(set CODE_SANDBOX=bwrap|unshare|rlimits to require one, e.g. CODE_SANDBOX=bwrap in production):

    bwrap    bubblewrap (`apt-get install bubblewrap`; tested with 0.8.0). New mount, network, pid, ipc and uts
             namespaces: no network at all (only its own loopback); it sees only /usr and the Python install,
             read-only, a minimal /dev and its own /proc, and writes only to two fresh tmpfs, /sandbox (its cwd,
             HOME and TMPDIR) and /dev/shm, `Limits.disk` bytes each, gone when the run ends; it cannot see or
             signal any process outside; everything it started dies with it; no_new_privs.
    unshare  util-linux `unshare`: new network, pid, ipc, uts and mount namespaces, so no network and no
             processes outside in view, and everything dies with it; but it sees the whole filesystem, can
             write wherever its uid may (/tmp, /dev/shm; as a non-root user, all of that user's files) and can
             connect to Unix sockets there.
    rlimits  rlimits, the minimal environment and the process group only: it can use the network, see other
             processes (as a non-root user: signal them, the trainer included, and read their environment in
             /proc), write wherever its uid may, and a child that calls setsid() outlives the timeout.

In every mode, when the trainer runs as root the code runs as an unprivileged uid of its own (`_uid`, one per
concurrent run, a fresh one after a run that left zombies, via `setpriv`, with no_new_privs): root ignores
RLIMIT_NPROC, may raise any rlimit again, and can do anything else. In rlimits mode, and after a timeout, every
process left under that uid is then killed.

In every mode the harness also caps open files (with `file_size`, this bounds memory held in memfd files),
joins a new, empty session keyring, so the trainer's keys are out of reach, and installs a seccomp filter
(`seccomp_filter`, where libseccomp and pyseccomp are installed) that fails keyctl, new namespaces (nested user
namespaces hand out capabilities), ptrace, bpf, io_uring and a few more with EPERM. As root, the code holds no
capabilities, bounding and inheritable sets included. The parent reads the report as bytes and scores 0 any
report with a line that is not the harness's, and removes the work directory with coreutils, however deep (as
root, also what the run's uid left in /tmp, /var/tmp and /dev/shm). Where the host lets us make memory cgroups
(`memory_cgroups`), each run joins one before its sandbox starts, capped at `Limits.total_memory`, and every
process left in it is killed after the run. `tests/e2e/test_code_reward.py` runs one hostile completion per attack
class in every mode, as root and as an ordinary user.

Not protected in any mode: kernel exploits through the syscalls the filter allows; without cgroups, total
memory, which is at most `Limits.processes * (Limits.memory + Limits.open_files * Limits.file_size)` per run;
CPU contention between runs; reward hacking of asserts that compare two computed values or use `and` / `or`,
which run inside the interpreter the code shares.
(Exiting early, printing fake reports, or replacing `exec`/`os._exit` score 0.)
"""

import ast
import atexit
import errno
import functools
import logging
import marshal
import operator
import os
import platform
import queue
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

logger = logging.getLogger(__name__)

MODES = ("bwrap", "unshare", "rlimits")
SYS_KEYCTL = {"x86_64": 250, "aarch64": 219, "i686": 288, "armv7l": 311}  # the keyctl syscall, per architecture
WORKDIR = "/sandbox"  # the code's cwd inside bwrap
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
       "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # the allowlist: nothing inherited
FENCED = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)  # a last block may be cut off


@dataclass(frozen=True)
class Limits:
    timeout: float = 10.0
    """Wall-clock seconds for the whole run (code and all asserts), start-up included."""
    cpu: int = 10
    """RLIMIT_CPU: CPU seconds per process."""
    memory: int = 512 << 20
    """RLIMIT_AS: bytes of address space per process."""
    processes: int = 8
    """RLIMIT_NPROC: processes and threads, the harness included."""
    file_size: int = 16 << 20
    """RLIMIT_FSIZE: the largest file it may write, in bytes."""
    open_files: int = 32
    """RLIMIT_NOFILE: open files per process. With `file_size` it caps memory held in files (memfd_create, which
    address space does not count): at most open_files x file_size bytes per process."""
    disk: int = 64 << 20
    """bwrap only: size of the tmpfs it may write to, in bytes."""
    total_memory: int = 1 << 30
    """Where the host lets us make memory cgroups (`memory_cgroups()`): bytes of memory for the whole run, all its
    processes, memfd and tmpfs files included, swap excluded. The kernel kills a process of the run past it."""


LIMITS = Limits()
MAX_OUTPUT = 4096  # run_code: bytes of output returned

# Runs inside the sandbox. Keep it stdlib-only and short: everything here is trusted.
HARNESS = r"""
import marshal, os, resource, sys
def main(run=exec, exit_now=os._exit, zip=zip):  # bound now: the code may replace builtins and os._exit
    job = marshal.loads(sys.stdin.buffer.read())  # marshal: importing json adds ~6 ms to each run
    limits = job["limits"]
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu"], limits["cpu"] + 1))
    for name, key in [("AS", "memory"), ("NPROC", "processes"), ("FSIZE", "file_size"), ("NOFILE", "open_files"),
                      ("CORE", None)]:
        value = limits[key] if key else 0
        resource.setrlimit(getattr(resource, "RLIMIT_" + name), (value, value))
    if job["keyctl"] or job["seccomp"]:
        import ctypes
        libc, ulong = ctypes.CDLL(None, use_errno=True), ctypes.c_ulong
    if job["keyctl"]:  # a new, empty session keyring: the trainer's keys (login, su -l, systemd) are out of reach
        libc.syscall(job["keyctl"], 1, None)  # KEYCTL_JOIN_SESSION_KEYRING, anonymous
    if job["seccomp"]:  # the parent's BPF program (seccomp_filter); from now on keyctl, unshare, ... fail with EPERM
        program = job["seccomp"]
        class Program(ctypes.Structure):  # struct sock_fprog
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
        if (libc.prctl(38, ulong(1), ulong(0), ulong(0), ulong(0))  # PR_SET_NO_NEW_PRIVS, which seccomp requires
                or libc.prctl(22, ulong(2), ctypes.byref(Program(len(program) // 8, program)), ulong(0), ulong(0))):
            print("seccomp filter not installed:", os.strerror(ctypes.get_errno()), flush=True)  # fails the run
            exit_now(1)
    tests = []  # (kind, code): "value" evaluates an expression, whose value the trainer checks; "assert" runs one
    for kind, source in job["tests"]:
        try:
            tests.append((kind, compile(source, "<test>", "eval" if kind == "value" else "exec")))
        except SyntaxError:
            tests.append(("assert", compile("assert False", "<test>", "exec")))
    token = job["token"]
    report = os.fdopen(os.dup(1), "w", buffering=1)
    null = os.open(os.devnull, os.O_RDWR)
    output = job["output_fd"] if job["output_fd"] >= 0 else null  # run_code: what the code prints comes back
    os.dup2(null, 0)
    for fd in (1, 2):
        os.dup2(output, fd)
    if output != null:
        os.close(output)
        sys.stdout.reconfigure(line_buffering=True)  # lines in the order printed, and kept if the run is killed
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        run(compile(job.pop("code"), "<completion>", "exec"), namespace)
    except BaseException as error:  # SystemExit too: the code crashed, no assert passes
        if job["output_fd"] >= 0:
            if not isinstance(error, SystemExit):  # the traceback as Python prints it, from the code's frames on
                import traceback
                frames = error.__traceback__
                while frames and frames.tb_frame.f_code.co_filename != "<completion>":
                    frames = frames.tb_next
                traceback.print_exception(type(error), error, frames)
            flush()
        exit_now(0)
    if job["output_fd"] >= 0:
        flush()
    for i, (kind, test) in enumerate(tests):
        try:
            if kind == "assert":
                run(test, namespace)
                line = f"{token} pass {i}"
            else:
                line = f"{token} value {i} {plain_repr(evaluate(test, namespace))}"
        except BaseException:
            continue
        report.write(line + "\n")
    exit_now(0)  # skip atexit handlers and threads the code left behind
# repr() of a value made only of builtin types (exactly: no subclass), which the trainer can literal_eval; a value
# with a .tolist() (numpy) is read through it; anything else is "opaque", and fails its assert.
def plain_repr(value, repr=repr, getattr=getattr, callable=callable):
    if plain(value):
        return repr(value)
    if callable(getattr(value, "tolist", None)) and plain(value := value.tolist()):
        return repr(value)
    return "opaque"
def plain(value, type=type, all=all, atoms=(int, float, complex, str, bytes, bool, type(None)),
          containers=(list, tuple, set, frozenset)):
    kind = type(value)
    if kind in atoms:
        return True
    if kind in containers:
        return all(plain(item) for item in value)
    return kind is dict and all(plain(key) and plain(item) for key, item in value.items())
def flush():  # exit_now skips it; the code may have replaced or closed the streams
    for stream in (sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:
            pass
evaluate = eval
main()
"""


def extract_code(text: str) -> str:
    """Return the last ```python fenced block of `text`, else its last fenced block, else all of it.

    >>> extract_code("Here:\\n```python\\nx = 1\\n```\\nand ```\\ny = 2\\n```")
    'x = 1\\n'
    >>> extract_code("x = 3")
    'x = 3'
    """
    blocks = FENCED.findall(text)
    python = [code for lang, code in blocks if lang.lower() in ("python", "py", "python3")]
    return (python or [code for _, code in blocks] or [text])[-1]


def split_tests(tests) -> list[str]:
    """Return the asserts of a `tests` cell: a string with one assert per line, or a list of them.

    >>> split_tests("assert f(1) == 1\\n\\n  assert f(2) == 4")
    ['assert f(1) == 1', 'assert f(2) == 4']
    >>> split_tests(None), split_tests([])
    ([], [])
    """
    if tests is None:
        return []
    lines = tests.splitlines() if isinstance(tests, str) else tests
    return [line.strip() for line in lines if line and line.strip()]


# ---- the sandbox modes --------------------------------------------------------------------------------------------


# Syscalls that Python code has no need for and that kernel exploits and sandbox escapes start from. The filter
# fails them with EPERM (clone3 with ENOSYS, so that glibc falls back to clone, whose flags a filter can read).
BLOCKED_SYSCALLS = ("keyctl", "add_key", "request_key",  # the kernel's keyrings: the trainer's secrets
                    "unshare", "setns",  # new namespaces: nested user namespaces hand out capabilities
                    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
                    "ptrace", "process_vm_readv", "process_vm_writev", "kexec_load", "mount", "umount2", "pivot_root")
CLONE_NEW = {"NEWNS": 0x20000, "NEWCGROUP": 0x2000000, "NEWUTS": 0x4000000, "NEWIPC": 0x8000000,
             "NEWUSER": 0x10000000, "NEWPID": 0x20000000, "NEWNET": 0x40000000}  # clone(2) flags for new namespaces


@functools.cache
def seccomp_filter() -> bytes | None:
    """The seccomp BPF program the harness installs before the code runs, or None where libseccomp is missing.

    libseccomp compiles it (through pyseccomp, a ctypes binding: the harness itself installs the bytes with one
    prctl and needs no package). Everything is allowed except BLOCKED_SYSCALLS and clone() with a CLONE_NEW* flag.
    A process of another architecture (x32, i386 system calls) is killed.
    """
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError, RuntimeError) as err:  # RuntimeError: pyseccomp found no libseccomp
        logger.warning("code sandbox: no seccomp filter (%s); keyrings and nested namespaces stay open to the code. "
                       "Install libseccomp2 and pyseccomp.", err)
        return None
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in BLOCKED_SYSCALLS:
        try:
            rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
        except OSError:  # no such syscall on this architecture (aarch64 has no umount2 alias, ...)
            pass
    for flag in CLONE_NEW.values():  # clone's first argument is its flags on x86_64 and aarch64
        rules.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    with tempfile.TemporaryFile() as program:
        rules.export_bpf(program)
        program.seek(0)
        return program.read()


def _python_dirs(python: str) -> list[str]:
    """The directories that hold `python` (for this Python: venv and base install), outside /usr, for bwrap to bind
    read-only."""
    dirs = {os.path.dirname(os.path.realpath(python))}
    if python == sys.executable:
        for path in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
            dirs |= {os.path.abspath(path), os.path.realpath(path)}
    dirs = {d for d in dirs if d != "/usr" and not d.startswith("/usr/")}
    return sorted(d for d in dirs if not any(d.startswith(other + "/") for other in dirs))


def _bwrap(limits: Limits, as_root: bool, python: str) -> list[str]:
    args = ["bwrap", "--die-with-parent", "--new-session", "--unshare-net", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--ro-bind", "/usr", "/usr"]
    if as_root:  # root needs no user namespace; setpriv drops to `_uid` inside, with only these capabilities
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
    else:
        args += ["--unshare-user"]
    for path in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):  # symlinks into /usr on merged-/usr systems
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    python_dirs = _python_dirs(python)
    parents = {os.path.dirname(d) for d in python_dirs}
    parents = {p for d in parents for p in _ancestors(d)}
    for parent in sorted(parents, key=lambda p: p.count("/")):  # else bwrap creates them 0700, unreadable to _uid
        args += ["--perms", "0755", "--dir", parent]
    for d in python_dirs:
        args += ["--ro-bind", d, d]
    args += ["--proc", "/proc", "--dev", "/dev"]
    for tmpfs in (WORKDIR, "/dev/shm"):  # the only writable places; /dev/shm for multiprocessing's semaphores
        args += ["--perms", "1777", "--size", str(limits.disk), "--tmpfs", tmpfs]
    args += ["--remount-ro", "/", "--remount-ro", "/dev", "--chdir", WORKDIR, "--clearenv"]
    for key, value in {**ENV, "HOME": WORKDIR, "TMPDIR": WORKDIR}.items():
        args += ["--setenv", key, value]
    return args + ["--"]


def _ancestors(path: str) -> list[str]:
    """'/a/b/c' -> ['/a', '/a/b', '/a/b/c']."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts)) if parts[0]]


def _unshare(as_root: bool) -> list[str]:
    user = [] if as_root else ["--user", "--map-current-user"]
    return ["unshare", *user, "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child", "--mount-proc", "--"]


def _setpriv(uid: int | None) -> list[str]:
    if uid is None:
        return ["setpriv", "--no-new-privs", "--"]
    # the new uid has no effective or permitted capabilities; emptying the inheritable and bounding sets too means
    # nothing it runs can gain one back
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
            "--no-new-privs", "--"]


# One slot per core, shared among the training processes on this node (LOCAL_WORLD_SIZE, set by torchrun and
# accelerate): at most that many runs at once in this process, each with a uid of its own when we are root.
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
_WORKERS = min(64, max(1, _CORES // int(os.environ.get("LOCAL_WORLD_SIZE", 1))))
_SLOTS: queue.Queue = queue.Queue()
for _slot in range(_WORKERS):
    _SLOTS.put(_slot)


UIDS_PER_SLOT = 8
_GENERATION = [0] * _WORKERS  # per slot: which of its uids runs next


def _uid(slot: int, generation: int = 0) -> int:
    """An unprivileged uid unique to this process, slot and generation (pids < 2**22: below 2**32), far above real
    users and subuid ranges."""
    return 1_000_000_000 + (os.getpid() * 64 + slot) * UIDS_PER_SLOT + generation


def _next_uid_if_used(slot: int, uid: int) -> None:
    """Move `slot` on to its next uid if processes of `uid` are left: killed processes stay zombies, which count
    against RLIMIT_NPROC, until init reaps them, which can take seconds (or forever, where the trainer is PID 1 of
    a container). The next run on this slot would otherwise be unable to fork."""
    for entry in os.scandir("/proc"):
        try:
            if entry.name.isdigit() and entry.stat().st_uid == uid:
                _GENERATION[slot] = (_GENERATION[slot] + 1) % UIDS_PER_SLOT
                return
        except OSError:  # gone
            pass


@functools.cache
def memory_cgroups() -> tuple[str, int] | None:
    """(directory, cgroup version) under which each run gets a memory cgroup of its own, or None where the host does
    not allow it: a cgroup v2 subtree with the memory controller delegated to us, or a writable v1 memory hierarchy
    (as root, usually). Probed once, by making this process's first slot cgroup."""
    for directory, version in _own_cgroups():
        if version == 2:  # children get the memory controller only if it is in our subtree_control
            try:
                with open(os.path.join(directory, "cgroup.controllers")) as available:
                    if "memory" not in available.read().split():  # not ours to hand out (or bound to v1)
                        continue
                with open(os.path.join(directory, "cgroup.subtree_control"), "r+") as control:
                    if "memory" not in control.read().split():
                        control.write("+memory")  # refused where our own cgroup holds processes
            except OSError:
                continue
        if _slot_cgroup(0, (directory, version)):
            return directory, version
    return None


def _own_cgroups() -> list[tuple[str, int]]:
    """The directories of this process's cgroup v2 and cgroup v1 memory cgroup, where they are mounted."""
    try:
        with open("/proc/self/cgroup") as own, open("/proc/self/mountinfo") as mounts:
            own = own.read().splitlines()
            mounts = mounts.read().splitlines()
    except OSError:
        return []
    paths = {}  # version -> our cgroup's path in its hierarchy ("hierarchy-id:controllers:path" lines)
    for line in own:
        _, controllers, path = line.split(":", 2)
        if not controllers:
            paths[2] = path
        elif "memory" in controllers.split(","):
            paths[1] = path
    found = []
    for mount in mounts:  # "... root mount-point options - fstype source super-options"
        fields = mount.split()
        kind = fields[fields.index("-") + 1]
        options = fields[fields.index("-") + 3].split(",")
        version = {"cgroup2": 2, "cgroup": 1 if "memory" in options else None}.get(kind)
        root = fields[3]
        mount_point = fields[4]
        path = paths.get(version)
        if path is not None and path.startswith(root):
            directory = os.path.normpath(os.path.join(mount_point, os.path.relpath(path, root)))
            if os.path.isdir(directory):
                found.append((directory, version))
    return sorted(found, key=lambda found: -found[1])  # v2 first


_CGROUPS: dict[int, str] = {}  # slot -> its cgroup, made once, removed at exit
_CGROUP_LIMITS: dict[str, int] = {}  # cgroup -> the total_memory it was last given


def _slot_cgroup(slot: int, where: tuple[str, int] | None = None) -> str | None:
    """The memory cgroup of `slot` (made on first use), or None."""
    if slot in _CGROUPS:
        return _CGROUPS[slot]
    if (where := where or memory_cgroups()) is None:
        return None
    path = os.path.join(where[0], f"code-sandbox-{os.getpid()}-{slot}")
    try:
        os.makedirs(path, exist_ok=True)
        limit = "memory.max" if where[1] == 2 else "memory.limit_in_bytes"
        with open(os.path.join(path, limit), "w") as file:  # writable: the controller is there and ours
            file.write(str(LIMITS.total_memory))
    except OSError as err:
        logger.debug("code sandbox: no memory cgroup at %s: %s", path, err)
        return None
    _CGROUPS[slot] = path
    return path


def _limit_memory(cgroup: str, total: int) -> None:
    """Set `cgroup`'s memory limit to `total` bytes, swap included (v1) or no swap (v2); only when it changes, as
    every run calls this and a run's limits rarely differ from the last one's."""
    if _CGROUP_LIMITS.get(cgroup) == total:
        return
    _CGROUP_LIMITS[cgroup] = total  # forgotten below if a write fails, so that the next run tries again
    if os.path.exists(os.path.join(cgroup, "memory.max")):
        settings = [("memory.max", total), ("memory.swap.max", 0)]
    else:  # v1: memsw (memory + swap) may never be below the memory limit, so lift it first
        settings = [("memory.memsw.limit_in_bytes", -1), ("memory.limit_in_bytes", total),
                    ("memory.memsw.limit_in_bytes", total)]
    for name, value in settings:
        try:
            with open(os.path.join(cgroup, name), "w") as file:
                file.write(str(value))
        except FileNotFoundError:  # no swap accounting
            pass
        except OSError as err:  # EBUSY: more than `total` still charged (files a run left); the old limit stays
            logger.warning("code sandbox: cannot set %s of %s to %d: %s", name, cgroup, value, err)
            _CGROUP_LIMITS.pop(cgroup, None)


def _empty(cgroup: str, rounds: int = 1) -> None:
    """SIGKILL every process left in `cgroup`, whatever its session, process group or pid namespace; with more
    `rounds`, until it is empty. The processes of a run that was just killed may still be exiting: one round does
    not wait for them."""
    for _ in range(rounds):
        try:
            with open(os.path.join(cgroup, "cgroup.procs")) as procs:
                pids = [int(pid) for pid in procs.read().split()]
        except OSError:
            return
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if rounds > 1:
            time.sleep(0.01)


@atexit.register
def _remove_cgroups() -> None:
    for cgroup in _CGROUPS.values():
        _empty(cgroup, rounds=100)
        try:
            os.rmdir(cgroup)
        except OSError:
            pass
    _CGROUPS.clear()


# The comparisons an assert checked in the trainer may make, as Python makes them
COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
           ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}


@dataclass(frozen=True)
class Check:
    """An assert checked in the trainer: the sandbox evaluates `expressions` (the computed operands) and sends back
    their values as plain data; the trainer then evaluates `test`, the assert's condition, on those values and the
    literals, which never enter the sandbox.

    `test` is the condition's AST with each operand replaced by ast.Name `_v<i>` (expressions[i]) or `_c<i>`
    (literals[i]): a comparison chain with at least one literal operand, its `not`, or a single value (truthiness).
    """

    expressions: tuple[str, ...]
    literals: tuple
    test: ast.expr


def split_assert(test: str) -> Check | None:
    """How one assert is graded: a `Check` the trainer makes on plain values, or None for an assert run as it is in
    the sandbox. In the trainer: a comparison (or chain) with a literal on one side, `==`, `!=`, `<`, `<=`, `>`,
    `>=`, `in`, `not in`, `is` (`is True`, `is None`, ...), each either way round; bare truthiness (`assert f(x)`);
    and `not` of either. In the sandbox: comparisons of two computed values (`f(x) == g(y)`), `and` / `or`, and
    asserts with nothing computed (`assert True`), which pass only if the code ran to its end.

    >>> check = split_assert("assert add(1, 2) == 3, 'sum'")
    >>> check.expressions, check.literals, ast.unparse(check.test)
    (('add(1, 2)',), (3,), '_v0 == _c0')
    >>> [ast.unparse(split_assert(t).test) for t in ["assert f(0) is True", "assert not f(0)", "assert 0 < f(1) < 9"]]
    ['_v0 is _c0', 'not _v0', '_c0 < _v0 < _c1']
    >>> split_assert("assert f(0) == g(0)"), split_assert("assert f(0) and f(1)"), split_assert("assert 1 < 2")
    (None, None, None)
    """
    try:
        [node] = ast.parse(test).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(node, ast.Assert):
        return None
    expressions = []
    literals = []

    def operand(expression: ast.expr) -> ast.Name:
        try:
            literals.append(ast.literal_eval(expression))
            return ast.Name(f"_c{len(literals) - 1}")
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            expressions.append(ast.unparse(expression))
            return ast.Name(f"_v{len(expressions) - 1}")

    condition = node.test
    negated = False
    if isinstance(condition, ast.UnaryOp) and isinstance(condition.op, ast.Not):
        condition = condition.operand
        negated = True
    if isinstance(condition, ast.Compare):
        if not all(type(op) in COMPARE for op in condition.ops):
            return None
        operands = [operand(e) for e in [condition.left, *condition.comparators]]
        if not literals:
            return None  # two computed values, compared inside the sandbox
        checked = ast.Compare(operands[0], condition.ops, operands[1:])
    elif isinstance(condition, ast.BoolOp):
        return None
    else:
        checked = operand(condition)
    if not expressions:  # `assert True`: nothing to compute, but it must still pass only if the code ran to its end
        return None
    return Check(tuple(expressions), tuple(literals), ast.UnaryOp(ast.Not(), checked) if negated else checked)


def holds(check: Check, values: list[bytes | None]) -> bool:
    """Whether `check` holds on the values the sandbox reported (a repr, or None when it sent none). Only plain data
    is read, with ast.literal_eval, and compared by the trainer's own operators: nothing the code defined runs here.
    A value that is missing, opaque or unreadable, or a comparison that raises (as `None < 3` does), fails.

    >>> holds(split_assert("assert 0 < f(1) < 9"), [b"4"]), holds(split_assert("assert f(1) is None"), [b"0"])
    (True, False)
    """
    def value(node: ast.expr):
        if isinstance(node, ast.UnaryOp):
            return not value(node.operand)
        if isinstance(node, ast.Compare):
            left = value(node.left)
            for op, comparator in zip(node.ops, node.comparators):
                right = value(comparator)
                if not COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        kind = node.id[1]
        index = int(node.id[2:])
        if kind == "c":
            return check.literals[index]
        if values[index] in (None, b"opaque"):
            raise ValueError("no plain value")
        return ast.literal_eval(values[index].decode())

    try:
        return bool(value(check.test))
    except Exception:  # not plain data after all, or a comparison Python would refuse: the assert fails
        return False


def _grade(output: bytes, token: str, jobs: list[list[str]], checks: list[tuple[int, Check | None]]) -> float | None:
    """The fraction of asserts passed, from the harness's report on `jobs` ([kind, source]: "value", an expression
    to evaluate, or "assert", an assert to run); `checks` gives for each assert its first job and its `Check` (None:
    the assert is one job, run in the sandbox). None if the report is not the harness's alone: a line of another
    form, or two lines for one job (the code wrote to the report's descriptor)."""
    prefix = f"{token} ".encode()
    reported = {}
    for line in output.splitlines():
        if not line.startswith(prefix):
            return None
        kind, _, rest = line[len(prefix):].partition(b" ")
        index, _, value = rest.partition(b" ")
        if not index.isdigit() or int(index) >= len(jobs) or int(index) in reported:
            return None
        if kind != {"assert": b"pass", "value": b"value"}[jobs[int(index)][0]] or (kind == b"pass") != (value == b""):
            return None
        reported[int(index)] = value
    passed = 0
    for first, check in checks:
        if check is None:
            passed += first in reported
        else:
            passed += holds(check, [reported.get(first + i) for i in range(len(check.expressions))])
    return passed / len(checks)


def _run(code: str, tests: list[str], limits: Limits, mode: str, python: str) -> float:
    """One sandboxed run of `python` in `mode`; the fraction of `tests` that passed."""
    token = secrets.token_hex(16)
    jobs = []
    checks = []
    for test in tests:
        check = split_assert(test)
        checks.append((len(jobs), check))
        jobs += [["value", e] for e in check.expressions] if check else [["assert", test]]
    output, _, _ = _sandboxed(code, jobs, token, limits, mode, python)
    # Bytes, never decoded as a whole: the code can write to the report's descriptor. A report with anything in it
    # that the harness would not write was tampered with (or the sandbox failed) and is not trusted.
    score = _grade(output, token, jobs, checks)
    if score is None:
        _explain(output)
        return 0.0
    return score


def _sandboxed(code: str, tests: list, token: str, limits: Limits, mode: str, python: str,
               capture: bool = False) -> tuple[bytes, bytes, int | None]:
    """Run the harness on `code` and `tests` in `mode`: (its report, what the code printed if `capture`, its exit
    status, None if it was still running at the timeout)."""
    as_root = os.geteuid() == 0
    printed = tempfile.TemporaryFile("w+b") if capture else None
    job = marshal.dumps({"code": code, "tests": tests, "token": token, "output_fd": printed.fileno() if capture else -1,
                         "limits": asdict(limits), "keyctl": SYS_KEYCTL.get(platform.machine()),
                         "seccomp": seccomp_filter() or b""}, 4)  # format 4: the system Python reads it too
    slot = _SLOTS.get()
    uid = _uid(slot, _GENERATION[slot]) if as_root else None
    workdir = tempfile.mkdtemp(prefix="code-sandbox-")
    try:
        # The job and the report are files without a name, so the code cannot find them in its directory;
        # the report is a regular file, so RLIMIT_FSIZE bounds it too.
        with tempfile.TemporaryFile("w+b") as job_file, tempfile.TemporaryFile("w+b") as out:
            job_file.write(job)
            job_file.seek(0)
            if uid is not None:  # the weaker modes run in `workdir`; bwrap uses its own tmpfs instead
                os.chown(workdir, uid, uid)
            prefix = {"bwrap": _bwrap(limits, as_root, python), "unshare": _unshare(as_root), "rlimits": []}[mode]
            if cgroup := _slot_cgroup(slot):  # the shell joins the cgroup, then becomes the sandbox: no fork escapes
                _limit_memory(cgroup, limits.total_memory)
                prefix = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', os.path.join(cgroup, "cgroup.procs"), *prefix]
            proc = subprocess.Popen([*prefix, *_setpriv(uid), python, "-I", "-c", HARNESS],
                                    stdin=job_file, stdout=out, stderr=subprocess.STDOUT, cwd=workdir,
                                    env={**ENV, "HOME": workdir, "TMPDIR": workdir}, start_new_session=True,
                                    pass_fds=[printed.fileno()] if capture else ())
            finished = _wait(proc, limits.timeout)
            _kill(proc, uid if mode == "rlimits" or not finished else None)
            if cgroup:
                _empty(cgroup)
            out.seek(0)
            output = out.read(1 << 20)
            if capture:
                printed.seek(0)
                captured = printed.read(MAX_OUTPUT + 1)
    finally:
        if capture:
            printed.close()
        _remove(workdir)
        if uid is not None:
            if mode != "bwrap":  # bwrap's code writes only to its own tmpfs
                _remove_files_of(uid)
            _next_uid_if_used(slot, uid)
        _SLOTS.put(slot)
    return output, captured if capture else b"", proc.returncode if finished else None


def _remove(path: str) -> None:
    """Delete a run's work directory whatever the code left in it: a tree too deep for shutil.rmtree's recursion,
    directories it made unreadable. coreutils' `chmod -R` and `rm -rf` walk iteratively. Never raises."""
    try:
        os.rmdir(path)  # empty: the usual case, and always under bwrap, whose code writes to its own tmpfs
        return
    except OSError:
        pass
    try:
        for command in (["chmod", "-R", "u+rwx", "--", path], ["rm", "-rf", "--", path]):
            subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        if os.path.lexists(path):
            logger.warning("code sandbox: could not remove %s", path)
    except OSError as err:
        logger.warning("code sandbox: could not remove %s: %s", path, err)


def _remove_files_of(uid: int) -> None:
    """Delete what a run's own `uid` left in the world-writable temporary directories (in /dev/shm it holds memory).

    The walk skips the directories `uid` cannot enter (not its own, no execute bit for others, as every mkdtemp,
    pytest and pip directory), below which it cannot have written: 200k files in such directories cost a run next
    to nothing (BENCHMARKS.md section 20). `-execdir` removes each entry from inside its parent, so no path is
    resolved again after the walk.
    """
    places = [d for d in dict.fromkeys([tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"]) if os.path.isdir(d)]
    subprocess.run(["find", *places, "-xdev", "-mindepth", "1",
                    "(", "-user", str(uid), "-prune", "-execdir", "rm", "-rf", "--", "{}", "+", ")", "-o",
                    "(", "-type", "d", "!", "-perm", "-o=x", "-prune", ")"],
                   env={"PATH": os.defpath},  # -execdir refuses a PATH with a relative entry
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def _wait(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait up to `timeout` seconds for `proc` to exit; True if it did. A pidfd wakes up at once (Popen.wait polls)."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # Python < 3.9 or Linux < 5.3
        try:
            proc.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        return bool(select.select([pidfd], [], [], timeout)[0])
    finally:
        os.close(pidfd)


def _kill(proc: subprocess.Popen, uid: int | None) -> None:
    """SIGKILL the run's process group and reap it; then, given a uid of its own, every process left under it.

    In bwrap and unshare modes the pid namespace already takes every process down with the sandbox.
    """
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    if uid is not None and shutil.which("kill"):
        for _ in range(3):  # kill(-1) as `uid` reaches exactly the processes of `uid`; repeat for late forks
            subprocess.run([*_setpriv(uid), "kill", "-9", "-1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _explain(output: bytes) -> None:
    """Log output that is not the harness's report, which scores the run 0: the sandbox's own errors (bwrap,
    unshare, setpriv, Python start-up), or code writing to the report's descriptor. The code's stdout and stderr
    go to /dev/null. The first time in full (500 bytes), then once per 100 runs."""
    _explain.count = getattr(_explain, "count", 0) + 1
    if _explain.count % 100 == 1:
        logger.warning("code sandbox: output that is not the harness's report, scored 0 (%d so far): %r",
                       _explain.count, output.strip()[-500:])


_LOCK = threading.Lock()
_PYTHONS: dict[str, str | None] = {}  # mode -> the Python that works in it, or None


def working_python(mode: str) -> str | None:
    """The Python that runs a trivial job correctly in `mode`, or None if `mode` does not work here; probed once.

    This Python, else the system's /usr/bin/python3: when we are root the code runs as an unprivileged uid, which
    may not reach a Python installed under /root, and bwrap can bind only what that uid may read. The probe also
    checks that the sandboxed Python loads the standard library it loads here, not another it falls back to.
    Using another Python than this one is logged: the code cannot import what is installed only here.
    """
    with _LOCK:
        if mode not in _PYTHONS:
            tools = {"bwrap": ["bwrap", "setpriv"], "unshare": ["unshare", "setpriv"], "rlimits": ["setpriv"]}[mode]
            pythons = dict.fromkeys([sys.executable, "/usr/bin/python3"]) if all(map(shutil.which, tools)) else []
            _PYTHONS[mode] = next((python for python in pythons if _probe(python, mode)), None)
            if _PYTHONS[mode] not in (None, sys.executable):
                logger.warning("code sandbox: %s mode runs the code with %s: %s does not work there (its uid cannot "
                               "read it, or its standard library). Packages installed only here are not importable.",
                               mode, _PYTHONS[mode], sys.executable)
        return _PYTHONS[mode]


def _probe(python: str, mode: str) -> bool:
    """Whether `python` scores a trivial job correctly in `mode`, having loaded the standard library it loads here."""
    if not os.path.exists(python):
        return False
    try:
        stdlib = subprocess.run([python, "-I", "-c", "import os; print(os.path.dirname(os.__file__))"],
                                capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return False
    probe = "import os\nstdlib = os.path.dirname(os.__file__)\n"
    tests = [f"assert stdlib == {stdlib!r}", "assert stdlib == None"]
    return _run(probe, tests, Limits(timeout=30), mode, python) == 0.5


def sandbox_mode() -> str:
    """The strongest mode that works here, or the one the CODE_SANDBOX variable asks for."""
    wanted = os.environ.get("CODE_SANDBOX", "auto")
    if wanted not in ("auto", *MODES):
        raise ValueError(f"CODE_SANDBOX={wanted!r}; choose one of: auto, {', '.join(MODES)}")
    for mode in MODES if wanted == "auto" else (wanted,):
        if working_python(mode):
            if mode != "bwrap" and not getattr(sandbox_mode, "warned", False):
                sandbox_mode.warned = True
                logger.warning("code sandbox: %s mode; install bubblewrap for full isolation (code_sandbox.py "
                               "says what this mode does not protect)", mode)
            return mode
    raise RuntimeError(f"no code sandbox mode ({wanted}) works on this machine; install bubblewrap and util-linux")


def _mode_and_python(mode: str | None) -> tuple[str, str]:
    """`mode`, or the strongest that works here, and the Python that runs in it; RuntimeError if it does not work."""
    mode = mode or sandbox_mode()
    if (python := working_python(mode)) is None:
        raise RuntimeError(f"code sandbox mode '{mode}' does not work on this machine")
    return mode, python


def run_tests(code: str, tests: list[str], limits: Limits | None = None, mode: str | None = None) -> float:
    """Run `code`, then each assert in `tests`, in a sandbox; return the fraction of asserts that pass.

    Args:
        code: Python source.
        tests: Assert statements, each run on its own after the code.
        limits: Time and resource limits; default `LIMITS`.
        mode: "bwrap", "unshare" or "rlimits"; default `sandbox_mode()`.

    Returns:
        A float in [0, 1]; 0.0 if the code raises, exits or runs out of time or memory before any assert passes.
    """
    if not tests:
        raise ValueError("run_tests needs at least one assert")
    mode, python = _mode_and_python(mode)
    return _run(code, tests, limits or LIMITS, mode, python)


def run_code(code: str, limits: Limits | None = None, mode: str | None = None) -> str:
    """Run `code` in a sandbox, as `run_tests` does, and return what it printed: stdout and stderr, with the last
    frames of the traceback if it raised, at most `MAX_OUTPUT` bytes (the `python` tool in tools.py).

    >>> run_code("print(6 * 7)")
    '42\\n'
    """
    mode, python = _mode_and_python(mode)
    limits = limits or LIMITS
    report, printed, status = _sandboxed(code, [], secrets.token_hex(16), limits, mode, python, capture=True)
    if report:  # the harness reports nothing without tests: this is the sandbox failing, or the code tampering
        _explain(report)
    text = printed[:MAX_OUTPUT].decode("utf-8", errors="replace")
    if len(printed) > MAX_OUTPUT:
        text += f"\n[output cut at {MAX_OUTPUT} bytes]"
    if status is None:
        text += f"\n[killed: still running after {limits.timeout:g} s]"
    elif status:  # the harness exits 0 whatever the code does, unless a limit killed it: CPU time, memory
        number = -status if status < 0 else status - 128  # a signal, seen directly or through the sandbox's shell
        why = {signal.SIGXCPU: f"used {limits.cpu} s of CPU time"}.get(number, f"signal {number}")
        text += f"\n[killed: {why}]" if 0 < number < 65 else f"\n[stopped by the sandbox: exit status {status}]"
    return text


def run_many(jobs: list[tuple[str, list[str]]], limits: Limits | None = None, mode: str | None = None) -> list[float]:
    """`run_tests` on each `(code, tests)` job, one sandbox per core at a time; scores in the order of `jobs`."""
    mode = mode or sandbox_mode()
    with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
        return list(pool.map(lambda job: run_tests(*job, limits=limits, mode=mode), jobs))
