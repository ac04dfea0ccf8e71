"""PPO with TRL's PPOTrainer: a template to copy.

    python ppo_trl_example.py       # the bundled tiny model learns addition on a CPU, in under a minute
    python ppo_trl_example.py --config recipes/SmolLM2-135M-Instruct/ppo/config_chat_addition_lora.yaml
    accelerate launch --config_file accelerate_configs/ddp.yaml --num_processes 8 ppo_trl_example.py \\
        --config recipes/Qwen2.5-0.5B-Instruct/ppo/config_gsm8k.yaml

A run without --config takes its settings from recipes/tiny/ppo.yaml; with one, from that recipe over TRL's
defaults. Every option is a flag and a recipe key, and a flag wins (docs/options.md, docs/ppo.md).

PPO (Schulman et al. 2017; for language models, Ziegler et al. 2019): the policy samples one completion per prompt;
each token's reward carries -kl_coef * (log pi - log pi_ref) to a frozen reference (under LoRA, the policy with its
adapter off), and the completion's score arrives at its last token; a value model (the policy's transformer under a
new one-output `score` head) predicts the reward to come, for GAE's advantages (Schulman et al. 2016, Eq. 16); the
policy takes num_ppo_epochs passes of the clipped surrogate (Schulman et al. 2017, Eq. 7). PPOTrainer does all of
it, but takes only a reward *model*: RewardAdapter below dresses rewards.py's functions up as one.

To start your own, copy this file with rewards.py: the two train your model on your data with every TRL option.
Copy extras/ too for the held-out evaluation, the run's records and plots, the code sandbox, and checks that stop a
mistake in one sentence. The default run also reads

    recipes/tiny/ppo.yaml assets/tiny-llama-addition assets/addition
"""

import gc
import math
import sys
import warnings
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml
from accelerate import PartialState
from accelerate.utils import gather_object
from datasets import load_dataset
from torch import nn
from transformers import (AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer,
                          DataCollatorWithPadding, GenerationConfig, set_seed)
from transformers.modeling_outputs import BaseModelOutput
from trl import ModelConfig, ScriptArguments, TrlParser, get_peft_config

from rewards import RewardArguments, get_reward_funcs

with warnings.catch_warnings():  # PPOTrainer is in trl.experimental in trl 1.12 (gone in 1.13): its notice says nothing
    warnings.filterwarnings("ignore", message="You are importing from 'trl.experimental'")
    from trl.experimental.ppo import PPOConfig, PPOTrainer
    from trl.experimental.utils import first_true_indices, get_reward

try:  # one-sentence checks, and the run's records and plots; a copy with rewards.py alone trains without them
    from extras import cli, outputs, ppo as extras_ppo
except ModuleNotFoundError as missing:
    if missing.name != "extras":
        raise
    cli = outputs = extras_ppo = None

HERE = Path(__file__).resolve().parent
DEFAULT_RECIPE = HERE / "recipes" / "tiny" / "ppo.yaml"  # a run without --config: the bundled tiny model, addition

# Options that would train silently wrong here, refused with the reason (those PPOTrainer's own loop never reads are
# refused too: extras/cli.py; tests/unit/test_options.py sorts every option into acting or refused)
REFUSED = {
    "max_steps": "PPOTrainer ignores it: set --total_episodes, the prompts sampled in all (PPO updates x "
                 "per_device_train_batch_size x gradient_accumulation_steps x processes)",
    "remove_unused_columns": "the script passes PPOTrainer only the input_ids column",
    "dataset_streaming": "the script tokenizes the dataset whole; take a slice with --dataset_train_split 'train[:10%]'",
    "resume_from_checkpoint": "trl 1.12's PPOTrainer cannot resume from a checkpoint (trl #2657): it restores neither "
                              "the value model nor the optimizer. Start the run again, or use GRPO, which resumes",
    **dict.fromkeys(["load_in_4bit", "load_in_8bit"], "the value model trains in full: QLoRA is GRPO's"),
    **dict.fromkeys(["tools", "environment_factory"], "PPOTrainer generates in one turn: tool calling is GRPO's"),
    **dict.fromkeys(["gradient_checkpointing", "gradient_checkpointing_kwargs"], "it is the old name of "
                    "--activation_checkpointing(_kwargs), which wins over it: set that"),
}


