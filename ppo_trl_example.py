# /// script
# requires-python = ">=3.11"
# dependencies = [  # `uv run ppo_trl_example.py` installs these; the versions the tests run on (docs/versions.md)
#     "trl==1.12.0",  # the last release with PPOTrainer
#     "requests>=2.31",  # trl 1.12 imports it and leaves it out of its own requirements
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
"""PPO with TRL's PPOTrainer: a template to copy.

    python ppo_trl_example.py       # the bundled tiny model learns addition on a CPU, in about 1-2 minutes
    python ppo_trl_example.py --config recipes/SmolLM2-135M-Instruct/ppo/config_chat_addition_lora.yaml
    accelerate launch --config_file accelerate_configs/zero3.yaml ppo_trl_example.py --config RECIPE.yaml

Settings: TRL's defaults, a --config recipe over them, flags over both; recipes/tiny/ppo.yaml's for the default run,
which names no model. The first lines a run prints say where its settings came from (docs/options.md).
PPO (Schulman et al. 2017; Ziegler et al. 2019): one completion per prompt, scored at its last token, a per-token KL
penalty kl_coef to a frozen reference, a value model (the policy's transformer under a new `score` head) for GAE's
advantages, and num_ppo_epochs passes of the clipped surrogate (docs/ppo.md). PPOTrainer does it all, but takes only a
reward *model*: RewardAdapter below wraps rewards.py's functions as one, and its docstring follows a reward from the
functions into PPO's loss.

Copy this file with rewards.py to train your model on your data; copy extras/ too for the held-out evaluation, the
run's records and plots, DeepSpeed, resuming and one-sentence checks. The default run, which names no model, also
reads

    recipes/tiny/ppo.yaml assets/tiny-llama-addition assets/addition extras/
"""

import importlib
import math
import os
import sys
import warnings
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

try:  # the opt-in extras: a copy with rewards.py alone trains without them. This one imports the standard library alone
    from extras import runtime
except ModuleNotFoundError as missing:
    if missing.name != "extras":
        raise
    runtime = None
# TRL removed PPOTrainer in 1.13 (TRL PR #7020): this script runs on trl 1.12.0, its last release with it, and
# grpo_trl_example.py on the newest (docs/versions.md). The header above gives it, and setup.sh's .venv-ppo.
PPO_TRL = "1.12.0"
if __name__ == "__main__":
    if runtime:  # before the libraries load: Ctrl-C in one line, OpenMP's wait on a CPU, the trl named first, and from
        runtime.start(__file__, PPO_TRL, environment=".venv-ppo")  # another environment, the same command in .venv-ppo
    try:
        trl_version = version("trl")
    except PackageNotFoundError:  # a Python without trl: the system's, or another project's
        trl_version = None
    if trl_version is None or tuple(map(int, trl_version.split(".")[:2])) >= (1, 13):
        which = f"trl {trl_version} has no PPOTrainer (TRL removed it in 1.13)" if trl_version else (
            f"this Python ({sys.executable}) has no trl")
        sys.exit(f"error: {which}: run ppo_trl_example.py on trl=={PPO_TRL}, in the .venv-ppo that bash setup.sh "
                 "makes, or with uv run ppo_trl_example.py")

import torch
from accelerate import PartialState
from accelerate.utils import gather_object
from datasets import load_dataset
from peft import get_peft_model
from torch import nn
from transformers import (AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer,
                          GenerationConfig, set_seed)
from transformers.modeling_outputs import BaseModelOutput
from trl import ModelConfig, ScriptArguments, TrlParser, get_peft_config, get_quantization_config

from rewards import RewardArguments, check_columns, check_reward_model, get_reward_funcs, run_reward

with warnings.catch_warnings():  # PPOTrainer is in trl.experimental in trl 1.12 (gone in 1.13): its notice says nothing
    warnings.filterwarnings("ignore", message="You are importing from 'trl.experimental'")
    from trl.experimental.ppo import PPOConfig, PPOTrainer
    from trl.experimental.utils import first_true_indices, get_reward

# With extras/: one-sentence checks, a readable --help and the default run; the run's folder, records and plots; and
# PPO's own (extras/ppo.py)
if runtime:
    from extras import checks, cli, outputs, ppo as extras_ppo, run_folder, summary
else:
    checks = cli = outputs = extras_ppo = run_folder = summary = None

# A run that names no model, with extras/: the bundled tiny model learning addition, as --config would read it
DEFAULT_RECIPE = Path(__file__).resolve().parent / "recipes" / "tiny" / "ppo.yaml"

