"""extras/run_folder.py: a run removes no file or folder it did not write. It starts in a new or empty folder, or
continues the run its folder holds; every other folder is refused in one line, every file in it as it was. Each case
is a folder as a user leaves it; the walk at the end takes every layout through every command the scripts print or the
docs advise, in the scripts themselves. The scripts' runs are tests/e2e/test_resume.py's."""

import json
import os
import shutil
from types import SimpleNamespace

import pytest
from conftest import ADDITION, SCRIPTS, TINY_MODEL, snapshot

from extras import run_folder
from extras.runtime import said


def a_run(out, steps=(2, 4), logged=True, complete=True, recorded=True):
    """A run as one leaves its folder: checkpoints (listed in checkpoints.json as written), records, the model."""
    out.mkdir(parents=True, exist_ok=True)
    for step in steps:
        (out / f"checkpoint-{step}").mkdir()
        (out / f"checkpoint-{step}" / "model.safetensors").write_bytes(b"w")
        if complete:
            (out / f"checkpoint-{step}" / "trainer_state.json").write_text(json.dumps(
                {"global_step": step, "max_steps": 4}))
    if recorded:  # made as the run began, with each checkpoint as it was saved
        (out / "checkpoints.json").write_text(json.dumps({f"checkpoint-{step}": run_folder.contents(
            out / f"checkpoint-{step}") for step in steps}))
    (out / "metrics.jsonl").write_text('{"step": 1}\n' if logged else "")
    for name in ("completions.jsonl", "model.safetensors", "config.json", "tokenizer.json", "training_args.bin"):
        (out / name).write_text("x")
    return out


def prepare(out, resume=None, eval_only=False, max_steps=4, save_total_limit=None):
    training_args = SimpleNamespace(output_dir=str(out), resume_from_checkpoint=resume, max_steps=max_steps,
                                    num_train_epochs=3.0, save_total_limit=save_total_limit)
    return run_folder.prepare(training_args, SimpleNamespace(eval_only=eval_only))


def test_a_new_or_empty_folder_takes_a_run(tmp_path):
    assert prepare(tmp_path / "new") is None and not (tmp_path / "new").exists()
    (tmp_path / "empty").mkdir()
    assert prepare(tmp_path / "empty") is None and prepare(tmp_path / "empty", resume="last") is None


@pytest.mark.parametrize("layout", ["a user's notes", "a user's model", "a run, finished, no checkpoint",
                                    "a run that crashed before its first log", "an --eval_only's eval.json"])
def test_a_folder_that_holds_anything_is_refused_and_names_only_safe_commands(tmp_path, layout):
    """Issue 82, items 1 and 2: an evaluation beside a user's model, or a run saved without checkpoints, was a run that
    `--overwrite_output_dir` or `--resume_from_checkpoint last` replaced, the user's model and the finished one with
    it, on the refusal's own advice. A run now starts in an empty folder, and a folder with nothing to continue is
    refused with `last` too, naming another folder or moving the files, never a flag that removes them."""
    out = tmp_path / "out"
    out.mkdir()
    files = {"a user's notes": ["notes.md"], "a user's model": ["config.json", "model.safetensors", "tokenizer.json"],
             "a run, finished, no checkpoint": ["metrics.jsonl", "model.safetensors", "summary.json"],
             "a run that crashed before its first log": ["completions.jsonl", "eval.json", "metrics.jsonl"],
             "an --eval_only's eval.json": ["config.json", "eval.json", "model.safetensors"]}[layout]
    for name in files:
        (out / name).write_text("mine")
    held = snapshot(tmp_path)
    for resume in (None, "last", "true"):
        with pytest.raises(SystemExit) as stopped:
            prepare(out, resume=resume)
        assert str(stopped.value) == (
            f"error: --output_dir {out} holds files already ({', '.join(files)}): a run starts in a new or empty "
            "folder and removes nothing it did not write: "
            + ("it has no complete checkpoint to continue; " if resume else "")
            + "give another --output_dir, or move those files")
    assert snapshot(tmp_path) == held