@dataclass
class PPOScriptArguments(ScriptArguments, RewardArguments):
    """The script's own options, on top of TRL's ScriptArguments (dataset_name, ...) and the rewards'. PPOConfig
    has --sft_model_path (the policy), --reward_model_path and the PPO settings."""

    reward_weights: list[float] | None = field(default=None, metadata={"help": "Each reward's weight (default 1)."})
    value_model_path: str | None = field(default=None, metadata={"help": "Default: the policy, with a new value head."})
    trust_remote_code: bool = field(default=False, metadata={"help": "Allow models that run their own code."})
    dataset_prompt_column: str = field(default="prompt", metadata={"help": "The prompt column, renamed `prompt`."})
    dataset_answer_column: str | None = field(default=None, metadata={"help": "The gold's, renamed `answer`."})
    system_prompt: str | None = field(default=None, metadata={"help": "A system message before every prompt."})
    eval_num_samples: int = field(default=0, metadata={"help": "K > 0: held-out pass@K before and after (extras/)."})
    eval_max_prompts: int = field(default=256, metadata={"help": "Evaluate at most this many held-out prompts."})
    eval_only: bool = field(default=False, metadata={"help": "Evaluate --model_name_or_path (or its adapter) only."})
    no_signal_patience: int = field(default=5, metadata={"help": "Warn after this many updates without signal."})
    stop_on_no_signal: bool = field(default=False, metadata={"help": "Stop cleanly at that warning."})
    tools: list[str] = field(default_factory=list, metadata={"help": "Refused: tool calling is GRPO's."})
    environment_factory: str | None = field(default=None, metadata={"help": "Refused, as --tools."})