# Options that would train silently wrong, refused with the reason (extras/cli.py refuses those PPOTrainer never reads
# or computes itself)
REFUSED = {
    "max_steps": "PPOTrainer ignores it: set --total_episodes, the prompts sampled in all (docs/ppo.md)",
    "remove_unused_columns": "the script passes PPOTrainer only the input_ids column",
    "dataset_streaming": "the script tokenizes the dataset whole: slice it, --dataset_train_split 'train[:10%]'",
    **dict.fromkeys(["tools", "environment_factory"], "PPOTrainer generates in one turn: tool calling is GRPO's"),
    "gradient_checkpointing": "it is the old name of --activation_checkpointing, which wins over it: set that",
    "gradient_checkpointing_kwargs": "it is the old name of --activation_checkpointing_kwargs: set that",
    # PPOTrainer computes the reference by switching the policy to this adapter; the script's LoRA policy has one
    "ref_adapter_name": "the reference is the LoRA policy with its one adapter disabled: naming that adapter makes the "
                        "reference the policy itself (no KL penalty), and any other name fails at the first update",
    "model_adapter_name": "PPOTrainer reads it only with --ref_adapter_name, which is refused",
}

# Values outside what PPO means, which would train silently wrong (a negative kl_coef trains, as a KL bonus), each
# refused in one sentence before anything loads: the option, whether a value is within it, and what it must be
LIMITS = {
    "learning_rate": (lambda v: v > 0, "above 0"),
    "kl_coef": (lambda v: v >= 0, "0 or more: the per-token KL penalty's weight"),
    "temperature": (lambda v: v > 0, "above 0: sampling's temperature (1 samples the model as it is)"),
    "cliprange": (lambda v: v >= 0, "0 or more: the policy ratio's clip range, 1 +/- cliprange"),
    "cliprange_value": (lambda v: v >= 0, "0 or more: the value's clip range"),
    "vf_coef": (lambda v: v >= 0, "0 or more: the value loss's weight"),
    "gamma": (lambda v: 0 <= v <= 1, "between 0 and 1: the discount"),
    "lam": (lambda v: 0 <= v <= 1, "between 0 and 1: GAE's lambda"),
    "missing_eos_penalty": (lambda v: v >= 0, "0 or more: subtracted from a completion that never stopped"),
    "num_ppo_epochs": (lambda v: v >= 1, "1 or more passes over each rollout"),
    "total_episodes": (lambda v: v >= 1, "1 or more prompts"),
}


@dataclass
class PPOScriptArguments(ScriptArguments, RewardArguments):
    """The script's options, over TRL's ScriptArguments and the rewards'; PPOConfig has the policy and reward model."""

    reward_weights: list[float] | None = field(default=None, metadata={"help": "Each reward's weight (default 1)."})
    value_model_path: str | None = field(default=None, metadata={"help": "Default: the policy, with a new value head."})
    trust_remote_code: bool = field(default=False, metadata={"help": "Allow models that run their own code."})
    dataset_prompt_column: str = field(default="prompt", metadata={"help": "The prompt column, renamed `prompt`."})
    dataset_answer_column: str | None = field(default=None, metadata={"help": "The gold's, renamed `answer`."})
    system_prompt: str | None = field(default=None, metadata={
        "help": "A system message put before every prompt, in place of any system message the prompt has."})
    tools: list[str] = field(default_factory=list, metadata={"help": "Refused: tool calling is GRPO's."})
    environment_factory: str | None = field(default=None, metadata={"help": "Refused, as --tools."})
    # Read by extras/ alone: the held-out evaluation and the no-signal watchdog
    eval_num_samples: int = field(default=0, metadata={"help": "K > 0: held-out pass@K before and after (extras/)."})
    eval_max_prompts: int = field(default=256, metadata={"help": "Evaluate at most this many held-out prompts."})
    eval_only: bool = field(default=False, metadata={"help": "Evaluate --model_name_or_path (or its adapter) only."})
    no_signal_patience: int = field(default=5, metadata={"help": "Warn after this many updates without signal."})
    stop_on_no_signal: bool = field(default=False, metadata={"help": "Stop cleanly at that warning."})


