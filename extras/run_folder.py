"""--output_dir, the folder of one run (docs/outputs.md): what a run continues, what it replaces, what it may remove.

    prepare(...)           before anything loads, on every process: the checkpoint the run resumes from, or None.
                           A folder that holds a run stops a new one in one line, unless the new one continues it
                           (--resume_from_checkpoint), replaces it (--overwrite_output_dir, or `last` where no
                           checkpoint is complete) or only evaluates beside it (--eval_only)
    last_checkpoint(out)   the newest complete checkpoint: what `last` resumes, and what Ctrl-C says is kept

Replacing a run removes the files runs write (RUN_FILES) and nothing else, as `git clean` removes only what it knows:
never the folder itself, and nothing at all where the folder holds another file, or one of the run's own inputs (its
model, data, reward or value model, or the checkpoint it resumes). Symbolic links are followed first: a link as
--output_dir names the folder it points to, and a link inside the folder is no run's.

This module imports the standard library alone: extras/runtime.py reads last_checkpoint as a run is interrupted.
"""

import json
import re
import shutil
import sys
from fnmatch import fnmatch
from pathlib import Path

# What runs write into --output_dir: anything else there is the user's
RUN_FILES = (
    # the run's records and plots (extras/outputs.py, extras/evaluation.py)
    "metrics.jsonl", "completions.jsonl", "summary.json", "eval.json", "eval-[0-9]*.json", "reward_curve.png",
    "training_curves.png",
    # the trainer's: checkpoints, its arguments, TensorBoard's logs, GRPOTrainer's --log_completions tables
    "checkpoint-[0-9]*", "training_args.bin", "runs", "completions",
    # the model (save_pretrained), or a LoRA adapter, and its tokenizer
    "config.json", "generation_config.json", "model.safetensors", "model-*-of-*.safetensors",
    "model.safetensors.index.json", "pytorch_model*.bin", "adapter_config.json", "adapter_model.safetensors",
    "adapter_model.bin", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "chat_template.jinja", "chat_template.json", "vocab.json", "merges.txt", "vocab.txt", "tokenizer.model",
    "spiece.model", "sentencepiece.bpe.model",
)
# Of those, what a run writes before its first step is logged: records of a run that never logged a step are no run
BEFORE_FIRST_LOG = ("metrics.jsonl", "completions.jsonl", "eval.json")


def is_run_file(entry: Path) -> bool:
    """A name runs write, and of the kind they write it: a checkpoint, TensorBoard's or log_completions' a folder,
    the rest files; a symbolic link is nobody's run."""
    if entry.is_symlink() or not any(fnmatch(entry.name, pattern) for pattern in RUN_FILES):
        return False
    folders = entry.name in ("runs", "completions") or re.fullmatch(r"checkpoint-\d+", entry.name)
    return entry.is_dir() if folders else entry.is_file()


def checkpoints(out: Path) -> list[Path]:
    """`out`'s checkpoint-N folders, by N."""
    found = [p for p in out.glob("checkpoint-*") if re.fullmatch(r"checkpoint-\d+", p.name) and p.is_dir()]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))


def is_complete(checkpoint: Path) -> bool:
    """A checkpoint whose trainer_state.json, which the trainer writes last, parses."""
    try:
        json.loads((checkpoint / "trainer_state.json").read_text())
        return True
    except (OSError, json.JSONDecodeError):
        return False


def last_checkpoint(output_dir: str) -> Path | None:
    """The newest complete checkpoint in `output_dir`, or None. (transformers' get_last_checkpoint takes the highest
    number, complete or not.)"""
    out = Path(output_dir).expanduser()
    complete = [p for p in checkpoints(out) if is_complete(p)] if out.is_dir() else []
    return complete[-1] if complete else None


def holds_a_run(entries: list[Path]) -> bool:
    """Whether the run files `entries` are a run's: anything but the records of a run that logged no step."""
    for entry in entries:
        if entry.name not in BEFORE_FIRST_LOG:
            return True
        if entry.name == "metrics.jsonl" and entry.read_text().strip():
            return True
    return False