def main(script_args: PPOScriptArguments, training_args: PPOConfig, model_args: ModelConfig):
    set_seed(training_args.seed)  # before any weights load: it fixes the value head's, and an added pad token's, start
    training_args.report_to = [n.strip() for e in training_args.report_to for n in e.split(",") if n.strip()]  # a,b
    if cli:  # the run's paths, models, launch and packages, and what PPOTrainer would fail on late or ignore
        cli.check(script_args, training_args, model_args)
        extras_ppo.check_options(script_args, training_args)
    # The policy is --sft_model_path when set (TRL's name), else --model_name_or_path; its tokenizer comes with it
    policy_path = training_args.sft_model_path or model_args.model_name_or_path

    ################
    # Dataset and tokenizer
    ################
    tokenizer = AutoTokenizer.from_pretrained(policy_path, revision=model_args.model_revision, padding_side="left",
                                              trust_remote_code=script_args.trust_remote_code)
    set_ppo_pad_token(tokenizer, policy_path)  # PPOTrainer ends a completion at its first pad: not the eos
    with PartialState().main_process_first():  # one process prepares it, the others read its cache
        train_dataset, eval_dataset = load_prompts(script_args)
        if isinstance(train_dataset[0]["prompt"], list) and tokenizer.chat_template is None:
            sys.exit(f"error: the prompts are conversations, but {policy_path}'s tokenizer has no chat template; use "
                     "plain-text prompts and no --system_prompt")
        eval_source = f"split '{script_args.dataset_test_split}'"
        if script_args.eval_num_samples > 0:  # no test split: hold out a seeded 10% of train
            train_dataset, eval_dataset, eval_source = extra("evaluation", "--eval_num_samples").held_out(
                train_dataset, eval_dataset, script_args, training_args.seed)
        datasets = [d.map(lambda p: {"input_ids": prompt_ids(tokenizer, p)}, input_columns="prompt")
                    for d in (train_dataset, eval_dataset) if d is not None]
    train_dataset, eval_dataset = datasets[0], datasets[1] if len(datasets) > 1 else None
    if cli:
        extras_ppo.check_prompts(datasets, tokenizer, training_args)

    ################
    # Rewards
    ################
    # The reward functions of rewards.py, as for GRPO, with the dataset's columns as kwargs; or a reward model
    try:
        reward_funcs = [] if training_args.reward_model_path else get_reward_funcs(
            script_args.reward_funcs, training_args.response_length, script_args)
    except ValueError as err:  # an unknown name, a module that does not import
        sys.exit(f"error: {err}")
    if cli:
        cli.check_columns(reward_funcs, datasets, script_args.dataset_name)

    ################
    # Models
    ################
    model_kwargs = dict(revision=model_args.model_revision, dtype=model_args.dtype,
                        attn_implementation=model_args.attn_implementation,
                        trust_remote_code=script_args.trust_remote_code)
    policy = AutoModelForCausalLM.from_pretrained(policy_path, **model_kwargs)
    fit_to_tokenizer(policy, tokenizer)
    if script_args.eval_only:
        return extra("ppo", "--eval_only").evaluate_only(policy, tokenizer, eval_dataset, eval_source, reward_funcs,
                                                         script_args, training_args)
    peft_config = get_peft_config(model_args)  # None unless --use_peft
    # The reference: a frozen copy of the starting policy; under LoRA, PPOTrainer disables the adapter instead
    ref_policy = AutoModelForCausalLM.from_pretrained(policy_path, **model_kwargs) if peft_config is None else None
    # The value model: the policy's transformer under a new one-output `score` layer, the value head (whose load
    # report, calling the head missing, extras/ppo.py puts in one line)
    value_path = script_args.value_model_path or policy_path
    with extras_ppo.new_value_head(value_path) if extras_ppo else nullcontext():
        value_model = AutoModelForSequenceClassification.from_pretrained(value_path, num_labels=1, **model_kwargs)
    reward_model = None
    if training_args.reward_model_path:  # it reads the policy's ids: PPOTrainer hands it them
        reward_model = AutoModelForSequenceClassification.from_pretrained(
            training_args.reward_model_path, num_labels=1, **{k: v for k, v in model_kwargs.items() if k != "revision"})
        if PartialState().is_main_process:
            print(f"scoring with the reward model {training_args.reward_model_path}; --reward_funcs is not used")
    for model in (ref_policy, value_model, reward_model):
        if model is not None:
            fit_to_tokenizer(model, tokenizer)
    if training_args.activation_checkpointing:  # trl 1.12's PPOTrainer reads the flag but never acts on it
        kwargs = dict(training_args.activation_checkpointing_kwargs or {})
        layers, offload = kwargs.pop("every_n_layers", 1), kwargs.pop("offload", False)
        for model in (policy, value_model):
            model.activation_checkpointing_enable(kwargs or None, every_n_layers=layers, offload=offload)
    # PPO scores samples with the plain policy: none of the processors (a repetition_penalty) the model may ship,
    # while it trains; its own config is put back before it is saved
    shipped_generation_config, policy.generation_config = policy.generation_config, plain_generation_config(tokenizer)

    ################
    # Training
    ################
    # Every prompt is left-padded to the longest, so the reward adapter knows where each completion starts
    prompt_width = max(len(ids) for d in datasets for ids in d["input_ids"])
    trainer = PPOTrainerWithRewardLogs(
        args=training_args,
        processing_class=tokenizer,
        model=policy,
        ref_model=ref_policy,
        reward_model=RewardAdapter(tokenizer, datasets, prompt_width, reward_funcs, script_args.reward_weights,
                                   reward_model),
        value_model=value_model,
        train_dataset=train_dataset.select_columns(["input_ids"]),
        eval_dataset=eval_dataset.select_columns(["input_ids"]) if eval_dataset is not None else None,
        data_collator=DataCollatorWithPadding(tokenizer, padding="max_length", max_length=prompt_width),
        peft_config=peft_config,
    )
    evaluation, recorder = None, None
    if script_args.eval_num_samples > 0:  # held-out pass@k before and after training, sampled as training samples
        evaluation = extra("ppo", "--eval_num_samples").evaluation(trainer, eval_dataset, eval_source, reward_funcs,
                                                                   script_args)
        trainer.add_callback(evaluation)
    if outputs:  # metrics.jsonl, completions.jsonl, short logs, the no-signal watchdog
        recorder = outputs.record(trainer, script_args, samples=lambda: trainer.latest_records)
    start = outputs.start(trainer) if outputs else None
    trainer.train()

    ################
    # Save
    ################
    policy.generation_config = shipped_generation_config
    trainer.save_model(training_args.output_dir)  # the policy alone, or its LoRA adapter, and the tokenizer
    if outputs:  # summary.json, reward_curve.png, training_curves.png and the closing summary
        outputs.summarize(trainer, recorder, start, [script_args, training_args, model_args], "PPO",
                          evaluation and evaluation.results)
    # Every process waits for the main one to write, then all leave together: an early exit can take the rest down
    trainer.accelerator.wait_for_everyone()
    trainer.accelerator.end_training()


