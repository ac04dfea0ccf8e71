# /// script
# requires-python = ">=3.11"
# dependencies = [  # `uv run grpo_trl_example.py` installs these; the versions the tests run on (docs/versions.md)
#     "trl==1.16.0",
#     "torch>=2.13.0,<2.14",
#     "transformers>=5.23.0,<5.26",
#     "peft>=0.21.0,<0.22",
#     "accelerate>=1.15.0,<1.17",
#     "datasets>=5.2.0,<5.3",
#     "math-verify>=0.9.0,<0.10",  # rewards.py: the accuracy reward, and the sympy values it reads
#     "sympy>=1.14,<2",
#     "pyseccomp==0.1.2; sys_platform == 'linux'",  # rewards.py: the code reward's sandbox filter
#     "vadersentiment==3.3.2",  # rewards.py: the sentiment reward
#     "matplotlib>=3.8",  # extras/: reward_curve.png
# ]
# ///
"""GRPO with TRL's GRPOTrainer: a template to copy.

    python grpo_trl_example.py      # the bundled tiny model learns addition on a CPU, in under a minute
    python grpo_trl_example.py --config recipes/SmolLM2-135M-Instruct/grpo/config_chat_addition.yaml
    accelerate launch --config_file accelerate_configs/zero2.yaml grpo_trl_example.py --config RECIPE.yaml

A run that names its model starts from TRL's defaults, a --config recipe over them, flags over both; a run that
names no model is the default run, with recipes/tiny/grpo.yaml's settings. Every option is a flag and a recipe key,
and a flag wins; the first lines a run prints say where its settings came from (docs/options.md).

GRPO (Shao et al. 2024, DeepSeekMath, Eq. 3): sample `num_generations` completions per prompt, score them, and use
each one's reward relative to its group, (r_i - mean(r)) / std(r), as the advantage of a clipped policy-gradient
loss, with a KL penalty `beta` to a frozen reference. GRPOTrainer does all of it: this script loads the prompts, the
rewards and the model, and reports what happened.

To start your own, copy this file with rewards.py: the two train your model on your data with every TRL option.
Copy extras/ too for the held-out evaluation, the run's records and plots, tool calling, the code sandbox, and checks
that stop a mistake in one sentence. The default run, which names no model, also reads

    recipes/tiny/grpo.yaml assets/tiny-llama-addition assets/addition extras/
"""

import importlib
import json
import math
import os
import sys
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

try:  # the opt-in extras: a copy with rewards.py alone trains without them. This one imports the standard library alone
    from extras import runtime
except ModuleNotFoundError as missing:
    if missing.name != "extras":
        raise
    runtime = None
# GRPO runs on the newest trl, with what TRL fixed after 1.12, and ppo_trl_example.py on trl 1.12, the last with
# PPOTrainer (docs/versions.md): the header above and setup.sh's .venv give this one.
GRPO_TRL = "1.16.0"
if __name__ == "__main__":
    if runtime:  # before the libraries load: Ctrl-C in one line, OpenMP's wait on a CPU, and the trl named first
        runtime.start(__file__, GRPO_TRL)
    try:
        version("trl")
    except PackageNotFoundError:  # a Python without trl: the system's, or another project's
        sys.exit(f"error: this Python ({sys.executable}) has no trl: run grpo_trl_example.py in the .venv that bash "
                 "setup.sh makes (source .venv/bin/activate), or with uv run grpo_trl_example.py")

import torch
from accelerate import PartialState
from datasets import load_dataset
from transformers import AutoConfig, set_seed
from trl import (GRPOConfig, GRPOTrainer, ModelConfig, ScriptArguments, TrlParser, get_peft_config,
                 get_quantization_config)

from rewards import RewardArguments, check_columns, check_reward_model, get_reward_funcs

if runtime:  # one-sentence checks, a readable --help and the default run; the run's folder, records and plots
    from extras import checks, cli, outputs, run_folder, summary
else:
    checks = cli = outputs = run_folder = summary = None

# A run that names no model, with extras/: the bundled tiny model learning addition, as --config would read it
DEFAULT_RECIPE = Path(__file__).resolve().parent / "recipes" / "tiny" / "grpo.yaml"

