"""Plumbing shared by `grpo_trl_example.py` and `ppo_trl_example.py`.

Nothing here is RL: it is the part of a training script that is the same whatever the
algorithm. Read the training scripts first; come here when you want to know how a piece works.

    RunArguments           the arguments both scripts take (data columns, rewards, evaluation, watchdog)
    parse_args()           TrlParser parsing: options that would have no effect refused, from a flag or a YAML key,
                           and valid batch sizes suggested when TRL rejects one
    default_recipe()       a script's default run, from recipes/tiny/<algo>.yaml, and the settings tuned for it
    device_defaults()      CPU defaults (`use_cpu`, no bf16, no activation checkpointing) when there is no GPU
    options_set()          the options a run sets itself, as flags or in its --config YAML
    check_model_path()     a clear error for a model that is neither a directory nor on the hub
    check_reward_model()   a clear error for a reward model that is not a one-output sequence classifier
    check_gpu_options()    a clear error for vLLM / QLoRA without a GPU or the package
    warn_if_tuned_defaults_kept()  a warning when a real model runs with the tiny model's settings
    configure_tracking()   `--report_to tensorboard,trackio`, and a clear error when a tracker is not installed
    load_splits()          the training and held-out splits, with the reward columns checked
    load_prompt_dataset()  a hub id or a local file/folder -> DatasetDict with a `prompt` column
    check_reward_funcs()   a clear error for a reward name or option that does not resolve
    check_reward_columns() a clear error, before any model loads, for a column a reward needs and the data lacks
    RunRecorder            a TrainerCallback that writes metrics.jsonl and completions.jsonl (resume-safe)
    resolve_checkpoint()   `--resume_from_checkpoint last`: the newest complete checkpoint
    NoSignalWatchdog       a TrainerCallback that warns (or stops) when the reward gives no signal
    write_summary()        summary.json, reward_curve.png, training_curves.png and the printed summary
"""

import importlib.util
import json
import logging
import os
import platform
import re
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch
from accelerate import PartialState
from datasets import DatasetDict, load_dataset
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, sort_checkpoints
from trl import ScriptArguments

from rewards import get_reward_funcs, reward_names

# Upstream warnings that every run would print and that mean nothing for it, each silenced by its exact message,
# never wholesale (docs/outputs.md, "What a run prints"):
# - trl 1.12 (trl/models/utils.py, PPOTrainer) and peft 0.21 call transformers 5.23's deprecated names for the
#   activation checkpointing methods, which forward to the new ones;
for _name in ("is_gradient_checkpointing", "gradient_checkpointing_enable", "gradient_checkpointing_disable"):
    warnings.filterwarnings("ignore", message=f"`{_name}` is deprecated", category=FutureWarning)
# - trl 1.12's PPOTrainer logs the variance of the policy ratio over its minibatches (val/ratio_var); with one
#   minibatch and one PPO epoch there is one value, torch warns and the metric is nan;
warnings.filterwarnings("ignore", message=r"var\(\): degrees of freedom is <= 0", category=UserWarning)
# - DeepSpeed 0.19's ZeRO calls torch 2.13's deprecated names for two collectives at every step, which forward to the
#   new ones;
for _name in ("all_gather_into_tensor", "reduce_scatter_tensor"):
    warnings.filterwarnings("ignore", message=rf"`torch\.distributed\.{_name}` is deprecated", category=FutureWarning)


@dataclass
class RunArguments(ScriptArguments):
    """The arguments both scripts take, on top of TRL's ScriptArguments (`dataset_name`, `dataset_config`,
    `dataset_train_split`, `dataset_test_split`): the data's columns, the rewards, the held-out evaluation and the
    no-signal watchdog. Each script's own arguments extend it."""

    reward_funcs: list[str] = field(
        default_factory=lambda: ["accuracy"],
        metadata={"help": f"Reward functions: {', '.join(reward_names())}, or a dotted path `module.function`. "
                  "Weight them with --reward_weights."},
    )
    reward_options: list[str] = field(
        default_factory=list,
        metadata={"help": "Options of the named rewards, as <reward>.<option>=<value>, e.g. overlong.buffer=0.5 "
                          "repetition.ngram_size=4 code.timeout=5 (docs/rewards.md lists each reward's options)."},
    )
    dataset_prompt_column: str = field(
        default="prompt",
        metadata={"help": "Column holding the prompt, e.g. `question` for GSM8K. It is renamed to `prompt`."},
    )
    dataset_answer_column: str | None = field(
        default=None,
        metadata={"help": "Column holding the gold answer, if it is not `answer`. It is renamed to `answer`."},
    )
    system_prompt: str | None = field(
        default=None,
        metadata={"help": "If set, each prompt becomes a chat with this system message first."},
    )
    eval_num_samples: int = field(
        default=0,
        metadata={"help": "If K > 0, sample K completions (and one greedy) per eval prompt before and after "
                  "training, and write mean reward, greedy accuracy, pass@1, pass@K and maj@K to eval.json."},
    )
    eval_max_prompts: int = field(
        default=256,
        metadata={"help": "Evaluate on at most this many prompts of the eval split."},
    )
    eval_only: bool = field(
        default=False,
        metadata={"help": "Train nothing: evaluate the policy (a model, or a LoRA adapter's folder) on the held-out "
                  "prompts, sampling as this run's training would, and write eval.json and the table."},
    )
    no_signal_patience: int = field(
        default=5,
        metadata={"help": "Warn when the reward gives no learning signal for this many logging steps."},
    )
    stop_on_no_signal: bool = field(
        default=False,
        metadata={"help": "Stop training cleanly, instead of only warning, when there is no learning signal."},
    )