def test_a_folder_with_a_checkpoint_is_continued_when_asked(tmp_path, capsys):
    out = a_run(tmp_path / "out")
    held = snapshot(tmp_path)
    with pytest.raises(SystemExit, match=r"holds files already \(checkpoint-2, checkpoint-4, checkpoints.json, ...\): "
                                         r".*: continue it with --resume_from_checkpoint last, give another"):
        prepare(out)
    assert prepare(out, resume="last", max_steps=8) == str(out / "checkpoint-4")
    assert f"resuming from {out / 'checkpoint-4'}, the run in {out}: step 4 of 4" in capsys.readouterr().out
    assert snapshot(tmp_path) == held


def test_checkpoints_no_run_of_these_scripts_began_are_not_continued_in_place(tmp_path, capsys):
    """A model folder with an SFT run's checkpoint-100/ (or a run from before the record): continuing it would write the
    trained model over the user's and resume another program's optimizer. It is refused, saying how to go on from that
    checkpoint in a new folder; and so is continuing a run of ours from a checkpoint before its newest, whose later
    steps would be written over."""
    out = a_run(tmp_path / "sft", recorded=False)
    held = snapshot(tmp_path)
    for resume in ("last", str(out / "checkpoint-4")):
        with pytest.raises(SystemExit) as stopped:
            prepare(out, resume=resume, max_steps=8)
        assert str(stopped.value) == (
            f"error: --output_dir {out} holds checkpoints that no run of these scripts began there (it has no "
            f"checkpoints.json): continuing it would write over its files; to go on from checkpoint-4, give "
            f"--resume_from_checkpoint {out / 'checkpoint-4'} and another --output_dir")
    with pytest.raises(SystemExit, match=r"holds files already .*: give another --output_dir, or move those files"):
        prepare(out)  # and no advice to continue it
    assert prepare(tmp_path / "new", resume=str(out / "checkpoint-4"), max_steps=8) == str(out / "checkpoint-4")
    ours = a_run(tmp_path / "ours")
    with pytest.raises(SystemExit, match=r"checkpoint-2: the run in .*ours continues there from its newest complete "
                                         r"checkpoint alone \(checkpoint-4\): give another --output_dir"):
        prepare(ours, resume=str(ours / "checkpoint-2"), max_steps=8)
    assert snapshot(tmp_path) == held | {path: held_as for path, held_as in snapshot(tmp_path).items()
                                         if path.startswith("ours")}


def test_last_resumes_the_newest_complete_checkpoint(tmp_path, capsys):
    out = a_run(tmp_path / "out")
    (out / "checkpoint-6").mkdir()  # killed while it was saved: no trainer_state.json
    (out / "checkpoint-8").mkdir()
    (out / "checkpoint-8" / "trainer_state.json").write_text('{"global_st')  # a torn write
    assert prepare(out, resume="last", max_steps=10) == str(out / "checkpoint-4")
    said_ = capsys.readouterr().out
    assert f"skipping {out / 'checkpoint-6'}: incomplete" in said_ and f"skipping {out / 'checkpoint-8'}" in said_


def test_last_in_a_new_folder_starts_afresh(tmp_path, capsys):
    assert prepare(tmp_path / "out", resume="last") is None
    assert f"no complete checkpoint in {tmp_path / 'out'}, so the run starts afresh" in capsys.readouterr().out


def test_resuming_a_finished_run_trains_nothing(tmp_path, capsys):
    out = a_run(tmp_path / "out")
    with pytest.raises(SystemExit) as stopped:
        prepare(out, resume="last", max_steps=4)
    assert stopped.value.code == 0 and "has finished: checkpoint-4 is step 4 of 4" in capsys.readouterr().out
    ppo = out / "checkpoint-4" / "trainer_state.json"  # PPO's state counts episodes, and its own loop stops right
    ppo.write_text(json.dumps({"global_step": 4, "max_steps": 4, "episode": 256}))
    assert prepare(out, resume="last", max_steps=-1) == str(out / "checkpoint-4")


