"""The command line, parsed once, and its mistakes stopped in one sentence before anything loads: TrlParser's parsing
with the nearest option to a mistyped one, a recipe's keys and values checked, options refused where they would have
no effect, and the settings line; --help, made readable by help.py. (The run's paths, models, launch and packages:
checks.py.)"""

import argparse
import difflib
import os
import re
import sys
from pathlib import Path

from extras import run_folder


def parse(parser, refused: dict[str, str], args: list[str] | None = None, default_recipe: Path | None = None) -> tuple:
    """`parser.parse_args_and_config()`, parsed once, every mistake one `error:` line. Options the trainer never reads
    (the parsed config class's own TrainingArguments fields), those it computes itself, and `refused` stop the run
    when set, as flags or recipe keys. The values are read from argparse first, which builds no config: a training
    config starts the process group, and its checks would read defaults that the recipe replaces.

    A run whose flags and recipe name no model is the default run: `default_recipe` as its --config, its paths read
    beside the script, so that it is the run `--config recipes/tiny/<algo>.yaml` is from the repository's root.
    Prints the settings line: where the settings came from, the main ones, and what the run leaves off."""
    args = list(sys.argv[1:] if args is None else args)
    config_class = parser.dataclass_types[1].__name__
    args = [part for arg in args for part in (arg.split("=", 1) if arg.startswith("--config=") else [arg])]
    refused = {**dict.fromkeys(UNREAD.get(config_class, []), f"{config_class}'s trainer never reads it"),
               **dict.fromkeys(COMPUTED.get(config_class, []), f"{config_class}'s trainer computes it from the batch "
                                                                "settings and the number of processes"),
               **refused}
    if {"-h", "--help"} & set(args):  # what a user sets first on --help's first screen (extras/help.py)
        from extras.help import readable_help

        readable_help(parser, refused, default_recipe)
    hint = " (--help lists every option)"
    parser.error = lambda message: sys.exit(f"error: {message}" + ("" if "choose from" in message else hint))
    actions = {}
    for action in parser._actions:  # the first of a flag's actions holds its default (`--no_<flag>` is the second)
        actions.setdefault(action.dest, action)
    if "stop_token" in actions:  # `--stop_token none`: PPOConfig's None, a completion that never stops (TRL's parser
        actions["stop_token"].choices = ("eos", None)  # takes only `eos`)
        actions["stop_token"].type = lambda value: None if value.lower() == "none" else value
        actions["stop_token"].metavar = "{eos,none}"  # as typed, not as parsed
    defaults = vars(parser.parse_known_args([])[0])
    recipe = None
    if "--config" in args:
        at = args.index("--config")
        if at + 1 == len(args):
            sys.exit("error: --config needs the path of a YAML recipe, e.g. --config recipes/tiny/grpo.yaml")
        recipe = args[at + 1]
        args = args[:at] + args[at + 2:]
    config = read_recipe(recipe, actions) if recipe else {}
    values = read_values(parser, config, args, actions, config_class)
    models = [key for key in ("model_name_or_path", "sft_model_path") if key in actions]
    default_run = default_recipe is not None and not any(getattr(values, key) for key in models)
    if default_run and recipe:
        sys.exit(f"error: --config {recipe} names no model: add `model_name_or_path: ...` to it, or give "
                 "--model_name_or_path")
    if default_run and not default_recipe.is_file():
        sys.exit(f"error: a run that names no model is the default run, which reads "
                 f"{Path(*default_recipe.parts[-3:])}, not beside {Path(sys.argv[0]).name}: name your model with "
                 "--model_name_or_path and your prompts with --dataset_name, or copy the file from the repository")
    if default_run:  # its model and data beside the script, where a recipe's paths are read from the working folder
        config = read_recipe(str(default_recipe), actions)
        config.update({key: str(default_recipe.parents[2] / config[key]) for key in ("model_name_or_path",
                                                                                     "dataset_name")})
        values = read_values(parser, config, args, actions, config_class)
    refuse(refused, defaults, values)
    first = os.environ.get("RANK", "0") == "0"
    model = getattr(values, "sft_model_path", None) or values.model_name_or_path
    if values.eval_only and model and (Path(model) / "summary.json").is_file():  # a run's folder: as it sampled
        from extras.eval_only import as_the_run_sampled

        taken = as_the_run_sampled(Path(model) / "summary.json", values, defaults)
        parser.set_defaults(**taken)
        values = parser.parse_known_args(args)[0]
        if taken and first:
            print(f"--eval_only {model} samples as its run did, from its summary.json: "
                  + ", ".join(f"{key} {value}" for key, value in taken.items()) + " (a flag sets another)")
    if first:
        named = Path(*default_recipe.parts[-3:]) if default_run else recipe
        origin = (f"{named} (the default run: no model named)" if default_run else
                  f"TRL's defaults, then {recipe}" if recipe else "TRL's defaults")
        print(settings_line(origin, values, config_class, defaults, (named, config)))
    if default_run:  # its recipe's folder, or where that holds files the next free one: unless a flag names one
        folder = run_folder.default_folder(config["output_dir"], values.resume_from_checkpoint is not None)
        parser.set_defaults(output_dir=folder)
        if folder != config["output_dir"] and parser.parse_known_args(args)[0].output_dir == folder and first:
            print(f"{config['output_dir']} holds files already: this run writes to {folder} (--output_dir names "
                  "another)")
    try:
        parsed = parser.parse_args_into_dataclasses(args=args)  # the recipe's values are the parser's defaults
    except ValueError as err:  # GRPOConfig's batch check says what is wrong, not what would be right
        if not (found := re.search(r"generation_batch_size \((\d+)\) must be divisible by num_generations \((\d+)\)",
                                   str(err))):
            raise
        size, group = map(int, found.groups())
        sizes = " or ".join(map(str, sorted({v for v in (size // group * group, -(-size // group) * group) if v})))
        sys.exit(f"error: {err} The generation batch is per_device_train_batch_size x processes x "
                 f"steps_per_generation completions: on one process, --per_device_train_batch_size {sizes}, or "
                 "change --num_generations.")
    if values.eval_only and hasattr(parsed[1], "num_generations"):  # GRPO's trainer loads the model as it is: no
        parsed[2].use_peft = False  # adapter of ours, no reference, no vLLM (PPO's --eval_only builds no trainer)
        parsed[1].beta = 0.0
        parsed[1].use_vllm = False
    return parsed


def read_values(parser, config: dict, args: list[str], actions: dict, config_class: str):
    """argparse's values of `args` over the recipe `config`, applied as TrlParser applies a --config recipe (its `env`
    set, its values the parser's defaults); an unknown option is one line, naming the nearest."""
    for key, value in config.pop("env", {}).items():
        os.environ[key] = str(value)
    parser.set_defaults_with_config(**config)
    values, unknown = parser.parse_known_args(args)
    if unknown:
        name = next((u for u in unknown if u.startswith("-")), unknown[0])
        what = f"unknown option {name.split('=')[0]}" if name.startswith("-") else f"unexpected argument {name!r}"
        option = name.lstrip("-").split("=")[0].replace("-", "_")
        other = next((theirs for ours, theirs in COUNTERPARTS.get(config_class, []) if option == ours), False)
        if other is not False:  # the other script's name: the nearest spelling would be another option
            sys.exit(f"error: {what}: that is {'PPO' if config_class == 'GRPOConfig' else 'GRPO'}'s option; "
                     + (f"here it is --{other}" if other else f"{COUNTERPARTS_WHY[option]}"))
        sys.exit(f"error: {what}{nearest(option, actions, '--')}")
    return values


# The main settings of each trainer's run, in the settings line
SHOWN = {"GRPOConfig": ("learning_rate", "length", "num_generations", "max_completion_length", "beta"),
         "PPOConfig": ("learning_rate", "length", "per_device_train_batch_size", "response_length", "kl_coef")}


def settings_line(origin: str, values, config_class: str, defaults: dict | None = None,
                  recipe: tuple = (None, {})) -> str:
    """Where a run's settings came from, the main ones, and what it leaves off; on a CPU, the precision it computes in,
    and why (`defaults`: the parser's; GRPO's follow the CPU's capability, PPO's are fp32; `recipe`: its name and
    keys, where it set bf16)."""
    steps = getattr(values, "max_steps", -1)
    episodes = getattr(values, "total_episodes", None)
    length = (f"{steps} step{'s' * (steps != 1)}" if steps > 0 else f"total_episodes {episodes}" if episodes else
              f"{values.num_train_epochs:g} epoch{'s' * (values.num_train_epochs != 1)}")
    shown = [length if key == "length" else f"{key} {getattr(values, key):g}" if isinstance(getattr(values, key), float)
             else f"{key} {getattr(values, key)}" for key in SHOWN[config_class]]
    if values.use_cpu:
        asked = values.bf16 != (defaults or {}).get("bf16")
        name, config = recipe
        why = (f"bf16: {str(values.bf16).lower()} in {name}" if asked and config.get("bf16") == values.bf16 else
               f"--bf16 {str(values.bf16).lower()}" if asked else "the CPU computes bf16" if values.bf16 else
               "PPO's default on a CPU" if config_class == "PPOConfig" else "the CPU has no native bf16")
        shown.append(f"{'bf16 mixed precision' if values.bf16 else 'fp32'} ({why})")
    off = "" if values.eval_num_samples > 0 else "; off: the held-out evaluation (--eval_num_samples K)"
    return f"settings: {origin}, then the flags: {', '.join(shown)}{off}"


def refuse(refused: dict[str, str], defaults: dict, values) -> None:
    """Stop at the first option of `refused` whose value (argparse's namespace) differs from its default."""
    for name, why in refused.items():
        if name in defaults and getattr(values, name) != defaults[name]:
            sys.exit(f"error: --{name} is not supported here: {why}")


# The options each trainer never reads, and those PPOTrainer overwrites with values it computes (trl 1.12,
# transformers 5.23): tests/unit/test_option_audit.py checks both lists against the trainers' source
UNREAD = {
    "GRPOConfig": """ignore_bias_buffers label_smoothing_factor label_names prediction_loss_only
        include_for_metrics batch_eval_metrics eval_do_concat_batches eval_accumulation_steps eval_use_gather_object
        train_sampling_strategy length_column_name data_seed average_tokens_across_devices bf16_full_eval
        fp16_full_eval use_cache do_train do_predict""".split(),
    "PPOConfig": """ignore_bias_buffers max_grad_norm label_smoothing_factor average_tokens_across_devices
        auto_find_batch_size torch_empty_cache_steps neftune_noise_alpha use_liger_kernel liger_kernel_config use_cache
        fp16 bf16_full_eval fp16_full_eval torch_compile torch_compile_backend torch_compile_mode
        accelerator_config parallelism_config ddp_find_unused_parameters ddp_bucket_cap_mb ddp_broadcast_buffers
        ddp_static_graph fsdp fsdp_config deepspeed logging_steps logging_strategy logging_first_step
        logging_nan_inf_filter include_num_input_tokens_seen log_level log_level_replica log_on_each_node
        skip_memory_metrics debug eval_delay eval_on_start prediction_loss_only
        eval_do_concat_batches eval_use_gather_object eval_accumulation_steps include_for_metrics batch_eval_metrics
        enable_jit_checkpoint ignore_data_skip
        restore_callback_states_from_checkpoint dataloader_drop_last dataloader_num_workers dataloader_pin_memory
        dataloader_persistent_workers dataloader_prefetch_factor dataloader_multiprocessing_context dataloader_in_order
        data_seed train_sampling_strategy length_column_name full_determinism label_names do_eval do_train
        do_predict""".split(),
}
COMPUTED = {
    "PPOConfig": """world_size local_batch_size micro_batch_size batch_size mini_batch_size local_mini_batch_size
        num_total_batches""".split(),
}


# An option of the other script typed into this one -> this one's name for the same thing (None: it has none, for the
# reason in COUNTERPARTS_WHY); tests/unit/test_options.py checks each name against the two scripts' options
COUNTERPARTS = {
    "PPOConfig": [("reward_model_name_or_path", "reward_model_path"), ("max_completion_length", "response_length"),
                  ("beta", "kl_coef"), ("num_generations", None)],
    "GRPOConfig": [("reward_model_path", "reward_model_name_or_path"), ("response_length", "max_completion_length"),
                   ("kl_coef", "beta"), ("sft_model_path", "model_name_or_path")],
}
COUNTERPARTS_WHY = {"num_generations": "PPO samples one completion per prompt, and learns a value model as baseline"}


# Options the scripts had and removed, each with what to do instead
GONE = {"overwrite_output_dir": "it is gone, as from transformers 5: a run never empties a folder; give another "
                                "--output_dir, or move the old run's files yourself (docs/outputs.md)"}


def nearest(name: str, actions: dict, prefix: str = "") -> str:
    """The option meant: those `name` begins (the parsers take no abbreviation: --learning_rat is no flag), else the
    closest spelling; for an option that is gone, what to do instead."""
    name = name.replace("-", "_")
    if name in GONE:
        return f": {GONE[name]}"
    options = [a for a in actions if a != "help"] + (["config"] if prefix else [])  # a flag, not a recipe key
    begun = [option for option in options if option.startswith(name)]
    close = [prefix + option for option in begun[:3] or difflib.get_close_matches(name, options, n=1, cutoff=0.6)]
    if not close:
        return " (--help lists every option)"
    named = ", ".join(close[:-1]) + " or " + close[-1] if len(close) > 1 else close[0]
    return f"; did you mean {named}{', ...' if len(begun) > 3 else ''}?"


def read_recipe(path: str, actions: dict) -> dict:
    """The --config YAML as a mapping, each key an option and each value one it takes, or one `error:` line."""
    import yaml

    try:
        text = Path(path).read_text()
        config = yaml.safe_load(text)
    except OSError as err:
        sys.exit(f"error: --config {path}: {err.strerror.lower()}")
    except yaml.YAMLError as err:
        line = f" (line {err.problem_mark.line + 1})" if getattr(err, "problem_mark", None) else ""
        sys.exit(f"error: --config {path} is not valid YAML{line}: {getattr(err, 'problem', err)}")
    if not isinstance(config, dict):
        sys.exit(f"error: --config {path} must hold `option: value` lines, one per option")
    # A text option's value as written: YAML reads `true`, `0123`, `1:30` or `2024.10` as a bool or a number
    written = {key.value: value for key, value in yaml.compose(text).value}
    for key, value in config.items():
        if key == "env":  # environment variables, which TrlParser sets
            continue
        if key not in actions:
            sys.exit(f"error: {path}: unknown key '{key}'{nearest(key, actions)}")
        check_value(path, key, value, actions[key])
        if actions[key].type is str and value is not None:
            node = written[key]
            config[key] = [item.value for item in node.value] if isinstance(value, list) else node.value
    return config


def check_value(path: str, key: str, value, action) -> None:
    """A recipe's value its option cannot take (argparse reads only text, so it converts a recipe's numbers not)."""
    for item in value if isinstance(value, list) else [value]:
        if item is None or action.type in (None, str):
            continue
        try:
            converted = action.type(item if isinstance(item, str) else str(item))
            if not isinstance(item, str) and converted != item:  # 2.5 for an int
                raise ValueError
        except (TypeError, ValueError, argparse.ArgumentTypeError):
            kind = {"int": "an integer", "float": "a number", "string_to_bool": "true or false"}.get(
                action.type.__name__, f"a valid {action.type.__name__}")
            sys.exit(f"error: {path}: {key}: {item!r} is not {kind}")
        if action.choices is not None and converted not in action.choices:
            sys.exit(f"error: {path}: {key}: {item!r} is not one of {', '.join(map(str, action.choices))}")
