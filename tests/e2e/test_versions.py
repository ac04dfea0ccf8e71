"""Each script checks its trl at start and names it in its first line (docs/versions.md): GRPO runs on the newest,
PPO on trl 1.12, the last with PPOTrainer. `--help` shows the check without a run: it comes before the parser."""

import shutil
import subprocess
import sys

import pytest
from conftest import HAS_PPO_TRAINER, REPO, START_ENV, TRL, accelerate_ddp, script_python, script_trl

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
    line = first_lines(script_python("ppo_trl_example.py"), REPO / "grpo_trl_example.py", tmp_path)[0]
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
    ppo_trl = script_trl("ppo_trl_example.py")
    proc = subprocess.run([sys.executable, *accelerate_ddp(2), str(REPO / "ppo_trl_example.py"), "--help"],
                          cwd=tmp_path, env=START_ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
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


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """A Python with nothing installed: a new virtual environment of the interpreter the suite's venv was made from."""
    folder = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    return str(folder / "bin" / "python")


@pytest.mark.parametrize("script", ["grpo_trl_example.py", "ppo_trl_example.py", "assets/build_reward_model.py"])
def test_a_python_without_trl_stops_in_one_line(script, bare_python, tmp_path):
    """The system's Python, or another project's: one sentence naming the environment to run in, no traceback; where
    the repository's .venv-ppo is there, PPO goes on in it instead."""
    (tmp_path / script).parent.mkdir(exist_ok=True)
    shutil.copy(REPO / script, tmp_path / script)  # a copy: no .venv-ppo beside it
    proc = subprocess.run([bare_python, script, "--help"], cwd=tmp_path, env=START_ENV, capture_output=True, text=True,
                          timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith(f"error: this Python ({bare_python}) has no trl: run ")
    if script == "ppo_trl_example.py" and (REPO / ".venv-ppo").is_dir():
        proc = subprocess.run([bare_python, str(REPO / script), "--help"], cwd=tmp_path, env=START_ENV,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and "usage:" in proc.stdout, proc.stderr[-3000:]


@pytest.mark.parametrize("script", ["grpo_trl_example.py", "ppo_trl_example.py"])
def test_ctrl_c_while_the_libraries_load_prints_one_line(script, tmp_path):
    """Ctrl-C in the 10-25 s a run spends importing torch, transformers and trl: `interrupted`, no traceback. The
    first line, the trl check, is printed before those imports begin."""
    import signal

    proc = subprocess.Popen([script_python(script), str(REPO / script)], cwd=tmp_path, env=START_ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert " on trl " in proc.stdout.readline()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130 and stderr.strip().splitlines() == ["interrupted"], stderr[-3000:]  # 128 + SIGINT
