"""A run forked from the warm interpreter (tests/warm_python.py) sees and prints what a fresh `python script.py`
does."""

import subprocess
import sys

import pytest
from conftest import START_ENV, THREADS, run_script, warm_python

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
def test_a_forked_run_is_a_fresh_run(tmp_path, how, monkeypatch):
    monkeypatch.setattr("conftest.REPO", tmp_path)  # run_script runs scripts from the repo root
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


def test_what_libraries_read_on_import_gets_a_fresh_process():
    warm = warm_python(sys.executable)
    assert warm.can_fork({**warm.env, "SPY_FILE": "x"})
    assert not warm.can_fork({**warm.env, "OMP_NUM_THREADS": "2"})
    assert not warm.can_fork({**warm.env, "TRANSFORMERS_VERBOSITY": "info"})
    # read by name while importing, whatever its prefix: transformers' USE_TORCH, trackio's TRACKIO_DIR (trl imports it)
    assert {"USE_TORCH", "TRACKIO_DIR"} <= warm.read_on_import
    assert not warm.can_fork({**warm.env, "USE_TORCH": "0"})


def test_a_run_past_its_timeout_is_killed(tmp_path, monkeypatch):
    monkeypatch.setattr("conftest.REPO", tmp_path)
    (tmp_path / "sleep.py").write_text("import time\ntime.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        run_script("sleep.py", cwd=tmp_path, timeout=1)
    (tmp_path / "quick.py").write_text("print('still serving')\n")
    assert run_script("quick.py", cwd=tmp_path).stdout == "still serving\n"