def main(script_args: PPOScriptArguments, training_args: PPOConfig, model_args: ModelConfig):
    set_seed(training_args.seed)  # before any weights load: it fixes the value head's, and an added pad token's, start
    check_limits(LIMITS | (checks.LIMITS if checks else {}), script_args, training_args)
    policy_path = training_args.sft_model_path or model_args.model_name_or_path  # TRL's name for it, or ours
    if policy_path is None:  # with extras/, a run that names none is the default run
        sys.exit(f"error: --model_name_or_path is missing: name your model (a hub id or a folder); a run that names "
                 f"none is the default run, which reads {DEFAULT_RECIPE.relative_to(DEFAULT_RECIPE.parents[2])} and "
                 f"extras/, not beside {Path(__file__).name}")
    if script_args.dataset_name is None:  # TRL's default: a run that names its model names its prompts too
        sys.exit("error: --dataset_name is missing: give a .jsonl, .json, .csv or .parquet file, a folder, or a hub id")
    if checks:  # the run's paths, models, launch and packages, and what PPOTrainer would fail on late or ignore
        checks.check(script_args, training_args, model_args)
        extras_ppo.check_options(script_args, training_args)
    if run_folder:  # a new or empty folder, or the run it holds continued; `last`, the newest complete checkpoint
        training_args.resume_from_checkpoint = run_folder.prepare(training_args, script_args)
    if not script_args.eval_only:  # no weight that trains held in bf16 or fp16 under a plain optimizer
        check_precision(model_args, training_args, policy_path, script_args.value_model_path or policy_path,
                        script_args.trust_remote_code, "--bf16 true")

    ################
    # Dataset and tokenizer
    ################
    tokenizer = AutoTokenizer.from_pretrained(policy_path, revision=model_args.model_revision, padding_side="left",
                                              trust_remote_code=script_args.trust_remote_code)
    # What ends a completion: with --stop_token eos, every stop token of the model, not only the tokenizer's eos (Llama
    # 3 and Qwen list several); with --stop_token_id, that token; with neither, nothing (TRL's default)
    model_stops = stop_token_ids(tokenizer, policy_path)
    stops = model_stops if training_args.stop_token == "eos" else {training_args.stop_token_id} - {None}
    set_ppo_pad_token(tokenizer, model_stops | stops)  # PPOTrainer ends a completion at its first pad: no stop token
    with PartialState().main_process_first():  # one process prepares it, the others read its cache
        train_dataset, eval_dataset = load_prompts(script_args)
        if isinstance(train_dataset[0]["prompt"], list) and tokenizer.chat_template is None:
            sys.exit(f"error: the prompts are conversations (lists of messages, or --system_prompt made them so) and "
                     f"{policy_path}'s tokenizer has no chat template to render them")
        eval_source = f"split '{script_args.dataset_test_split}'"
        if script_args.eval_num_samples > 0:  # no test split: hold out a seeded 10% of train
            train_dataset, eval_dataset, eval_source = extra("evaluation", "--eval_num_samples").held_out(
                train_dataset, eval_dataset, script_args, training_args.seed)
        datasets = [d.map(lambda p: {"input_ids": prompt_ids(tokenizer, p)}, input_columns="prompt")
                    for d in (train_dataset, eval_dataset) if d is not None]
    train_dataset = datasets[0]
    eval_dataset = datasets[1] if len(datasets) > 1 else None
    check_prompts(datasets, tokenizer, training_args)

    ################
    # Rewards
    ################
    # The reward functions of rewards.py, as for GRPO, with the dataset's columns as kwargs; or a reward model
    try:
        if training_args.reward_model_path:
            reward_funcs = []
            check_reward_model(training_args.reward_model_path, script_args.trust_remote_code)
        else:
            reward_funcs = get_reward_funcs(script_args.reward_funcs, training_args.response_length, script_args)
            check_columns(reward_funcs, datasets, script_args.dataset_name)
        eval_reward_funcs = get_reward_funcs(script_args.eval_reward_funcs, training_args.response_length, script_args)
        check_columns(eval_reward_funcs, datasets, script_args.dataset_name)
    except ValueError as err:  # an unknown name, a module that does not import, a reward that could not score
        sys.exit(f"error: {err}")
    if checks:  # --metric_for_best_model: one of the held-out evaluation's, before anything loads
        checks.check_best_metric(training_args, script_args, reward_funcs + eval_reward_funcs,
                                 () if reward_funcs else ("reward_model",))
    names = [f.__name__ for f in reward_funcs] or ["reward_model"]
    if script_args.reward_weights is not None and len(script_args.reward_weights) != len(names):
        sys.exit(f"error: {len(script_args.reward_weights)} --reward_weights for {len(names)} rewards "
                 f"({', '.join(names)}): give one weight per reward")
    rows = rows_by_prompt(datasets, reward_funcs, tokenizer) if reward_funcs else {}

    ################
    # Models
    ################
    model_kwargs = dict(dtype=model_args.dtype, trust_remote_code=script_args.trust_remote_code,
                        attn_implementation=model_args.attn_implementation)
    revision = model_args.model_revision  # the policy's, and so its reference's and the value model's
    # QLoRA (--load_in_4bit/8bit): the policy's base is quantized; the value model trains in full, unquantized. A
    # quantization_config of None, passed, would load a checkpoint saved quantized (`*-bnb-4bit`) as if it were not
    quantization = {"quantization_config": get_quantization_config(model_args)} if model_args.load_in_4bit or (
        model_args.load_in_8bit) else {}
    policy = AutoModelForCausalLM.from_pretrained(policy_path, revision=revision, **quantization, **model_kwargs)
    # bitsandbytes on a CPU with AVX512-BF16 repacks a 4-bit layer the first time it runs in eval mode (the held-out
    # evaluation) for a matmul with no backward: no adapter got a gradient after it. Its plain one trains
    for module in policy.modules():
        if hasattr(module, "support_avx512bf16_for_cpu"):
            module.support_avx512bf16_for_cpu = False
    fit_to_tokenizer(policy, tokenizer)
    reward_model = None
    if training_args.reward_model_path:  # it reads the policy's token ids, as PPOTrainer feeds them, up to PPO's pad
        reward_model = AutoModelForSequenceClassification.from_pretrained(training_args.reward_model_path,
                                                                          num_labels=1, **model_kwargs)
        fit_to_tokenizer(reward_model, tokenizer)
    if script_args.eval_only:
        return extra("ppo", "--eval_only").evaluate_only(policy, reward_model, tokenizer, eval_dataset, eval_source,
                                                         reward_funcs + eval_reward_funcs, script_args, training_args,
                                                         stops)
    peft_config = get_peft_config(model_args)  # None unless --use_peft
    # The reference: a frozen copy of the starting policy; under LoRA, PPOTrainer disables the adapter instead
    ref_policy = None
    if peft_config is None:
        ref_policy = AutoModelForCausalLM.from_pretrained(policy_path, revision=revision, **model_kwargs)
    # The value model: the policy's transformer under a new one-output `score` head (extras/ppo.py says so in a line)
    value_path = script_args.value_model_path or policy_path
    with extras_ppo.new_value_head(value_path) if extras_ppo else nullcontext():
        value_model = AutoModelForSequenceClassification.from_pretrained(value_path, num_labels=1, revision=revision,
                                                                         **model_kwargs)
    if getattr(value_model, "hf_quantizer", None) is not None:  # a checkpoint saved quantized: the value model trains
        value_model = value_model.dequantize(dtype=torch.float32)  # in full, under a plain optimizer
    for model in (ref_policy, value_model):
        if model is not None:
            fit_to_tokenizer(model, tokenizer)
    if training_args.activation_checkpointing:  # trl 1.12's PPOTrainer reads the flag but never acts on it
        kwargs = dict(training_args.activation_checkpointing_kwargs or {})
        layers = kwargs.pop("every_n_layers", 1)
        offload = kwargs.pop("offload", False)
        for model in (policy, value_model):
            model.activation_checkpointing_enable(kwargs or None, every_n_layers=layers, offload=offload)
    # PPO samples the plain policy: no processors (a repetition_penalty) from its own config, put back to save
    shipped_generation_config = policy.generation_config
    policy.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)

    ################
    # Training
    ################
    # PPOTrainer adds the LoRA adapter itself. ZeRO-3 partitions every trained weight in one dtype, its mixed
    # precision's: there the adapter is made here, in the base's dtype, not peft's fp32, as trl 1.16's GRPOTrainer
    # makes it (TRL #6089); DeepSpeed's optimizer steps fp32 copies
    trained = policy
    zero3 = training_args.deepspeed_plugin is not None and training_args.deepspeed_plugin.zero_stage == 3
    if peft_config is not None and zero3:
        trained = get_peft_model(policy, peft_config, autocast_adapter_dtype=False)
        peft_config = None
    if training_args.bf16:  # PPOTrainer's accelerator takes its mixed precision from accelerate's launcher alone
        os.environ["ACCELERATE_MIXED_PRECISION"] = "bf16"
    # QLoRA in 4 bits under --bf16: trl 1.12 casts the policy's frozen embeddings and LM head to bf16, and its own
    # generation, outside autocast, fails on them (float != BFloat16): they go back to the dtype they loaded in
    cast_back = training_args.bf16 and getattr(policy, "is_loaded_in_4bit", False) and (
        training_args.deepspeed_plugin is None)  # DeepSpeed holds every weight in its own dtype
    loaded = [(param, param.dtype) for param in policy.parameters()] if cast_back else []
    trainer = PPOTrainerWithRewardLogs(
        args=training_args,
        processing_class=tokenizer,
        model=trained,
        ref_model=ref_policy,
        reward_model=RewardAdapter(tokenizer, rows, reward_funcs, script_args.reward_weights, reward_model, stops,
                                   training_args.missing_eos_penalty),
        value_model=value_model,
        train_dataset=train_dataset.select_columns(["input_ids"]),
        eval_dataset=eval_dataset.select_columns(["input_ids"]) if eval_dataset is not None else None,
        peft_config=peft_config,
    )
    for param, dtype in loaded:  # QLoRA under --bf16: back to the dtype it loaded in, as said above
        param.data = param.data.to(dtype)
    policy.generation_config.eos_token_id = sorted(stops) or None  # PPOTrainer set the tokenizer's eos alone
    evaluation = None
    if script_args.eval_num_samples > 0:  # held-out pass@k before and after, sampled as PPOTrainer samples
        evaluation = extra("ppo", "--eval_num_samples").evaluation(trainer, eval_dataset, eval_source,
                                                                    reward_funcs + eval_reward_funcs, script_args)
    if run_folder:  # checkpoints.json: the folder claimed as training begins, and what each checkpoint holds
        run_folder.keep_record(trainer)
    if outputs:  # metrics.jsonl, completions.jsonl, short logs, the no-signal watchdog; the clock
        outputs.record(trainer, script_args, samples=lambda: trainer.latest_records)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)

    ################
    # Save
    ################
    policy.generation_config = shipped_generation_config
    trainer.save_model(training_args.output_dir)  # the policy alone, or its LoRA adapter, and the tokenizer
    if summary:  # summary.json, reward_curve.png, training_curves.png and the closing summary
        summary.write(trainer, [script_args, training_args, model_args], "PPO", evaluation and evaluation.results)
    trainer.accelerator.wait_for_everyone()  # for the main process's writing: an early exit can take the rest down
    trainer.end()  # the trackers finished, the process group destroyed


