"""The run's paths, models, launch and packages, checked before anything loads: each mistake one `error:` line
(`check`, which both scripts call after parsing)."""

import importlib.util
import os
import sys
from pathlib import Path

import torch


DATA_FILES = (".jsonl", ".json", ".csv", ".parquet")  # what the scripts' load_prompts reads as a file

# Values the libraries refuse themselves, but only once the models have loaded (transformers' generation, PPOTrainer's
# batch split), and one only the extras read: with the script's LIMITS, which would train silently wrong, its
# check_limits refuses them before anything loads
LIMITS = {
    "repetition_penalty": (lambda v: v > 0, "above 0 (1: none)"),  # GRPO's
    "max_completion_length": (lambda v: v >= 1, "1 or more tokens"),  # GRPO's
    "response_length": (lambda v: v >= 1, "1 or more tokens"),  # PPO's
    "num_mini_batches": (lambda v: v >= 1, "1 or more"),  # PPO's
    "eval_num_samples": (lambda v: v >= 0, "0 (no held-out evaluation) or more samples per prompt"),
}


def check(script_args, training_args, model_args) -> None:
    """The run's paths, models, launch and packages, before anything loads: each mistake one `error:` line."""
    here = Path(sys.argv[0]).resolve().parent
    bundled = [(flag, path) for flag, path in [("--model_name_or_path", model_args.model_name_or_path),
                                              ("--dataset_name", script_args.dataset_name)]
               if path and Path(path).is_relative_to(here / "assets") and not Path(path).exists()]
    if bundled:  # a copy of the script without the bundled files
        sys.exit(f"error: the default run reads {' and '.join(str(Path(p).relative_to(here)) for _, p in bundled)}, "
                 f"which are not beside {Path(sys.argv[0]).name}: copy them from the repository with it, or give "
                 f"your own with {' and '.join(flag for flag, _ in bundled)}")
    policy = getattr(training_args, "sft_model_path", None) or model_args.model_name_or_path
    for flag, path, kind, revision in [
            ("--sft_model_path" if policy != model_args.model_name_or_path else "--model_name_or_path", policy,
             "model", model_args.model_revision),
            ("--dataset_name", script_args.dataset_name, "dataset", None),
            *[("--reward_model_name_or_path", p, "model", None) for p in getattr(script_args,
                                                                                  "reward_model_name_or_path", [])],
            *[(f"--{k}", getattr(training_args, k, None) or getattr(script_args, k, None), "model",
               model_args.model_revision if k == "value_model_path" else None)
              for k in ("value_model_path", "reward_model_path")]]:
        if path:
            check_path(flag, path, kind, revision, here)
    data = Path(script_args.dataset_name)
    if data.is_file() and data.suffix not in DATA_FILES:
        sys.exit(f"error: --dataset_name {data}: use a {', '.join(DATA_FILES)} file, or a folder")
    for file in [data] if data.is_file() else sorted(data.rglob("*")) if data.is_dir() else []:
        if file.suffix in DATA_FILES and file.stat().st_size == 0:  # datasets would stop with a bare StopIteration
            sys.exit(f"error: --dataset_name: {file} is empty")
    if model_args.use_peft and model_args.lora_target_modules:
        from extras.lora_targets import check_lora_targets

        check_lora_targets(model_args.lora_target_modules, policy, model_args.model_revision)
    on_cpu = training_args.use_cpu or not torch.cuda.is_available()
    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true" and on_cpu:
        sys.exit("error: FSDP shards a model across GPUs only: on a CPU accelerate would run plain DDP under FSDP's "
                 "name; launch with accelerate_configs/zero3.yaml to shard it on a CPU, or ddp.yaml")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.cuda.is_available() and not training_args.use_cpu:
        sys.exit(f"error: {os.environ['WORLD_SIZE']} processes on a machine with no GPU would each train a model of "
                 "their own: drop --use_cpu false (on a CPU they talk over gloo)")
    needs = [("--use_vllm", "vllm", 'pip install "vllm>=0.22,<=0.31"')] if getattr(training_args, "use_vllm", 0) \
        else []
    if script_args.eval_only:  # a model scores as it trained only on its base quantized as then
        from extras.eval_only import check_as_trained

        check_as_trained(policy, model_args)
    if model_args.load_in_4bit or model_args.load_in_8bit:
        if not model_args.use_peft and not script_args.eval_only:
            sys.exit("error: --load_in_4bit/--load_in_8bit quantize a frozen base: add --use_peft to train LoRA on it")
        needs.append(("--load_in_4bit/--load_in_8bit", "bitsandbytes", "pip install bitsandbytes"))
    if getattr(training_args, "use_liger_kernel", False):  # its Triton kernels, which GRPOTrainer imports late
        needs.append(("--use_liger_kernel", "liger_kernel", "pip install liger-kernel"))
    needs += [(f"--report_to {name}", name, "pip install -r requirements-tracking.txt")
              for name in training_args.report_to if name in ("tensorboard", "trackio")]
    for flag, package, install in needs:
        if package in ("vllm", "liger_kernel") and not torch.cuda.is_available():  # bitsandbytes runs on a CPU too
            sys.exit(f"error: {flag} needs a CUDA GPU and none is visible; drop the flag to run on CPU")
        if importlib.util.find_spec(package) is None:
            sys.exit(f"error: {flag} needs the `{package}` package: {install}")
    rewards = len(script_args.reward_funcs) + len(getattr(script_args, "reward_model_name_or_path", []))
    if (weights := getattr(training_args, "reward_weights", None)) is not None and len(weights) != rewards:
        sys.exit(f"error: {len(weights)} --reward_weights for {rewards} rewards (reward models first, then "
                 "--reward_funcs)")
    if getattr(training_args, "sync_ref_model", False) and (training_args.beta == 0 or model_args.use_peft):
        sys.exit("error: --sync_ref_model moves the KL reference toward the policy: it needs --beta > 0 and no "
                 "--use_peft (under LoRA the reference is the policy with its adapter off)")
    tools = getattr(script_args, "tools", None) or getattr(script_args, "environment_factory", None)
    if getattr(training_args, "max_tool_calling_iterations", None) is not None and not tools:
        sys.exit("error: --max_tool_calling_iterations bounds the rounds of tool calls: add --tools")
    if script_args.eval_num_samples > 0 and tools:
        sys.exit(f"error: --eval_num_samples {script_args.eval_num_samples}: the before/after evaluation generates "
                 "without the tool loop; with --tools set --eval_num_samples 0, and read the tool-call rate and "
                 "rewards in summary.json, or set --eval_strategy steps (GRPOTrainer's evaluation runs the tools)")
    if script_args.eval_only and script_args.eval_num_samples < 1:
        sys.exit("error: --eval_only evaluates --eval_num_samples K samples (and one greedy) per held-out prompt: set "
                 "K to 1 or more (the SmolLM2 recipes set 2)")
    if script_args.eval_reward_funcs and script_args.eval_num_samples < 1:
        sys.exit(f"error: --eval_reward_funcs {' '.join(script_args.eval_reward_funcs)} are scored only by the "
                 "held-out evaluation, which is off: set --eval_num_samples K (the SmolLM2 recipes set 2)")
    if script_args.eval_num_samples > 0 and script_args.eval_max_prompts < 1:
        sys.exit(f"error: --eval_max_prompts {script_args.eval_max_prompts} leaves no prompt to evaluate: set it to 1 "
                 "or more, or turn the evaluation off with --eval_num_samples 0")


