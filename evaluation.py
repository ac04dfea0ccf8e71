"""Held-out evaluation before and after training: mean reward, greedy accuracy, pass@k and maj@k.

Both training scripts add `BeforeAfterEval` as a callback when `--eval_num_samples K` is set. When training
starts and when it ends it samples K completions per eval prompt exactly as training samples them, plus one greedy
completion, and scores them with the training rewards (reward functions and reward models alike).

- The prompts are the token ids training feeds the model (`prompt_token_ids`): the same special tokens (a
  BOS for Llama-style tokenizers) and the same chat template (its default system prompt included).
- The sampling is the trainer's own: each script hands over the `GenerationConfig` its trainer generates with
  (temperature, top_p, top_k, min_p, repetition_penalty, generation_kwargs, length, stop tokens) and how the trainer
  cuts a completion (`Sampling`). A model's own `generation_config.json` fills only what that config leaves unset, in
  evaluation as in training, because `generate` merges them the same way for both. Greedy is that config with
  sampling off.
- Every process evaluates its own slice of the prompts and the results are gathered, so a long eval does not
  keep the other ranks waiting. Generation runs inside TRL's `unwrap_model_for_generation`, as the trainers'
  own does, which gathers ZeRO-3 weights; FSDP2 and ZeRO-3 let `generate` keep the ranks in step.

For every reward that declares itself a correctness reward (`rewards.reward_spec(correctness=True)`: 1.0 exactly
when the completion is right, such as `accuracy` and `code`) it also reports:
    greedy_accuracy  fraction of prompts whose greedy completion is right
    pass@1, pass@k   the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models
                     Trained on Code", Eq. 1): the chance that at least one of k samples is right
    maj@k            fraction of prompts where the most common final answer among the k samples is right
                     (for rewards that also declare how to read a final answer, such as `accuracy`)
Other rewards get their mean over the samples and over the greedy completions.
"""

import copy
import json
import math
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from accelerate import PartialState
from accelerate.utils import gather_object
from transformers import GenerationConfig, TrainerCallback
from trl.data_utils import apply_chat_template, is_conversational