# Options that would train silently wrong here, refused with the reason (the options GRPOTrainer never reads are
# refused too: extras/cli.py; tests/unit/test_options.py sorts every option into acting or refused)
REFUSED = {
    "remove_unused_columns": "it drops the dataset columns the rewards read (`answer`), so every reward is None",
    "dataset_streaming": "the script loads the dataset whole; take a slice with --dataset_train_split 'train[:10%]'",
    "model_init_kwargs": "the script builds it from --dtype, --attn_implementation and --model_revision; set those",
    "gradient_checkpointing": "it is the old name of --activation_checkpointing, which wins over it: set that",
    "gradient_checkpointing_kwargs": "it is the old name of --activation_checkpointing_kwargs: set that",
}

# Values outside what GRPO means, which would train silently wrong (a negative beta trained, as a KL bonus), each
# refused in one sentence before anything loads: the option, whether a value is within it, and what it must be
LIMITS = {
    "learning_rate": (lambda v: v > 0, "above 0"),
    "beta": (lambda v: v >= 0, "0 or more: the KL penalty's weight (0 leaves the reference out)"),
    "temperature": (lambda v: v > 0, "above 0: sampling's temperature (1 samples the model as it is)"),
    "top_p": (lambda v: 0 < v <= 1, "above 0 and at most 1"),
    "epsilon": (lambda v: v >= 0, "0 or more: the clip range's lower side, 1 - epsilon"),
    "epsilon_high": (lambda v: v >= 0, "0 or more: the clip range's upper side, 1 + epsilon_high"),
    "num_iterations": (lambda v: v >= 1, "1 or more: the updates each generation serves"),
}


@dataclass
class GRPOScriptArguments(ScriptArguments, RewardArguments):
    """The script's own options, on top of TRL's ScriptArguments (dataset_name, dataset_train_split, ...) and the
    rewards' (rewards.RewardArguments)."""

    reward_model_name_or_path: list[str] = field(default_factory=list, metadata={
        "help": "Reward models (one-output sequence classifiers), scored before --reward_funcs, each reading the text "
                "with its own tokenizer; --reward_weights lists their weights first."})
    dataset_prompt_column: str = field(default="prompt", metadata={"help": "The prompt column, renamed `prompt`."})
    dataset_answer_column: str | None = field(default=None, metadata={
        "help": "The gold answer's column, if it is not `answer`: renamed `answer`, which `accuracy` reads."})
    system_prompt: str | None = field(default=None, metadata={
        "help": "A system message put before every prompt, in place of any system message the prompt has."})
    # Read by extras/ alone: the held-out evaluation, tool calling and the no-signal watchdog
    eval_num_samples: int = field(default=0, metadata={
        "help": "K > 0: sample K completions and one greedy per held-out prompt before and after training, and report "
                "pass@1, pass@K, maj@K and greedy accuracy (eval.json). Needs extras/."})
    eval_max_prompts: int = field(default=256, metadata={"help": "Evaluate at most this many held-out prompts."})
    eval_only: bool = field(default=False, metadata={
        "help": "Train nothing: evaluate --model_name_or_path (a model or a LoRA adapter) as this run would."})
    tools: list[str] = field(default_factory=list, metadata={
        "help": "Tools the model may call: calculator, python, or module.function (extras/tools.py)."})
    environment_factory: str | None = field(default=None, metadata={
        "help": "A stateful environment whose methods are tools: notebook, or module.Class (extras/tools.py)."})
    no_signal_patience: int = field(default=5, metadata={
        "help": "Warn after this many logs without a learning signal (0: never)."})
    stop_on_no_signal: bool = field(default=False, metadata={"help": "Stop cleanly at that warning."})