def test_a_checkpoint_of_another_run_goes_on_in_a_new_folder_only(tmp_path, capsys):
    other = a_run(tmp_path / "other")
    out = a_run(tmp_path / "out")
    with pytest.raises(SystemExit, match="holds files already"):
        prepare(out, resume=str(other / "checkpoint-2"))
    assert prepare(tmp_path / "new", resume=str(other / "checkpoint-2")) == str(other / "checkpoint-2")
    assert (f"resuming from {other / 'checkpoint-2'}, a checkpoint of the run in {other}, into {tmp_path / 'new'}: "
            "step 2 of 4") in capsys.readouterr().out


@pytest.mark.parametrize("theirs", ["checkpoint-1-best/notes.md", "checkpoint-best/model.safetensors",
                                    "checkpoint-2/mine/model.safetensors", "checkpoint-9 -> elsewhere",
                                    "checkpoint-4/trainer_state.json.bak"])
def test_a_continued_run_under_save_total_limit_is_refused_where_rotation_would_take_a_users_file(tmp_path, theirs):
    """Issue 82, items 3 and 5: transformers rotates out every `checkpoint-*` folder (by time: any name; by step: any
    that begins with a number), a user's `checkpoint-1-best/` among them, and a user's folder nested in a run's
    checkpoint goes with it. A run continued under --save_total_limit stops before loading where the folder holds one
    that checkpoints.json does not list as the run wrote it."""
    out = a_run(tmp_path / "out")
    (tmp_path / "elsewhere").mkdir()
    if "->" in theirs:
        (out / theirs.split(" -> ")[0]).symlink_to(tmp_path / "elsewhere")
    else:
        (out / theirs).parent.mkdir(exist_ok=True)
        (out / theirs).write_text("mine")
    held = snapshot(tmp_path)
    with pytest.raises(SystemExit, match=rf"does not list these as the run wrote them: {theirs.split('/')[0]}; move "
                                         r"them out of the folder, or continue without --save_total_limit"
                                         .split(" -> ")[0]):
        prepare(out, resume="last", max_steps=8, save_total_limit=1)
    assert snapshot(tmp_path) == held
    assert prepare(out, resume="last", max_steps=8) == str(out / "checkpoint-4")  # no limit, nothing removed


def test_checkpoints_the_record_does_not_list_are_not_rotated(tmp_path):
    """Checkpoints in a run's folder that its record does not list (copied in, or written by hand) are nobody's to
    rotate."""
    out = a_run(tmp_path / "out")
    (out / "checkpoints.json").write_text("{}")
    with pytest.raises(SystemExit, match="does not list these as the run wrote them: checkpoint-2, checkpoint-4;"):
        prepare(out, resume="last", max_steps=8, save_total_limit=2)


def test_a_checkpoint_begun_and_not_saved_is_the_runs_own(tmp_path):
    """Killed between writing a checkpoint and listing it, a run leaves a checkpoint the record lists as begun: it is
    the run's, which rotation may take, so that `last` (what Ctrl-C advises) goes on under --save_total_limit."""
    out = a_run(tmp_path / "out")
    record = json.loads((out / "checkpoints.json").read_text())
    (out / "checkpoints.json").write_text(json.dumps({**record, "checkpoint-6": None}))
    (out / "checkpoint-6").mkdir()
    (out / "checkpoint-6" / "trainer_state.json").write_text(json.dumps({"global_step": 6, "max_steps": 8}))
    assert run_folder.unwritten(out) == []
    assert prepare(out, resume="last", max_steps=8, save_total_limit=1) == str(out / "checkpoint-6")


def test_rotation_takes_no_folder_the_check_misses(tmp_path):
    """The folders the check reads are every one that transformers' rotation may take, by time or by step."""
    from transformers.trainer_utils import sort_checkpoints

    out = a_run(tmp_path / "checkpoint-7" / "out")  # a step number in the path above: by step, rotation takes any
    for age, name in enumerate(("checkpoint-1-best", "checkpoint-best", "checkpoint-", "checkpoint-03", "mine")):
        (out / name).mkdir()
        os.utime(out / name, (1e9 + age, 1e9 + age))  # older than the run's: by time, rotation takes them first
    taken = {os.path.basename(path) for use_mtime in (False, True)
             for path in sort_checkpoints(str(out), use_mtime=use_mtime)}
    assert "checkpoint-best" in taken and "checkpoint-" in taken  # by time, whatever follows the dash
    assert taken - {"checkpoint-2", "checkpoint-4"} == set(run_folder.unwritten(out))