class RewardAdapter(nn.Module):
    """The reward functions as a reward model, the only kind of reward trl 1.12's PPOTrainer takes.

    PPOTrainer scores a batch of rollouts with TRL's `get_reward(adapter, ids, pad_token_id, prompt_width)`, where
    `ids` holds each prompt (left-padded to the batch's longest, `prompt_width`) followed by its completion. It calls
    `adapter.backbone(ids, attention_mask)`, passes the last hidden states through `adapter.score`, and takes the value
    at each completion's last token as its reward. So `backbone` computes the reward and returns it at every position:
    it decodes each completion, finds its dataset row by the prompt's ids in `rows`, calls the reward functions with
    the row's columns, and adds up their values times `reward_weights` (a None counts 0, as in GRPOTrainer). `score`
    passes it on unchanged. PPOTrainer then takes the KL penalty off each token and learns from the result
    (docs/ppo.md).

    A completion that holds none of the run's `stops` never stopped: it loses `missing_eos_penalty`, here rather than
    in trl 1.12's PPOTrainer, which counts only the tokenizer's eos as a stop (PPOTrainerWithRewardLogs hands it on).

    get_reward does not pass `prompt_width` on to the model, so PromptWidths sets it as PPOTrainer draws each batch.
    With a reward model in place of the functions, `backbone` asks it, as get_reward would.
    """

    base_model_prefix = "backbone"  # get_reward calls getattr(model, model.base_model_prefix)

    def __init__(self, tokenizer, rows: dict, reward_funcs: list, reward_weights: list[float] | None = None,
                 reward_model: nn.Module | None = None, stops: set[int] = frozenset(),
                 missing_eos_penalty: float | None = None):
        super().__init__()
        self.tokenizer = tokenizer
        self.stops = set(stops)
        self.missing_eos_penalty = missing_eos_penalty
        self.rows = rows
        self.reward_funcs = reward_funcs
        self.reward_model = reward_model  # a submodule: PPOTrainer moves it to the device with the adapter
        self.names = [f.__name__ for f in reward_funcs] or ["reward_model"]
        self.weights = torch.tensor(reward_weights or [1.0] * len(self.names))
        self.score = nn.Identity()
        self.prompt_width = 0  # the current batch's, set by PromptWidths
        self.records = []  # each completion scored since the last log, for completions.jsonl and the reward logs

    @torch.no_grad()
    def backbone(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **kwargs) -> BaseModelOutput:
        width = self.prompt_width
        prompt_ids = [tuple(ids[mask.bool()].tolist())
                      for ids, mask in zip(input_ids[:, :width], attention_mask[:, :width])]
        ends = first_true_indices(attention_mask[:, width:] == 0).tolist()  # a completion ends at its first pad
        completion_ids = [ids[:end] for ids, end in zip(input_ids[:, width:].tolist(), ends)]
        texts = self.tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        if self.reward_model is not None:
            padded = input_ids.masked_fill(attention_mask == 0, self.tokenizer.pad_token_id)
            _, scores, _ = get_reward(self.reward_model, padded, self.tokenizer.pad_token_id, width)
            per_func = scores[:, None].cpu()  # (batch, 1)
        else:
            rows = [self.row(key) for key in prompt_ids]
            prompts = [row["prompt"] for row in rows]
            completions = [[{"role": "assistant", "content": text}] if isinstance(prompt, list) else text
                           for prompt, text in zip(prompts, texts)]  # conversational prompts, chat completions
            columns = {name: [row[name] for row in rows] for name in rows[0] if name not in ("prompt", "input_ids")}
            values = [run_reward(func, prompts=prompts, completions=completions, completion_ids=completion_ids,
                                 **columns) for func in self.reward_funcs]
            per_func = torch.tensor([[math.nan if v is None else v for v in column] for column in values]).T
        stopped = torch.tensor([bool(self.stops.intersection(ids)) for ids in completion_ids])
        for key, text, values, stop in zip(prompt_ids, texts, per_func.tolist(), stopped.tolist()):
            scored = {name: None if math.isnan(value) else value for name, value in zip(self.names, values)}
            self.records.append({"prompt": self.tokenizer.decode(key, skip_special_tokens=True), "completion": text,
                                 **scored, "stopped": stop})
        rewards = (per_func * self.weights).nansum(dim=1)  # sum_i w_i r_i, a None as 0
        if self.missing_eos_penalty is not None:
            rewards = rewards - self.missing_eos_penalty * (~stopped)
        rewards = rewards.to(input_ids.device)
        hidden = rewards[:, None, None].expand(-1, input_ids.shape[1], 1)  # (batch, length, 1): the reward everywhere
        return BaseModelOutput(hidden_states=(hidden,))

    def row(self, prompt_ids: tuple) -> dict:
        """The dataset row of a prompt, by its ids."""
        if prompt_ids not in self.rows:
            raise KeyError(f"no dataset row has the prompt {self.tokenizer.decode(prompt_ids)!r}")
        return self.rows[prompt_ids]


