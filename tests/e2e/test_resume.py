"""Crash-safe training: SIGKILL a run after its first checkpoint, resume it, and check nothing is lost or doubled."""

import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from conftest import REPO, THREADS, read_jsonl, run_script

from extras.outputs import read_jsonl_lenient


@pytest.mark.newest_trl
def test_grpo_kill_and_resume(tmp_path):
    out = tmp_path / "out"
    steps = 60
    args = ["--output_dir", out, "--max_steps", steps, "--logging_steps", 1, "--save_steps", 10,
            "--eval_strategy", "no"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **THREADS}
    proc = subprocess.Popen([sys.executable, str(REPO / "grpo_trl_example.py"), *map(str, args)], cwd=tmp_path,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240

    def logged_steps() -> list[int]:
        return [r["step"] for r in read_jsonl_lenient(out / "metrics.jsonl")]

    # Kill it once it has checkpointed step 10 and logged steps past it, which the resumed run must replace.
    while not ((out / "checkpoint-10" / "trainer_state.json").exists() and max(logged_steps(), default=0) >= 12):
        assert proc.poll() is None and time.time() < deadline, "the run ended before the kill"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before_kill = read_jsonl(out / "metrics.jsonl")
    assert 12 <= max(r["step"] for r in before_kill) < steps and not (out / "summary.json").exists()
    assert not (out / "checkpoint-60").exists()  # killed mid-run, not at the end

    run_script("grpo_trl_example.py", *args, "--resume_from_checkpoint", "last", cwd=tmp_path)

    summary = json.loads((out / "summary.json").read_text())
    assert summary["global_step"] == steps
    metrics = read_jsonl(out / "metrics.jsonl")
    assert [r["step"] for r in metrics] == list(range(1, steps + 1))  # every step exactly once, across the kill
    # it resumed rather than restarted: the steps up to the checkpoint are the killed run's own records
    assert metrics[:10] == before_kill[:10]
    completion_steps = [r["step"] for r in read_jsonl(out / "completions.jsonl")]
    assert sorted(set(completion_steps)) == list(range(1, steps + 1)) and len(completion_steps) == steps * 16

    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(out).num_parameters() > 0


def resolve_checkpoint(wanted, output_dir):
    """extras.cli.checkpoint for `--resume_from_checkpoint wanted --output_dir output_dir`."""
    from extras.cli import checkpoint

    return checkpoint(SimpleNamespace(resume_from_checkpoint=wanted and str(wanted), output_dir=str(output_dir)))


def test_resume_last_skips_a_checkpoint_cut_short(tmp_path):
    for step, state in [(10, "{}"), (20, '{"global_st'), (30, None)]:  # complete, torn write, killed before the state
        (tmp_path / f"checkpoint-{step}").mkdir()
        if state is not None:
            (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text(state)
    assert resolve_checkpoint("last", tmp_path) == str(tmp_path / "checkpoint-10")
    assert resolve_checkpoint(str(tmp_path / "checkpoint-30"), str(tmp_path)) == str(tmp_path / "checkpoint-30")
    assert resolve_checkpoint(None, str(tmp_path)) is None
    with pytest.raises(SystemExit, match="checkpoint-40: no such directory"):
        resolve_checkpoint(str(tmp_path / "checkpoint-40"), str(tmp_path))


def test_resume_last_ignores_directories_that_are_not_step_checkpoints(tmp_path):
    """`checkpoint-best` (e.g. copied there by a user or a callback) is not a checkpoint of a step: skip it."""

    for name in ("checkpoint-5", "checkpoint-best", "checkpoint-40"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "trainer_state.json").write_text("{}")
    assert resolve_checkpoint("last", tmp_path) == str(tmp_path / "checkpoint-40")
    with pytest.raises(SystemExit, match="no complete checkpoint in"):
        resolve_checkpoint("last", str(tmp_path / "empty"))


def test_resume_from_a_checkpoint_path_repeats_the_steps_after_it(tmp_path):
    """`--resume_from_checkpoint PATH` into a fresh output directory: the resumed steps are the original run's own
    (the checkpoint holds the weights, optimizer, scheduler and RNG states), and only they are logged."""
    first, resumed = tmp_path / "first", tmp_path / "resumed"
    flags = ["--max_steps", 4, "--logging_steps", 1, "--save_steps", 2, "--eval_strategy", "no",
             "--use_cpu", "true"]  # on CPU, where the same state gives the same steps
    run_script("grpo_trl_example.py", "--output_dir", first, *flags, cwd=tmp_path)
    run_script("grpo_trl_example.py", "--output_dir", resumed, "--resume_from_checkpoint", first / "checkpoint-2",
               *flags, cwd=tmp_path)
    timing = {"step_time", "wall_time"}  # wall-clock seconds and the time of the log, the keys allowed to differ
    original = [{k: v for k, v in m.items() if k not in timing} for m in read_jsonl(first / "metrics.jsonl")]
    again = [{k: v for k, v in m.items() if k not in timing} for m in read_jsonl(resumed / "metrics.jsonl")]
    assert [m["step"] for m in again] == [3, 4]
    for resumed_step, original_step in zip(again, original[2:], strict=True):
        assert resumed_step == pytest.approx(original_step)
    assert json.loads((resumed / "summary.json").read_text())["global_step"] == 4


@pytest.mark.parametrize("value, message", [
    ("last", "error: --resume_from_checkpoint last: no complete checkpoint in"),
    ("./checkpoint-7", "error: --resume_from_checkpoint ./checkpoint-7: no such directory"),
])
def test_resume_without_a_checkpoint_stops_before_loading(tmp_path, value, message, fails_early):
    assert message in fails_early(tmp_path, "--resume_from_checkpoint", value)
