"""The `code` reward and its sandbox: scoring, then hostile completions that must score 0, in time, harming nothing."""

import dataclasses
import importlib.util
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import REPO, read_jsonl, run_script

from extras import code_sandbox
from extras.code_sandbox import Limits, extract_code, run_many, sandbox_mode, split_tests, working_python
from rewards import code_reward, get_reward_funcs

# One worker runs this whole file (pytest.ini: --dist loadgroup): the hostile runs are timed against their limits,
# and on 2 cores two files of them side by side push runs past their timeouts.
pytestmark = pytest.mark.xdist_group("sandbox")

FAST = Limits(timeout=3, cpu=2, memory=256 << 20, processes=8, open_files=32)  # short limits for the hostile cases
SLACK = 3.0  # seconds on top of the timeout: start-up and clean-up on a busy 2-core machine
ADD = "def add(a, b):\n    return a + b\n"
ADD_TESTS = "assert add(1, 2) == 3\nassert add(-1, 1) == 0\nassert add(2, 2) == 4"
FORK_BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"


def as_plain(texts):
    return list(texts)


def as_conversational(texts):
    return [[{"role": "user", "content": "write add"}, {"role": "assistant", "content": text}] for text in texts]


@pytest.fixture(params=[as_plain, as_conversational], ids=["plain", "conversational"])
def fmt(request):
    return request.param


@pytest.fixture
def fast(monkeypatch):
    """Run `code_reward` with FAST limits."""
    monkeypatch.setattr(code_sandbox, "LIMITS", FAST)


def timed_reward(completions, tests):
    start = time.monotonic()
    rewards = code_reward(completions, tests=tests)
    return rewards, time.monotonic() - start


def ours(uid: int) -> bool:
    """Whether `uid` runs this process's sandboxes. As root each run has a uid of its own, derived from our pid
    (code_sandbox._uid), so tests running beside this one (pytest-xdist) are told apart; otherwise every run
    shares our uid, and anything under it counts."""
    if os.geteuid() != 0:
        return uid == os.geteuid()
    first = code_sandbox._uid(0)
    return first <= uid < first + 64 * code_sandbox.UIDS_PER_SLOT


