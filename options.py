"""The options of a run, shared by `grpo_trl_example.py` and `ppo_trl_example.py`: the arguments both take, their
defaults, and the checks each script's validate() calls before anything loads.

    RunArguments           the arguments both scripts take (data columns, rewards, evaluation, watchdog)
    parse_args()           TrlParser parsing: options that would have no effect refused, from a flag or a YAML key,
                           and valid batch sizes suggested when TRL rejects one
    default_recipe()       a script's default run, from recipes/tiny/<algo>.yaml, and the settings tuned for it
    set_default_run()      a script's default run (and the device defaults) as its TrlParser's defaults
    device_defaults()      CPU defaults (`use_cpu`, no bf16, no activation checkpointing) when there is no GPU
    options_set()          the options a run sets itself, as flags or in its --config YAML
    check_model_path()     a clear error for a model that is neither a directory nor on the hub
    check_reward_model()   a clear error for a reward model that is not a one-output sequence classifier
    check_reward_funcs()   a clear error for a reward name or option that does not resolve
    check_gpu_options()    a clear error for vLLM / QLoRA without a GPU or the package
    check_launch()         a clear error for a launch that would run as something else (FSDP on a CPU, ...)
    configure_tracking()   `--report_to tensorboard,trackio`, and a clear error when a tracker is not installed
    resolve_checkpoint()   `--resume_from_checkpoint last`: the newest complete checkpoint
    warn_if_tuned_defaults_kept()  a warning when a real model runs with the tiny model's settings
"""

import argparse
import difflib
import importlib.util
import json
import os
import re
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path

import torch
from accelerate import PartialState
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, sort_checkpoints
from trl import ScriptArguments

from rewards import get_reward_funcs, reward_names


@dataclass
class RunArguments(ScriptArguments):
    """The arguments both scripts take, on top of TRL's ScriptArguments (`dataset_name`, `dataset_config`,
    `dataset_train_split`, `dataset_test_split`): the data's columns, the rewards, the held-out evaluation and the
    no-signal watchdog. Each script's own arguments extend it."""

    _argument_group_name = "the script's own options (and TRL's ScriptArguments)"  # --help lists them first

    def __post_init__(self):  # a recipe may give one value where a list is taken (`reward_funcs: accuracy`)
        for f in fields(self):
            if str(f.type).startswith("list") and isinstance(getattr(self, f.name), str):
                setattr(self, f.name, [getattr(self, f.name)])

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


