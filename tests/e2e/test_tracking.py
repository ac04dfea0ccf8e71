"""Live tracking offline: `--report_to tensorboard,trackio` writes the reward each script logs, with no network."""

import json
import sqlite3
from types import SimpleNamespace

import pytest
from conftest import read_jsonl, run_script


tensorboard = pytest.importorskip("tensorboard", reason="pip install -r requirements-tracking.txt")
pytest.importorskip("trackio", reason="pip install -r requirements-tracking.txt")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

TINY = {"grpo_trl_example.py": ["--max_steps", 3, "--logging_steps", 1],
        "ppo_trl_example.py": ["--total_episodes", 48, "--per_device_train_batch_size", 16, "--num_mini_batches", 1]}


@pytest.mark.parametrize("script", sorted(TINY))
def test_tensorboard_and_trackio_hold_the_logged_reward(script, tmp_path):
    out = tmp_path / "out"
    done = run_script(script, *TINY[script], "--eval_strategy", "steps", "--eval_steps", 2, "--eval_num_samples", 2,
                      "--eval_max_prompts", 4, "--report_to", "tensorboard,trackio", "--project", "tracking-test",
                      "--output_dir", out, cwd=tmp_path, env={"TRACKIO_DIR": str(tmp_path / "trackio")})
    logged = [row["reward"] for row in read_jsonl(out / "metrics.jsonl") if "reward" in row]
    assert len(logged) == 3
    # issue 84: the held-out point of step 2 reaches the trackers as the training logs do
    [held_out] = [row["heldout/accuracy/pass@1"] for row in read_jsonl(out / "metrics.jsonl")
                  if "heldout/accuracy/pass@1" in row]

    [run] = (out / "runs").iterdir()  # transformers' TensorBoardCallback: <output_dir>/runs/<date>_<host>
    events = EventAccumulator(str(run))
    events.Reload()
    assert [event.value for event in events.Scalars("train/reward")] == pytest.approx(logged)
    points = [(event.step, event.value) for event in events.Scalars("train/heldout/accuracy/pass@1")]
    assert points == [(2, pytest.approx(held_out))]

    with sqlite3.connect(tmp_path / "trackio" / "tracking-test.db") as db:  # trackio: one SQLite file per project
        rows = [json.loads(metrics) for (metrics,) in db.execute("SELECT metrics FROM metrics ORDER BY id")]
    assert [row["train/reward"] for row in rows if "train/reward" in row] == pytest.approx(logged)
    assert [row["train/heldout/accuracy/pass@1"] for row in rows if "train/heldout/accuracy/pass@1" in row] == [
        pytest.approx(held_out)]

    assert f"tensorboard --logdir {out / 'runs'}" in done.stdout  # the summary says how to open each dashboard
    assert "trackio show --project tracking-test" in done.stdout


def test_a_tracker_that_is_not_installed_stops_the_run_with_one_line(monkeypatch):
    from extras import checks

    real = checks.importlib.util.find_spec
    monkeypatch.setattr(checks.importlib.util, "find_spec", lambda name: None if name == "trackio" else real(name))
    script_args = SimpleNamespace(dataset_name="data", eval_only=False, eval_num_samples=0, reward_funcs=[])
    training_args = SimpleNamespace(use_cpu=True, report_to=["tensorboard", "trackio"])
    model_args = SimpleNamespace(model_name_or_path=".", model_revision=None, load_in_4bit=False, load_in_8bit=False,
                                 use_peft=False)
    with pytest.raises(SystemExit) as stop:
        checks.check(script_args, training_args, model_args)
    assert str(stop.value) == ("error: --report_to trackio needs the `trackio` package: "
                               "pip install -r requirements-tracking.txt")
