"""--output_dir, the folder of one run (docs/outputs.md): a run removes no file or folder it did not write.

    prepare(...)           before anything loads, on every process: the checkpoint the run resumes from, or None. A run
                           starts in a new or empty folder, or continues the run of these scripts that its folder holds
                           from its newest checkpoint; any other folder is refused in one line, and nothing in it is
                           touched
    default_folder(...)    the default run's folder: its recipe's, or where that holds files, the next free NAME-N
    keep_record(trainer)   the trainer keeps the run's record, checkpoints.json (Written): made as the run begins, which
                           claims the folder, then listing what the run wrote into each checkpoint it saves
    last_checkpoint(out)   the newest complete checkpoint: what `last` resumes, and what Ctrl-C says is kept

A run removes nothing itself. transformers removes checkpoint folders under --save_total_limit, every `checkpoint-*`
folder of --output_dir (trainer_utils.rotate_checkpoints); a run into a new folder finds only its own there, and a run
that continues one is refused before loading where the folder holds a `checkpoint-*` that checkpoints.json does not
list as written, as it is, by the run.
"""

import json
import os
import re
import sys
from pathlib import Path

from accelerate import PartialState
from accelerate.utils import gather_object
from transformers import TrainerCallback
from transformers.trainer_callback import DefaultFlowCallback

RECORD = "checkpoints.json"  # the run's: made as it begins, then each checkpoint it saved, with what it wrote there


def prepare(training_args, script_args) -> str | None:
    """The checkpoint to resume from: --resume_from_checkpoint as given, or for `last` (`true`) the newest complete
    checkpoint in --output_dir, where the run goes on; with none, `last` starts the run afresh in an empty folder."""
    given = training_args.output_dir
    out = Path(given).expanduser().resolve()  # a link: the folder it names
    main = PartialState().is_main_process
    if out.exists() and not out.is_dir():
        sys.exit(f"error: --output_dir {given} is a file: a run writes a folder there")
    wanted = training_args.resume_from_checkpoint
    if script_args.eval_only:  # it writes eval.json, or eval-N.json beside one, and nothing else
        if wanted is not None:
            sys.exit(f"error: --eval_only evaluates --model_name_or_path as it is, and resumes nothing: to evaluate a "
                     f"checkpoint, give it as --model_name_or_path ({wanted})")
        return None
    found = resume_point(wanted, given, main)
    if found is not None and found.resolve().parent == out:  # the folder's own run, continued
        newest = last_checkpoint(given)
        if not (out / RECORD).is_file():  # another program's run (an SFT's), or one from before the record
            sys.exit(f"error: --output_dir {given} holds checkpoints that no run of these scripts began there (it has "
                     f"no {RECORD}): continuing it would write over its files; to go on from {found.name}, give "
                     f"--resume_from_checkpoint {found} and another --output_dir")
        if newest is None or found.resolve() != newest.resolve():  # from an earlier one, over the steps after it
            sys.exit(f"error: --resume_from_checkpoint {wanted}: the run in {given} continues there from its newest "
                     f"complete checkpoint alone ({newest.name if newest else 'it has none'}): give another "
                     "--output_dir to go on from this one")
        finished(training_args, read_state(found), found, main)
        limit = training_args.save_total_limit
        if limit and (theirs := unwritten(out)):
            sys.exit(f"error: --save_total_limit {limit} lets transformers remove `checkpoint-*` folders from "
                     f"{given}, and {RECORD} does not list these as the run wrote them: {listed(theirs)}; move them "
                     "out of the folder, or continue without --save_total_limit")
        say_resuming(found, f"the run in {given}", main)
        return str(found)
    held = sorted(entry.name for entry in out.iterdir()) if out.is_dir() else []
    if held:
        go_on = ("continue it with --resume_from_checkpoint last, " if (out / RECORD).is_file() and
                 last_checkpoint(given) else "it has no complete checkpoint to continue; " if wanted else "")
        sys.exit(f"error: --output_dir {given} holds files already ({listed(held)}): a run starts in a new or empty "
                 f"folder and removes nothing it did not write: {go_on}give another --output_dir, or move those files")
    if found is not None:
        say_resuming(found, f"a checkpoint of the run in {found.resolve().parent}, into {given}", main)
    elif wanted is not None and main:
        print(f"--resume_from_checkpoint {wanted}: no complete checkpoint in {given}, so the run starts afresh")
    return str(found) if found else None


def listed(names: list[str]) -> str:
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


def say_resuming(checkpoint: Path, where: str, main: bool) -> None:
    state = read_state(checkpoint)
    if main:
        of = f" of {state['max_steps']}" if state.get("max_steps") else ""
        episode = f", episode {state['episode']}" if "episode" in state else ""  # PPO's prompts sampled so far
        print(f"resuming from {checkpoint}, {where}: step {state.get('global_step', '?')}{of}{episode}")


def resume_point(wanted: str | None, given: str, main: bool) -> Path | None:
    """The checkpoint --resume_from_checkpoint names: a folder, or for `last` the newest complete one in `given`, the
    output folder, or None; the incomplete ones after it are said."""
    if wanted is None:
        return None
    if wanted.lower() not in ("last", "true"):
        if not Path(wanted).is_dir():
            sys.exit(f"error: --resume_from_checkpoint {wanted}: no such directory; `last` resumes from the newest "
                     "complete checkpoint in --output_dir")
        return Path(wanted)
    found = last_checkpoint(given)
    if main:
        for checkpoint in checkpoints(Path(given).expanduser()):
            if found is None or int(checkpoint.name[11:]) > int(found.name[11:]):
                print(f"skipping {checkpoint}: incomplete (no whole trainer_state.json, which the trainer writes "
                      "last)")
    return found