def check_chat_template(prompt, model_args) -> None:
    """GRPO's prompts as conversations (lists of messages, or --system_prompt made them so) need the policy's
    tokenizer to have a chat template. A LoRA adapter's folder without a tokenizer (--eval_only) has its base's,
    loaded later."""
    from transformers import AutoTokenizer

    if not isinstance(prompt, list):
        return
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path, revision=model_args.model_revision)
    except (OSError, ValueError):
        return
    if tokenizer.chat_template is None:
        sys.exit(f"error: the prompts are conversations (lists of messages, or --system_prompt made them so) and "
                 f"{model_args.model_name_or_path}'s tokenizer has no chat template to render them")


# Bundled folders that are built, not shipped, and the command that builds each (tests/unit/test_errors.py checks
# that each builder writes there by default)
BUILT = {"assets/SmolLM2-135M-Instruct": "python assets/convert_gguf.py",
         "assets/sentiment-reward-model": "python assets/build_reward_model.py"}


def check_path(flag: str, path: str, kind: str, revision: str | None, here: Path) -> None:
    """`path` is a file or folder here, or a hub id (`name` or `org/name`) of a model or dataset the hub has: else one
    `error:` line saying where relative paths are read from (the working directory, in a recipe too), where the
    path is if it is beside the script, and the command that builds a bundled folder that is built, not shipped.
    The hub is asked once, for 5 s (transformers and datasets retry for half a minute with no network); offline
    (HF_HUB_OFFLINE=1), a model must be in its cache, and datasets reads its own."""
    local = Path(path).expanduser()
    if local.exists():
        return
    parts = Path(path).parts
    hub_id = (not path.startswith((".", "/", "~")) and len(parts) <= 2 and local.suffix not in DATA_FILES
              and not (len(parts) == 2 and Path(parts[0]).is_dir()))  # `assets/x` where assets/ is a folder: a path
    reason = "no such file or directory"
    if hub_id:
        from huggingface_hub import HfApi, constants, try_to_load_from_cache

        if kind == "model" and any(isinstance(try_to_load_from_cache(path, file, revision=revision), str)
                                   for file in ("config.json", "adapter_config.json")):  # a LoRA adapter's, too
            return
        if constants.HF_HUB_OFFLINE:
            if kind == "dataset":
                return
            reason = ("no such file or folder here, and the hub is offline (HF_HUB_OFFLINE=1) and its cache has no "
                      "such model")
        else:
            try:
                getattr(HfApi(), f"{kind}_info")(path, revision=revision, timeout=5)
                return
            except Exception as err:  # RepositoryNotFoundError, a malformed id, or no network; a gated one exists
                if "Gated" in type(err).__name__:
                    return
                reason = "no such file or folder here, and " + (
                    f"the hub has no {kind} of that name" if "NotFound" in type(err).__name__ or "Validation" in
                    type(err).__name__ else f"the hub could not be reached to look it up ({type(err).__name__})")
    hints = []
    beside = not local.is_absolute() and (here / local).exists()  # in the script's folder, the clone
    if not local.is_absolute():
        hints.append(f"relative paths, in a recipe too, are read from the working directory, {Path.cwd()}")
        if beside:
            hints.append(f"it is in {here}: run from there")
    built = next((command for folder, command in BUILT.items() if Path(*local.parts[-2:]) == Path(folder)), None)
    if built and not beside:  # a bundled folder that is built, not shipped, and not built yet
        hints.append(f"it is built, not shipped: `{built}` builds it")
    sys.exit(f"error: {flag} {path}: {reason}" + "".join(f"; {hint}" for hint in hints))


