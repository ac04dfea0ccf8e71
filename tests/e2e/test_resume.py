"""Crash-safe training: SIGKILL a run after its first checkpoint, resume it, and check nothing is lost or doubled."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

from conftest import REPO, THREADS, read_jsonl, run_script, snapshot

from extras.outputs import read_jsonl_lenient
from extras.runtime import INTERRUPTED


def kill_after(script: str, args: list, out, checkpoint: int, logged: int, cwd) -> None:
    """Run `script` as a user would and SIGKILL it once it has saved checkpoint-`checkpoint` in `out` and logged step
    `logged` past it: steps the resumed run must replace."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **THREADS}
    proc = subprocess.Popen([sys.executable, str(REPO / script), *map(str, args)], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while not ((out / f"checkpoint-{checkpoint}" / "trainer_state.json").exists()
               and max((r["step"] for r in read_jsonl_lenient(out / "metrics.jsonl")), default=0) >= logged):
        assert proc.poll() is None and time.time() < deadline, "the run ended before the kill"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def training_logs(out) -> list[dict]:
    """metrics.jsonl's training logs, without the evaluations' (TRL's eval_*, the held-out heldout/*)."""
    return [r for r in read_jsonl(out / "metrics.jsonl") if not any(k.startswith(("eval_", "heldout/")) for k in r)]


def test_grpo_kill_and_resume(tmp_path):
    """With reused generations (--num_iterations 2: new completions at odd steps, reused at even ones), from the
    checkpoint of step 10, where a generation begins."""
    out = tmp_path / "out"
    steps = 60
    args = ["--output_dir", out, "--max_steps", steps, "--logging_steps", 1, "--save_strategy", "steps",
            "--save_steps", 10, "--num_iterations", 2,
            # issue 84: the model kept is the checkpoint a held-out metric ranks best, here the lowest KL to the
            # reference, over the points before the kill and after it (Trainer keeps the best in its state)
            "--eval_strategy", "steps", "--eval_steps", 10, "--metric_for_best_model", "kl/to_reference",
            "--greater_is_better", "false", "--load_best_model_at_end", "true"]
    kill_after("grpo_trl_example.py", args, out, checkpoint=10, logged=12, cwd=tmp_path)
    before_kill = training_logs(out)
    assert 12 <= max(r["step"] for r in before_kill) < steps and not (out / "summary.json").exists()
    assert not (out / "checkpoint-60").exists()  # killed mid-run, not at the end
    start = json.loads((out / "eval.json").read_text())  # the held-out evaluation at step 0, kept as it was made

    proc = run_script("grpo_trl_example.py", *args, "--resume_from_checkpoint", "last", cwd=tmp_path)
    assert_before_is_the_run_start(out, start, proc.stdout)
    resumed = re.search(r"GRPO: 60 steps, the (\d+) steps after step (\d+) in ", proc.stdout)  # this process's
    assert resumed and int(resumed[1]) == 60 - int(resumed[2])  # time, and the steps it took

    summary = json.loads((out / "summary.json").read_text())
    assert summary["global_step"] == steps
    metrics = training_logs(out)
    assert [r["step"] for r in metrics] == list(range(1, steps + 1))  # every step exactly once, across the kill
    # it resumed rather than restarted: the steps up to the checkpoint are the killed run's own records
    assert metrics[:10] == before_kill[:10]
    completion_steps = [r["step"] for r in read_jsonl(out / "completions.jsonl")]  # those of each generation
    assert sorted(set(completion_steps)) == list(range(1, steps + 1, 2)) and len(completion_steps) == steps // 2 * 16

    from safetensors.torch import load_file

    report = json.loads((out / "eval.json").read_text())
    kls = {point["step"]: point["metrics"]["kl"]["to_reference"] for point in report["during"]}
    assert sorted(kls) == list(range(10, steps + 1, 10))  # the point before the kill, kept
    best = report["best"]
    assert best["step"] == min(kls, key=kls.get) and best["saved"] and best["last_step"] == steps, best
    ended, kept = (load_file(folder / "model.safetensors") for folder in (out, out / f"checkpoint-{best['step']}"))
    assert all(torch.equal(ended[k], kept[k]) for k in kept)


def assert_before_is_the_run_start(out, start: dict, stdout: str) -> None:
    """A resumed run's held-out "before" is its start's, read from eval.json, not its checkpoint's; the table and the
    summary call it `before`."""
    report = json.loads((out / "eval.json").read_text())
    assert start["before_step"] == report["before_step"] == 0 and "after" not in start
    assert report["before"] == start["before"] and report["before_per_prompt"] == start["before_per_prompt"]
    assert "held-out evaluation before training: the run's start, from" in stdout
    assert "evaluating (before" not in stdout and "before -> after" in stdout


# A reward that raises at its FAIL_AT-th call in a run, and scores 0 before it
FLAKY = """
import os

calls = 0


def flaky(completions, **kwargs):
    global calls
    calls += 1
    if calls >= int(os.environ["FAIL_AT"]):
        raise RuntimeError("the reward fails")
    return [0.0] * len(completions)
"""


@pytest.mark.parametrize("script, length", [
    ("grpo_trl_example.py", ["--max_steps", 3, "--logging_steps", 1]),
    ("ppo_trl_example.py", ["--total_episodes", 192]),  # 3 updates of 64, the reward called once for each
])
def test_a_run_that_crashed_before_a_checkpoint_is_kept(tmp_path, script, length):
    """Issue 82: `--resume_from_checkpoint last` where a run crashed before its first checkpoint started afresh by
    removing the crashed run's files. A later run never empties an earlier one: it is refused in one line that names
    another folder, the crashed run's records kept byte for byte for the user to read."""
    (tmp_path / "fragile.py").write_text(FLAKY)
    out = tmp_path / "out"
    args = ["--output_dir", out, *length, "--eval_num_samples", 0, "--save_strategy", "steps", "--save_steps", 100]
    crashed = run_script(script, *args, "--reward_funcs", "fragile.flaky", cwd=tmp_path, check=False,
                         env={"PYTHONPATH": str(tmp_path), "FAIL_AT": "3"})
    assert crashed.returncode == 1 and "the reward fails" in crashed.stderr
    assert [m["step"] for m in read_jsonl(out / "metrics.jsonl") if "reward" in m] == [1, 2]
    held = snapshot(tmp_path)

    again = run_script(script, *args, "--resume_from_checkpoint", "last", cwd=tmp_path, check=False)
    assert again.returncode == 1 and again.stderr.strip().splitlines()[-1] == (
        f"error: --output_dir {out} holds files already (checkpoints.json, completions.jsonl, metrics.jsonl): a run "
        "starts in a new or empty folder and removes nothing it did not write: it has no complete checkpoint to "
        "continue; give another --output_dir, or move those files")
    assert snapshot(tmp_path) == held


@pytest.mark.parametrize("reuse", [[], ["--num_iterations", 2], ["--steps_per_generation", 2]],
                         ids=["new-completions-each-step", "num_iterations-2", "steps_per_generation-2"])
def test_resume_from_a_checkpoint_path_repeats_the_steps_after_it(tmp_path, reuse):
    """`--resume_from_checkpoint PATH` into a fresh output directory: the resumed steps are the original run's own
    (the checkpoint holds the weights, optimizer, scheduler and RNG states), and only they are logged. With reused
    generations too, whose completions a checkpoint does not hold: step 2 ends one generation, step 3 samples anew."""
    first, resumed = tmp_path / "first", tmp_path / "resumed"
    flags = ["--max_steps", 4, "--logging_steps", 1, "--save_strategy", "steps", "--save_steps", 2,
             "--eval_strategy", "no", "--use_cpu", "true", *reuse]  # on CPU, where the same state gives the same steps
    run_script("grpo_trl_example.py", "--output_dir", first, *flags, cwd=tmp_path)
    proc = run_script("grpo_trl_example.py", "--output_dir", resumed, "--resume_from_checkpoint",
                      first / "checkpoint-2", *flags, cwd=tmp_path)
    assert "missing keys" not in proc.stderr  # the tied output layer is not saved, and not missed
    timing = {"step_time", "wall_time"}  # wall-clock seconds and the time of the log, the keys allowed to differ
    original = [{k: v for k, v in m.items() if k not in timing} for m in read_jsonl(first / "metrics.jsonl")]
    again = [{k: v for k, v in m.items() if k not in timing} for m in read_jsonl(resumed / "metrics.jsonl")]
    assert [m["step"] for m in again] == [3, 4]
    for resumed_step, original_step in zip(again, original[2:], strict=True):
        assert resumed_step == pytest.approx(original_step)
    assert json.loads((resumed / "summary.json").read_text())["global_step"] == 4


@pytest.mark.parametrize("script", ["grpo_trl_example.py", "ppo_trl_example.py"])
def test_resume_from_a_folder_that_is_not_there_stops_before_loading(tmp_path, script, fails_early):
    error = fails_early(tmp_path, "--resume_from_checkpoint", "./checkpoint-7", script=script)
    assert "error: --resume_from_checkpoint ./checkpoint-7: no such directory" in error


@pytest.mark.parametrize("flags, message", [
    (["--num_iterations", 2, "--save_strategy", "steps", "--save_steps", 3],
     "error: --save_steps 3: with --num_iterations 2"),
    (["--steps_per_generation", 4, "--gradient_accumulation_steps", 2, "--save_strategy", "steps",
      "--save_steps", 0.01],  # 1% of 300 steps: 3
     "error: --save_steps 0.01: with --num_iterations 1, --steps_per_generation 4"),
])
def test_checkpoints_between_two_generations_stop_before_loading(tmp_path, flags, message, fails_early):
    """A checkpoint holds no reused completions: one saved between two generations would resume differently."""
    error = fails_early(tmp_path, *flags)
    assert error.startswith(message) and error.endswith("save every 2 or 4 steps")


def test_resuming_between_two_generations_stops_before_loading(tmp_path, fails_early):
    checkpoint = tmp_path / "checkpoint-3"  # as a run with other settings, or an older version of the script, left
    checkpoint.mkdir()
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": 3}))
    error = fails_early(tmp_path, "--num_iterations", 2, "--save_strategy", "steps", "--save_steps", 2,
                        "--resume_from_checkpoint", checkpoint)
    assert error.startswith(f"error: --resume_from_checkpoint {checkpoint}: step 3 falls between two generations")


def test_ppo_kill_and_resume_ends_where_the_uninterrupted_run_ends(tmp_path):
    """trl 1.12's PPOTrainer cannot resume (trl #2657); the script can. A PPO run SIGKILLed after the checkpoint of
    update 3 (or 6) and resumed with `last` logs every update once, and ends where the same run left alone ends: the
    same rewards at every update and the same policy, bit for bit on a CPU (the checkpoint holds the policy, the value
    model, the optimizer and scheduler, the RNG states and the counters; the data order is replayed, and TRL's sample
    tables come at the whole run's updates)."""
    killed, alone = tmp_path / "killed", tmp_path / "alone"
    updates = 16
    args = ["--total_episodes", 64 * updates, "--eval_num_samples", 2, "--eval_max_prompts", 8, "--save_strategy",
            "steps", "--save_steps", 3,
            "--num_sample_generations", 4,  # TRL's sample tables, at updates 1, 5, 9, 13: they draw random numbers too
            # issue 84: the model kept is the checkpoint a held-out metric ranks best, here the lowest pass@1, which
            # is at the first point, before the kill: the resumed run must keep it
            "--eval_strategy", "steps", "--eval_steps", 3, "--metric_for_best_model", "accuracy/pass@1",
            "--greater_is_better", "false", "--load_best_model_at_end", "true"]
    kill_after("ppo_trl_example.py", [*args, "--output_dir", killed], killed, checkpoint=3, logged=6, cwd=tmp_path)
    assert not (killed / "summary.json").exists() and not (killed / f"checkpoint-{updates}").exists()
    start = json.loads((killed / "eval.json").read_text())
    checkpoint = {p.name for p in (killed / "checkpoint-3").iterdir()}
    assert {"model.safetensors", "value_model", "optimizer.pt", "scheduler.pt", "rng_state.pth"} <= checkpoint
    assert json.loads((killed / "checkpoint-3" / "trainer_state.json").read_text())["episode"] == 3 * 64

    proc = run_script("ppo_trl_example.py", *args, "--output_dir", killed, "--resume_from_checkpoint", "last",
                      cwd=tmp_path)
    run_script("ppo_trl_example.py", *args, "--output_dir", alone, cwd=tmp_path)
    assert "resuming from" in proc.stdout and f"of {updates}" in proc.stdout
    resumed = re.search(rf"PPO: {updates} steps, the (\d+) steps after step (\d+) in ", proc.stdout)
    assert resumed and int(resumed[1]) == updates - int(resumed[2])
    assert_before_is_the_run_start(killed, start, proc.stdout)
    assert json.loads((alone / "eval.json").read_text())["before"] == start["before"]  # as the run left alone's

    metrics = {run: training_logs(run) for run in (killed, alone)}
    assert [m["step"] for m in metrics[killed]] == list(range(1, updates + 1))  # every update once, across the kill
    for key in ("reward", "objective/kl", "loss/value_avg", "episode", "lr"):
        assert [m[key] for m in metrics[killed]] == pytest.approx([m[key] for m in metrics[alone]], abs=1e-6), key
    assert json.loads((killed / "summary.json").read_text())["global_step"] == updates

    from safetensors.torch import load_file

    ended, left_alone = (load_file(run / "model.safetensors") for run in (killed, alone))
    assert all(torch.equal(ended[k], left_alone[k]) for k in left_alone)
    bests = [json.loads((run / "eval.json").read_text())["best"] for run in (killed, alone)]
    assert bests[0] == bests[1] and bests[0]["step"] == 3 and bests[0]["saved"], bests
    kept = load_file(killed / "checkpoint-3" / "model.safetensors")
    assert all(torch.equal(ended[k], kept[k]) for k in kept)
    assert "held-out accuracy/pass@1, best at step 3: " in proc.stdout


@pytest.mark.parametrize("script, flags", [
    ("grpo_trl_example.py", ["--save_strategy", "steps", "--save_steps", 5]),
    ("ppo_trl_example.py", ["--save_strategy", "steps", "--save_steps", 2]),
])
def test_ctrl_c_stops_in_one_line_that_says_how_to_go_on(tmp_path, script, flags):
    """Ctrl-C (SIGINT) after a checkpoint: no traceback, and the line names the checkpoint and the command."""
    out = tmp_path / "out"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **THREADS}
    proc = subprocess.Popen([sys.executable, str(REPO / script), "--output_dir", str(out), "--eval_num_samples", "0",
                             *map(str, flags)], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while not list(out.glob("checkpoint-*/trainer_state.json")):
        assert proc.poll() is None and time.time() < deadline, "the run ended before the interrupt"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stderr = proc.communicate(timeout=60)[1]
    assert proc.returncode == INTERRUPTED and "Traceback" not in stderr, stderr[-3000:]  # 130, as shells expect
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"interrupted; {out}/checkpoint-") and last.endswith(
        "is kept: the same command with --resume_from_checkpoint last continues from it"), last