def test_the_record_claims_the_folder_and_lists_each_checkpoint_as_it_is_saved(tmp_path):
    """Made as the run begins: a second run that found the same folder free stops there, before writing anything
    (two default runs started at once both took NAME-2). Then each checkpoint, begun and saved."""
    out = tmp_path / "out"
    args = SimpleNamespace(output_dir=str(out), should_save=True, resume_from_checkpoint=None)
    control, state = SimpleNamespace(should_save=True), SimpleNamespace(global_step=2)
    callback = run_folder.Written()
    callback.on_train_begin(args, state, control)
    assert json.loads((out / "checkpoints.json").read_text()) == {}
    with pytest.raises(SystemExit, match=f"another run began in {out} after this one found it free"):
        run_folder.Written().on_train_begin(args, state, control)
    callback.on_step_end(args, state, control)
    assert json.loads((out / "checkpoints.json").read_text()) == {"checkpoint-2": None}
    (out / "checkpoint-2" / "value_model").mkdir(parents=True)
    (out / "checkpoint-2" / "value_model" / "model.safetensors").write_bytes(b"v")
    (out / "checkpoint-2" / "trainer_state.json").write_text("{}")
    callback.on_save(args, state, control)
    assert run_folder.unwritten(out) == []
    (out / "checkpoint-4").mkdir()
    (out / "checkpoint-4" / "trainer_state.json").write_text("{}")
    callback.on_save(args, SimpleNamespace(global_step=4), control)
    shutil.rmtree(out / "checkpoint-2")  # rotated out: it leaves the record at the next save
    callback.on_save(args, SimpleNamespace(global_step=4), control)
    assert json.loads((out / "checkpoints.json").read_text()) == {"checkpoint-4": ["trainer_state.json"]}
    resumed = SimpleNamespace(output_dir=str(out), should_save=True, resume_from_checkpoint=str(out / "checkpoint-4"))
    callback.on_train_begin(resumed, SimpleNamespace(global_step=4), control)  # its own run, continued: no claim


def test_eval_only_is_refused_no_folder_and_resumes_nothing(tmp_path):
    out = a_run(tmp_path / "out")
    assert prepare(out, eval_only=True) is None
    with pytest.raises(SystemExit, match="--eval_only evaluates --model_name_or_path as it is, and resumes nothing"):
        prepare(out, eval_only=True, resume="last")


def test_a_link_as_the_folder_is_followed_and_kept(tmp_path):
    out, link = a_run(tmp_path / "out"), tmp_path / "link"
    link.symlink_to(out)
    assert prepare(link, resume="last", max_steps=8) == str(link / "checkpoint-4") and link.is_symlink()


def test_a_linked_checkpoint_is_no_runs_to_resume(tmp_path):
    out = a_run(tmp_path / "out")
    elsewhere = tmp_path / "another-run" / "checkpoint-9"
    elsewhere.mkdir(parents=True)
    (elsewhere / "trainer_state.json").write_text('{"global_step": 9}')
    (out / "checkpoint-9").symlink_to(elsewhere)
    assert run_folder.last_checkpoint(str(out)) == out / "checkpoint-4"


def test_a_file_as_the_folder(tmp_path):
    (tmp_path / "out").write_text("mine")
    with pytest.raises(SystemExit, match="is a file"):
        prepare(tmp_path / "out")
    assert (tmp_path / "out").read_text() == "mine"


