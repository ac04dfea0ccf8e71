"""extras/run_folder.py: a new run continues, replaces or refuses the run in --output_dir, and removes nothing that
no run writes. Each case is a folder as a user leaves it, with their own files beside the run's; the scripts' runs
are tests/e2e/test_resume.py's."""

import json
import os
import re
from types import SimpleNamespace

import pytest

from extras import run_folder
from extras.runtime import said

INPUTS = [("--model_name_or_path", None), ("--dataset_name", None)]


def a_run(out, steps=(2, 4), logged=True, complete=True):
    """A finished-looking run in `out`: checkpoints, records, the saved model."""
    out.mkdir(parents=True, exist_ok=True)
    for step in steps:
        (out / f"checkpoint-{step}").mkdir()
        (out / f"checkpoint-{step}" / "model.safetensors").write_bytes(b"w")
        if complete:
            (out / f"checkpoint-{step}" / "trainer_state.json").write_text(json.dumps(
                {"global_step": step, "max_steps": 4}))
    (out / "metrics.jsonl").write_text('{"step": 1}\n' if logged else "")
    for name in ("completions.jsonl", "model.safetensors", "config.json", "tokenizer.json", "training_args.bin"):
        (out / name).write_text("x")
    (out / "runs" / "Dec02_07-12-33_host").mkdir(parents=True)  # TensorBoard's
    (out / "runs" / "Dec02_07-12-33_host" / "events.out.tfevents.1764659553.host.123.0").write_text("x")
    return sorted(p.name for p in out.iterdir())


def prepare(out, inputs=INPUTS, resume=None, overwrite=False, eval_only=False, max_steps=4):
    training_args = SimpleNamespace(output_dir=str(out), resume_from_checkpoint=resume, max_steps=max_steps,
                                    num_train_epochs=3.0)
    script_args = SimpleNamespace(overwrite_output_dir=overwrite, eval_only=eval_only)
    return run_folder.prepare(training_args, script_args, inputs)


def names(folder):
    return sorted(p.name for p in folder.iterdir())


def test_a_new_run_into_a_folder_with_only_the_users_files_removes_nothing(tmp_path):
    (tmp_path / "notes.md").write_text("mine")
    (tmp_path / "data.jsonl").write_text("{}")
    assert prepare(tmp_path) is None
    assert names(tmp_path) == ["data.jsonl", "notes.md"]


def test_a_folder_that_holds_a_run_is_refused_and_kept(tmp_path):
    kept = a_run(tmp_path / "out")
    with pytest.raises(SystemExit, match=r"--output_dir .*out holds a run already \(checkpoint-2, checkpoint-4, "):
        prepare(tmp_path / "out")
    assert names(tmp_path / "out") == kept


def test_replacing_removes_the_runs_files_and_keeps_the_folder(tmp_path, capsys):
    out = tmp_path / "out"
    a_run(out)
    assert prepare(out, overwrite=True) is None
    assert out.is_dir() and names(out) == []
    assert "--overwrite_output_dir: replacing the run in" in capsys.readouterr().out


@pytest.mark.parametrize("theirs", ["notes.txt", "train.jsonl", "README.md", "my_reward.py", "base-model/file",
                                    "checkpoint-best/file", "checkpoint-3.zip", "eval-2-notes.json",
                                    "metrics.jsonl.bak", "runs/notes.txt", "checkpoint-4/my_eval.txt",
                                    "completions/mine.csv"])
def test_replacing_refuses_where_the_folder_holds_anything_else(tmp_path, theirs):
    """A notes file, the run's own dataset, a module, a model folder beside the run, files named near a run's, a
    note inside a folder runs write: each stays, and so does the whole run beside it."""
    out = tmp_path / "out"
    kept = a_run(out)
    (out / theirs).parent.mkdir(exist_ok=True)
    (out / theirs).write_text("mine")
    top = theirs.split("/")[0]
    with pytest.raises(SystemExit, match=f"holds files no run writes \\({re.escape(top)}\\)"):
        prepare(out, overwrite=True)
    assert names(out) == sorted({*kept, top}) and (out / theirs).read_text() == "mine"


