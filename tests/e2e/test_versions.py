"""Each script checks its trl at start and names it in its first line (docs/versions.md): GRPO runs on the newest,
PPO on trl 1.12, the last with PPOTrainer. `--help` shows the check without a run: it comes before the parser."""

import shutil
import subprocess
import sys

import pytest
from conftest import HAS_PPO_TRAINER, PPO_PYTHON, REPO, START_ENV, TRL, accelerate_ddp, script_trl

needs_newest = pytest.mark.skipif(HAS_PPO_TRAINER, reason="shows a trl without PPOTrainer: runs in .venv")


def first_lines(python: str, script, cwd) -> list[str]:
    proc = subprocess.run([python, str(script), "--help"], cwd=cwd, env=START_ENV, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines()[:2]


def test_grpo_names_its_trl_first(tmp_path):
    assert first_lines(sys.executable, REPO / "grpo_trl_example.py", tmp_path)[0] == f"grpo_trl_example.py on trl {TRL}"


@needs_newest
def test_grpo_on_another_trl_says_which_its_tests_run_on(tmp_path):
    other = script_trl("ppo_trl_example.py")
    line = first_lines(PPO_PYTHON, REPO / "grpo_trl_example.py", tmp_path)[0]
    assert line == f"grpo_trl_example.py on trl {other}, untested: the tests run on trl {TRL}"


@needs_newest
def test_ppo_run_by_the_grpo_environment_goes_on_in_its_own(tmp_path):
    """`python ppo_trl_example.py` with .venv active: the same command, re-executed in .venv-ppo."""
    ppo_trl = script_trl("ppo_trl_example.py")
    assert first_lines(sys.executable, REPO / "ppo_trl_example.py", tmp_path) == [
        f"trl {TRL} here: ppo_trl_example.py goes on in .venv-ppo, with trl {ppo_trl}",
        f"ppo_trl_example.py on trl {ppo_trl}"]


@needs_newest
def test_ppo_launched_from_the_grpo_environment_goes_on_in_its_own_once_per_process(tmp_path):
    """`accelerate launch` from .venv: each process re-executes itself in .venv-ppo; the first alone says so."""
    proc = subprocess.run([sys.executable, *accelerate_ddp(2), str(REPO / "ppo_trl_example.py"), "--help"],
                          cwd=tmp_path, env=START_ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ppo_trl = script_trl("ppo_trl_example.py")
    assert proc.stdout.count(f"trl {TRL} here: ppo_trl_example.py goes on in .venv-ppo, with trl {ppo_trl}") == 1
    assert proc.stdout.count(f"ppo_trl_example.py on trl {ppo_trl}") == 1
    assert proc.stdout.count("usage: ppo_trl_example.py") == 2


@needs_newest
def test_ppo_on_a_trl_without_ppo_trainer_stops_naming_the_pin_and_how_to_get_it(tmp_path):
    """A copy of the script, with no .venv-ppo beside it."""
    for name in ("ppo_trl_example.py", "rewards.py"):
        shutil.copy(REPO / name, tmp_path)
    proc = subprocess.run([sys.executable, "ppo_trl_example.py"], cwd=tmp_path, env=START_ENV, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 1 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: trl {TRL} has no PPOTrainer (TRL removed it in 1.13): run ppo_trl_example.py on trl==1.12.0, in the "
        ".venv-ppo that bash setup.sh makes, or with uv run ppo_trl_example.py")