def checkpoints(out: Path) -> list[Path]:
    """`out`'s checkpoint-N folders, by N (a link is no run's checkpoint)."""
    found = [p for p in out.glob("checkpoint-*") if re.fullmatch(r"checkpoint-\d+", p.name) and p.is_dir()
             and not p.is_symlink()]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))


def last_checkpoint(output_dir: str) -> Path | None:
    """The newest complete checkpoint in `output_dir` (one whose trainer_state.json, which the trainer writes last,
    parses), or None. (transformers' get_last_checkpoint takes the highest number, complete or not.)"""
    complete = [p for p in checkpoints(Path(output_dir).expanduser()) if read_state(p)]
    return complete[-1] if complete else None


def read_state(checkpoint: Path) -> dict:
    """A checkpoint's trainer_state.json, or {} where it has none (a path the trainer will read, or refuse)."""
    try:
        return json.loads((checkpoint / "trainer_state.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def finished(training_args, state: dict, checkpoint: Path, main: bool) -> None:
    """A finished run resumed trains nothing more: transformers' Trainer, resumed at its last step, trains one past
    it unless the step ends an epoch. The run's length is --max_steps, or the same epochs as the checkpoint's."""
    steps = training_args.max_steps
    if steps <= 0 and state.get("num_train_epochs") == getattr(training_args, "num_train_epochs", None):
        steps = state.get("max_steps", 0)
    if "episode" not in state and 0 < steps <= state.get("global_step", 0):  # PPO's own loop counts right
        if main:
            print(f"the run in {training_args.output_dir} has finished: {checkpoint.name} is step "
                  f"{state['global_step']} of {steps}, so there is nothing to train (raise --max_steps to train on)")
        sys.exit(0)


def contents(folder: Path) -> list[str]:
    """Every file and folder inside `folder`, as paths relative to it (links listed, not followed)."""
    return sorted(str(Path(root, name).relative_to(folder)) for root, folders, files in os.walk(folder)
                  for name in folders + files)


def read_record(out: Path) -> dict:
    try:
        return json.loads((out / RECORD).read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def unwritten(out: Path) -> list[str]:
    """The `checkpoint-*` folders of `out` that transformers' rotation may remove (rotate_checkpoints, by time, takes
    every one; by step, those with a number) and that this run's record does not list as they are now (or as begun:
    a run killed while saving one)."""
    record = read_record(out)
    return sorted(p.name for p in out.glob("checkpoint-*")
                  if p.is_dir() and (p.name not in record or record[p.name] not in (None, contents(p))))


def keep_record(trainer) -> None:
    """Written among the trainer's callbacks, right after transformers' DefaultFlowCallback, which decides at each
    step's end whether to save, and before those that write into the folder as training begins (the held-out
    evaluation's eval.json, TensorBoard's runs/): the folder is claimed before anything is written there."""
    callbacks = trainer.callback_handler.callbacks
    flow = next(i for i, callback in enumerate(callbacks) if isinstance(callback, DefaultFlowCallback))
    callbacks.insert(flow + 1, Written())


class Written(TrainerCallback):
    """The run's record in --output_dir, checkpoints.json. A new run makes it as it begins, before anything else is
    written there: a second run that found the same folder free at the same time stops then. Each checkpoint is
    listed as begun (null) before it is saved, and with the files and folders in it once it is."""

    def on_train_begin(self, args, state, control, **kwargs):
        out = Path(args.output_dir)
        resumed = args.resume_from_checkpoint and Path(args.resume_from_checkpoint).resolve().parent == out.resolve()
        claimed = True
        if args.should_save and not resumed:  # the main process (of each machine, with --save_on_each_node)
            out.mkdir(parents=True, exist_ok=True)
            try:
                with open(out / RECORD, "x") as record:
                    record.write("{}\n")
            except FileExistsError:
                claimed = False
        if not all(gather_object([claimed])):
            sys.exit(f"error: another run began in {args.output_dir} after this one found it free: run this one "
                     "again (the default run then takes the next free folder), or give it another --output_dir")

    def on_step_end(self, args, state, control, **kwargs):
        if control.should_save and args.should_save:  # listed before it is written: a run killed while saving it
            self.write(args, f"checkpoint-{state.global_step}", None)  # leaves a checkpoint that is its own

    def on_save(self, args, state, control, **kwargs):
        PartialState().wait_for_everyone()  # every process has written its part of the checkpoint
        if args.should_save:
            name = f"checkpoint-{state.global_step}"
            self.write(args, name, contents(Path(args.output_dir) / name))

    @staticmethod
    def write(args, name: str, files: list[str] | None) -> None:
        out = Path(args.output_dir)
        record = {kept: held for kept, held in read_record(out).items() if (out / kept).is_dir()}  # rotated: gone
        record[name] = files
        (out / f"{RECORD}.tmp").write_text(json.dumps(record, indent=1) + "\n")
        os.replace(out / f"{RECORD}.tmp", out / RECORD)  # whole, or the last whole one, if the run is killed


def default_folder(path: str, resuming: bool) -> str:
    """The default run's folder: `path`, or where that holds files, `path-N` past the highest N that does, as
    Lightning's version_N; resuming, the newest of them, where it has a complete checkpoint to continue."""
    base = Path(path)
    numbered = [(1, base)] + [(int(p.name[len(base.name) + 1:]), p) for p in base.parent.glob(f"{base.name}-*")
                              if re.fullmatch(re.escape(base.name) + r"-\d+", p.name)]
    used = [(n, p) for n, p in numbered if p.exists() and (not p.is_dir() or any(p.iterdir()))]
    if not used:
        return path
    n, newest = max(used)
    if resuming and last_checkpoint(str(newest)):
        return str(newest)
    return f"{base}-{n + 1}"