def test_the_default_run_takes_the_next_free_folder(tmp_path, monkeypatch):
    """Where the default run's folder holds a run (or anything), the run goes to NAME-N past the highest taken, as
    Lightning's version_N; `last` continues the newest of them that has a complete checkpoint."""
    monkeypatch.chdir(tmp_path)
    assert run_folder.default_folder("outputs/run", resuming=False) == "outputs/run"
    (tmp_path / "outputs" / "run").mkdir(parents=True)  # empty: taken as it is
    assert run_folder.default_folder("outputs/run", resuming=False) == "outputs/run"
    a_run(tmp_path / "outputs" / "run")
    assert run_folder.default_folder("outputs/run", resuming=False) == "outputs/run-2"
    assert run_folder.default_folder("outputs/run", resuming=True) == "outputs/run"
    a_run(tmp_path / "outputs" / "run-3", steps=())  # no checkpoint
    assert run_folder.default_folder("outputs/run", resuming=False) == "outputs/run-4"
    assert run_folder.default_folder("outputs/run", resuming=True) == "outputs/run-4"
    (tmp_path / "outputs" / "run-10").write_text("a file")  # whatever is there
    assert run_folder.default_folder("outputs/run", resuming=False) == "outputs/run-11"


def test_ctrl_c_names_as_kept_the_checkpoint_last_resumes(tmp_path, monkeypatch):
    """Interrupted while checkpoint-6 was being saved: checkpoint-4 is what `last` resumes, and what is named."""
    from extras import runtime

    out = a_run(tmp_path / "out")
    (out / "checkpoint-6").mkdir()
    monkeypatch.setitem(runtime._run, "output_dir", str(out))
    assert said() == (f"\ninterrupted; {out / 'checkpoint-4'} is kept: the same command with --resume_from_checkpoint "
                      "last continues from it")
    monkeypatch.setitem(runtime._run, "output_dir", str(tmp_path / "none"))
    assert said() == "\ninterrupted"


# The walk: folder layouts a user may give as --output_dir, each a function of (folder, tmp_path)
def model_of_theirs(out, tmp_path):
    shutil.copytree(TINY_MODEL, out)


def evaluated_model(out, tmp_path):  # item 1: an --eval_only beside a model of the user's
    model_of_theirs(out, tmp_path)
    (out / "eval.json").write_text('{"model": {}}')


def dataset_of_theirs(out, tmp_path):
    (out / "train").mkdir(parents=True)
    (out / "train" / "data.jsonl").write_text('{"prompt": "1+1", "answer": "2"}\n')


def run_like_names_in_their_folders(out, tmp_path):
    for name in ("mine/checkpoint-3/model.safetensors", "mine/metrics.jsonl", "mine/eval.json",
                 "deep/a/b/c/checkpoint-1/trainer_state.json", ".hidden"):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text("mine")


def links(out, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "kept.txt").write_text("mine")
    out.mkdir(parents=True)
    (out / "to-elsewhere").symlink_to(tmp_path / "elsewhere")
    (out / "checkpoint-9").symlink_to(tmp_path / "elsewhere")
    (out / "eval.json").symlink_to(tmp_path / "elsewhere" / "kept.txt")


def finished_without_checkpoints(out, tmp_path):  # item 2: every tiny and SmolLM2 recipe saves no checkpoint
    a_run(out, steps=())
    (out / "summary.json").write_text("{}")


def finished_with_checkpoints(out, tmp_path):
    a_run(out)
    (out / "summary.json").write_text("{}")


def unfinished_with_an_incomplete_checkpoint(out, tmp_path):
    a_run(out, steps=(2,))
    (out / "checkpoint-4").mkdir()  # killed while saving it
    (out / "checkpoint-4" / "model.safetensors").write_bytes(b"half")


def crashed_before_a_checkpoint(out, tmp_path):
    a_run(out, steps=(), logged=False)
    (out / "eval.json").write_text('{"before": {}}')


def another_programs_run(out, tmp_path):  # an SFT's output: a model and a checkpoint, no record of ours
    model_of_theirs(out, tmp_path)
    a_run(out / "run", steps=(100,), recorded=False)
    (out / "run").rename(out / "sft")
    (out / "sft" / "checkpoint-100").rename(out / "checkpoint-100")