def prompt_token_ids(tokenizer, prompt, chat_template_kwargs: dict | None = None) -> list[int]:
    """The token ids a trainer feeds the model for one prompt.

    As trl 1.12's GRPOTrainer tokenizes prompts (`_tokenize_prompts`): a conversation goes through the chat
    template, ending with the assistant's turn; plain text through the tokenizer with its special tokens, so a
    tokenizer that adds BOS adds it here too. The PPO script tokenizes its prompts with this function.
    """
    if is_conversational({"prompt": prompt}):
        return tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True,
                                             **(chat_template_kwargs or {}))["input_ids"]
    return tokenizer(text=prompt)["input_ids"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct: 1 - C(n-c, k) / C(n, k) (Chen et al. 2021, Eq. 1).

    >>> pass_at_k(n=8, c=2, k=1), pass_at_k(n=8, c=0, k=8), pass_at_k(n=8, c=1, k=8)
    (0.25, 0.0, 1.0)
    """
    if n - c < k:
        return 1.0
    # The product form avoids huge binomials: C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k / i)
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def majority_answer(texts: list[str], final_answer) -> int | None:
    """Index of a sample carrying the most common final answer, or None if no sample has one.

    >>> from rewards import extract_answer
    >>> majority_answer(["so 4", "it is 5", "4"], extract_answer)
    0
    """
    answers = [final_answer(t) for t in texts]
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return None
    best = counts.most_common(1)[0][0]
    return answers.index(best)


@dataclass
class Sampling:
    """How a trainer samples a completion: the `GenerationConfig` it passes to `generate`, and `end`, which cuts a
    generated row of token ids to the completion the trainer keeps (e.g. up to and including the first eos)."""

    config: GenerationConfig
    end: Callable[[list[int]], list[int]]

    def greedy(self) -> "Sampling":
        """The same settings with sampling off: the most likely token at each step, after the same logits
        processors (a repetition_penalty, for one) as training applies."""
        config = copy.deepcopy(self.config)
        config.do_sample = False
        config.temperature = config.top_p = config.top_k = config.min_p = None  # settings of sampling alone
        return Sampling(config, self.end)

    def describe(self) -> dict:
        """The settings that shape a sample, for eval.json."""
        keys = ("do_sample", "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "max_new_tokens",
                "eos_token_id")
        return {key: getattr(self.config, key, None) for key in keys}


def up_to_first(stop_ids) -> Callable[[list[int]], list[int]]:
    """`end` for a trainer that keeps a completion up to and including its first stop token (GRPOTrainer's mask)."""
    stops = set(stop_ids if isinstance(stop_ids, (list, tuple, set)) else [stop_ids]) - {None}

    def end(ids: list[int]) -> list[int]:
        for i, token in enumerate(ids):
            if token in stops:
                return ids[: i + 1]
        return ids

    return end


@torch.no_grad()
def generate(model, tokenizer, prompt_ids: list[list[int]], num_samples: int, sampling: Sampling,
             batch_size: int) -> tuple[list[list[str]], list[list[list[int]]]]:
    """Generate `num_samples` completions per prompt with the trainer's `sampling`, at most `batch_size` completions
    per `generate` call (--per_device_eval_batch_size; at least one prompt's).

    Returns texts and token ids, both indexed [prompt][sample]. As in the trainers, a completion's ids are what
    `sampling.end` keeps, and its text is decoded without special tokens.
    """
    device = next(model.parameters()).device
    config = copy.deepcopy(sampling.config)
    config.num_return_sequences = num_samples
    prompts_per_call = max(1, batch_size // num_samples)
    texts, ids = [], []
    for start in range(0, len(prompt_ids), prompts_per_call):
        batch = tokenizer.pad({"input_ids": prompt_ids[start:start + prompts_per_call]}, padding_side="left",
                              return_tensors="pt").to(device)
        out = model.generate(**batch, generation_config=config)
        for row in out[:, batch["input_ids"].shape[1]:].tolist():
            row = sampling.end(row)
            ids.append(row)
            texts.append(tokenizer.decode(row, skip_special_tokens=True))
    group = lambda xs: [xs[i:i + num_samples] for i in range(0, len(xs), num_samples)]  # noqa: E731
    return group(texts), group(ids)


def score(reward_func, rows: dict[str, list], texts: list[list[str]], ids: list[list[list[int]]]) -> list[list]:
    """Score completions [prompt][sample] with a reward, passing each row's columns as keyword arguments."""
    k = len(texts[0])
    conversational = is_conversational({"prompt": rows["prompt"][0]})
    flat = [t for sample in texts for t in sample]
    completions = [[{"role": "assistant", "content": t}] for t in flat] if conversational else flat
    columns = {c: [v for v in values for _ in range(k)] for c, values in rows.items() if c != "input_ids"}
    columns["prompts"] = columns.pop("prompt")
    rewards = reward_func(completions=completions, completion_ids=[i for s in ids for i in s], **columns)
    return [list(rewards[i:i + k]) for i in range(0, len(rewards), k)]


class RewardModelReward:
    """A sequence-classification reward model (num_labels=1) as a reward function, for the evaluation.

    `encode(prompt, completion, completion_ids) -> token ids` says what the model reads, so that it scores exactly
    what it scores in training: GRPO gives it text in the reward model's own tokenizer, PPO the policy's ids.
    The score is the model's output at the last token, as in TRL.
    """

    correctness = False

    def __init__(self, model, name: str, encode, pad_token_id: int, batch_size: int):
        self.model, self.__name__, self.encode = model, name, encode
        self.pad_token_id, self.batch_size = pad_token_id, batch_size

    @torch.inference_mode()
    def __call__(self, prompts, completions, completion_ids, **kwargs) -> list[float]:
        device = next(self.model.parameters()).device
        rows = [self.encode(*args) for args in zip(prompts, completions, completion_ids, strict=True)]
        scores = []
        for start in range(0, len(rows), self.batch_size):
            batch = rows[start:start + self.batch_size]
            width = max(map(len, batch))
            input_ids = torch.tensor([r + [self.pad_token_id] * (width - len(r)) for r in batch], device=device)
            mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in batch], device=device)
            logits = self.model(input_ids=input_ids, attention_mask=mask).logits  # (batch, 1), at the last real token
            scores += logits[:, 0].float().tolist()
        return scores


def text_encoder(tokenizer, chat_template_kwargs: dict | None = None):
    """`encode` for a reward model that reads text, as GRPOTrainer builds it: the prompt and completion joined (through
    the reward model's chat template for conversations) and tokenized without adding special tokens."""

    def encode(prompt, completion, completion_ids) -> list[int]:
        if is_conversational({"prompt": prompt}):
            messages = {"messages": prompt + completion}
            text = apply_chat_template(messages, tokenizer, **(chat_template_kwargs or {}))["text"]
        else:
            text = prompt + completion
        return tokenizer(text=text, add_special_tokens=False)["input_ids"]

    return encode


def mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def metrics_of(reward_func, rewards: list[list], greedy_rewards: list, texts: list[list[str]],
               num_samples: int) -> dict:
    """The metrics of one reward over all prompts: rewards [prompt][sample], greedy_rewards [prompt]."""
    metrics = {"mean_reward": mean(r for rs in rewards for r in rs)}
    if not getattr(reward_func, "correctness", False):
        return metrics | {"greedy_reward": mean(greedy_rewards)}
    scored = [(rs, ts) for rs, ts in zip(rewards, texts) if None not in rs]
    correct = [sum(r == 1.0 for r in rs) for rs, _ in scored]
    metrics |= {
        "greedy_accuracy": mean(float(r == 1.0) for r in greedy_rewards if r is not None),
        "pass@1": mean(pass_at_k(num_samples, c, 1) for c in correct),
        f"pass@{num_samples}": mean(pass_at_k(num_samples, c, num_samples) for c in correct),
    }
    if (final_answer := getattr(reward_func, "final_answer", None)) is not None:
        votes = [majority_answer(ts, final_answer) for _, ts in scored]
        metrics[f"maj@{num_samples}"] = mean(float(v is not None and rs[v] == 1.0) for (rs, _), v in zip(scored, votes))
    return metrics


def evaluate(model, tokenizer, dataset, reward_funcs, num_samples: int, sampling: Sampling, seed: int,
             accelerator, batch_size: int, per_prompt: list | None = None) -> dict:
    """Evaluate `model` on the prompts of `dataset` (its `input_ids` column holds them as the trainer tokenizes them).

    Each process generates and scores its own slice of the prompts; call it on every process. Returns
    {reward name: {metric: value}} on every process. `per_prompt`, if given, receives one record per prompt, in
    order: the prompt, the process that scored it, the sampled completions and each reward's rewards for them, the
    greedy completion and each reward's reward for it.
    """
    indices = list(range(len(dataset)))
    # Equal slices (the last one padded with repeats) so every rank runs the same number of forward passes.
    with accelerator.split_between_processes(indices, apply_padding=True) as mine:
        rows = dataset.select(mine).to_dict()
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed + accelerator.process_index)  # the same sampling noise before and after training
        sampled, sampled_ids = generate(model, tokenizer, rows["input_ids"], num_samples, sampling, batch_size)
    greedy, greedy_ids = generate(model, tokenizer, rows["input_ids"], 1, sampling.greedy(), batch_size)
    model.train(was_training)

    mine_scored = [{"index": i, "prompt": prompt, "process": accelerator.process_index, "completions": texts,
                    "rewards": {}, "greedy_completion": g[0], "greedy": {}}
                   for i, prompt, texts, g in zip(mine, rows["prompt"], sampled, greedy)]
    for func in reward_funcs:
        for entry, rs, g in zip(mine_scored, score(func, rows, sampled, sampled_ids),
                                score(func, rows, greedy, greedy_ids)):
            entry["rewards"][func.__name__], entry["greedy"][func.__name__] = rs, g[0]
    gathered = {entry["index"]: entry for entry in reversed(gather_object(mine_scored))}  # drop the padding repeats
    entries = [gathered[i] for i in indices]
    if per_prompt is not None:
        per_prompt += [{k: v for k, v in e.items() if k != "index"} for e in entries]
    return {
        func.__name__: metrics_of(func, [e["rewards"][func.__name__] for e in entries],
                                  [e["greedy"][func.__name__] for e in entries], [e["completions"] for e in entries],
                                  num_samples)
        for func in reward_funcs
    }