class PromptWidths:
    """PPOTrainer's dataloader, telling `adapter` the width of each batch's prompts as PPOTrainer draws the batch
    (PPOTrainer's collator left-pads them to the batch's longest)."""

    def __init__(self, dataloader, adapter: RewardAdapter):
        self.dataloader = dataloader
        self.adapter = adapter

    def __len__(self) -> int:
        return len(self.dataloader)

    def __iter__(self):
        for batch in self.dataloader:
            self.adapter.prompt_width = batch["input_ids"].shape[1]
            yield batch


class PPOTrainerWithRewardLogs(PPOTrainer):
    """PPOTrainer with the reward adapter's logs (`reward` and `rewards/<name>/mean`, as GRPOTrainer logs them), and
    what trl 1.12's PPOTrainer lacks: saving under DDP and DeepSpeed, resuming, and stopping when a callback asks."""

    is_distributed_loading_by_transformers = False  # read when saving; set by Trainer.__init__, which it skips

    def __init__(self, args: PPOConfig, **kwargs):
        with extra("ppo", "DeepSpeed").adapter_outside_deepspeed() if args.deepspeed_plugin else nullcontext():
            super().__init__(args=args, **kwargs)
        self.latest_records = []  # the last update's completions and their rewards, for completions.jsonl
        self.dataloader = PromptWidths(self.dataloader, self.reward_model)
        self.eval_dataloader = PromptWidths(self.eval_dataloader, self.reward_model)
        # PPOTrainer reads `policy` and `config` on self.model, which under DDP is torch's wrapper around them; set on
        # the wrapper's own __dict__, they are not registered as its submodules a second time
        unwrapped = self.accelerator.unwrap_model(self.model)
        if unwrapped is not self.model and not self.is_deepspeed_enabled:
            object.__setattr__(self.model, "policy", unwrapped.policy)
            object.__setattr__(self.model, "config", unwrapped.config)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "objective/scores" in logs:  # PPOTrainer's log of an update, on every process
            stopped = sum(record["stopped"] for record in self.reward_model.records)  # this process's, as TRL counts
            self.latest_records = gather_object(self.reward_model.records)
            self.reward_model.records = []
            for name in self.reward_model.names:  # None where no completion had one, as GRPOTrainer's nanmean
                values = [record[name] for record in self.latest_records if record[name] is not None]
                logs[f"rewards/{name}/mean"] = sum(values) / len(values) if values else None
            logs["reward"] = logs["objective/scores"]
            logs["val/num_eos_tokens"] = stopped  # completions that stopped, at any stop token (TRL's: at the eos)
        super().log(logs, start_time)

    def train(self, resume_from_checkpoint: str | None = None) -> None:
        if resume_from_checkpoint:  # both models, optimizer, counters, RNG states, the place in the data
            extra("ppo", "--resume_from_checkpoint").resume(self, resume_from_checkpoint)
        penalty = self.args.missing_eos_penalty
        self.args.missing_eos_penalty = None  # RewardAdapter applies it, at every stop token of the run
        try:
            if extras_ppo:  # it stops when a callback asks too (--stop_on_no_signal), which trl 1.12's loop never reads
                extras_ppo.train_until_asked(self, super().train)
            else:
                super().train()
        finally:
            self.args.missing_eos_penalty = penalty  # as the run was asked, for its records

    def generate_completions(self, sampling: bool = False) -> None:
        super().generate_completions(sampling)
        self.reward_model.records = []  # TRL's sample tables score eval prompts: no training reward

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        if self.is_deepspeed_enabled:  # trl 1.12 hands transformers the bare policy as the engine, and fails
            extra("ppo", "DeepSpeed").save_policy(self, output_dir or self.args.output_dir)
        else:  # the policy alone (and its tokenizer), our `policy` above under DDP
            super().save_model(output_dir, _internal_call)
        if _internal_call and extras_ppo:  # a checkpoint: the value model too, for --resume_from_checkpoint
            extras_ppo.save_value_model(self, output_dir)


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