def main(script_args: GRPOScriptArguments, training_args: GRPOConfig, model_args: ModelConfig):
    set_seed(training_args.seed)  # before anything random: GRPOTrainer makes a LoRA adapter before it seeds
    check_limits(LIMITS | (checks.LIMITS if checks else {}), script_args, training_args)
    if model_args.model_name_or_path is None:  # TRL's default; with extras/, a run that names none is the default run
        sys.exit(f"error: --model_name_or_path is missing: name your model (a hub id or a folder); a run that names "
                 f"none is the default run, which reads {DEFAULT_RECIPE.relative_to(DEFAULT_RECIPE.parents[2])} and "
                 f"extras/, not beside {Path(__file__).name}")
    if script_args.dataset_name is None:  # TRL's default: a run that names its model names its prompts too
        sys.exit("error: --dataset_name is missing: give a .jsonl, .json, .csv or .parquet file, a folder, or a hub id")
    if checks:  # the run's paths, models, launch and packages
        checks.check(script_args, training_args, model_args)
    if run_folder:  # a new or empty folder, or the run it holds continued; `last`, the newest complete checkpoint
        training_args.resume_from_checkpoint = run_folder.prepare(training_args, script_args)
    check_generation_boundaries(training_args)  # no reused completions in a checkpoint: save where a generation begins
    if not script_args.eval_only:  # no weight that trains held in bf16 or fp16 under a plain optimizer
        check_precision(model_args, training_args, model_args.model_name_or_path, None, training_args.trust_remote_code,
                        "--bf16 true")

    ################
    # Dataset
    ################
    with PartialState().main_process_first():  # one process prepares it, the others read its cache
        train_dataset, eval_dataset = load_prompts(script_args)
    eval_source = f"split '{script_args.dataset_test_split}'"
    if script_args.eval_num_samples > 0:  # no test split: hold out a seeded 10% of train
        train_dataset, eval_dataset, eval_source = extra("evaluation", "--eval_num_samples").held_out(
            train_dataset, eval_dataset, script_args, training_args.seed)
    if eval_dataset is None and training_args.eval_strategy != "no":
        training_args.eval_strategy = "no"  # TRL's periodic evaluation, of the test split
        if PartialState().is_main_process:
            print(f"no '{script_args.dataset_test_split}' split in {script_args.dataset_name}: evaluation is off")

    ################
    # Rewards
    ################
    # Plain functions (completions, **kwargs) -> list[float | None], the dataset's columns as kwargs; reward models
    # (a path each) score prompt + completion as text. The total reward is their weighted sum (--reward_weights).
    try:
        reward_funcs = get_reward_funcs(script_args.reward_funcs, training_args.max_completion_length, script_args)
        eval_reward_funcs = get_reward_funcs(script_args.eval_reward_funcs, training_args.max_completion_length,
                                             script_args)
        check_columns(reward_funcs + eval_reward_funcs, [train_dataset, eval_dataset], script_args.dataset_name)
        for path in script_args.reward_model_name_or_path:
            check_reward_model(path, training_args.trust_remote_code)
    except ValueError as err:  # an unknown name, a module that does not import, a reward that could not score
        sys.exit(f"error: {err}")
    if checks:  # --metric_for_best_model: one the held-out evaluation or TRL's measures, before anything loads
        checks.check_best_metric(training_args, script_args, reward_funcs + eval_reward_funcs,
                                 tuple(Path(path).name for path in script_args.reward_model_name_or_path),
                                 reference=training_args.beta != 0 or model_args.use_peft)
    tools = []
    environment_factory = None
    if script_args.tools or script_args.environment_factory:  # GRPOTrainer runs each call and feeds the result back
        tools, environment_factory, reward_funcs = extra("tools", "--tools").setup(
            script_args, model_args, train_dataset, reward_funcs)

    if checks:  # conversations need a chat template: GRPOTrainer would stop at them after loading the model
        checks.check_chat_template(train_dataset[0]["prompt"], model_args)

    ################
    # Model
    ################
    # GRPOTrainer loads the policy from its path, and with beta > 0 and no LoRA the frozen reference from the same
    # path; with LoRA the reference is the policy with its adapter disabled.
    training_args.model_init_kwargs = dict(
        revision=model_args.model_revision,
        dtype=model_args.dtype,
        attn_implementation=model_args.attn_implementation,
    )
    policy = model_args.model_name_or_path
    if script_args.eval_only:  # the model as it is, or a LoRA adapter on the base its config names
        policy = extra("eval_only", "--eval_only").model_to_evaluate(policy, model_args, training_args)

    ################
    # Training
    ################
    trainer = GRPOTrainer(
        model=policy,
        reward_funcs=script_args.reward_model_name_or_path + reward_funcs,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset if training_args.eval_strategy != "no" else None,
        peft_config=get_peft_config(model_args),  # None unless --use_peft
        quantization_config=get_quantization_config(model_args),  # QLoRA: None unless --load_in_4bit/8bit
        tools=tools or None,
        environment_factory=environment_factory,
    )
    qlora_workarounds(trainer.model)  # two upstream QLoRA bugs: the adapters' dtype, bitsandbytes' CPU repack
    if script_args.eval_only:  # the model evaluated once, as training evaluates the policy: eval.json and the table
        return extra("eval_only", "--eval_only").evaluate_only(trainer, eval_dataset, eval_source,
                                                               reward_funcs + eval_reward_funcs, script_args)
    evaluation = None
    if script_args.eval_num_samples > 0:  # held-out pass@k before and after training, sampled as training samples
        evaluation = extra("evaluation", "--eval_num_samples").for_grpo(trainer, eval_dataset, eval_source,
                                                                         reward_funcs + eval_reward_funcs, script_args)
        trainer.add_callback(evaluation)
    if run_folder:  # checkpoints.json: the folder claimed as training begins, and what each checkpoint holds
        run_folder.keep_record(trainer)
    if outputs:  # metrics.jsonl, completions.jsonl, short logs, the no-signal watchdog; the clock
        outputs.record(trainer, script_args, beta=training_args.beta)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)

    ################
    # Save
    ################
    trainer.save_model(training_args.output_dir)  # the model, or only the LoRA adapter
    if summary:  # summary.json, reward_curve.png, training_curves.png and the closing summary
        summary.write(trainer, [script_args, training_args, model_args], "GRPO", evaluation and evaluation.results)
    trainer.accelerator.wait_for_everyone()  # for the main process's writing: an early exit can take the rest down
    trainer.end()  # the trackers finished, the process group destroyed