def eval_split(train_dataset, eval_dataset, train_split: str, test_split: str, seed: int):
    """Return (train, eval, where the eval prompts come from); without an eval split, hold out a seeded 10% of train.

    The held-out prompts leave the training set, so the evaluation stays held out.
    """
    if eval_dataset is not None:
        return train_dataset, eval_dataset, f"split '{test_split}'"
    split = train_dataset.train_test_split(test_size=0.1, seed=seed)
    source = f"{len(split['test'])} prompts held out of '{train_split}' (seed {seed})"
    if PartialState().is_main_process:
        print(f"no '{test_split}' split: evaluating on {source}")
    return split["train"], split["test"], source


def check_eval_options(num_samples: int, max_prompts: int, eval_only: bool = False) -> None:
    """Stop, before any model loads, on a before/after evaluation that has no prompt to evaluate, or an --eval_only
    run that would evaluate nothing."""
    if eval_only and num_samples < 1:
        raise SystemExit("error: --eval_only evaluates --eval_num_samples K samples (and one greedy) per held-out "
                         "prompt: set K to 1 or more (the SmolLM2 recipes set 2)")
    if num_samples > 0 and max_prompts < 1:
        raise SystemExit(f"error: --eval_max_prompts {max_prompts} leaves no prompt to evaluate: set it to 1 or more, "
                         "or turn the evaluation off with --eval_num_samples 0")