def prompt_ids(tokenizer, prompt) -> list[int]:
    """A prompt's ids as GRPOTrainer makes them: the chat template, or the tokenizer with its special tokens."""
    return (tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True)
            if isinstance(prompt, list) else tokenizer(text=prompt))["input_ids"]


def rows_by_prompt(datasets: list, reward_funcs: list, tokenizer) -> dict:
    """Each prompt's ids -> its dataset row, which the reward functions read. Rows with one prompt may differ only in
    columns no reward reads (an `id`); else the run stops here, before any model loads."""
    read = set()  # the columns the rewards declare (rewards.reads), or every column for one that declares none
    for func in reward_funcs:
        columns = getattr(func, "columns", None)
        read |= {"*"} if columns is None else {n for c in columns for n in ([c] if isinstance(c, str) else c)}
    rows = {}
    for row in (row for dataset in datasets for row in dataset):
        key = tuple(row["input_ids"])
        kept = rows.setdefault(key, row)
        differ = sorted(k for k in row if k != "input_ids" and ("*" in read or k in read) and row[k] != kept.get(k))
        if differ:
            sys.exit(f"error: two dataset rows have the prompt {tokenizer.decode(key)!r} and different {differ}, "
                     "which the rewards read: drop the duplicates")
    return rows


def check_prompts(datasets: list, tokenizer, training_args) -> None:
    """Prompts PPOTrainer would mishandle, in one line each: too few for a rollout (its dataloader drops the last
    partial batch and would loop forever), a reward model with another tokenizer, or a prompt holding the pad token
    (which PPOTrainer takes for padding)."""
    rollout = (training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps
               * PartialState().num_processes)
    if len(datasets[0]) < rollout:
        sys.exit(f"error: the training split has {len(datasets[0])} prompts, fewer than one PPO rollout "
                 f"(per_device_train_batch_size x gradient_accumulation_steps x processes = {rollout}); use more "
                 "prompts or a smaller batch")
    if training_args.reward_model_path:
        probe = "The reward model reads the policy's token ids: 3 + 4 = 7."
        theirs = AutoTokenizer.from_pretrained(training_args.reward_model_path)
        if theirs(probe).input_ids != tokenizer(probe).input_ids:
            sys.exit(f"error: the reward model {training_args.reward_model_path} has a different tokenizer from the "
                     "policy's; PPOTrainer feeds it the policy's token ids, so they must share one")
    if any(tokenizer.pad_token_id in ids for d in datasets for ids in d["input_ids"]):
        sys.exit(f"error: a prompt holds the pad token {tokenizer.pad_token!r}, which PPO would mask out as padding "
                 "(the tokenizer writes it for text it does not know); clean the prompts")