def load_prompts(args: ScriptArguments):
    """--dataset_name (a hub id, a folder, or a .jsonl/.json/.csv/.parquet file) -> its train and test splits (None
    where there is none; `train[:10%]` slices one), with `prompt` and `answer` columns."""
    builder = dict(jsonl="json", json="json", csv="csv", parquet="parquet").get(Path(args.dataset_name).suffix[1:])
    source = dict(path=builder, data_files=args.dataset_name) if builder else dict(path=args.dataset_name,
                                                                                   name=args.dataset_config)
    splits = []
    for split in (args.dataset_train_split, args.dataset_test_split):
        try:
            splits.append(load_dataset(**source, split=split))
        except ValueError as err:  # an unknown split: datasets' message names those there are
            if not splits:
                sys.exit(f"error: --dataset_name {args.dataset_name}: {err}")
            splits.append(None)  # no test split
        except ConnectionError as err:  # neither here nor reachable on the hub (offline, or no network)
            sys.exit(f"error: --dataset_name {args.dataset_name}: no such file or folder here, and a hub dataset "
                     f"id needs the hub ({err})")
    # --dataset_prompt_column and --dataset_answer_column: the named column becomes `prompt` or `answer`
    for flag, name in [("dataset_prompt_column", "prompt"), ("dataset_answer_column", "answer")]:
        column = getattr(args, flag)
        if column in (None, name):
            continue
        for i, split in enumerate(splits):
            if split is None:
                continue
            if column not in split.column_names:
                sys.exit(f"error: --{flag} {column}: no such column in {args.dataset_name}; its columns are: "
                         f"{', '.join(split.column_names)}")
            if name in split.column_names:  # the column it replaces
                split = split.remove_columns([name])
            splits[i] = split.rename_column(column, name)
    for split in splits:
        if split is not None and "prompt" not in split.column_names:
            sys.exit(f"error: --dataset_name {args.dataset_name} has no `prompt` column; its columns are: "
                     f"{', '.join(split.column_names)}; name yours with --dataset_prompt_column")
    if args.system_prompt:  # prompts become conversations that open with this system message, and have no other
        system = {"role": "system", "content": args.system_prompt}

        def with_system(prompt):
            messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
            return {"prompt": [system] + [message for message in messages if message["role"] != "system"]}

        splits = [split.map(with_system, input_columns="prompt") if split is not None else None for split in splits]
    return splits