class RewardAdapter(nn.Module):
    """Reward functions as the reward model trl 1.12's PPOTrainer takes. Its `get_reward` runs
    `getattr(model, model.base_model_prefix)(input_ids, attention_mask)`, passes the last hidden state through
    `model.score` and reads it at each completion's end: here `backbone` decodes each row, finds its dataset row by the
    prompt's ids (left-padded to `prompt_width`), and returns the rewards' weighted sum (None as 0, as GRPOTrainer's
    nansum) at every position; `score` is the identity. With a reward model, `backbone` runs get_reward on it."""

    base_model_prefix = "backbone"

    def __init__(self, tokenizer, datasets, prompt_width: int, reward_funcs=(), reward_weights=None, reward_model=None):
        super().__init__()
        self.tokenizer, self.prompt_width, self.reward_funcs = tokenizer, prompt_width, list(reward_funcs)
        self.reward_model = reward_model  # a submodule: PPOTrainer moves it to the device with the adapter
        self.names = [f.__name__ for f in self.reward_funcs] or ["reward_model"]
        self.weights = torch.tensor(reward_weights or [1.0] * len(self.names))
        self.config = reward_model.config if reward_model is not None else None  # read by TRL under DeepSpeed
        self.score, self.records, self.rows = nn.Identity(), [], {}
        for row in (row for dataset in datasets for row in dataset) if reward_funcs else ():
            if self.rows.setdefault(key := tuple(row["input_ids"]), row) != row:  # one prompt, two rows
                raise ValueError(f"two dataset rows have the prompt {tokenizer.decode(key)!r} but different "
                                 f"{sorted(k for k in row if row[k] != self.rows[key].get(k))}; PPO's batches carry "
                                 "only token ids, so the rewards could not tell them apart. Drop the duplicates.")

    @torch.no_grad()
    def backbone(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **kwargs) -> BaseModelOutput:
        rewards = self.score_rows(input_ids, attention_mask)
        return BaseModelOutput(hidden_states=(rewards[:, None, None].expand(-1, input_ids.shape[1], 1),))

    def score_rows(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        width = self.prompt_width
        prompt_ids = [tuple(i for i, m in zip(ids, mask) if m)
                      for ids, mask in zip(input_ids[:, :width].tolist(), attention_mask[:, :width].tolist())]
        lengths = first_true_indices(attention_mask[:, width:] == 0).tolist()  # to the first pad, as get_reward
        completion_ids = [ids[:n] for ids, n in zip(input_ids[:, width:].tolist(), lengths)]
        texts = self.tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        if self.reward_model is not None:
            padded = input_ids.masked_fill(attention_mask == 0, self.tokenizer.pad_token_id)
            per_func = get_reward(self.reward_model, padded, self.tokenizer.pad_token_id, width)[1].float().cpu()[:, None]
        else:
            if missing := [key for key in prompt_ids if key not in self.rows]:
                raise KeyError(f"no dataset row has the prompt {self.tokenizer.decode(missing[0])!r}")
            rows = [self.rows[key] for key in prompt_ids]
            prompts = [row["prompt"] for row in rows]
            completions = [[{"role": "assistant", "content": t}] if isinstance(p, list) else t
                           for p, t in zip(prompts, texts)]
            columns = {k: [row[k] for row in rows] for k in rows[0] if k not in ("prompt", "input_ids")}
            per_func = torch.tensor([[math.nan if r is None else r for r in func(
                prompts=prompts, completions=completions, completion_ids=completion_ids, **columns)]
                for func in self.reward_funcs]).T  # (batch, rewards), None as NaN
        self.records += [{"prompt": self.tokenizer.decode(key, skip_special_tokens=True), "completion": text,
                          **{n: None if math.isnan(v) else v for n, v in zip(self.names, values)}}
                         for key, text, values in zip(prompt_ids, texts, per_func.tolist())]
        return (per_func * self.weights).nansum(dim=1).to(input_ids.device)  # sum_i w_i r_i, skipping None

    def take_records(self) -> list[dict]:
        records, self.records = self.records, []
        return records


class PPOTrainerWithRewardLogs(PPOTrainer):
    """PPOTrainer that logs as GRPOTrainer does (`reward`, its own `objective/scores`, and `rewards/<name>/mean`,
    over every process's completions, kept for completions.jsonl), saves the unwrapped policy (trl 1.12 hands DDP's
    wrapper to its save), exposes the policy to the reference forward under LoRA and DDP, and stops when a callback
    asks (its loop never reads `should_training_stop`), finishing the update as its loop would."""

    latest_records: list[dict] = []
    is_distributed_loading_by_transformers = False  # read when saving; set by Trainer.__init__, which it skips

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if (unwrapped := self.accelerator.unwrap_model(self.model)) is not self.model:  # not a submodule: a name
            object.__setattr__(self.model, "policy", unwrapped.policy)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "objective/scores" in logs:  # once per update, on every process
            self.latest_records = gather_object(self.reward_model.take_records())
            names = self.reward_model.names
            values = torch.tensor([[math.nan if r[n] is None else r[n] for n in names] for r in self.latest_records])
            sums, counts = values.reshape(-1, len(names)).nansum(0), (~values.isnan()).reshape(-1, len(names)).sum(0)
            logs = {**logs, "reward": logs["objective/scores"], **{f"rewards/{n}/mean": s / c if c else None for n, s, c
                                                                   in zip(names, sums.tolist(), counts.tolist())}}
        super().log(logs, start_time)
        if self.control.should_training_stop:
            raise _StopTraining

    def train(self) -> None:
        try:
            super().train()
        except _StopTraining:  # the update was logged: finish it as the loop does, as a run's last update
            self.lr_scheduler.step()
            self.control = self.callback_handler.on_step_end(self.args, self.state, self.control)
            self.control.should_save |= self.args.save_strategy == "steps"
            self.control = self.callback_handler.on_train_end(self.args, self.state, self.control)
            if self.control.should_save:
                self._save_checkpoint(self.model, trial=None)
                self.control = self.callback_handler.on_save(self.args, self.state, self.control)

    def generate_completions(self, sampling: bool = False) -> None:
        super().generate_completions(sampling)
        self.reward_model.take_records()  # TRL's sample tables score eval prompts: no training reward

    @contextmanager
    def _unwrapped(self):
        wrapped = self.model
        self.model = self.model if self.is_deepspeed_enabled else self.accelerator.unwrap_model(self.model)
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


class _StopTraining(Exception):
    """Leaves PPOTrainer's loop early (PPOTrainerWithRewardLogs)."""


def load_prompts(args: PPOScriptArguments):
    """--dataset_name (a hub id, a folder, or one .jsonl/.json/.csv/.parquet file) -> the train and test splits (None
    where there is none; a split may be sliced, `train[:10%]`), with `prompt` and `answer` columns."""
    path, builders = Path(args.dataset_name), {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}
    source = dict(path=builders[path.suffix], data_files=str(path)) if path.suffix in builders else dict(
        path=args.dataset_name, name=args.dataset_config)
    try:  # an unknown split or column: datasets' message names those there are
        splits = [load_dataset(**source, split=args.dataset_train_split)]
        try:
            splits.append(load_dataset(**source, split=args.dataset_test_split))
        except ValueError:  # no such split
            splits.append(None)
        for flag, name in [("dataset_prompt_column", "prompt"), ("dataset_answer_column", "answer")]:
            for i, split in enumerate(splits):
                if (column := getattr(args, flag)) not in (None, name) and split is not None:
                    if column not in split.column_names:
                        sys.exit(f"error: --{flag} {column}: no such column in {args.dataset_name}; its columns are: "
                                 f"{', '.join(split.column_names)}")
                    splits[i] = split.remove_columns([c for c in [name] if c in split.column_names]).rename_column(
                        column, name)
    except ValueError as err:
        sys.exit(f"error: --dataset_name {args.dataset_name}: {err}")
    if args.system_prompt:  # prompts become conversations, with the system message first
        system = [{"role": "system", "content": args.system_prompt}]
        splits = [s.map(lambda p: {"prompt": system + (p if isinstance(p, list) else [{"role": "user", "content": p}])},
                        input_columns="prompt") if s is not None else None for s in splits]
    return splits


def prompt_ids(tokenizer, prompt) -> list[int]:
    """A prompt's ids as GRPOTrainer makes them: the chat template, or the tokenizer with its special tokens."""
    if isinstance(prompt, list):
        return tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True,
                                             return_dict=True)["input_ids"]
    return tokenizer(text=prompt)["input_ids"]


