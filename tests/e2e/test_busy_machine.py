"""A run on a CPU shared with other work: its waiting threads sleep instead of spinning (OMP_WAIT_POLICY=PASSIVE,
set by each script before torch loads OpenMP, which reads it then), unless the user set a policy. The time it saves
is measured, not tested: benchmarks/bench_busy.py, BENCHMARKS.md section 13."""

import os
import subprocess
import sys

import pytest
from conftest import REPO

# Records OMP_WAIT_POLICY as it is when torch is first imported, in $PROBE_FILE
PROBE = """
import os, sys

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" and not os.path.exists(os.environ["PROBE_FILE"]):
            with open(os.environ["PROBE_FILE"], "w") as f:
                f.write(os.environ.get("OMP_WAIT_POLICY", "unset"))
        return None

sys.meta_path.insert(0, Watch())
"""


@pytest.mark.parametrize("script", ["grpo_trl_example.py", "ppo_trl_example.py"])
@pytest.mark.parametrize("users, expected", [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_waiting_threads_sleep_unless_the_user_says_otherwise(tmp_path, script, users, expected):
    (tmp_path / "sitecustomize.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env.update(PYTHONPATH=str(tmp_path), PROBE_FILE=str(tmp_path / "policy"), **({"OMP_WAIT_POLICY": users} if users
                                                                                  else {}))
    proc = subprocess.run([sys.executable, str(REPO / script), "--help"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "policy").read_text() == expected