def check_generation_boundaries(args: GRPOConfig) -> None:
    """Stop before loading where a checkpoint could fall between two generations: GRPOTrainer reuses each generation's
    completions for `steps_per_generation * num_iterations` micro-batches, and a checkpoint does not hold them, so only
    one saved where a new generation begins resumes into the steps that the run left alone takes."""
    reused = args.steps_per_generation * args.num_iterations  # micro-batches from one generation (1: TRL's default)
    cycle = reused // math.gcd(reused, args.gradient_accumulation_steps)  # optimizer steps from a boundary to the next
    why = (f"with --num_iterations {args.num_iterations}, --steps_per_generation {args.steps_per_generation} and "
           f"--gradient_accumulation_steps {args.gradient_accumulation_steps} a new generation begins every {cycle} "
           "steps, and a checkpoint does not hold the completions reused until the next")
    save_steps = args.save_steps if args.save_steps >= 1 else math.ceil(args.max_steps * args.save_steps)  # Trainer's
    resumable = args.save_strategy == "steps" and not args.save_only_model  # not only weights for evaluation
    if resumable and save_steps % cycle and not 0 < args.max_steps <= save_steps:
        below = int(save_steps) // cycle * cycle
        every = f"{below} or {below + cycle}" if below else f"{cycle}"
        sys.exit(f"error: --save_steps {args.save_steps:g}: {why}: save every {every} steps")
    state = Path(args.resume_from_checkpoint or "") / "trainer_state.json"
    if args.resume_from_checkpoint and state.is_file():
        step = json.loads(state.read_text())["global_step"]
        if step % cycle and not 0 < args.max_steps <= step:  # a finished run trains nothing more
            sys.exit(f"error: --resume_from_checkpoint {args.resume_from_checkpoint}: step {step} falls between two "
                     f"generations; {why}: resume from a checkpoint at a multiple of {cycle} steps")


def check_precision(model_args: ModelConfig, training_args, policy: str, value_model: str | None,
                    trust_remote_code: bool, bf16_flag: str) -> None:
    """Stop before loading when weights that train would be held in bf16 or fp16 under a plain optimizer: an update
    below a weight's precision (1/256 of it in bf16) rounds away, so at fine-tuning learning rates most updates are
    lost (docs/scaling.md). A value model trains in full; a policy too, but under LoRA, whose adapters are fp32 (peft;
    under QLoRA the GRPO script undoes trl's cast to bf16), and whose lora_modules_to_save keep the base's dtype.
    With --dtype auto each loads in its checkpoint's own dtype (a value model started from a bf16 reward model, as
    TRL's PPO example starts it, is bf16). DeepSpeed trains an fp32 master copy."""
    if training_args.deepspeed or os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true":
        return
    trained = {"value model": value_model} if value_model else {}
    if not model_args.use_peft or model_args.lora_modules_to_save:
        trained["policy"] = policy
    for what, path in trained.items():
        dtype = model_args.dtype
        if dtype == "auto":  # the checkpoint's own
            dtype = AutoConfig.from_pretrained(path, revision=model_args.model_revision,
                                               trust_remote_code=trust_remote_code).dtype
        dtype = str(dtype).removeprefix("torch.")
        if dtype in ("bfloat16", "float16"):
            sys.exit(f"error: --dtype {model_args.dtype} would train the {what} ({path}) in {dtype} under a plain "
                     f"optimizer, which rounds most updates away: use --dtype float32 ({bf16_flag} for bf16 "
                     "compute), LoRA for a policy (--use_peft), or DeepSpeed ZeRO (accelerate_configs/zero2.yaml)")


def qlora_workarounds(model) -> None:
    """QLoRA, by --load_in_4bit/8bit or a checkpoint saved quantized (trl's test): trl casts the adapters to bf16,
    where an Adam step at a fine-tuning learning rate is below half a unit of most weights' last place and rounds
    away, so they go back to fp32, as peft makes them (docs/scaling.md). And bitsandbytes on a CPU with AVX512-BF16
    repacks a 4-bit layer the first time it runs in eval mode (the held-out evaluation) for a matmul with no
    backward, after which no adapter got a gradient: its plain one trains."""
    if not (getattr(model, "is_loaded_in_4bit", False) or getattr(model, "is_loaded_in_8bit", False)):
        return
    for param in model.parameters():
        if param.requires_grad:
            param.data = param.data.float()
    for module in model.modules():
        if hasattr(module, "support_avx512bf16_for_cpu"):
            module.support_avx512bf16_for_cpu = False


def check_limits(limits: dict, *settings) -> None:
    """Stop before loading at a value outside what the algorithm means (LIMITS): one sentence, saying what it must
    be."""
    for name, (within, meaning) in limits.items():
        value = next((getattr(args, name) for args in settings if hasattr(args, name)), None)
        if value is not None and not within(value):
            sys.exit(f"error: --{name} {value}: it must be {meaning}")


def extra(name: str, flag: str):
    """extras/<name>.py, which `flag` needs: a copy of this script without the folder stops in one sentence."""
    try:
        return importlib.import_module(f"extras.{name}")
    except ModuleNotFoundError as missing:
        if missing.name not in ("extras", f"extras.{name}"):
            raise
        sys.exit(f"error: {flag} needs extras/{name}.py: copy the extras/ folder beside {Path(__file__).name}")