def check_best_metric(training_args, script_args, reward_funcs: list, reward_models: tuple[str, ...] = (),
                      reference: bool = True) -> None:
    """--metric_for_best_model, before anything loads: a metric of the held-out evaluation during training, as
    eval.json names it (reward/metric), or for GRPO one of TRL's own evaluation's; else one line listing them.
    `reward_funcs`: the training and --eval_reward_funcs rewards; `reward_models`: the names of GRPO's; `reference`:
    whether the trainer holds one (GRPO at beta 0 without LoRA does not), for the KL to it."""
    metric = training_args.metric_for_best_model
    if metric is None:
        return
    from extras.during_training import held_out_metrics

    name = metric.removeprefix("eval_")
    ours = held_out_metrics(reward_funcs, script_args.eval_num_samples, reward_models, reference)
    grpo = hasattr(training_args, "num_generations")  # trl 1.12's PPOTrainer has no evaluation of its own
    trained = [f.__name__ for f in reward_funcs if f.__name__ not in script_args.eval_reward_funcs]
    trls = ["loss", "reward", "reward_std", "kl", "entropy"] + [
        f"rewards/{reward}/{stat}" for reward in [*reward_models, *trained] for stat in ("mean", "std")] if grpo else []
    if name in ours and not (script_args.eval_num_samples and training_args.eval_strategy == "steps"):
        sys.exit(f"error: --metric_for_best_model {metric} is the held-out evaluation's: it needs --eval_num_samples K "
                 "and --eval_strategy steps --eval_steps N")
    if name not in ours + trls:
        sys.exit(f"error: --metric_for_best_model {metric} is no metric this run measures; the held-out "
                 f"evaluation's are {', '.join(ours)}" + (f", and TRL's evaluation's {', '.join(trls)}" if trls else "")
                 + (" (TrainingArguments names 'loss' where --load_best_model_at_end names none)" if name == "loss"
                    else ""))