class BeforeAfterEval(TrainerCallback):
    """Evaluate the policy when training starts and when it ends, then write `eval.json` and print a table.

    A callback, so that it runs inside training, on every process, with the model as the trainer has prepared it
    (DDP, DeepSpeed, FSDP). On a resumed run "before" is the checkpoint's policy; `before_step` says which.

    Args:
        dataset: eval prompts with an `input_ids` column (`prompt_token_ids`) plus the columns the rewards need;
            the first `max_prompts` are used.
        source: where the prompts come from, recorded in eval.json (e.g. "split 'test'").
        generation_model: a context manager factory yielding the policy to generate with; the scripts pass TRL's
            `unwrap_model_for_generation` over the trainer's wrapped model.
        accelerator: the trainer's, for the slices and the gathering.
        batch_size: completions per `generate` call on each process (--per_device_eval_batch_size).
        Remaining arguments: as for `evaluate()`.
    """

    def __init__(self, dataset, source: str, tokenizer, reward_funcs, num_samples: int, max_prompts: int,
                 sampling: Sampling, seed: int, generation_model, accelerator, output_dir: str, batch_size: int):
        self.dataset = dataset.select(range(min(len(dataset), max_prompts)))
        self.sampling = sampling
        self.settings = dict(source=source, num_prompts=len(self.dataset), num_samples=num_samples,
                             temperature=sampling.config.temperature, max_new_tokens=sampling.config.max_new_tokens,
                             seed=seed, sampling=sampling.describe(), batch_size=batch_size)
        self.tokenizer, self.reward_funcs = tokenizer, reward_funcs
        self.generation_model, self.accelerator, self.output_dir = generation_model, accelerator, Path(output_dir)
        self.results = {}

    def run(self, when: str, step: int) -> None:
        s = self.settings
        if self.accelerator.is_main_process:
            print(f"evaluating ({when}, step {step}): {s['num_prompts']} prompts x {s['num_samples']} samples "
                  f"+ greedy, on {self.accelerator.num_processes} process(es)")
        start = time.perf_counter()
        per_prompt = []
        with self.generation_model() as model:
            self.results[when] = evaluate(model, self.tokenizer, self.dataset, self.reward_funcs, s["num_samples"],
                                          self.sampling, s["seed"], self.accelerator, s["batch_size"], per_prompt)
        self.results[f"{when}_per_prompt"] = per_prompt
        self.results[f"{when}_step"] = step
        self.results[f"{when}_seconds"] = round(time.perf_counter() - start, 1)
        if self.accelerator.is_main_process:
            print(f"evaluated ({when}) in {self.results[f'{when}_seconds']:.0f} s")

    def on_train_begin(self, args, state, control, **kwargs):
        self.run("before", state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        self.run("after", state.global_step)
        if self.accelerator.is_main_process:
            self.write()

    def evaluate_only(self, step: int) -> None:
        """--eval_only: evaluate the model as it is, once, and write eval.json and the table with its one column,
        `model`, in place of `before` and `after`."""
        self.run("model", step)
        if self.accelerator.is_main_process:
            self.write()

    def write(self) -> None:
        path = self.output_dir / "eval.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**self.settings, **self.results}, indent=2) + "\n")
        columns = {when: self.results[when] for when in ("before", "after", "model") if when in self.results}
        print(f"\nheld-out evaluation, {self.settings['source']}:\n{format_table(columns)}\n  written to {path}")


def format_table(columns: dict[str, dict]) -> str:
    """A table of {column: {reward: {metric: value}}}, one line per reward and metric (those of the last column).

    >>> print(format_table({"before": {"accuracy": {"pass@1": 0.25}}, "after": {"accuracy": {"pass@1": 0.5}}}))
    reward        metric              before   after
    accuracy      pass@1               0.250   0.500
    """
    lines = [f"{'reward':<14}{'metric':<18}" + "".join(f"{label:>8}" for label in columns)]
    fmt = lambda v: f"{v:8.3f}" if v is not None else f"{'-':>8}"  # noqa: E731
    for name, metrics in list(columns.values())[-1].items():
        for metric in metrics:
            values = (column.get(name, {}).get(metric) for column in columns.values())
            lines.append(f"{name:<14}{metric:<18}" + "".join(map(fmt, values)))
    return "\n".join(lines)