def sandbox_processes() -> list[int]:
    """Pids of our processes still running the harness (forked children included); none may outlive a run."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and "job = marshal.loads(" in (entry / "cmdline").read_text() \
                    and ours(entry.stat().st_uid):
                pids.append(int(entry.name))
        except OSError:
            pass
    return pids


def work_dirs() -> set[Path]:
    """Our runs' work directories in the temporary directory (chowned to the run's uid as root)."""
    dirs = set()
    for path in Path(tempfile.gettempdir()).glob("code-sandbox-*"):
        try:
            if ours(path.stat().st_uid):
                dirs.add(path)
        except OSError:
            pass
    return dirs


def assert_no_leftovers():
    for _ in range(20):
        if not sandbox_processes():
            return
        time.sleep(0.1)
    pytest.fail(f"sandbox processes left running: {sandbox_processes()}")


def needs(*modes):
    return pytest.mark.skipif(sandbox_mode() not in modes, reason=f"the {sandbox_mode()} sandbox does not protect this")


# ---- scoring ---------------------------------------------------------------------------------------------------------


def test_correct_code_scores_1(fmt):
    completion = f"Here you go:\n```python\n{ADD}```\nIt adds."
    assert code_reward(fmt([completion]), tests=[ADD_TESTS]) == [1.0]


def test_partly_correct_code_scores_the_fraction_passed(fmt):
    wrong_for_negatives = "def add(a, b):\n    return abs(a) + abs(b)\n"
    rewards = code_reward(fmt([wrong_for_negatives, "def add(a, b):\n    return None\n"]), tests=[ADD_TESTS] * 2)
    assert rewards == [pytest.approx(2 / 3), 0.0]


def test_asserts_run_one_by_one(fmt):
    tests = ["assert add(1, 1) == 3", "assert undefined_name", "assert add(1, 1) == 2"]  # a list works too
    assert code_reward(fmt([ADD]), tests=[tests]) == [pytest.approx(1 / 3)]


def test_timeout_option_reaches_the_sandbox():
    """`--code_timeout S` is the sandbox's wall-clock limit: code that sleeps 1.5 s passes under the default 10 s and
    fails under 0.5 s."""
    from rewards import RewardArguments

    sleepy = "import time\ntime.sleep(1.5)\n" + ADD
    [default] = get_reward_funcs(["code"], max_completion_length=8)
    [short] = get_reward_funcs(["code"], max_completion_length=8, args=RewardArguments(code_timeout=0.5))
    assert default([sleepy], tests=[ADD_TESTS]) == [1.0]
    assert short([sleepy], tests=[ADD_TESTS]) == [0.0]


def test_no_tests_is_none(fmt):
    assert code_reward(fmt([ADD, ADD])) == [None, None]
    assert code_reward(fmt([ADD, ADD, ADD, ADD]), tests=[None, "", [], ADD_TESTS]) == [None, None, None, 1.0]


def test_crash_exit_or_forged_report_scores_0(fmt):
    completions = [
        ADD + "raise RuntimeError('boom')\n",  # a crash after a correct definition
        ADD + "import sys\nsys.exit(0)\n",
        ADD + "import os\nos._exit(0)\n",
        "import os\nfor fd in range(1, 10):\n    try:\n        os.write(fd, b'pass 0\\npass 1\\npass 2\\n')\n"
        "    except OSError:\n        pass\n",  # wrong code that forges report lines, without the token
        "def add(a, b)\n    return a + b\n",  # syntax error
        "import builtins\nbuiltins.exec = lambda *args: None\n",  # asserts that do not run must not pass
    ]
    assert code_reward(fmt(completions), tests=[ADD_TESTS] * len(completions)) == [0.0] * len(completions)


@pytest.mark.parametrize("text, code", [
    ("```python\nx = 1\n```\nthen\n```python\nx = 2\n```", "x = 2\n"),
    ("```py\nx = 1\n```\n```text\nnot code\n```", "x = 1\n"),
    ("```\nx = 3\n```", "x = 3\n"),
    ("x = 4", "x = 4"),
    ("```python\nx = 5\n", "x = 5\n"),  # cut off before the closing fence
])
def test_extract_code(text, code):
    assert extract_code(text) == code


def test_split_tests():
    assert split_tests("assert a\n  \nassert b  ") == ["assert a", "assert b"]
    assert split_tests(["assert a", ""]) == ["assert a"]


def test_registered_as_code():
    [reward] = get_reward_funcs(["code"], max_completion_length=8)
    assert reward.__name__ == "code"
    assert reward(completions=[ADD, ADD], tests=[ADD_TESTS, None], answer=["x", "y"]) == [1.0, None]


# ---- hostile completions: each scores 0 within its limit and harms nothing -----------------------------------------


# Each hostile case runs next to correct code (ADD), which must score 1.0: a sandbox that never starts, or that
# fails every run, scores everything 0 and would pass the hostile rows alone.


def test_infinite_loop_times_out(fast):
    rewards, seconds = timed_reward(["while True:\n    pass\n" + ADD, ADD], [ADD_TESTS] * 2)
    assert rewards == [0.0, 1.0] and seconds < FAST.timeout + SLACK
    assert_no_leftovers()


def test_asserts_passed_before_a_timeout_still_count(fast):
    rewards, seconds = timed_reward([ADD], [["assert add(1, 1) == 2", "while True: pass"]])
    assert rewards == [0.5] and seconds < FAST.timeout + SLACK


def test_sleeping_past_the_timeout(fast):
    rewards, seconds = timed_reward(["import time\ntime.sleep(60)\n" + ADD, ADD], [ADD_TESTS] * 2)
    assert rewards == [0.0, 1.0] and seconds < FAST.timeout + SLACK
    assert_no_leftovers()


def test_fork_bomb_is_contained_and_cleaned_up(fast):
    rewards, seconds = timed_reward([FORK_BOMB + ADD, ADD], [ADD_TESTS] * 2)
    assert rewards == [0.0, 1.0] and seconds < FAST.timeout + SLACK
    assert_no_leftovers()


@needs("bwrap", "unshare")  # as root, rlimits mode keeps root's uid, for which the kernel ignores RLIMIT_NPROC
def test_process_limit_stops_forks(fast):
    """The code counts its own successful forks (children that stay alive) until fork fails; the asserts, which run
    in the same namespace, read the count: forking works, and stops below the process limit."""
    counting = ("import os, time\nforks = 0\nwhile forks < 1000:\n    try:\n        pid = os.fork()\n"
                "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(60)\n        os._exit(0)\n"
                "    forks += 1\n")
    tests = ["assert forks >= 1", f"assert forks < {FAST.processes}"]
    rewards, seconds = timed_reward([counting], [tests])
    assert rewards == [1.0] and seconds < FAST.timeout + SLACK
    assert_no_leftovers()


@pytest.mark.skipif(os.geteuid() != 0, reason="as root only: a non-root trainer's runs all share its uid")
def test_code_can_fork_right_after_a_fork_bomb_in_its_slot(mode):
    """Killed processes (a fork bomb's, or children left behind) stay zombies until init reaps them, and count
    against their uid's process limit meanwhile (here, for about 2 s): the slot's next run gets a fresh uid, or
    could not fork."""
    leaves = "import os, time\nwhile True:\n    if os.fork() == 0:\n        time.sleep(60)\n"  # forks up to the limit
    forks = "import subprocess\nforked = subprocess.run(['true']).returncode == 0\n"
    slots = len(code_sandbox._GENERATION)
    assert run_many([(leaves, ["assert True"])] * slots, limits=FAST, mode=mode) == [0.0] * slots  # one per slot
    assert run_many([(forks, ["assert forked"])] * 4, limits=FAST, mode=mode) == [1.0] * 4


def test_correct_code_still_scores_1_next_to_a_fork_bomb(fast):
    completions = [FORK_BOMB, ADD, ADD, FORK_BOMB, ADD, ADD]
    rewards, seconds = timed_reward(completions, [ADD_TESTS] * len(completions))
    assert rewards == [0.0, 1.0, 1.0, 0.0, 1.0, 1.0]
    assert seconds < 2 * FAST.timeout + SLACK  # two bombs, one slot each
    assert_no_leftovers()


def test_huge_memory_allocation_fails(fast):
    completions = ["x = bytearray(8 << 30)\n" + ADD,  # 8 GiB at once
                   "blocks = [bytearray(64 << 20) for _ in range(64)]\n" + ADD,  # 4 GiB in pieces
                   "x = bytearray(64 << 20)\n" + ADD]  # 64 MiB: within the limit
    rewards, seconds = timed_reward(completions, [ADD_TESTS] * 3)
    assert rewards == [0.0, 0.0, 1.0] and seconds < FAST.timeout + SLACK


def test_cannot_write_outside_its_directory(fast, tmp_path):
    targets = [tmp_path / "pwned.txt", REPO / "pwned.txt"]
    completions = [f"open({str(target)!r}, 'w').write('pwned')\n" + ADD for target in targets]
    completions.append("open('scratch.txt', 'w').write('ok')\n" + ADD)  # its own working directory is writable
    rewards, seconds = timed_reward(completions, [ADD_TESTS] * len(completions))
    assert rewards == [0.0] * len(targets) + [1.0] and seconds < FAST.timeout + SLACK
    assert not any(target.exists() for target in targets)


@needs("bwrap")
def test_cannot_write_to_tmp(fast):
    target = Path(f"/tmp/code-sandbox-pwned-{os.getpid()}")
    rewards, seconds = timed_reward([f"open({str(target)!r}, 'w').write('pwned')\n" + ADD, ADD], [ADD_TESTS] * 2)
    assert rewards == [0.0, 1.0] and seconds < FAST.timeout + SLACK
    assert not target.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="as root only: each run has a uid of its own, whose files can go")
@pytest.mark.parametrize("mode", ["unshare", "rlimits"])  # bwrap's code cannot write to the host's /tmp at all
def test_files_left_in_the_hosts_temporary_directories_are_removed(mode):
    if working_python(mode) is None:
        pytest.skip(f"{mode} mode does not work here")
    name = f"code-sandbox-left-{os.getpid()}"
    # the clean-up skips directories the run cannot enter; one it can, deeper down, is still walked
    shared = Path(tempfile.mkdtemp(dir="/tmp")) / "open"
    shared.mkdir()
    shared.chmod(0o777)
    shared.parent.chmod(0o755)
    code = "import os\n" + "".join(f"os.makedirs('{place}/{name}/d', exist_ok=True)\n"
                                    f"open('{place}/{name}/d/f', 'wb').write(b'x' * 4096)\n"
                                    for place in ("/tmp", "/dev/shm")) + f"open('{shared}/f', 'w').write('x')\n" + ADD
    try:
        assert score([code], [ADD_TESTS], mode)[0] == [1.0]  # it could write there
        assert not Path(f"/tmp/{name}").exists() and not Path(f"/dev/shm/{name}").exists()
        assert shared.is_dir() and not (shared / "f").exists()
    finally:
        shutil.rmtree(shared.parent)


@needs("bwrap", "unshare")
def test_no_network(fast):
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        port = server.getsockname()[1]
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'hi')\n" + ADD
        rewards, seconds = timed_reward([code, ADD], [ADD_TESTS] * 2)
        assert rewards == [0.0, 1.0] and seconds < FAST.timeout + SLACK
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing connected


def test_no_secrets_in_its_environment(fast, monkeypatch):
    secret = "hf_fake_secret_4242"
    monkeypatch.setenv("HF_TOKEN", secret)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    read_proc = (  # the trainer's environment through /proc
        "import glob\n"
        "def visible():\n"
        "    for path in glob.glob('/proc/*/environ'):\n"
        "        try:\n"
        f"            if {secret!r} in open(path, errors='replace').read():\n"
        "                return True\n"
        "        except OSError:\n"
        "            pass\n"
        "assert visible()\n"
    )
    completions = [f"import os\nassert os.environ.get('HF_TOKEN') == {secret!r}\n" + ADD,
                   f"import os\nassert {secret!r} in str(os.environ)\n" + ADD,
                   read_proc + ADD]
    if sandbox_mode() == "rlimits" and os.geteuid() != 0:
        completions.pop()  # same uid as the trainer, no pid namespace: /proc/<trainer>/environ is readable
    completions.append("import os\nassert os.environ['PATH']\n" + ADD)  # a minimal environment is still there
    rewards, seconds = timed_reward(completions, [ADD_TESTS] * len(completions))
    assert rewards == [0.0] * (len(completions) - 1) + [1.0] and seconds < FAST.timeout + SLACK


@pytest.mark.skipif(sandbox_mode() == "rlimits" and os.geteuid() != 0,
                    reason="in rlimits mode as a non-root user the code can signal the trainer")
def test_cannot_kill_the_trainer(fast):
    code = (f"import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill({os.getpid()}, signal.SIGKILL)\n"
            + ADD)
    rewards, seconds = timed_reward([code, ADD], [ADD_TESTS] * 2)
    assert rewards == [0.0, 1.0] and seconds < FAST.timeout + SLACK
    os.kill(os.getpid(), 0)  # still here


# ---- the weaker modes, when this machine has them -------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["unshare", "rlimits"])
def test_fallback_modes_still_contain_the_basics(mode, monkeypatch):
    if working_python(mode) is None:
        pytest.skip(f"{mode} mode does not work here")
    monkeypatch.setenv("HF_TOKEN", "hf_fake_secret_4242")
    jobs = [(ADD, split_tests(ADD_TESTS)),
            ("while True:\n    pass\n" + ADD, split_tests(ADD_TESTS)),
            (FORK_BOMB + ADD, split_tests(ADD_TESTS)),
            ("x = bytearray(8 << 30)\n" + ADD, split_tests(ADD_TESTS)),
            ("import os\nassert 'HF_TOKEN' in os.environ\n" + ADD, split_tests(ADD_TESTS))]
    start = time.monotonic()
    assert run_many(jobs, limits=FAST, mode=mode) == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert time.monotonic() - start < 2 * FAST.timeout + SLACK
    assert_no_leftovers()


# ---- the bundled task ---------------------------------------------------------------------------------------------


def load_builder():
    spec = importlib.util.spec_from_file_location("build_code_task", REPO / "assets" / "build_code_task.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bundled_task_is_what_the_builder_writes(tmp_path):
    builder = load_builder()
    for name, rows in zip(("train", "test"), builder.build_rows()):
        lines = (REPO / "assets" / "code" / f"{name}.jsonl").read_text().splitlines()
        assert [json.loads(line) for line in lines] == rows, f"run `python assets/build_code_task.py` ({name})"


def test_reference_solutions_score_1():
    builder = load_builder()
    train, test = builder.build_rows()
    tests_of = {row["prompt"]: row["tests"] for row in train + test}
    tests = [tests_of[builder.PROMPT.format(signature=sig, description=desc)] for sig, desc, _, _ in builder.TASKS]
    solutions = [f"```python\n{solution}\n```" for _, _, solution, _ in builder.TASKS]
    assert code_reward(solutions, tests=tests) == [1.0] * len(solutions)
    shifted = solutions[1:] + solutions[:1]  # each task's tests fail every other task's solution
    assert code_reward(shifted, tests=tests) == [0.0] * len(solutions)


def test_grpo_runs_on_the_bundled_code_task(tmp_path):
    out = tmp_path / "out"
    run_script("grpo_trl_example.py", "--dataset_name", REPO / "assets" / "code", "--reward_funcs", "code",
               "--max_steps", 1, "--logging_steps", 1, "--eval_strategy", "no", "--output_dir", out, cwd=tmp_path)
    rows = read_jsonl(out / "completions.jsonl")
    assert rows and all(row["code"] == 0.0 for row in rows)  # the tiny model cannot write code, but every row is scored
    assert "rewards/code/mean" in read_jsonl(out / "metrics.jsonl")[0]


# ---- issue 11: what the code may not do to the trainer, in every mode this machine has -------------------------------

MODES_HERE = [mode for mode in code_sandbox.MODES if working_python(mode)]
KNOWN_ARCH = platform.machine() in ("x86_64", "aarch64")  # the syscall numbers below are known for these
SYSCALLS = {"x86_64": {"keyctl": 250, "add_key": 248, "clone": 56},
            "aarch64": {"keyctl": 219, "add_key": 217, "clone": 220}}.get(platform.machine(), {})
HOSTILE_LIMITS = dataclasses.replace(FAST, file_size=1 << 20)  # 1 MiB files: the memfd ceiling is 32 MiB


@pytest.fixture(params=MODES_HERE)
def mode(request):
    return request.param


def score(codes, tests, mode, limits=FAST):
    start = time.monotonic()
    rewards = run_many([(code, split_tests(t) if isinstance(t, str) else t) for code, t in zip(codes, tests)],
                       limits=limits, mode=mode)
    return rewards, time.monotonic() - start


CTYPES = "import ctypes, os, subprocess\nlibc = ctypes.CDLL(None, use_errno=True)\n"
ANYTHING = "class Anything:\n    def __eq__(self, other):\n        return True\n    __hash__ = None\n"
FORGE_WITH_TOKEN = (  # given `token`, write a pass line and a value line for each assert to every descriptor
    "def add(a, b):\n    return None\n"
    "for fd in range(1, 32):\n"
    "    for i in range(3):\n"
    "        for line in (f'{token} pass {i}\\n', f'{token} value {i} 3\\n'):\n"
    "            try:\n"
    "                os.write(fd, line.encode())\n"
    "            except OSError:\n"
    "                pass\n")
KEYCTL_SEARCH = CTYPES + f"""
SYSCALLS = {SYSCALLS!r}
key = libc.syscall(SYSCALLS["keyctl"], 10, -3, b"user", b"sandbox-test-secret", 0)  # KEYCTL_SEARCH the session keyring
buffer = ctypes.create_string_buffer(64)
read = libc.syscall(SYSCALLS["keyctl"], 11, key, buffer, 64) if key > 0 else -1  # KEYCTL_READ
leaked = buffer.raw[:read] if read > 0 else None
"""
READ_CAPS = ("caps = {line.split(':')[0]: int(line.split()[1], 16) for line in open('/proc/self/status')\n"
             "        if line.startswith('Cap')}\n")

# Hostile completions, one per attack class of issue 11: name -> (code, asserts, the score it must get). Each runs
# beside a correct `add`, which must still score 1, as the trainer's user (root here) and as an ordinary user.
HOSTILE = {
    "a malformed report": (  # bytes that are not UTF-8, lines that are not the harness's, on every descriptor
        "import os\nfor fd in range(1, 64):\n    try:\n        os.write(fd, b'\\xff\\xfe not a report\\n')\n"
        "    except OSError:\n        pass\n" + ADD, ADD_TESTS, 0.0),
    "a deep directory tree": (  # deeper than shutil.rmtree's recursion limit
        "import os\nfor _ in range(1500):\n    os.mkdir('d')\n    os.chdir('d')\n" + ADD, ADD_TESTS, 1.0),
    "reading the trainer's session keyring": (KEYCTL_SEARCH, ["assert leaked is None"], 1.0),
    "memory in memfd files": (  # not address space: only the open-file and file-size limits bound it
        "import os\nheld, total = [], 0\nwhile total < (256 << 20):\n    try:\n        fd = os.memfd_create('m')\n"
        "        held.append(fd)\n        for _ in range(4):\n            os.write(fd, b'x' * (1 << 18))\n"
        "            total += 1 << 18\n    except OSError:\n        break\n",
        ["assert total > 0", f"assert total <= {HOSTILE_LIMITS.open_files * HOSTILE_LIMITS.file_size}"], 1.0),
    "capabilities": (READ_CAPS, [f"assert caps['Cap{kind}'] == 0" for kind in ("Eff", "Prm", "Inh", "Amb")], 1.0),
    # nested user namespaces (a private netns with CAP_NET_ADMIN: the usual first step of kernel exploits), three ways
    "a user namespace by unshare(2)": (CTYPES + "made = libc.unshare(0x10000000) == 0\n",  # CLONE_NEWUSER
                                       ["assert made is False"], 1.0),
    "a user namespace by clone(2)": (
        CTYPES + f"pid = libc.syscall({SYSCALLS.get('clone')}, 0x10000000 | 17, 0, 0, 0, 0)\n"  # | SIGCHLD
        "if pid == 0:\n    os._exit(0)\nmade = pid > 0 and os.waitpid(pid, 0)[1] == 0\n",
        ["assert made is False"], 1.0),
    "a network namespace by unshare(1)": (
        CTYPES + "made = subprocess.run(['unshare', '--user', '--map-root-user', '--net', 'true']).returncode == 0\n",
        ["assert made is False"], 1.0),
    # in-interpreter forgeries: each passed every assert of the old harness without solving the task
    "an object equal to everything": (ANYTHING + "def add(a, b):\n    return Anything()\n", ADD_TESTS, 0.0),
    "patched builtins": (ANYTHING + "import builtins\nbuiltins.len = lambda *args: Anything()\n"
                         "def add(a, b):\n    return None\n",
                         ["assert len(add([1], [2])) == 2", "assert len(add([], [])) == 0"], 0.0),
    "the token from the harness's memory": (
        "import gc, os\n"
        "token = next(o for o in gc.get_objects() if isinstance(o, dict) and 'token' in o and 'tests' in o)['token']\n"
        + FORGE_WITH_TOKEN, ADD_TESTS, 0.0),
    "the token through /proc/<pid>/fd": (  # the job, in any process's open files that the code can read
        "import os, re\ntoken = 'none'\n"
        "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "    try:\n        fds = os.listdir(f'/proc/{pid}/fd')\n    except OSError:\n        continue\n"
        "    for fd in fds:\n"
        "        try:\n"
        "            with open(os.open(f'/proc/{pid}/fd/{fd}', os.O_RDONLY | os.O_NONBLOCK), 'rb') as file:\n"
        "                found = re.search(rb'[0-9a-f]{32}', file.read(1 << 20))\n"
        "        except OSError:\n            continue\n"
        "        token = found.group().decode() if found else token\n" + FORGE_WITH_TOKEN, ADD_TESTS, 0.0),
    "replaced compiled asserts": (
        "import gc, types\ndef add(a, b):\n    return None\n"
        "for obj in gc.get_objects():\n"
        "    if isinstance(obj, list) and obj and all(isinstance(t, types.CodeType) for t in obj):\n"
        "        obj[:] = [compile('pass', '<test>', 'exec')] * len(obj)\n", ADD_TESTS, 0.0),
    "rewritten asserts in the harness's frame": (  # every assert replaced by `pass` while the first one runs
        "import sys\ndef is_even(n):\n    frame = sys._getframe(1)\n"
        "    while frame is not None and 'tests' not in frame.f_locals:\n        frame = frame.f_back\n"
        "    if frame is not None:\n        tests = frame.f_locals['tests']\n"
        "        tests[:] = [('assert', compile('pass', '<test>', 'exec'))] * len(tests)\n",
        ["assert is_even(4) is True", "assert is_even(3) is False", "assert is_even(8)", "assert not is_even(8) != 1"],
        0.0),
    # last: in rlimits mode as an ordinary user every run shares one uid, and the bomb's zombies hold that uid's
    # process limit until init reaps them, which can take seconds
    "a fork bomb": (FORK_BOMB + ADD, ADD_TESTS, 0.0),
}


def add_key_to_session_keyring() -> bool:
    """Put a secret into this process's session keyring, as `login`, `su -l` or systemd would hold one."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(SYSCALLS["add_key"], b"user", b"sandbox-test-secret", b"hunter2", 7, -3) > 0


@pytest.mark.skipif(not KNOWN_ARCH, reason="the hostile table's syscall numbers are known for x86_64 and aarch64")
@pytest.mark.parametrize("attack", HOSTILE)
def test_a_hostile_completion_gets_its_score_and_harms_nothing(mode, attack, caplog, monkeypatch):
    code, tests, expected = HOSTILE[attack]
    if attack == "reading the trainer's session keyring" and not add_key_to_session_keyring():
        pytest.skip("no session keyring here")
    monkeypatch.setattr(code_sandbox._explain, "count", 0, raising=False)  # a report that is not the harness's: logged
    before = work_dirs()
    with caplog.at_level("WARNING", logger="code_sandbox"):
        rewards, seconds = score([code, ADD], [tests, ADD_TESTS], mode, HOSTILE_LIMITS)
    assert rewards == [expected, 1.0], f"scored {rewards} in {seconds:.1f} s; {caplog.text}"
    assert seconds < FAST.timeout + SLACK
    assert work_dirs() <= before  # nothing left behind
    assert_no_leftovers()


def test_the_attacks_work_outside_the_sandbox():
    """Each hostile code that must score 1 in the sandbox (it found nothing) does find its target when run as a
    plain child of the trainer, so those entries test the sandbox, not a machine that lacks the feature."""
    if not KNOWN_ARCH or os.geteuid() != 0:
        pytest.skip("as root on x86_64 or aarch64 only: capabilities and namespaces need root here")
    assert add_key_to_session_keyring()
    found = {"reading the trainer's session keyring": "leaked is not None", "capabilities": "caps['CapEff'] != 0",
             "a user namespace by unshare(2)": "made", "a user namespace by clone(2)": "made",
             "a network namespace by unshare(1)": "made"}
    for attack, condition in found.items():
        probe = HOSTILE[attack][0] + f"\nimport sys\nsys.exit(0 if {condition} else 1)\n"
        assert subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0, attack


def test_a_malformed_report_is_logged(caplog, monkeypatch):
    monkeypatch.setattr(code_sandbox._explain, "count", 0, raising=False)  # the first such report is logged in full
    code, tests, _ = HOSTILE["a malformed report"]
    with caplog.at_level("WARNING", logger="code_sandbox"):
        assert score([code], [tests], sandbox_mode())[0] == [0.0]
    assert "not the harness's report" in caplog.text


def test_memory_in_memfd_files_needs_the_open_file_cap(monkeypatch):
    """Without the open-file cap the memfd entry of HOSTILE holds 8 times the ceiling: that entry can fail."""
    monkeypatch.setattr(code_sandbox, "HARNESS", code_sandbox.HARNESS.replace('("NOFILE", "open_files"),', "", 1))
    code, tests, _ = HOSTILE["memory in memfd files"]
    assert score([code], [tests], sandbox_mode(), HOSTILE_LIMITS)[0] == [0.5]  # total > 0, but not <= the ceiling


def test_without_libseccomp_the_sandbox_runs_and_says_what_is_open(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # import pyseccomp raises ImportError
    code_sandbox.seccomp_filter.cache_clear()
    try:
        with caplog.at_level("WARNING", logger="code_sandbox"):
            assert code_sandbox.seccomp_filter() is None
            assert score([ADD], [ADD_TESTS], sandbox_mode())[0] == [1.0]
    finally:
        code_sandbox.seccomp_filter.cache_clear()
    assert "no seccomp filter" in caplog.text and "nested namespaces" in caplog.text


SPREAD = ("import os, time\npids = []\nfor _ in range(4):  # 4 processes of 48 MiB each: 192 MiB in all\n"
          "    pid = os.fork()\n    if pid == 0:\n        block = b'x' * (48 << 20)\n        time.sleep(1)\n"
          "        os._exit(0)\n    pids.append(pid)\nheld = sum(os.waitpid(pid, 0)[1] == 0 for pid in pids)\n")


@pytest.mark.skipif(code_sandbox.memory_cgroups() is None, reason="no memory cgroups for us on this host")
def test_the_memory_of_a_whole_run_is_bounded_by_its_cgroup(mode, monkeypatch):
    """Processes x RLIMIT_AS is not a bound on a run's memory; its cgroup is: of four processes of 48 MiB, at most
    two fit in 128 MiB, and the kernel kills the others."""
    limits = dataclasses.replace(HOSTILE_LIMITS, timeout=6, total_memory=128 << 20)
    rewards, _ = score([SPREAD, ADD], [["assert held >= 1", "assert held <= 2"], ADD_TESTS], mode, limits)
    assert rewards == [1.0, 1.0]
    monkeypatch.setattr(code_sandbox, "_slot_cgroup", lambda slot: None)  # without it, all four hold their memory
    assert score([SPREAD], [["assert held == 4"]], mode, limits)[0] == [1.0]


@pytest.mark.skipif(code_sandbox.memory_cgroups() is None, reason="no memory cgroups for us on this host")
def test_the_run_cgroups_are_removed_when_the_trainer_exits():
    parent, _ = code_sandbox.memory_cgroups()
    run = ("import os\nfrom extras import code_sandbox\n"
           "rewards = code_sandbox.run_many([('x = 1', ['assert x == 1'])] * 2)\n"
           "print(os.getpid(), len(code_sandbox._CGROUPS), rewards)")
    done = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True, cwd=REPO, check=True)
    pid, cgroups, rewards = done.stdout.split(maxsplit=2)
    assert int(cgroups) >= 1 and rewards.strip() == "[1.0, 1.0]"  # the runs had cgroups
    assert not list(Path(parent).glob(f"code-sandbox-{pid}-*"))  # and they are gone


def test_a_python_that_cannot_load_its_own_standard_library_is_not_used(monkeypatch, caplog):
    """As root the code runs as another uid. A Python under /root (pyenv, conda) then starts but loads the system's
    standard library instead of its own, silently; the probe notices, and the fallback is logged."""
    def stdlib(uid=None):
        user = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"] if uid else []
        return subprocess.run([*user, sys.executable, "-I", "-c", "import os; print(os.__file__)"],
                              capture_output=True, text=True).stdout
    if os.geteuid() == 0 and stdlib(code_sandbox._uid(0)) != stdlib():  # the case this machine has, if it has it
        assert working_python("rlimits") != sys.executable
    monkeypatch.setattr(code_sandbox, "_PYTHONS", {})
    monkeypatch.setattr(code_sandbox, "_probe", lambda python, mode: python != sys.executable)
    with caplog.at_level("WARNING", logger="code_sandbox"):
        assert working_python("rlimits") == "/usr/bin/python3"
    assert f"rlimits mode runs the code with /usr/bin/python3: {sys.executable} does not work there" in caplog.text


def test_as_root_the_bounding_set_is_empty(mode):
    if os.geteuid() != 0:  # setpriv can empty the bounding set only with CAP_SETPCAP, which a non-root trainer lacks
        pytest.skip("as root only")
    assert score([READ_CAPS], [["assert caps['CapBnd'] == 0"]], mode)[0] == [1.0]


# The same table as an ordinary user: a fresh uid with no capabilities runs the sandbox itself, on a Python it can
# read, with code_sandbox and pyseccomp on its path. It prints, per attack, the scores of [attack, correct add].
AS_USER = """
import ctypes, json, sys
job = json.loads(sys.stdin.read())
sys.path[:0] = job["path"]
from extras import code_sandbox
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall(job["keyctl"], 1, None)  # a session keyring of its own (KEYCTL_JOIN_SESSION_KEYRING), with a secret
libc.syscall(job["add_key"], b"user", b"sandbox-test-secret", b"hunter2", 7, -3)
if code_sandbox.working_python(job["mode"]) is None:
    print(json.dumps(None))
else:
    limits = code_sandbox.Limits(**job["limits"])  # one pair at a time: in rlimits mode all runs share our uid, and
    print(json.dumps([code_sandbox.run_many([(code, tests), (job["add"], job["add_tests"])], limits, job["mode"])
                      for code, tests in job["cases"]]))  # its process limit: a fork bomb would starve the others
"""


@pytest.mark.skipif(os.geteuid() != 0 or not KNOWN_ARCH, reason="needs root to switch to an ordinary user")
def test_hostile_completions_as_an_ordinary_user(mode, tmp_path):
    import pyseccomp

    uid = 2_000_000_000 + os.getpid() % 1_000_000  # no such user: nothing else runs under it
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, uid, uid)
    os.chmod(tmp_path, 0o755)
    user = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]
    python = next((python for python in (sys.executable, "/usr/bin/python3")
                   if subprocess.run([*user, python, "-c", f"import sys; sys.path[:0] = {[str(REPO)]!r}; "
                                      "from extras import code_sandbox"], capture_output=True).returncode == 0), None)
    if python is None:
        pytest.skip("no Python here that an ordinary user can run code_sandbox with")
    job = {"path": [str(REPO), os.path.dirname(pyseccomp.__file__)], "mode": mode,
           "limits": dataclasses.asdict(HOSTILE_LIMITS), "keyctl": SYSCALLS["keyctl"], "add_key": SYSCALLS["add_key"],
           "add": ADD, "add_tests": split_tests(ADD_TESTS),
           "cases": [(code, split_tests(tests) if isinstance(tests, str) else tests)
                     for code, tests, _ in HOSTILE.values()]}
    done = subprocess.run([*user, python, "-c", AS_USER], input=json.dumps(job), capture_output=True, text=True,
                          cwd=home, env={"PATH": os.environ["PATH"], "HOME": str(home), "TMPDIR": str(home)},
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    rewards = json.loads(done.stdout)
    if rewards is None:
        pytest.skip(f"{mode} mode does not work for an ordinary user here")
    wrong = {attack: got for (attack, (_, _, expected)), got in zip(HOSTILE.items(), rewards) if got != [expected, 1.0]}
    assert not wrong, f"as uid {uid} with {python}: {wrong}\n{done.stderr[-2000:]}"


@pytest.mark.parametrize("tests, expected", [
    (["assert add(1, 2) == 3", "assert 3 == add(2, 1)", "assert add(1, 1) == 3"], 2 / 3),  # either side expected
    (["assert add([1], [2]) == [1, 2]", "assert add((1,), (2,)) == (1, 2)", "assert add('a', 'b') == 'ab'"], 1.0),
    (["assert add(1, 2) == 3.0", "assert add(0.1, 0.2) == 0.3"], 0.5),  # Python's own ==: 3 == 3.0, 0.30000000000000004
    (["assert add(1, 2) == 3, 'with a message'"], 1.0),
    # checked in the trainer, on the values the sandbox sends back: comparisons with a literal, either way round and
    # chained; `is`; truthiness; `not`
    (["assert add(1, 2) > 2", "assert add(1, 2) in (3, 4)", "assert add(1, 2)", "assert 0 < add(1, 2) <= 3"], 1.0),
    (["assert add(1, 2) != 3", "assert 4 <= add(1, 2)", "assert add(1, 2) not in [3]", "assert not add(1, -1)"], 0.25),
    # 1 is not True
    (["assert add(1, 0) is True", "assert add([], []) is not None", "assert add(0.5, 0.5) == 1"], 2 / 3),
    (["assert add(None, None) is None", "assert add('a', 'b') < 1", "assert add(1, 'b')"], 0.0),  # TypeErrors fail
    (["assert add(1, 2) == sum([1, 2])", "assert add(1, 2) and add(2, 2)"], 1.0),  # two computed values: in the sandbox
])
def test_asserts_are_graded_as_python_would(tests, expected):
    assert run_many([(ADD, tests)], limits=FAST) == [pytest.approx(expected)]


def test_the_bundled_task_is_graded_in_the_trainer():
    """Every assert of assets/code is a check the trainer makes on plain values: none runs in the sandbox, where the
    code shares the interpreter and could subvert it."""
    from extras.code_sandbox import split_assert

    tests = [t for split in ("train", "test") for row in read_jsonl(REPO / "assets" / "code" / f"{split}.jsonl")
             for t in split_tests(row["tests"])]
    assert len(tests) > 100 and [t for t in tests if split_assert(t) is None] == []


def test_numpy_like_values_are_read_through_tolist():
    code = ("class Vector(list):\n    def tolist(self):\n        return list(self)\n"
            "def add(a, b):\n    return Vector([a, b])\n")
    assert run_many([(code, ["assert add(1, 2) == [1, 2]", "assert add(1, 2) == [2, 1]"])], limits=FAST) == [0.5]