def cpu_computes_bf16() -> bool:
    """Whether this CPU multiplies bf16 in hardware (AVX512-BF16 or AMX: 2.8x its fp32 rate on an AMD EPYC); on the
    others bf16 is emulated, and slower than fp32 (BENCHMARKS.md, section 27)."""
    capabilities = torch.cpu.get_capabilities()
    return bool(capabilities.get("avx512_bf16") or capabilities.get("amx_bf16"))


def make_parser() -> TrlParser:
    """TRL's configs, with a CPU's defaults where there is no GPU."""
    # allow_abbrev=False: a flag short of its last letters (--learning_rat) is an unknown one, not the flag it begins
    parser = TrlParser((GRPOScriptArguments, GRPOConfig, ModelConfig), allow_abbrev=False)
    if not torch.cuda.is_available():  # TRL's defaults are a GPU's: here the CPU (gloo between processes), in bf16
        parser.set_defaults(use_cpu=True, bf16=cpu_computes_bf16())  # autocast where it computes bf16, else fp32
    parser.set_defaults(activation_checkpointing=torch.cuda.is_available(), gradient_checkpointing=None)
    # Every trained weight takes part in every step: DDP need not look for unused ones (and warns when told to)
    parser.set_defaults(ddp_find_unused_parameters=False)
    return parser


def parse_args(args: list[str] | None = None) -> tuple:
    """TRL's defaults, a --config recipe over them, flags over both, parsed once. With extras/: a mistake in one line,
    a readable --help, the settings line, and the default run, which names no model: DEFAULT_RECIPE, as --config
    would read it from here (extras/cli.py)."""
    if cli:
        script_args, training_args, model_args = cli.parse(make_parser(), REFUSED, args, DEFAULT_RECIPE)
    else:
        script_args, training_args, model_args = parse_without_extras(args)
    # What the flags' text leaves to the script: --report_to tensorboard,trackio as the list TRL expects, and one LoRA
    # target as peft reads a name (TRL passes one alone to peft as a regex of a whole module path)
    training_args.report_to = [n.strip() for e in training_args.report_to for n in e.split(",") if n.strip()]
    if isinstance(model_args.lora_target_modules, str) and model_args.lora_target_modules.isidentifier():
        model_args.lora_target_modules = [model_args.lora_target_modules]  # q_proj: every q_proj
    return script_args, training_args, model_args


def parse_refusing(parser: TrlParser, refused: dict[str, str], args: list[str] | None) -> tuple:
    """`parser.parse_args_and_config(args)`, stopped in one sentence at an option of `refused` set away from its
    default, as a flag or a recipe key (with extras/, extras/cli.py refuses them as it parses)."""
    defaults = {name: parser.get_default(name) for name in refused}  # before a recipe's values replace them
    parsed = parser.parse_args_and_config(args)
    given = vars(parser.parse_known_args(args)[0])  # argparse's values: a config's __post_init__ changes some defaults
    for name, why in refused.items():
        if given[name] != defaults[name]:
            sys.exit(f"error: --{name} is not supported here: {why}")
    return parsed


def parse_without_extras(args: list[str] | None) -> tuple:
    """TrlParser's parse of a copy without extras/, saying what it goes without. REFUSED's options stop it, as they
    stop a run with extras/, and so does a flag that only an extra would act on."""
    print(f"extras/ is not beside {Path(__file__).name}: no summary.json, records, plots, held-out evaluation, "
          "no-signal warning or one-sentence checks")
    parsed = parse_refusing(make_parser(), REFUSED, args)
    if parsed[0].stop_on_no_signal:  # the no-signal watchdog, which would stop the run, is extras/watchdogs.py's
        extra("watchdogs", "--stop_on_no_signal")
    if str(parsed[1].resume_from_checkpoint).lower() in ("last", "true"):  # the newest complete checkpoint, which
        extra("run_folder", f"--resume_from_checkpoint {parsed[1].resume_from_checkpoint}")  # run_folder.py finds
    if parsed[1].save_total_limit and list(Path(parsed[1].output_dir).glob("checkpoint-*")):  # transformers' rotation
        extra("run_folder", "--save_total_limit in a folder with checkpoints")  # takes any: run_folder.py knows whose
    return parsed


if __name__ == "__main__":
    if runtime:  # upstream notices silenced, Ctrl-C in one line that says which checkpoint is kept, a refusal said once
        runtime.run(main, parse_args)  # per launch, the trainer freed
    else:
        main(*parse_args())