def parse_args(parser, unsupported: dict[str, str], args: list[str] | None = None):
    """`parser.parse_args_and_config()`, where every mistake is one `error:` line: an unknown option (a flag or a key
    of the `--config` YAML) names the nearest valid one, a bad value names its option, and the options that would have
    no effect (`unsupported`) are refused whether they come as flags or as YAML keys. TRL's batch-geometry error gets
    the nearest valid sizes.

    The checks read argparse's own values, before any training config is built: building one starts the process group
    (and DeepSpeed's config), which must come from the run's own arguments (--ddp_backend, --ddp_timeout), once.
    Against the script's own defaults a recipe's `logging_steps: 3` is as much a change as `--logging_steps 3`.
    """
    args = list(sys.argv[1:] if args is None else args)
    describe_options(parser, unsupported)

    def error(message: str):  # argparse's own errors (a bad value, a missing one): its message, without the usage
        raise SystemExit(f"error: {message}" + ("" if "choose from" in message else " (--help lists every option)"))

    parser.error = error
    actions = {}
    for action in parser._actions:  # the first of a flag's actions holds its default (`--no_<flag>` is the second)
        actions.setdefault(action.dest, action)
    script_defaults = vars(parser.parse_known_args([])[0])  # as argparse reads them (string defaults converted)
    config, config_at = {}, args.index("--config") if "--config" in args else None
    if config_at is not None:
        if config_at + 1 == len(args):
            raise SystemExit("error: --config needs the path of a YAML recipe, e.g. --config recipes/tiny/grpo.yaml")
        path = args[config_at + 1]
        config = read_config(path)
        for key, value in config.items():
            if key not in actions:
                raise SystemExit(f"error: {path}: unknown key '{key}'{nearest(key, actions)}")
            check_config_value(path, key, value, actions[key])
    saved = [(action, action.default) for action in parser._actions]
    parser.set_defaults_with_config(**config)  # as TrlParser applies a recipe, for this look at the values only
    flags = args[:config_at] + args[config_at + 2:] if config_at is not None else args
    values, unknown = parser.parse_known_args(flags)
    for action, default in saved:
        action.default = default
    if unknown:
        name = next((u for u in unknown if u.startswith("-")), unknown[0])
        what = f"unknown option {name.split('=')[0]}" if name.startswith("-") else f"unexpected argument {name!r}"
        raise SystemExit(f"error: {what}{nearest(name.lstrip('-').split('=')[0], actions, '--')}")
    refuse_ignored_fields(unsupported, script_defaults, values)

    try:
        parsed = parser.parse_args_and_config(args)
    except ValueError as err:
        found = re.search(r"generation_batch_size \((\d+)\) must be divisible by num_generations \((\d+)\)", str(err))
        if not found:
            raise
        size, group = map(int, found.groups())
        nearest_sizes = sorted({v for v in (size // group * group, -(-size // group) * group) if v > 0})
        sizes = " and ".join(map(str, nearest_sizes))
        raise SystemExit(
            f"error: {err} The generation batch is per_device_train_batch_size x processes x steps_per_generation "
            f"completions; the nearest valid sizes are {sizes} (on one process with steps_per_generation 1: "
            f"--per_device_train_batch_size {' or '.join(map(str, nearest_sizes))}), or change --num_generations."
        ) from None
    if not {"activation_checkpointing", "gradient_checkpointing"} & options_set(args):  # see device_defaults
        training_args = next(a for a in parsed if hasattr(a, "activation_checkpointing"))
        training_args.activation_checkpointing = training_args.gradient_checkpointing = torch.cuda.is_available()
    return parsed


def nearest(name: str, actions: dict, prefix: str = "") -> str:
    """'; did you mean --<the closest option>?', or '' when no option is close."""
    close = difflib.get_close_matches(name.replace("-", "_"), [a for a in actions if a != "help"], n=1, cutoff=0.6)
    return f"; did you mean {prefix}{close[0]}?" if close else " (--help lists every option)"


def read_config(path: str) -> dict:
    """The `--config` YAML as a mapping, or one `error:` line saying why it is not one."""
    import yaml

    try:
        config = yaml.safe_load(Path(path).read_text())
    except OSError as err:
        raise SystemExit(f"error: --config {path}: {err.strerror.lower()}") from None
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        line = f" (line {where.line + 1})" if where else ""
        raise SystemExit(f"error: --config {path} is not valid YAML{line}: {getattr(err, 'problem', err)}") from None
    if not isinstance(config, dict):
        raise SystemExit(f"error: --config {path} must hold `option: value` lines, one per option")
    return {key: value for key, value in config.items() if key != "env"}  # TrlParser sets `env:` as variables


def check_config_value(path: str, key: str, value, action) -> None:
    """Stop with one line on a YAML value its option cannot take: argparse checks only the values it reads as text."""
    for item in value if isinstance(value, list) else [value]:
        if item is None or action.type in (None, str):
            continue
        try:
            converted = action.type(item if isinstance(item, str) else str(item))  # as argparse, on text
            if not isinstance(item, str) and converted != item:  # 2.5 for an int
                raise ValueError
        except (TypeError, ValueError, argparse.ArgumentTypeError):
            kind = {"int": "an integer", "float": "a number", "string_to_bool": "true or false"}.get(
                action.type.__name__, f"a valid {action.type.__name__}")
            raise SystemExit(f"error: {path}: {key}: {item!r} is not {kind}") from None
        if action.choices is not None and converted not in action.choices:
            raise SystemExit(f"error: {path}: {key}: {item!r} is not one of {', '.join(map(str, action.choices))}")


def describe_options(parser, unsupported: dict[str, str]) -> None:
    """`--help` that a reader can use: a one-line usage naming `--config`, the script's own options first, TRL's after,
    and no options that this script refuses (`unsupported`)."""
    ours = [g for g in parser._action_groups if g.title == RunArguments._argument_group_name]
    parser._action_groups = ours + [g for g in parser._action_groups if g not in ours]
    parser._optionals.title = "TRL's options (the training config and ModelConfig)"
    parser.usage = "%(prog)s [--config recipe.yaml] [--option value ...]"
    parser.description = (
        "Every option is a flag and a key of a YAML recipe given with --config; flags override the recipe. "
        "docs/options.md lists the ones you will use; options this script refuses are not listed.")
    for action in parser._actions:
        if action.dest in unsupported:
            action.help = argparse.SUPPRESS


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


# The keys of a default recipe that name files of the repository: they resolve from the script's folder.
REPOSITORY_PATHS = ("model_name_or_path", "dataset_name")


def default_recipe(path: Path, root: Path) -> tuple[dict, dict]:
    """A script's default run, read from its recipe (recipes/tiny/<algo>.yaml): every key's value, and the keys
    marked `# tuned` (settings that suit the tiny model only) with theirs.

    The bundled model and data (`REPOSITORY_PATHS`) resolve from `root`, the script's folder, so that the default run
    works from any working directory; every other value, `output_dir` among them, is used as written. Neither depends
    on what the disk holds.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = (root / "r.yaml").write_text("model_name_or_path: assets/m\\noutput_dir: out\\nseed: 1  # tuned\\n")
    >>> values, tuned = default_recipe(root / "r.yaml", root)
    >>> values["model_name_or_path"] == str(root / "assets/m"), values["output_dir"], tuned
    (True, 'out', {'seed': 1})
    """
    import yaml

    text = path.read_text()
    values = yaml.safe_load(text)
    values |= {key: str(root / values[key]) for key in REPOSITORY_PATHS if values.get(key)}
    tuned = {key: values[key] for key in re.findall(r"^(\w+):.*#\s*tuned\b", text, re.M)}
    return values, tuned


def set_default_run(parser, recipe: Path, root: Path) -> tuple[dict, dict]:
    """Make a script's default run (the recipe's values, over `device_defaults()`) the TrlParser's defaults; return
    the recipe's values and the settings it marks `# tuned` (see `default_recipe`)."""
    defaults, tuned = default_recipe(recipe, root)
    parser.set_defaults_with_config(**{**device_defaults(), **defaults})
    return defaults, tuned


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


def check_default_files(recipe: dict, script_args, model_args) -> None:
    """Stop with one sentence when a run names the bundled model or data (the default recipe's values, by default)
    and they are not there, as in a copy of the script made without them: the sentence names what to copy, or the
    flags that replace it, where a hub lookup of the missing path would retry for half a minute and say neither."""
    chosen = {"model_name_or_path": model_args.model_name_or_path, "dataset_name": script_args.dataset_name}
    missing = [key for key in REPOSITORY_PATHS if chosen[key] == recipe[key] and not Path(recipe[key]).exists()]
    if missing:
        script = Path(sys.argv[0]).name
        names = " and ".join(str(Path(recipe[key]).relative_to(Path(recipe[key]).parents[1])) for key in missing)
        raise SystemExit(f"error: the default run reads {names}, which are not beside {script}: copy them from the "
                         f"repository with it, or give your own with {' and '.join(f'--{k}' for k in missing)}")


def check_model_path(name: str, revision: str = "main", flag: str = "--model_name_or_path") -> None:
    """Stop with one clear sentence when a model is neither a local directory nor on the hub.

    Without this, a typo surfaces as a hub error about repo-id syntax, or a long retrying download.
    """
    if Path(name).expanduser().is_dir():
        return
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise SystemExit(f"error: {flag} {name}: no such directory")
    from huggingface_hub import constants, hf_hub_download

    for file in ("config.json", "adapter_config.json"):  # a model, or a LoRA adapter (--eval_only)
        try:
            hf_hub_download(name, file, revision=revision)  # from the local cache when offline
            return
        except Exception as err:
            error = err
    why = ("the hub is offline (HF_HUB_OFFLINE=1) and it is not in the local cache" if constants.HF_HUB_OFFLINE
           else f"the hub could not serve it ({type(error).__name__})")
    raise SystemExit(f"error: {flag} {name} is not a local directory, and {why}")


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
        if PartialState().is_main_process:
            print(f"WARNING: {model_path} runs with settings tuned for the bundled tiny model: "
                  f"{settings}. Set them for your model, or start from a recipe in recipes/.")


def refuse_ignored_fields(ignored: dict[str, str], defaults: dict, values) -> None:
    """Stop with one sentence when an option that would have no effect is set away from its default.

    Args:
        ignored: option name -> why it has no effect here and what to do instead.
        defaults: the parser's defaults, option name -> value, before any recipe.
        values: argparse's namespace of the run's values (a recipe's among them).
    """
    for name, why in ignored.items():
        if name in defaults and getattr(values, name) != defaults[name]:
            raise SystemExit(f"error: --{name} is not supported here: {why}")


def check_reward_funcs(names: list[str], max_completion_length: int, options: list[str]) -> None:
    """Stop with one line on a reward name or option that does not resolve (an unknown name, a bad option, a dotted
    path that does not import), before anything loads."""
    try:
        get_reward_funcs(names, max_completion_length, options)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None


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
            if PartialState().is_main_process:
                print(f"skipping incomplete checkpoint {checkpoint}")
    raise SystemExit(f"error: --resume_from_checkpoint {resume_from_checkpoint}: "
                     f"no complete checkpoint in {output_dir}")