def set_ppo_pad_token(tokenizer, policy_path: str) -> None:
    """A pad that is no stop token, from the vocabulary where it can be (no new embedding row: a LoRA adapter stays
    small): one named for padding, the unknown token, a reserved one; never the bos, an eos, or a token the chat
    template writes. Else a new `<|pad|>`. (TRL's PPO example adds `[PAD]`, and works only with spare embedding rows.)"""
    stops = {tokenizer.eos_token_id}
    try:  # the model's own stop tokens (Llama 3 and Qwen3 list several)
        eos = GenerationConfig.from_pretrained(policy_path).eos_token_id
        stops |= set(eos if isinstance(eos, list) else [eos])
    except OSError:  # no generation_config.json
        pass
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
        message = (f"PPO pads with {tokenizer.pad_token!r} (id {tokenizer.pad_token_id}), a token of the vocabulary "
                   f"that is no stop token (the tokenizer's pad: {was})")
    else:
        tokenizer.add_special_tokens({"pad_token": "<|pad|>"})
        message = (f"PPO pads with a new token '<|pad|>' (the tokenizer's pad: {was}, and the vocabulary has no "
                   "unused special token): the models grow one embedding row, which a LoRA adapter then saves")
    if PartialState().is_main_process:
        print(message)


def fit_to_tokenizer(model, tokenizer) -> None:
    """The tokenizer's pad token on `model`: an embedding row if set_ppo_pad_token added one, and its id."""
    if model.get_input_embeddings().num_embeddings < len(tokenizer):
        model.resize_token_embeddings(len(tokenizer))
    model.config.pad_token_id = tokenizer.pad_token_id