def stop_token_ids(tokenizer, policy_path: str) -> set[int]:
    """The tokens that end a completion: the tokenizer's eos and the model's own (Llama 3 and Qwen list several)."""
    stops = {tokenizer.eos_token_id}
    with suppress(OSError):  # OSError: the model ships no generation config
        eos = GenerationConfig.from_pretrained(policy_path).eos_token_id
        stops |= set(eos if isinstance(eos, list) else [eos])
    return stops - {None}


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


def set_ppo_pad_token(tokenizer, stops: set[int]) -> None:
    """A pad that is no stop token: from the vocabulary (a pad, the unk, a reserved token; never the bos, a stop token
    or a token the chat template writes), else a new `<|pad|>`. (TRL's PPO example adds `[PAD]`: a new embedding
    row.)"""
    if tokenizer.pad_token is not None and tokenizer.pad_token_id not in stops:
        return
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else ""
    special = [t.content for i, t in sorted(tokenizer.added_tokens_decoder.items())
               if t.special and i not in stops | {tokenizer.bos_token_id} and t.content not in template]
    candidates = ([t for t in special if "pad" in t.lower()] + [t for t in special if t == tokenizer.unk_token]
                  + [t for t in special if "reserved" in t.lower()])
    was = "none" if tokenizer.pad_token is None else f"{tokenizer.pad_token!r}, the eos"
    if candidates:
        tokenizer.pad_token = candidates[0]
    else:  # the models grow one embedding row, which a LoRA adapter then saves
        tokenizer.add_special_tokens({"pad_token": "<|pad|>"})
    if PartialState().is_main_process:
        print(f"PPO pads with {tokenizer.pad_token!r} (id {tokenizer.pad_token_id}), "
              f"{'a token of the vocabulary' if candidates else 'a new token (one new embedding row)'} that is no "
              f"stop token (the tokenizer's pad: {was})")


