"""A run forked from the warm interpreter (tests/warm_python.py) sees and prints what a fresh `python script.py`
does."""

import shutil
import subprocess
import sys

import pytest
from conftest import PPO_PYTHON, REPO, START_ENV, THREADS, run_script, warm_python


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A folder for a test's scripts, with extras/runtime.py beside them as the project's scripts have it: where that
    silences a notice (bitsandbytes', on a CPU with AVX512-BF16) only a script beside it is forked."""
    monkeypatch.setattr("conftest.REPO", tmp_path)  # run_script runs scripts from the repo root
    (tmp_path / "extras").mkdir()
    shutil.copy(REPO / "extras" / "runtime.py", tmp_path / "extras")
    return tmp_path

PROBE = """
import atexit, json, os, sys, threading, warnings
import torch

seen = {"argv": sys.argv[1:], "path0": sys.path[0] == os.path.dirname(os.path.abspath(__file__)),
        "cwd": os.getcwd(), "name": __name__, "threads": torch.get_num_threads(),
        "env": {k: os.environ.get(k) for k in ("PROBE", "HF_HUB_OFFLINE", "OMP_NUM_THREADS")},
        "user_module": __import__("user_module").VALUE}
print(json.dumps(seen))
warnings.warn("a warning of the script's own")
atexit.register(lambda: print("atexit ran"))
threading.Thread(target=lambda: print("a thread finished")).start()
if sys.argv[1] == "raise":
    raise ValueError("an uncaught error")
if sys.argv[1] == "exit":
    sys.exit("error: a message")
"""


@pytest.mark.parametrize("how", ["ok", "raise", "exit"])
def test_a_forked_run_is_a_fresh_run(folder, how):
    tmp_path = folder
    (tmp_path / "probe.py").write_text(PROBE)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "user_module.py").write_text("VALUE = 7\n")
    env = {"PROBE": "yes", "PYTHONPATH": str(tmp_path / "lib")}
    fresh, forked = (run_script("probe.py", how, cwd=tmp_path, env=env, check=False, fresh=fresh)
                     for fresh in (True, False))
    assert warm_python(sys.executable).can_fork({**START_ENV, **THREADS, **env})
    assert forked.returncode == fresh.returncode == (0 if how == "ok" else 1)
    assert forked.stdout == fresh.stdout
    assert forked.stdout.startswith('{"argv": ["%s"], "path0": true, "cwd": "%s", "name": "__main__", "threads": 1'
                                    % (how, tmp_path))
    assert forked.stderr.splitlines()[-1] == fresh.stderr.splitlines()[-1]  # the exception or exit message
    assert forked.stderr.count("a warning of the script's own") == fresh.stderr.count("a warning of the script's own")


def test_a_forked_script_without_the_extras_prints_what_its_imports_print(tmp_path, monkeypatch):
    """The warm interpreter imported the libraries with bitsandbytes' notice silenced, as the scripts do: a script
    that does not (a bare copy) gets the notice from its forked child, as its own imports print it in a fresh
    process, where the CPU has AVX512-BF16 (and nothing elsewhere)."""
    monkeypatch.setattr("conftest.REPO", tmp_path)
    (tmp_path / "bare.py").write_text("import peft\nprint('imported')\n")
    fresh, forked = (run_script("bare.py", cwd=tmp_path, fresh=fresh) for fresh in (True, False))
    assert forked.stdout == fresh.stdout == "imported\n"
    assert forked.stderr == fresh.stderr


def test_what_libraries_read_on_import_gets_a_fresh_process():
    warm = warm_python(sys.executable)
    assert warm.can_fork({**warm.env, "SPY_FILE": "x"})
    assert not warm.can_fork({**warm.env, "OMP_NUM_THREADS": "2"})
    assert not warm.can_fork({**warm.env, "TRANSFORMERS_VERBOSITY": "info"})
    # read by name while importing, whatever its prefix: transformers' USE_TORCH, trackio's TRACKIO_DIR (trl imports it)
    assert {"USE_TORCH", "TRACKIO_DIR"} <= warm.read_on_import
    assert not warm.can_fork({**warm.env, "USE_TORCH": "0"})


def test_a_run_past_its_timeout_is_killed(folder):
    tmp_path = folder
    (tmp_path / "sleep.py").write_text("import time\ntime.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        run_script("sleep.py", cwd=tmp_path, timeout=1)
    (tmp_path / "quick.py").write_text("print('still serving')\n")
    assert run_script("quick.py", cwd=tmp_path).stdout == "still serving\n"


# A sitecustomize.py that makes bitsandbytes take the path of a CPU with AVX512-BF16, whatever the CPU: the answer of
# its native library's check, read while bitsandbytes imports (nothing runs a 4-bit kernel here)
AVX512_BF16 = """
import importlib.abc, importlib.util, sys

class Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "bitsandbytes.cextension":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        execute = spec.loader.exec_module
        def exec_module(module):
            execute(module)
            module.lib.has_avx512bf16_cpu = lambda: True
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Finder())
"""


@pytest.mark.parametrize("script", ["grpo_trl_example.py", "ppo_trl_example.py"])
def test_importing_the_libraries_prints_nothing_on_a_cpu_with_avx512_bf16(tmp_path, script):
    """bitsandbytes, imported by peft, says on such a CPU that a kernel from the hub failed to load: before the
    settings line of every run, --help included, where it says nothing about the run. The path is forced, so that a
    CPU without the feature runs it too; the same Python importing peft alone shows that it was."""
    (tmp_path / "sitecustomize.py").write_text(AVX512_BF16)
    python = sys.executable if script.startswith("grpo") else PPO_PYTHON
    env = {**START_ENV, **THREADS, "PYTHONPATH": str(tmp_path)}
    alone = subprocess.run([python, "-c", "import peft"], env=env, capture_output=True, text=True, check=True)
    assert "Failed to load CPU gemm_4bit_forward" in alone.stderr
    shown = subprocess.run([python, REPO / script, "--help"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           check=True)
    assert shown.stderr == "" and shown.stdout.startswith(f"{script} on trl "), shown.stderr
    assert shown.stdout.splitlines()[1].startswith("usage:")