@pytest.mark.parametrize("flags", [{}, {"overwrite": True}, {"resume": "last"}])
def test_a_models_files_without_a_run_are_refused_and_kept(tmp_path, flags):
    """A folder with a model in it and no run's records (a model of the user's, not this run's input): a run would
    write its own model over it, and --overwrite_output_dir or `last` may not remove it."""
    out = tmp_path / "out"
    out.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "vocab.txt"):
        (out / name).write_text("mine")
    with pytest.raises(SystemExit, match=r"holds a model's files \(config.json, model.safetensors, tokenizer.json, "
                                         r"vocab.txt\) and no run's records"):
        prepare(out, **flags)
    assert names(out) == ["config.json", "model.safetensors", "tokenizer.json", "vocab.txt"]


def test_a_folder_named_like_a_runs_file_is_the_users(tmp_path):
    out = tmp_path / "out"
    a_run(out)
    (out / "model.safetensors").unlink()
    (out / "model.safetensors").mkdir()  # a run writes a file of that name, never a folder
    with pytest.raises(SystemExit, match=r"holds files no run writes \(model.safetensors\)"):
        prepare(out, overwrite=True)


@pytest.mark.parametrize("flag, where", [
    ("--model_name_or_path", "checkpoint-2"),  # training on from a checkpoint, into its own folder
    ("--model_name_or_path", "."),  # the base model is the folder
    ("--dataset_name", "completions.jsonl"),  # a run's records as the data
    ("--reward_model_name_or_path", "checkpoint-4"),
    ("--value_model_path", "checkpoint-4"),
])
def test_replacing_never_removes_the_runs_own_inputs(tmp_path, flag, where):
    out = tmp_path / "out"
    kept = a_run(out)
    path = str(out / where)
    with pytest.raises(SystemExit) as stopped:
        prepare(out, inputs=[*INPUTS, (flag, path)], overwrite=True)
    assert flag in str(stopped.value) and names(out) == kept


def test_the_folder_is_the_model_refused_with_or_without_replacing(tmp_path):
    """`--model_name_or_path mymodel --output_dir mymodel`: the trained model would be written over the base."""
    model = tmp_path / "mymodel"
    model.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (model / name).write_text("base")
    for overwrite in (False, True):
        with pytest.raises(SystemExit, match="is the run's --model_name_or_path"):
            prepare(model, inputs=[("--model_name_or_path", str(model))], overwrite=overwrite)
    assert names(model) == ["config.json", "model.safetensors", "tokenizer.json"]
    prepare(model, inputs=[("--model_name_or_path", str(model))], eval_only=True)  # eval.json beside it, no more


def test_a_link_as_the_folder_is_followed_and_kept(tmp_path):
    out, link = tmp_path / "out", tmp_path / "link"
    a_run(out)
    link.symlink_to(out)
    prepare(link, overwrite=True)
    assert link.is_symlink() and out.is_dir() and names(out) == []


def test_a_link_inside_the_folder_is_nobodys_run(tmp_path):
    out = tmp_path / "out"
    a_run(out)
    (tmp_path / "elsewhere").mkdir()
    (out / "eval.json").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SystemExit, match=r"holds files no run writes \(eval.json\)"):
        prepare(out, overwrite=True)
    assert (tmp_path / "elsewhere").is_dir()


def test_a_linked_checkpoint_is_no_runs_to_resume(tmp_path):
    out = tmp_path / "out"
    a_run(out)
    elsewhere = tmp_path / "another-run" / "checkpoint-9"
    elsewhere.mkdir(parents=True)
    (elsewhere / "trainer_state.json").write_text('{"global_step": 9}')
    (out / "checkpoint-9").symlink_to(elsewhere)
    assert run_folder.last_checkpoint(str(out)) == out / "checkpoint-4"


def test_last_resumes_the_newest_complete_checkpoint(tmp_path, capsys):
    out = tmp_path / "out"
    a_run(out)
    (out / "checkpoint-6").mkdir()  # killed while it was saved: no trainer_state.json
    (out / "checkpoint-8").mkdir()
    (out / "checkpoint-8" / "trainer_state.json").write_text('{"global_st')  # a torn write
    assert prepare(out, resume="last", max_steps=10) == str(out / "checkpoint-4")
    said_ = capsys.readouterr().out
    assert f"skipping {out / 'checkpoint-6'}: incomplete" in said_ and f"skipping {out / 'checkpoint-8'}" in said_
    assert f"resuming from {out / 'checkpoint-4'}, the run in {out}: step 4 of 4" in said_