def prepare(training_args, script_args, inputs: list[tuple[str, str | None]]) -> str | None:
    """The checkpoint to resume from: --resume_from_checkpoint as given, or for `last` (`true`) the newest complete
    checkpoint in --output_dir; with none, `last` starts the run afresh, so that one command restarts a run whatever
    it reached. The folder is the run's own: continued, replaced, or new. `inputs`: the run's paths, each with its
    flag (None where not given), which the folder may not be and which replacing it may not remove."""
    from accelerate import PartialState

    given = training_args.output_dir
    out = Path(given).expanduser().resolve()  # a link: the folder it names
    main = PartialState().is_main_process
    if out.exists() and not out.is_dir():
        sys.exit(f"error: --output_dir {given} is a file: a run writes a folder there")
    wanted = training_args.resume_from_checkpoint
    last = wanted is not None and wanted.lower() in ("last", "true")
    if wanted is not None and not last:
        inputs = [*inputs, ("--resume_from_checkpoint", wanted)]
    local = [(flag, Path(path).expanduser().resolve()) for flag, path in inputs
             if path and Path(path).expanduser().exists()]
    for flag, path in local:
        if path == out and not (script_args.eval_only and flag == "--model_name_or_path"):  # eval.json beside it
            sys.exit(f"error: --output_dir {given} is the run's {flag}: the run would write its model and records "
                     "over it; give the run a folder of its own")
    entries = sorted(out.iterdir()) if out.is_dir() else []
    ours = [entry for entry in entries if is_run_file(entry)]

    found = resume_point(given, wanted, main)
    if found is not None:
        state = read_state(found)
        own = found.resolve().parent == out  # the folder's own run, continued
        if own:
            finished(training_args, state, found, main)
        if main:
            of = f" of {state['max_steps']}" if state.get("max_steps") else ""
            episode = f", episode {state['episode']}" if "episode" in state else ""  # PPO's prompts sampled so far
            print(f"resuming from {found}, the run in {given}: step {state.get('global_step', '?')}{of}{episode}")
        if own:
            return str(found)

    if not script_args.eval_only and holds_a_run(ours):
        if not (last or script_args.overwrite_output_dir):
            listed = ", ".join(entry.name for entry in ours[:3]) + (", ..." if len(ours) > 3 else "")
            sys.exit(f"error: --output_dir {given} holds a run already ({listed}): a run needs a folder of its own: "
                     "give another --output_dir, replace that run with --overwrite_output_dir, or continue it with "
                     "--resume_from_checkpoint last")
        why = f"--resume_from_checkpoint {wanted}" if last else "--overwrite_output_dir"
        replace(out, given, entries, ours, local, why, main)
    return str(found) if found else None


def resume_point(given: str, wanted: str | None, main: bool) -> Path | None:
    """The checkpoint --resume_from_checkpoint names: a folder, or for `last` the newest complete one in `given`, the
    output folder (None where there is none, said)."""
    if wanted is None:
        return None
    if wanted.lower() not in ("last", "true"):
        if not Path(wanted).is_dir():
            sys.exit(f"error: --resume_from_checkpoint {wanted}: no such directory; `last` resumes from the newest "
                     "complete checkpoint in --output_dir")
        return Path(wanted)
    found = last_checkpoint(given)
    if main:
        out = Path(given).expanduser()
        for checkpoint in checkpoints(out) if out.is_dir() else []:
            if found is None or int(checkpoint.name[11:]) > int(found.name[11:]):
                print(f"skipping {checkpoint}: incomplete (no whole trainer_state.json, which the trainer writes "
                      "last)")
        if found is None:
            print(f"--resume_from_checkpoint {wanted}: no complete checkpoint in {given}, so the run starts afresh")
    return found


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


def replace(out: Path, given: str, entries: list[Path], ours: list[Path], inputs: list[tuple[str, Path]],
            why: str, main: bool) -> None:
    """Remove the run files `ours` from `out`, which holds `entries`; refuse, in one line, where `out` holds anything
    else or one of the run's `inputs`."""
    from accelerate import PartialState

    others = [entry.name for entry in entries if entry not in ours]
    if others:
        listed = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        sys.exit(f"error: {why} would replace the run in {given}, which also holds files no run writes ({listed}): "
                 "a run removes only its own files; move those, or give another --output_dir")
    for flag, path in inputs:
        if path.is_relative_to(out):
            sys.exit(f"error: {why} would replace the run in {given}, which holds this run's {flag} ({path}): move "
                     "it, or give another --output_dir")
    PartialState().wait_for_everyone()  # every process has looked before the main one removes
    if main:
        names = ", ".join(entry.name for entry in ours[:6]) + (f" and {len(ours) - 6} more" if len(ours) > 6 else "")
        print(f"{why}: replacing the run in {given}, removing its {names}")
        for entry in ours:
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    PartialState().wait_for_everyone()