def fit_to_tokenizer(model, tokenizer) -> None:
    """The tokenizer's pad token on `model`: an embedding row if set_ppo_pad_token added one, and its id, which a
    sequence classifier (value or reward model) reads to find a completion's last token."""
    if model.get_input_embeddings().num_embeddings < len(tokenizer):
        model.resize_token_embeddings(len(tokenizer))
    model.config.pad_token_id = tokenizer.pad_token_id


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


def make_parser() -> TrlParser:
    """TRL's configs, with a CPU's defaults where there is no GPU, and a completion that ends at its stop token."""
    # allow_abbrev=False: a flag short of its last letters (--learning_rat) is an unknown one, not the flag it begins
    parser = TrlParser((PPOScriptArguments, PPOConfig, ModelConfig), allow_abbrev=False)
    # bf16 mixed precision, which PPOTrainer takes from accelerate's launcher (main() passes --bf16 on), is TRL's
    # default on a GPU, where PPOTrainer never read it and trained in fp32, as it still does unless asked, on a CPU
    # too: even where the CPU computes bf16, PPO's LoRA recipe learned less reliably in it (BENCHMARKS.md, section 27).
    # TRL's other defaults are a GPU's: here the CPU (gloo between processes)
    parser.set_defaults(bf16=False)
    if not torch.cuda.is_available():
        parser.set_defaults(use_cpu=True)
    parser.set_defaults(activation_checkpointing=torch.cuda.is_available(), gradient_checkpointing=None,
                        sft_model_path=None, reward_model_path=None)  # PPOConfig's are hub models: a run names its own
    # A completion ends at its first stop token. TRL's default (None) generates past it, and the reward would score
    # the model's invented next turns; `stop_token: null` in a recipe asks for that (with extras/, `--stop_token
    # none` too), and --stop_token_id N for a token of one's own
    parser.set_defaults(stop_token="eos")
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
    if training_args.stop_token_id is not None:  # a stop token of one's own replaces the default, --stop_token eos
        training_args.stop_token = None
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
          "no-signal warning, DeepSpeed, resume or one-sentence checks")
    parsed = parse_refusing(make_parser(), REFUSED, args)
    if parsed[0].stop_on_no_signal:  # the no-signal watchdog, which would stop the run, is extras/watchdogs.py's
        extra("watchdogs", "--stop_on_no_signal")
    if parsed[1].save_total_limit and list(Path(parsed[1].output_dir).glob("checkpoint-*")):  # transformers' rotation
        extra("run_folder", "--save_total_limit in a folder with checkpoints")  # takes any: run_folder.py knows whose
    return parsed


if __name__ == "__main__":
    if runtime:  # upstream notices silenced, Ctrl-C in one line that says which checkpoint is kept, a refusal said once
        runtime.run(main, parse_args)  # per launch, the trainer freed
    else:
        main(*parse_args())