# A reward module that, once imported, sits in a library's bare `except:` as datasets' fingerprinting does: it catches
# the interrupt and goes on
SWALLOWS = """
import os, time
open(os.environ["MARKER"], "w").close()
for _ in range(600):
    try:
        time.sleep(0.1)
    except:  # noqa: E722
        pass

def zero(completions, **kwargs):
    return [0.0] * len(completions)
"""


@pytest.mark.parametrize("script", ["grpo_trl_example.py", "ppo_trl_example.py"])
def test_ctrl_c_ends_the_run_where_a_library_catches_everything(tmp_path, script):
    """Ctrl-C inside code whose bare `except:` swallows KeyboardInterrupt (and SystemExit): the run ends within
    seconds, in one line, where it went on to train to the end and exit 0."""
    from extras.runtime import GRACE

    (tmp_path / "swallows.py").write_text(SWALLOWS)
    marker = tmp_path / "inside"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **THREADS, "PYTHONPATH": str(tmp_path), "MARKER": str(marker)}
    proc = subprocess.Popen([sys.executable, str(REPO / script), "--reward_funcs", "swallows.zero", "--output_dir",
                             str(tmp_path / "out")], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not marker.exists():
        assert proc.poll() is None and time.time() < deadline, "the run ended before the interrupt"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    interrupted = time.time()
    stderr = proc.communicate(timeout=60)[1]
    assert time.time() - interrupted < GRACE + 5 and proc.returncode == INTERRUPTED, stderr[-2000:]
    assert stderr.strip().splitlines()[-1] == "interrupted" and "Traceback" not in stderr, stderr[-2000:]


@pytest.mark.parametrize("script, length, longer", [
    ("grpo_trl_example.py", ["--max_steps", 4, "--save_steps", 2, "--logging_steps", 1], ["--max_steps", 6]),
    ("ppo_trl_example.py", ["--total_episodes", 256, "--save_steps", 2], ["--total_episodes", 384]),  # updates of 64
])
def test_a_folder_holds_one_run_and_the_users_files_beside_it(tmp_path, script, length, longer):
    """A second run into a used --output_dir stops in one line before loading, unless it continues that run. A user's
    files beside the run stay as they are, a user's `checkpoint-1-best/` and a folder of theirs inside a run's
    checkpoint too, which transformers' rotation under --save_total_limit would remove with the run's own: such a run
    is refused before loading, and goes on once they are moved, rotating out the run's own checkpoints alone. A
    finished run resumed trains nothing."""
    out = tmp_path / "out"
    first = ["--output_dir", out, *length, "--save_strategy", "steps", "--eval_num_samples", 0]
    run_script(script, *first, cwd=tmp_path)
    (out / "notes.txt").write_text("mine")
    (out / "checkpoint-1-best").mkdir()
    (out / "checkpoint-1-best" / "model.safetensors").write_text("mine")
    (out / "checkpoint-2" / "my-model").mkdir()
    (out / "checkpoint-2" / "my-model" / "model.safetensors").write_text("mine")
    held = snapshot(tmp_path)

    other = run_script(script, *first, "--learning_rate", 1e-4, cwd=tmp_path, check=False)
    assert other.returncode == 1 and other.stderr.strip().splitlines()[-1] == (
        f"error: --output_dir {out} holds files already (checkpoint-1-best, checkpoint-2, checkpoint-4, ...): a run "
        "starts in a new or empty folder and removes nothing it did not write: continue it with "
        "--resume_from_checkpoint last, give another --output_dir, or move those files")
    rotating = run_script(script, *first, *longer, "--save_total_limit", 1, "--resume_from_checkpoint", "last",
                          cwd=tmp_path, check=False)
    assert rotating.returncode == 1 and rotating.stderr.strip().splitlines()[-1] == (
        f"error: --save_total_limit 1 lets transformers remove `checkpoint-*` folders from {out}, and checkpoints.json "
        "does not list these as the run wrote them: checkpoint-1-best, checkpoint-2; move them out of the folder, or "
        "continue without --save_total_limit")
    assert "Loading weights" not in other.stdout + other.stderr + rotating.stdout + rotating.stderr
    assert snapshot(tmp_path) == held

    resumed = run_script(script, *first, "--resume_from_checkpoint", "last", cwd=tmp_path)
    if script.startswith("grpo"):  # GRPOTrainer, resumed at its last step, trained one more
        assert resumed.stdout.strip().splitlines()[-1] == (f"the run in {out} has finished: checkpoint-4 is step 4 of "
                                                           "4, so there is nothing to train (raise --max_steps to "
                                                           "train on)")
    else:  # PPO resumes in the script's own loop, which trains no update past the last
        assert f"resuming from {out / 'checkpoint-4'}, the run in {out}: step 4 of 4" in resumed.stdout

    (tmp_path / "moved").mkdir()
    (out / "checkpoint-1-best").rename(tmp_path / "moved" / "checkpoint-1-best")
    (out / "checkpoint-2" / "my-model").rename(tmp_path / "moved" / "my-model")
    run_script(script, *first, *longer, "--save_total_limit", 1, "--resume_from_checkpoint", "last", cwd=tmp_path)
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-6"]  # the run's own, rotated out
    assert [m["step"] for m in read_jsonl(out / "metrics.jsonl") if "step" in m][-1] == 6
    assert (out / "notes.txt").read_text() == "mine"  # beside the run, kept
