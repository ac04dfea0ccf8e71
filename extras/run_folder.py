"""--output_dir, the folder of one run (docs/outputs.md): what a run continues, what it replaces, what it may remove.

    prepare(...)           before anything loads, on every process: the checkpoint the run resumes from, or None.
                           A folder that holds a run stops a new one in one line, unless the new one continues it
                           (--resume_from_checkpoint), replaces it (--overwrite_output_dir, or `last` where no
                           checkpoint is complete) or only evaluates beside it (--eval_only)
    last_checkpoint(out)   the newest complete checkpoint: what `last` resumes, and what Ctrl-C says is kept

Replacing a run removes the files runs write (RUN_FILES, by whole name, and RUN_FOLDERS that hold only what runs
write in them) and nothing else, as `git clean` removes only what it knows: never the folder itself, and nothing at
all where the folder holds another file, or one of the run's own inputs (its model, data, reward or value model, or
the checkpoint it resumes). A folder holds a run by its records, arguments or checkpoints: a model's files alone may
be the user's, and a run refuses to write over them. Symbolic links are followed first: a link as --output_dir names
the folder it points to, and a link inside the folder is no run's.

This module imports the standard library alone: extras/runtime.py reads last_checkpoint as a run is interrupted.
"""

import json
import re
import shutil
import sys
from pathlib import Path

# What runs write into --output_dir, by whole name: anything else there is the user's
MODEL_FILES = (  # the model (save_pretrained), or a LoRA adapter, and its tokenizer
    r"config\.json", r"generation_config\.json", r"model(-\d+-of-\d+)?\.safetensors",
    r"model\.safetensors\.index\.json", r"pytorch_model(-\d+-of-\d+)?\.bin", r"pytorch_model\.bin\.index\.json",
    r"adapter_config\.json", r"adapter_model\.(safetensors|bin)", r"tokenizer\.json", r"tokenizer_config\.json",
    r"special_tokens_map\.json", r"added_tokens\.json", r"chat_template\.(jinja|json)", r"vocab\.(json|txt)",
    r"merges\.txt", r"tokenizer\.model", r"spiece\.model", r"sentencepiece\.bpe\.model",
)
RUN_FILES = (
    # the run's records and plots (extras/outputs.py, extras/evaluation.py), the trainer's arguments
    r"metrics\.jsonl", r"completions\.jsonl", r"summary\.json", r"eval(-\d+)?\.json", r"reward_curve\.png",
    r"training_curves\.png", r"training_args\.bin", *MODEL_FILES,
)
# The folders runs write, each with what it holds (anything else inside makes it the user's): TensorBoard's logs,
# GRPOTrainer's --log_completions tables, and a checkpoint: the trainer's state, the model, PPO's value_model/,
# DeepSpeed's global_stepN/ and FSDP's shards
RUN_FOLDERS = {
    r"runs": (r"events\.out\.tfevents\..+",),
    r"completions": (r"completions_\d+\.parquet",),
    r"checkpoint-\d+": (*RUN_FILES, r"trainer_state\.json", r"optimizer\.(pt|bin)", r"scheduler\.pt", r"scaler\.pt",
                        r"rng_state(_\d+)?\.pth", r"README\.md", r"latest", r"zero_to_(fp32|torch)\.py",
                        r"(bf16_)?(zero_pp_rank_\d+_)?mp_rank_\d+_(optim|model)_states\.pt",
                        r"(pytorch_model_fsdp|optimizer)(_\d+)?\.bin", r"__\d+_\d+\.distcp", r"\.metadata"),
}


def named(name: str, patterns) -> bool:
    return any(re.fullmatch(pattern, name) for pattern in patterns)


def is_run_file(entry: Path) -> bool:
    """A name runs write, and of the kind they write it: a file, or a folder that holds only what runs write in it;
    a symbolic link, here or inside, is nobody's run."""
    if entry.is_symlink():
        return False
    if not entry.is_dir():
        return entry.is_file() and named(entry.name, RUN_FILES)
    held = next((names for folder, names in RUN_FOLDERS.items() if re.fullmatch(folder, entry.name)), None)
    return held is not None and all(
        not path.is_symlink() and (path.is_dir() or named(path.name, held)) for path in entry.rglob("*"))


def checkpoints(out: Path) -> list[Path]:
    """`out`'s checkpoint-N folders, by N (a link is no run's checkpoint)."""
    found = [p for p in out.glob("checkpoint-*") if re.fullmatch(r"checkpoint-\d+", p.name) and p.is_dir()
             and not p.is_symlink()]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))


def is_complete(checkpoint: Path) -> bool:
    """A checkpoint whose trainer_state.json, which the trainer writes last, parses."""
    return bool(read_state(checkpoint))


def last_checkpoint(output_dir: str) -> Path | None:
    """The newest complete checkpoint in `output_dir`, or None. (transformers' get_last_checkpoint takes the highest
    number, complete or not.)"""
    out = Path(output_dir).expanduser()
    complete = [p for p in checkpoints(out) if is_complete(p)] if out.is_dir() else []
    return complete[-1] if complete else None


def before_first_log(entry: Path) -> bool:
    """What a run writes before its first step is logged, as a run that crashed in it leaves it: empty records, a
    held-out evaluation of the start alone, TensorBoard's and --log_completions' folders (opened as training starts)."""
    if entry.name in ("metrics.jsonl", "completions.jsonl"):
        return not entry.read_bytes().strip()
    if entry.name == "eval.json":  # `model` (--eval_only) or `after`: an evaluation that ended
        try:
            return not {"after", "model"} & set(json.loads(entry.read_bytes()))
        except (ValueError, TypeError):  # torn as it was written
            return True
    return entry.name in ("runs", "completions")


def holds_a_run(entries: list[Path]) -> bool:
    """Whether the run files `entries` are a run's: a record of one that logged a step, its arguments, a checkpoint.
    A model's files alone are no proof: they may be a model of the user's."""
    return any(not before_first_log(entry) and not named(entry.name, MODEL_FILES) for entry in entries)


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
    elif not script_args.eval_only and (model := [entry.name for entry in ours if named(entry.name, MODEL_FILES)]):
        sys.exit(f"error: --output_dir {given} holds a model's files ({', '.join(model)}) and no run's records "
                 "(training_args.bin, metrics.jsonl, a checkpoint): they may be a model of yours, which the run would "
                 "write over; move them, or give the run a folder of its own")
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