def a_run_with_their_files_inside(out, tmp_path):  # items 3 and 5
    a_run(out)
    (out / "checkpoint-1-best").mkdir()
    (out / "checkpoint-1-best" / "notes.md").write_text("mine")
    (out / "checkpoint-1-best" / "model.safetensors").write_text("mine")
    (out / "checkpoint-2" / "my-model").mkdir()
    (out / "checkpoint-2" / "my-model" / "model.safetensors").write_text("mine")
    (out / "notes.md").write_text("mine")


LAYOUTS = [model_of_theirs, evaluated_model, dataset_of_theirs, run_like_names_in_their_folders, links,
           finished_without_checkpoints, finished_with_checkpoints, unfinished_with_an_incomplete_checkpoint,
           crashed_before_a_checkpoint, another_programs_run, a_run_with_their_files_inside]
# Every command the scripts print or the docs advise, with `out` for the folder; each with a check that stops it late
# (item 4: a refused command had emptied the folder before its later checks ran)
COMMANDS = {
    "a run": [], "continue": ["--resume_from_checkpoint", "last"],
    "continue (true)": ["--resume_from_checkpoint", "true"],
    "continue, rotating": ["--resume_from_checkpoint", "last", "--save_total_limit", 1],
    "from a checkpoint": ["--resume_from_checkpoint", "out/checkpoint-2"],
    "evaluate": ["--eval_only", "--eval_num_samples", 2],
    "an unknown reward": ["--reward_funcs", "acuracy"], "bf16 weights": ["--dtype", "bfloat16"],
    "the removed flag": ["--overwrite_output_dir", "true"],
}
SCRIPT_FLAGS = {"grpo_trl_example.py": ["--max_steps", 8], "ppo_trl_example.py": ["--total_episodes", 512]}


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize("layout", LAYOUTS, ids=[layout.__name__ for layout in LAYOUTS])
def test_every_layout_through_every_command_keeps_every_file(tmp_path, layout, script, until_weights):
    """Each command runs in the script itself up to loading the model (nothing after it removes a file but rotation,
    which the e2e tests run), from the folder that holds `out`: every file and link under tmp_path, the folder's and
    beside it, is byte for byte what it was; a refusal is one line that advises no flag that removes anything, and
    `--resume_from_checkpoint last` only where there is a complete checkpoint to continue. The default run too, with
    its recipe's folder in that layout: it goes to a new folder, or continues that one's run."""
    out = tmp_path / "outputs" / script.replace("_trl_example.py", "-tiny-addition")
    layout(out, tmp_path)
    held = snapshot(tmp_path)
    named = ["--model_name_or_path", TINY_MODEL, "--dataset_name", ADDITION, *SCRIPT_FLAGS[script]]
    for name, command in COMMANDS.items():
        command = [str(out / "checkpoint-2") if part == "out/checkpoint-2" else part for part in command]
        for args in ([*named, "--output_dir", out, *command], command):  # named, and the default run
            returncode, stdout, stderr = until_weights(tmp_path, *args, script=script)
            assert snapshot(tmp_path) == held, (name, args)
            default = args is command
            ours = (out / "checkpoints.json").is_file() and run_folder.last_checkpoint(str(out))
            if not default and name != "evaluate" and not ours:
                assert returncode == 1, (name, args)  # nothing of ours to continue: no run goes into the folder
            if name == "continue, rotating" and ours and run_folder.unwritten(out):
                assert returncode == 1, (name, args)  # rotation would take a folder the run did not write
            if default and name in ("a run", "an unknown reward"):  # a folder that holds files: the next free one
                assert f"{out.relative_to(tmp_path)} holds files already: this run writes to " in stdout, stdout
            if returncode == 1:
                error = stderr.strip().splitlines()[-1]
                assert error.startswith("error: ") and "Traceback" not in stderr, (name, stderr[-2000:])
                assert ("--overwrite_output_dir: it is gone" in error) is (name == "the removed flag"), error
                assert "--resume_from_checkpoint last" not in error or ours, error
                assert not default or "holds files already" not in error, error  # it takes the next free folder
            else:
                assert returncode in (0, "loaded"), (name, args, stderr[-2000:])
