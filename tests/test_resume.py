"""Crash-safe training: SIGKILL a run after its first checkpoint, resume it, and check nothing is lost or doubled."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, read_jsonl, run_script


def test_grpo_kill_and_resume(tmp_path):
    out = tmp_path / "out"
    steps = 60
    args = ["--output_dir", out, "--max_steps", steps, "--logging_steps", 1, "--save_steps", 10, "--eval_strategy", "no"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, str(REPO / "grpo_trl_example.py"), *map(str, args)], cwd=tmp_path,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while not (out / "checkpoint-10" / "trainer_state.json").exists():
        assert proc.poll() is None and time.time() < deadline, "the run ended before its first checkpoint"
        time.sleep(0.05)
    time.sleep(0.2)  # let it log a few steps past the checkpoint, which the resumed run must replace
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before_kill = read_jsonl(out / "metrics.jsonl")
    assert max(r["step"] for r in before_kill) < steps and not (out / "summary.json").exists()

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


def test_resume_last_skips_a_checkpoint_cut_short(tmp_path):
    from common import resolve_checkpoint

    for step, state in [(10, "{}"), (20, '{"global_st'), (30, None)]:  # complete, torn write, killed before the state
        (tmp_path / f"checkpoint-{step}").mkdir()
        if state is not None:
            (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text(state)
    assert resolve_checkpoint("last", str(tmp_path)) == str(tmp_path / "checkpoint-10")
    assert resolve_checkpoint(str(tmp_path / "checkpoint-30"), str(tmp_path)) == str(tmp_path / "checkpoint-30")
    assert resolve_checkpoint(None, str(tmp_path)) is None


def test_resume_last_ignores_directories_that_are_not_step_checkpoints(tmp_path):
    """`checkpoint-best` (e.g. copied there by a user or a callback) is not a checkpoint of a step: skip it."""
    from common import resolve_checkpoint

    for name in ("checkpoint-5", "checkpoint-best", "checkpoint-40"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "trainer_state.json").write_text("{}")
    assert resolve_checkpoint("last", str(tmp_path)) == str(tmp_path / "checkpoint-40")
    with pytest.raises(SystemExit, match="no complete checkpoint in"):
        resolve_checkpoint("last", str(tmp_path / "empty"))