class _DropLogRecord(logging.Filter):
    """Drops the log records whose message matches `pattern`."""

    def __init__(self, pattern: str):
        super().__init__()
        self.pattern = re.compile(pattern)

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.match(record.getMessage())


# - trl 1.12's PPOTrainer asks `generate` for its scores (output_scores, return_dict_in_generate) beside a
#   generation config, which transformers 5.23 logs once as deprecated.
logging.getLogger("transformers.generation.utils").addFilter(_DropLogRecord(
    r"Passing `generation_config` together with generation-related arguments="
    r"\(\{'(output_scores|return_dict_in_generate)', '(output_scores|return_dict_in_generate)'\}\)"))

# File extensions `--dataset_name` accepts for a single local file, and the `datasets` builder for each.
LOCAL_FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


def parse_args(parser, unsupported: dict[str, str], args: list[str] | None = None):
    """`parser.parse_args_and_config()`, refusing the `unsupported` options whether they come as flags or as keys of
    the `--config` YAML, and adding the nearest valid settings to TRL's batch-geometry error.

    TrlParser makes a YAML's values the parser's defaults, so the script's own defaults are read first: against
    those, a recipe's `logging_steps: 3` is as much a change as `--logging_steps 3`.
    GRPOConfig checks at parse time, before any model loads, that every generation batch holds whole
    groups of `num_generations` completions; its message says what is wrong but not what would be right.
    """
    defaults = parser.parse_args_into_dataclasses(args=[])
    try:
        parsed = parser.parse_args_and_config(args)
    except ValueError as err:
        found = re.search(r"generation_batch_size \((\d+)\) must be divisible by num_generations \((\d+)\)", str(err))
        if not found:
            raise
        size, group = map(int, found.groups())
        nearest = sorted({v for v in (size // group * group, -(-size // group) * group) if v > 0})
        raise SystemExit(
            f"error: {err} The generation batch is per_device_train_batch_size x processes x steps_per_generation "
            f"completions; the nearest valid sizes are {' and '.join(map(str, nearest))} (on one process with "
            f"steps_per_generation 1: --per_device_train_batch_size {' or '.join(map(str, nearest))}), "
            f"or change --num_generations."
        ) from None
    refuse_ignored_fields(unsupported, defaults, *parsed)
    if not {"activation_checkpointing", "gradient_checkpointing"} & options_set(args):  # see device_defaults
        training_args = next(a for a in parsed if hasattr(a, "activation_checkpointing"))
        training_args.activation_checkpointing = training_args.gradient_checkpointing = torch.cuda.is_available()
    return parsed


TRACKERS = ("tensorboard", "trackio")  # --report_to values whose package (of the same name) is optional


def configure_tracking(training_args) -> None:
    """Accept `--report_to tensorboard,trackio` (the command line takes one string; a YAML config takes a list),
    and stop with one line, before any weights load, when a tracker's package is missing."""
    names = (name.strip() for entry in training_args.report_to for name in entry.split(","))
    training_args.report_to = [name for name in names if name not in ("", "none")]
    for name in training_args.report_to:
        if name in TRACKERS:
            try:
                importlib.import_module(name)
            except ImportError as err:
                raise SystemExit(f"error: --report_to {name} needs the {name} package ({err}); "
                                 "pip install -r requirements-tracking.txt") from None


def tracking_lines(training_args) -> list[str]:
    """How to open each tracker's dashboard, for the end-of-run summary."""
    lines = []
    if "tensorboard" in training_args.report_to:
        where = os.environ.get("TENSORBOARD_LOGGING_DIR") or Path(training_args.output_dir) / "runs"  # transformers'
        lines.append(f"  tensorboard: tensorboard --logdir {where}")
    if "trackio" in training_args.report_to:
        where = os.environ.get("TRACKIO_DIR")
        lines.append(f"  trackio:     trackio show --project {training_args.project}"
                     + (f"   (with TRACKIO_DIR={where})" if where else ""))
    return lines


def default_recipe(path: Path, root: Path) -> tuple[dict, dict]:
    """A script's default run, read from its recipe (recipes/tiny/<algo>.yaml): every key's value, and the keys
    marked `# tuned` (settings that suit the tiny model only) with theirs.

    A value naming a file or folder under `root` (the recipe's `assets/...`) becomes its absolute path, so that the
    default run works from any working directory.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp()); (root / "assets").mkdir()
    >>> _ = (root / "r.yaml").write_text("model_name_or_path: assets\\nlearning_rate: 3.0e-4  # tuned\\nseed: 42\\n")
    >>> values, tuned = default_recipe(root / "r.yaml", root)
    >>> values["model_name_or_path"] == str(root / "assets"), values["seed"], tuned
    (True, 42, {'learning_rate': 0.0003})
    """
    import yaml

    text = path.read_text()
    values = yaml.safe_load(text)
    for key, value in values.items():
        if isinstance(value, str) and value and (root / value).exists():
            values[key] = str(root / value)
    tuned = {key: values[key] for key in re.findall(r"^(\w+):.*#\s*tuned\b", text, re.M)}
    return values, tuned


def device_defaults() -> dict:
    """Defaults for the training config that depend on the hardware.

    TRL's configs default to `bf16=True`, which fails on a machine without a GPU, and to activation checkpointing,
    which saves GPU memory by running each layer's forward twice. With no CUDA device we train on CPU in fp32
    (`use_cpu=True` also makes `accelerate launch --multi_gpu` use gloo) and keep the activations: recomputing them
    cost SmolLM2-135M 21% per GRPO step and 15% per PPO update (BENCHMARKS.md, section 9d) for 0.5 GB of memory,
    which a CPU machine does not miss. TRL sets its default under the old name, `gradient_checkpointing`, which
    makes transformers warn on every run that the name is deprecated; here that default is None, and `parse_args`
    sets activation checkpointing after parsing (on a GPU, off on a CPU) unless a flag or a YAML key names either
    name. Every default here can be overridden by a flag or a `--config` YAML.
    """
    defaults = {"gradient_checkpointing": None}  # neither name set: parse_args decides
    if torch.cuda.is_available():
        return {**defaults, "bf16": torch.cuda.is_bf16_supported()}
    return {**defaults, "use_cpu": True, "bf16": False}


def options_set(argv: list[str] | None = None) -> set[str]:
    """The options a run sets itself, as flags or as keys of its `--config` YAML, rather than by default.

    TrlParser turns a YAML's values into parser defaults, so the parsed values cannot tell a recipe's setting from
    the script's default; this reads the command line and the YAML instead.

    >>> sorted(options_set(["--max_steps", "3", "--beta=0", "--use_peft"]))
    ['beta', 'max_steps', 'use_peft']
    """
    import yaml

    argv = sys.argv[1:] if argv is None else argv
    names, config = set(), None
    for i, arg in enumerate(argv):
        if arg.startswith("--"):
            name, _, value = arg[2:].partition("=")
            names.add(name.replace("-", "_"))
            if name == "config":
                config = value or (argv[i + 1] if i + 1 < len(argv) else None)
    if config is not None and Path(config).is_file():
        names |= set(yaml.safe_load(Path(config).read_text()) or {}) - {"env"}
    return names - {"config"}


def check_model_path(name: str, revision: str = "main", flag: str = "--model_name_or_path") -> None:
    """Stop with one clear sentence when a model is neither a local directory nor on the hub.

    Without this, a typo surfaces as a hub error about repo-id syntax, or a long retrying download.
    """
    if Path(name).expanduser().is_dir():
        return
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise SystemExit(f"error: {flag} {name}: no such directory")
    from huggingface_hub import constants, hf_hub_download

    try:
        hf_hub_download(name, "config.json", revision=revision)  # from the local cache when offline
    except Exception as err:
        why = ("the hub is offline (HF_HUB_OFFLINE=1) and it is not in the local cache" if constants.HF_HUB_OFFLINE
               else f"the hub could not serve it ({type(err).__name__})")
        raise SystemExit(f"error: {flag} {name} is not a local directory, and {why}") from None


def check_reward_model(path: str, flag: str, trust_remote_code: bool = False) -> None:
    """Stop before training unless `path` is a sequence-classification model with one output, a reward model.

    Any causal LM would otherwise load as one, with a new, random `score` head, and train on noise.
    """
    from transformers import AutoConfig

    check_model_path(path, flag=flag)
    config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    architectures = config.architectures or []
    if not any(a.endswith("ForSequenceClassification") for a in architectures) or config.num_labels != 1:
        raise SystemExit(
            f"error: {flag} {path} is {', '.join(architectures) or 'an unknown architecture'} with {config.num_labels} "
            "labels; a reward model is a sequence-classification model with one output (num_labels=1) that scores a "
            "whole prompt + completion"
        )


def check_gpu_options(training_args, model_args) -> None:
    """Stop early, with one clear sentence, when an option needs a GPU or a package this machine lacks.

    vLLM generation (`--use_vllm`) and QLoRA (`--load_in_4bit` / `--load_in_8bit`, via bitsandbytes)
    only run on CUDA GPUs. Without this check they fail deep inside TRL after the model has loaded.
    """
    needs = []
    if getattr(training_args, "use_vllm", False):
        needs.append(("--use_vllm", "vllm", 'pip install "vllm>=0.19,<=0.27.1"'))
    if model_args.load_in_4bit or model_args.load_in_8bit:
        if not model_args.use_peft:
            raise SystemExit("error: --load_in_4bit/--load_in_8bit quantize a frozen base: "
                             "add --use_peft to train LoRA on it")
        needs.append(("--load_in_4bit/--load_in_8bit", "bitsandbytes", "pip install bitsandbytes"))
    for flag, package, install in needs:
        if not torch.cuda.is_available():
            raise SystemExit(f"error: {flag} needs a CUDA GPU and none is visible; drop the flag to run on CPU")
        if importlib.util.find_spec(package) is None:
            raise SystemExit(f"error: {flag} needs the `{package}` package: {install}")


def check_launch(training_args, deepspeed_ok: bool = True) -> None:
    """Stop early, with one clear sentence, when `accelerate launch` asked for a distributed mode that this machine
    would run as something else. accelerate (1.15) wraps a model in FSDP only on GPUs and other accelerators: on a CPU
    it runs plain DDP under FSDP's name. And processes on a machine with no GPU that do not run on the CPU's backend
    (`--use_cpu false`) train one separate model each. DeepSpeed ZeRO-2 and ZeRO-3 do run on a CPU (over gloo).
    `deepspeed_ok=False`: the script cannot run under DeepSpeed (PPO)."""
    on_cpu = training_args.use_cpu or not torch.cuda.is_available()
    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true" and on_cpu:
        raise SystemExit("error: FSDP shards a model across GPUs only: on a CPU accelerate would run plain DDP under "
                         "FSDP's name; launch with accelerate_configs/zero3.yaml to shard it on a CPU, or ddp.yaml")
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true" and not deepspeed_ok:
        raise SystemExit("error: PPO does not run under DeepSpeed here: trl 1.12's PPOTrainer fails when it saves (it "
                         "hands transformers the policy as the DeepSpeed engine), and ZeRO-3 cannot wrap the reward "
                         "functions' adapter, which has no parameters; launch with accelerate_configs/ddp.yaml")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.cuda.is_available() and not training_args.use_cpu:
        raise SystemExit(f"error: {os.environ['WORLD_SIZE']} processes on a machine with no GPU would each train a "
                         "model of their own: drop --use_cpu false (on a CPU they talk over gloo)")


def warn_if_tuned_defaults_kept(tiny_model: str, model_path: str, tuned: dict, training_args) -> None:
    """Warn when a run on another model than the bundled tiny one (`tiny_model`) keeps settings tuned for it: values
    it did not set, as a flag or in its recipe, that are still the tiny model's.

    A 4-token completion budget or a 3e-4 learning rate is right for the tiny addition model and wrong
    for almost any other, so say so up front rather than let a real run quietly go nowhere. `model_path` is the
    model that trains (PPO's `--sft_model_path` when set).
    """
    if os.path.abspath(model_path) == os.path.abspath(tiny_model):  # the same path, relative or not
        return
    chosen = options_set()  # a value set on purpose (a recipe's learning rate that equals the tiny one) is no slip
    kept = {k: v for k, v in tuned.items() if k not in chosen and getattr(training_args, k) == v}
    if kept:
        settings = ", ".join(f"--{k} {v}" for k, v in kept.items())
        PartialState().print(f"WARNING: {model_path} runs with settings tuned for the bundled tiny model: "
                             f"{settings}. Set them for your model, or start from a recipe in recipes/.")


def refuse_ignored_fields(ignored: dict[str, str], defaults, *parsed) -> None:
    """Stop with one sentence when an option that would have no effect is set away from its default.

    Args:
        ignored: option name -> why it has no effect here and what to do instead.
        defaults: the dataclasses parsed from no arguments and no `--config`: the script's own defaults, after the
            configs' own post-processing (which turns some None defaults into objects).
        parsed: the parsed dataclasses.
    """
    for args, default in zip(parsed, defaults):
        for name, why in ignored.items():
            if hasattr(args, name) and getattr(args, name) != getattr(default, name):
                raise SystemExit(f"error: --{name} is not supported here: {why}")


def load_prompt_dataset(
    dataset_name: str,
    dataset_config: str | None = None,
    prompt_column: str = "prompt",
    system_prompt: str | None = None,
    train_split: str = "train",
    answer_column: str | None = None,
) -> DatasetDict:
    """Load prompts from the hub or from disk and put them in TRL's `prompt` column.

    Args:
        dataset_name: a hub id (`openai/gsm8k`), a local folder that `datasets` can read
            (e.g. `train.jsonl` + `test.jsonl`), or a single .jsonl/.json/.csv/.parquet file (its only split is
            `train`).
        dataset_config: the hub dataset's config name (`main` for GSM8K), if it has several.
        prompt_column: the column holding the prompt; it is renamed to `prompt`. It may hold a string
            (standard format) or a list of `{"role", "content"}` messages (conversational format).
        system_prompt: if set, every prompt becomes conversational with this system message first.
        train_split: the split that must exist.
        answer_column: if set, this column is renamed to `answer`, the gold answer that `accuracy` reads.

    Returns:
        A DatasetDict; a missing train split, an empty split or a missing prompt column stops the script with
        a message naming what is there. Every other column (e.g. `answer`) is kept: the reward functions receive it
        as a kwarg.
    """
    path = Path(dataset_name)
    if path.is_file() and path.suffix not in LOCAL_FILE_BUILDERS:
        raise SystemExit(f"error: cannot read '{path}': use a {', '.join(LOCAL_FILE_BUILDERS)} file, or a folder")
    # `datasets` fails on an empty data file with a bare StopIteration (one file) or "Instruction 'test' corresponds
    # to no data" (a split file in a folder)
    for file in [path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []:
        if file.suffix in LOCAL_FILE_BUILDERS and file.stat().st_size == 0:
            raise SystemExit(f"error: {file} is empty")
    if path.is_file():
        dataset = load_dataset(LOCAL_FILE_BUILDERS[path.suffix], data_files={"train": str(path)})
    else:  # a local folder, or a dataset on the hub
        dataset = load_dataset(dataset_name, name=dataset_config)

    if train_split not in dataset:
        raise SystemExit(f"error: no split '{train_split}' in {dataset_name}; its splits are: {', '.join(dataset)}. "
                         "Choose one with --dataset_train_split")
    for name, split in dataset.items():
        if len(split) == 0:
            raise SystemExit(f"error: split '{name}' of {dataset_name} is empty")
        if prompt_column not in split.column_names:
            raise SystemExit(f"error: no prompt column '{prompt_column}' in split '{name}' of {dataset_name}; its "
                             f"columns are: {', '.join(split.column_names)}. Choose one with --dataset_prompt_column")
    for column, role, flag in [(prompt_column, "prompt", "--dataset_prompt_column"),
                               (answer_column, "answer", "--dataset_answer_column")]:
        if column is None or column == role:
            continue
        for name, split in dataset.items():
            if column not in split.column_names:
                raise SystemExit(f"error: {flag} {column}: no such column in split '{name}' of {dataset_name}; its "
                                 f"columns are: {', '.join(split.column_names)}")
        dataset = DatasetDict({
            name: (split.remove_columns(role) if role in split.column_names else split).rename_column(column, role)
            for name, split in dataset.items()
        })

    if system_prompt:

        def add_system_prompt(prompt):
            messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
            return {"prompt": [{"role": "system", "content": system_prompt}] + messages}

        dataset = dataset.map(add_system_prompt, input_columns="prompt")
    return dataset


# How to supply a column a reward needs without preprocessing, where a flag exists for it.
COLUMN_FLAGS = {"answer": "--dataset_answer_column", "solution": "--dataset_answer_column",
                "prompt": "--dataset_prompt_column"}


def check_reward_funcs(names: list[str], max_completion_length: int, options: list[str]) -> None:
    """Stop with one line on a reward name or option that does not resolve (an unknown name, a bad option, a dotted
    path that does not import), before anything loads."""
    try:
        get_reward_funcs(names, max_completion_length, options)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None


def load_splits(script_args: RunArguments, seed: int, reward_funcs: list) -> tuple:
    """(train split, held-out split or None, where the held-out prompts come from), as both scripts read them.

    One process prepares the data while the others wait, then read it from the cache (as TRL's scripts do). The
    before/after evaluation (--eval_num_samples) holds out a seeded 10% of train when the data has no test split.
    A column a reward needs but the data lacks stops the run here, before any model loads.
    """
    from evaluation import eval_split

    with PartialState().main_process_first():
        dataset = load_prompt_dataset(
            script_args.dataset_name, script_args.dataset_config, script_args.dataset_prompt_column,
            script_args.system_prompt, script_args.dataset_train_split, script_args.dataset_answer_column,
        )
    train, held_out = dataset[script_args.dataset_train_split], dataset.get(script_args.dataset_test_split)
    source = None
    if script_args.eval_num_samples > 0:
        train, held_out, source = eval_split(train, held_out, script_args.dataset_train_split,
                                             script_args.dataset_test_split, seed)
    for split in (train, held_out):
        if split is not None:
            check_reward_columns(reward_funcs, split.column_names, script_args.dataset_name)
    return train, held_out, source


def check_reward_columns(reward_funcs, column_names: list[str], dataset_name: str) -> None:
    """Stop, before any model loads, when a reward needs a dataset column that is not there.

    What a reward needs comes from `rewards.required_columns` (its `@reward_spec`, else its signature). Without
    this check `accuracy` on a dataset with no gold column returns None for every sample and trains on nothing.
    """
    for func in reward_funcs:
        for need in getattr(func, "columns", ()):
            names = (need,) if isinstance(need, str) else tuple(need)
            if any(n in column_names for n in names):
                continue
            flag = COLUMN_FLAGS.get(names[0])
            how = (f"map yours onto it with {flag} <column>" if flag else
                   f"rename yours to '{names[0]}' in the data")
            raise SystemExit(
                f"error: reward '{func.__name__}' needs a column {' or '.join(repr(n) for n in names)}, and "
                f"{dataset_name} has: {', '.join(column_names)}; {how}"
            )


class RunRecorder(TrainerCallback):
    """Append each log to `metrics.jsonl`, and sampled completions to `completions.jsonl`.

    Both files are append-only JSON lines, written by the main process only, so a crash never leaves a
    half-written file behind: at worst the last line is missing.
    Why not `trainer.state.log_history`: it holds the same logs, but in memory, and on disk only inside each
    checkpoint; metrics.jsonl is on disk at every logging step, and a resumed run keeps each step in it once.

    Args:
        output_dir: where the files go (created if needed).
        samples: called at each logging step; returns the latest completions as a list of dicts
            (prompt, completion, one key per reward). The trainer-specific part lives in each script.
    """

    def __init__(self, output_dir: str, samples: Callable[[], list[dict]]):
        self.output_dir = Path(output_dir)
        self.samples = samples
        self.history: list[dict] = []  # every training log, also used by write_summary()

    def on_train_begin(self, args, state, control, **kwargs):
        """Start the files afresh, or, when resuming, keep only what was logged up to the checkpoint.

        Steps logged after the checkpoint by the run that died are run again now, so they are dropped,
        and every step appears exactly once.
        """
        if not state.is_world_process_zero:
            return
        self.output_dir.mkdir(parents=True, exist_ok=True)
        for name in ("metrics.jsonl", "completions.jsonl"):
            kept = [r for r in read_jsonl_lenient(self.output_dir / name) if r["step"] <= state.global_step]
            write_text_atomic(self.output_dir / name, "".join(json.dumps(r) + "\n" for r in kept))
            if name == "metrics.jsonl":
                self.history = kept

    def on_step_end(self, args, state, control, **kwargs):
        """Log the last step, whatever --logging_steps says: a run shorter than one logging interval, or one that
        ends between two, still records its final reward and completions (transformers logs only every
        `logging_steps`, so a 6-step run with logging_steps 10 would log nothing)."""
        if state.global_step >= state.max_steps:
            control.should_log = True
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or "train_runtime" in logs:
            return  # the final log (train_runtime, train_loss) goes to summary.json instead
        self.output_dir.mkdir(parents=True, exist_ok=True)
        record = {"step": state.global_step, "wall_time": round(time.time(), 3), **logs}  # for curves against time
        self.history.append(record)
        with open(self.output_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")
        if "reward" in logs:  # a training log, not an eval one
            with open(self.output_dir / "completions.jsonl", "a") as f:
                f.writelines(json.dumps({"step": state.global_step, **row}) + "\n" for row in self.samples())


class NoSignalWatchdog(TrainerCallback):
    """Say so when training has stopped getting a learning signal, and why that usually happens.

    Policy-gradient methods learn from differences in reward. Two patterns in the logs mean there
    are none: GRPO's `frac_reward_zero_std` near 1 (every completion of a prompt got the same reward,
    so every advantage is 0), or a total reward that has not moved for `patience` logging steps.
    Either prints one warning with the usual fixes; with `stop=True` training then stops cleanly
    (the model and outputs are still written). With `beta=0` a zero loss is expected, and is
    explained once so it is not mistaken for a bug.

    Args:
        patience: how many consecutive logging steps without signal before warning.
        stop: stop training at the warning (`--stop_on_no_signal`).
        beta: the KL coefficient, for the zero-loss explanation; None where it does not apply (PPO).
    """

    FIXES = (
        "Usual fixes: more completions per prompt (--num_generations), a higher --temperature, a reward "
        "with partial credit (e.g. add tag_count next to format), or check that the reward can read your "
        "completions at all (look at completions.jsonl: is the answer where the parser looks?)."
    )

    def __init__(self, patience: int = 5, stop: bool = False, beta: float | None = None):
        self.patience, self.stop, self.beta = patience, stop, beta
        self.recent: list[dict] = []
        self.warned = self.explained_zero_loss = False
        self.unscored: set[str] = set()  # rewards already reported as scoring nothing

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs:
            return
        # A reward that returned None for every completion of the logging step: both trainers log its mean as None.
        for key, value in logs.items():
            name = key.removeprefix("rewards/").removesuffix("/mean")
            if key.startswith("rewards/") and key.endswith("/mean") and value is None and name not in self.unscored:
                self.unscored.add(name)
                if state.is_world_process_zero:
                    print(f"\nWARNING: reward '{name}' returned None for every completion at step {state.global_step}: "
                          "it could not score any of them, so it adds nothing to the reward. Check that the dataset "
                          "has the columns it reads, and that its answers are where it looks (completions.jsonl).")
        if logs.get("reward") is None:
            return
        self.recent = (self.recent + [logs])[-self.patience :]
        rewards = [log["reward"] for log in self.recent]
        reason = None
        if len(self.recent) == self.patience:
            if all(log.get("frac_reward_zero_std", 0.0) >= 0.95 for log in self.recent):
                reason = "frac_reward_zero_std >= 0.95: the completions of each prompt all got the same reward"
            elif max(rewards) - min(rewards) < 1e-6:
                reason = f"the mean reward has stayed at {rewards[-1]:.4g}"
        if reason is None:
            self.warned = False  # signal is back: warn again if it is lost again
        elif not self.warned:
            self.warned = True
            if state.is_world_process_zero:
                print(f"\nWARNING: no learning signal for {self.patience} logging steps (step {state.global_step}): "
                      f"{reason}, so the advantages are zero and the policy does not change. {self.FIXES}")
            if self.stop:
                control.should_training_stop = True
                if state.is_world_process_zero:
                    print("Stopping training (--stop_on_no_signal).")
        if self.beta == 0 and abs(logs.get("loss", 1.0)) < 1e-8 and not self.explained_zero_loss:
            self.explained_zero_loss = True
            if state.is_world_process_zero:
                print("\nNOTE: loss is 0 with beta=0. This is expected: GRPO's advantages have zero mean within each "
                      "group, so the loss is about 0 at every step even while the policy learns. Watch the reward.")


def mean_reward_first_last(history: list[dict], key: str = "reward", fraction: float = 0.2) -> tuple[float, float]:
    """Mean of `key` over the first and the last `fraction` of the logged steps that have it."""
    values = [h[key] for h in history if h.get(key) is not None]
    if not values:
        return float("nan"), float("nan")
    k = max(1, round(len(values) * fraction))
    return sum(values[:k]) / k, sum(values[-k:]) / k


def distributed_mode(trainer) -> dict:
    """How the run is spread over processes, as accelerate set it up rather than as the launch config asked: the mode
    (single process, DDP, FSDP1/FSDP2, DeepSpeed ZeRO-<stage>), the number of processes, the device and the backend.
    """
    from accelerate.utils import DistributedType

    accelerator, state = trainer.accelerator, trainer.accelerator.state
    if state.distributed_type == DistributedType.FSDP:
        mode = f"FSDP{state.fsdp_plugin.fsdp_version}"
    elif state.distributed_type == DistributedType.DEEPSPEED:
        mode = f"DeepSpeed ZeRO-{state.deepspeed_plugin.zero_stage}"
    else:
        mode = "DDP" if accelerator.num_processes > 1 else "single process"
    return {"mode": mode, "processes": accelerator.num_processes, "device": accelerator.device.type,
            "backend": state.backend}


def describe(mode: dict) -> str:
    """The distributed mode in words, as a run prints it.

    >>> describe({"mode": "DDP", "processes": 2, "device": "cpu", "backend": "gloo"})
    'DDP, 2 processes on cpu (gloo)'
    >>> describe({"mode": "single process", "processes": 1, "device": "cpu", "backend": None})
    'single process, 1 process on cpu'
    """
    processes = f"{mode['processes']} process{'es' if mode['processes'] > 1 else ''}"
    return f"{mode['mode']}, {processes} on {mode['device']}" + (f" ({mode['backend']})" if mode["backend"] else "")


def print_distributed_mode(trainer) -> None:
    """Say, before training, how the run is spread over processes (main process only)."""
    if trainer.accelerator.is_main_process:
        print(f"distributed: {describe(distributed_mode(trainer))}", flush=True)


def held_parameters(trainer) -> list[int]:
    """The number of parameters (elements, frozen ones included) of the model the trainer prepared (PPO: policy and
    value model) stored on each process, gathered from all of them (call it on every process): the whole model under
    DDP or one process, about 1/N of it each where FSDP or ZeRO-3 shards it."""
    def local(p):
        if hasattr(p, "ds_tensor"):  # DeepSpeed ZeRO-3: this process's partition
            return p.ds_tensor.numel()
        return p.to_local().numel() if hasattr(p, "to_local") else p.numel()  # FSDP2: a DTensor's local shard

    model = getattr(trainer, "model_wrapped", trainer.model)  # PPOTrainer keeps the prepared model (policy and value)
    held = torch.tensor([sum(local(p) for p in model.parameters())], device=trainer.accelerator.device)
    return trainer.accelerator.gather(held).tolist()


def library_versions() -> dict:
    import accelerate
    import datasets
    import peft
    import transformers
    import trl

    return {
        "python": platform.python_version(),
        **{m.__name__: m.__version__ for m in (torch, transformers, trl, peft, accelerate, datasets)},
    }


def write_text_atomic(path: Path, text: str) -> None:
    """Write to a temporary file and rename it over `path`, so a kill never leaves a half-written file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_json_atomic(path: Path, obj) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, default=str) + "\n")


def read_jsonl_lenient(path: Path) -> list[dict]:
    """The records of a JSON-lines file, without a last line cut short by a kill; [] if there is no file."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return records


def resolve_checkpoint(resume_from_checkpoint: str | None, output_dir: str) -> str | None:
    """`--resume_from_checkpoint`: a checkpoint directory, or `last` (also `true`) for the newest complete one
    in `output_dir`. transformers' own `sort_checkpoints` finds the `checkpoint-<step>` directories (others,
    such as `checkpoint-best`, are not checkpoints of a step). A checkpoint is complete once trainer_state.json,
    which the Trainer writes last, parses; one cut short by a kill is skipped. (transformers' `get_last_checkpoint`
    returns the newest `checkpoint-<step>` folder whether or not it is complete.)"""
    if resume_from_checkpoint is None:
        return None
    if resume_from_checkpoint.lower() not in ("last", "true"):
        if not Path(resume_from_checkpoint).is_dir():
            raise SystemExit(f"error: --resume_from_checkpoint {resume_from_checkpoint}: no such directory; "
                             "`last` resumes from the newest complete checkpoint in --output_dir")
        return resume_from_checkpoint
    checkpoints = sort_checkpoints(output_dir, PREFIX_CHECKPOINT_DIR) if Path(output_dir).is_dir() else []
    for checkpoint in reversed(checkpoints):  # newest first
        try:
            json.loads((Path(checkpoint) / "trainer_state.json").read_text())
            return checkpoint
        except (OSError, json.JSONDecodeError):
            print(f"skipping incomplete checkpoint {checkpoint}")
    raise SystemExit(f"error: --resume_from_checkpoint {resume_from_checkpoint}: "
                     f"no complete checkpoint in {output_dir}")


def plot_rewards(history: list[dict], reward_keys: list[str], path: Path, title: str) -> None:
    """Plot the total reward, each reward function's mean and the eval reward against the training step.

    TensorBoard and trackio draw the same curves live (`--report_to`); this PNG needs neither a server nor an
    optional package, so every run leaves one."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for key in ["reward", *reward_keys, "eval_reward"]:
        points = [(h["step"], h[key]) for h in history if h.get(key) is not None]
        if points:
            style = {"reward": dict(linewidth=2), "eval_reward": dict(linestyle="--", marker="o")}.get(key, {})
            ax.plot(*zip(*points), label=key, **style)
    ax.set_xlabel("step")
    ax.set_ylabel("mean reward")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# Panels of training_curves.png: a title and the metric keys to draw, GRPO's and PPO's names alike.
TRAINING_PANELS = [
    ("KL to the reference", ["kl", "objective/kl"]),
    ("completion length (tokens)", ["completions/mean_length", "completion_length"]),
    ("tool use (per completion)", ["tools/call_frequency", "tools/failure_frequency"]),
]


def plot_training(history: list[dict], reward_keys: list[str], path: Path, title: str) -> None:
    """One PNG with a panel per reward function's mean, then KL, completion length and tool use (where logged),
    against the step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(key.removeprefix("rewards/").removesuffix("/mean"), [key]) for key in reward_keys] + TRAINING_PANELS
    panels = [(name, [k for k in keys if any(h.get(k) is not None for h in history)]) for name, keys in panels]
    panels = [(name, keys) for name, keys in panels if keys]
    if not panels:  # nothing logged yet (stopped before its first step)
        return
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 2.2 * len(panels)), sharex=True, squeeze=False)
    for ax, (name, keys) in zip(axes[:, 0], panels):
        for key in keys:
            ax.plot(*zip(*[(h["step"], h[key]) for h in history if h.get(key) is not None]), label=key)
        ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("step")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_summary(trainer, recorder: RunRecorder, train_output, script_args, training_args, model_args, title: str):
    """Write summary.json and the plots, and print where everything went. Call it on every process: the parameters
    each one holds are gathered first; the rest is the main process's."""
    held = held_parameters(trainer)
    if not trainer.accelerator.is_main_process:
        return
    out = Path(training_args.output_dir)
    history = [h for h in recorder.history if "reward" in h]
    first, last = mean_reward_first_last(history)
    reward_keys = sorted({k for h in history for k in h if k.startswith("rewards/") and k.endswith("/mean")})
    summary = {
        "command": " ".join(sys.argv),
        "script_args": asdict(script_args),
        "training_args": training_args.to_dict(),
        "model_args": asdict(model_args),
        "versions": library_versions(),
        "world_size": trainer.accelerator.num_processes,
        "distributed": {**distributed_mode(trainer), "held_parameters": held},
        "global_step": trainer.state.global_step,
        "train_runtime": train_output.metrics.get("train_runtime"),
        "reward_first_20pct": first,
        "reward_last_20pct": last,
        "reward_per_func_last": {k: history[-1][k] for k in reward_keys} if history else {},
    }
    # Tool-calling GRPO (--tools): how often the model called a tool, per completion, and how often a call failed,
    # as TRL logs them; next to each reward function's mean, so "more calls, more right answers" reads off one file.
    tool_keys = sorted({k for h in history for k in h if k.startswith("tools/")})
    if tool_keys:
        summary["first_last_20pct"] = {k: mean_reward_first_last(history, k) for k in reward_keys + tool_keys}
    write_json_atomic(out / "summary.json", summary)
    plots = [out / "reward_curve.png", out / "training_curves.png"]
    plot_rewards(recorder.history, reward_keys, plots[0], title)
    plot_training(history, reward_keys, plots[1], title)

    print(
        f"\n{title}: {trainer.state.global_step} steps in {summary['train_runtime']:.1f}s "
        f"({describe(summary['distributed'])})\n"
        f"  mean reward, first 20% of logged steps: {first:.3f}\n"
        f"  mean reward, last 20% of logged steps:  {last:.3f}\n"
        + "".join(f"  {key}, first -> last 20%: {a:.3f} -> {b:.3f}\n"
                  for key, (a, b) in summary.get("first_last_20pct", {}).items())
        + f"  model:       {out}\n"
        f"  metrics:     {out / 'metrics.jsonl'}\n"
        f"  completions: {out / 'completions.jsonl'}\n"
        f"  summary:     {out / 'summary.json'}\n"
        f"  plots:       {', '.join(str(p) for p in plots if p.exists())}"
        + "".join("\n" + line for line in tracking_lines(training_args))
    )