def plain_generation_config(tokenizer) -> GenerationConfig:
    """The policy's generation config while PPO samples: its special tokens, and no processors."""
    return GenerationConfig(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                            pad_token_id=tokenizer.pad_token_id)


def extra(name: str, flag: str):
    """extras/<name>.py, which `flag` needs: a copy of this script without the folder stops in one sentence."""
    import importlib

    try:
        return importlib.import_module(f"extras.{name}")
    except ModuleNotFoundError as missing:
        if missing.name not in ("extras", f"extras.{name}"):
            raise
        raise SystemExit(f"error: {flag} needs extras/{name}.py beside {Path(__file__).name}: copy the extras/ "
                         "folder from the repository") from None


def make_parser(default_run: bool = True) -> TrlParser:
    """The command line: TRL's configs, the CPU's defaults where there is no GPU, and for the default run (no
    --config) recipes/tiny/ppo.yaml, its bundled model and data found from this folder wherever the run starts."""
    parser = TrlParser((PPOScriptArguments, PPOConfig, ModelConfig))
    if not torch.cuda.is_available():  # TRL's defaults are a GPU's: here the CPU, in fp32 (and gloo between processes)
        parser.set_defaults(use_cpu=True, bf16=False)
    parser.set_defaults(activation_checkpointing=torch.cuda.is_available(), gradient_checkpointing=None)
    parser.set_defaults(sft_model_path=None, reward_model_path=None)  # PPOConfig's are hub models: a run names its own
    if default_run:
        if not DEFAULT_RECIPE.is_file():
            sys.exit(f"error: a run without --config reads {DEFAULT_RECIPE.relative_to(HERE)}, which is not beside "
                     f"{Path(__file__).name}: copy it from the repository, or name your own recipe with --config")
        recipe = yaml.safe_load(DEFAULT_RECIPE.read_text())
        parser.set_defaults_with_config(**{**recipe, **{k: str(HERE / recipe[k]) for k in ("model_name_or_path",
                                                                                          "dataset_name")}})
    return parser


if __name__ == "__main__":
    parser = make_parser(default_run="--config" not in sys.argv)
    if cli:  # one-sentence errors, the nearest option to a mistyped one, refusals, a readable --help
        script_args, training_args, model_args = cli.parse(parser, REFUSED)
    else:
        script_args, training_args, model_args = parser.parse_args_and_config()
    main(script_args, training_args, model_args)
    gc.collect()  # free the trainer while Python is whole: freed at shutdown, gloo can abort it (pytorch#179291)