@pytest.mark.parametrize("left", ["records, no checkpoint", "an incomplete checkpoint", "a finished run, unsaved"])
def test_last_without_a_complete_checkpoint_restarts_the_run(tmp_path, left, capsys):
    """After a Ctrl-C before the first checkpoint, a crash while the only one was saved, or a run with
    --save_strategy no: the command the refusal advises restarts the run, replacing the run's files only."""
    out = tmp_path / "out"
    a_run(out, steps=() if left != "an incomplete checkpoint" else (2,), complete=False)
    if left == "a finished run, unsaved":
        (out / "summary.json").write_text("{}")
    assert prepare(out, resume="last") is None
    said_ = capsys.readouterr().out
    assert f"no complete checkpoint in {out}, so the run starts afresh" in said_ and names(out) == []
    (out / "metrics.jsonl").write_text('{"step": 1}\n')
    (out / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit, match=r"holds files no run writes \(notes.txt\)"):
        prepare(out, resume="last")


def test_records_of_a_run_that_logged_no_step_are_no_run(tmp_path):
    """A run that crashed at its first step leaves empty records (and its held-out `before`): the fixed rerun goes
    ahead, and so does `last`; the new run rewrites them."""
    out = tmp_path / "out"
    out.mkdir()
    for name in ("metrics.jsonl", "completions.jsonl"):
        (out / name).write_text("")
    (out / "eval.json").write_text('{"before": {}}')
    (out / "runs" / "Dec02_07-12-33_host").mkdir(parents=True)  # --report_to tensorboard opens as training starts
    (out / "runs" / "Dec02_07-12-33_host" / "events.out.tfevents.1764659553.host.123.0").write_text("x")
    (out / "completions").mkdir()  # GRPOTrainer makes it for --log_completions when it is built
    assert prepare(out) is None and prepare(out, resume="last") is None
    (out / "metrics.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(SystemExit, match="holds a run already"):
        prepare(out)
    (out / "metrics.jsonl").write_text("")
    (out / "eval.json").write_text('{"model": {}}')  # an --eval_only's evaluation is a run's record
    with pytest.raises(SystemExit, match=r"holds a run already \(completions, completions.jsonl, eval.json"):
        prepare(out)


def test_resuming_a_finished_run_trains_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    a_run(out)
    with pytest.raises(SystemExit) as stopped:
        prepare(out, resume="last", max_steps=4)
    assert stopped.value.code == 0 and "has finished: checkpoint-4 is step 4 of 4" in capsys.readouterr().out
    assert prepare(out, resume="last", max_steps=8) == str(out / "checkpoint-4")  # more steps asked: trains on
    ppo = out / "checkpoint-4" / "trainer_state.json"  # PPO's state counts episodes, and its own loop stops right
    ppo.write_text(json.dumps({"global_step": 4, "max_steps": 4, "episode": 256}))
    assert prepare(out, resume="last", max_steps=-1) == str(out / "checkpoint-4")


def test_a_checkpoint_elsewhere_into_a_folder_that_holds_a_run_is_refused(tmp_path):
    other = tmp_path / "other"
    a_run(other)
    out = tmp_path / "out"
    kept = a_run(out)
    with pytest.raises(SystemExit, match="holds a run already"):
        prepare(out, resume=str(other / "checkpoint-2"))
    assert names(out) == kept
    assert prepare(tmp_path / "new", resume=str(other / "checkpoint-2")) == str(other / "checkpoint-2")


def test_eval_only_beside_a_run_removes_nothing(tmp_path):
    out = tmp_path / "out"
    kept = a_run(out)
    assert prepare(out, eval_only=True, overwrite=True) is None and names(out) == kept


def test_ctrl_c_names_as_kept_the_checkpoint_last_resumes(tmp_path, monkeypatch):
    """Interrupted while checkpoint-6 was being saved: checkpoint-4 is what `last` resumes, and what is named."""
    from extras import runtime

    out = tmp_path / "out"
    a_run(out)
    (out / "checkpoint-6").mkdir()
    monkeypatch.setitem(runtime._run, "output_dir", str(out))
    assert said() == (f"\ninterrupted; {out / 'checkpoint-4'} is kept: the same command with --resume_from_checkpoint "
                      "last continues from it")
    monkeypatch.setitem(runtime._run, "output_dir", str(tmp_path / "none"))
    assert said() == "\ninterrupted"


def test_a_file_as_the_folder(tmp_path):
    (tmp_path / "out").write_text("mine")
    with pytest.raises(SystemExit, match="is a file"):
        prepare(tmp_path / "out")
    assert os.path.isfile(tmp_path / "out")
