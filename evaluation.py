"""Held-out evaluation before and after training: mean reward, greedy accuracy, pass@k and maj@k.

Both training scripts call `evaluate()` on the eval split when `--eval_num_samples K` is set:
for each prompt it samples K completions at the training temperature, plus one greedy completion,
and scores them with the same reward functions used for training.

For each reward in `CORRECTNESS_REWARDS` (a reward that is 1.0 exactly when the answer is right)
it also reports:
    greedy_accuracy  fraction of prompts whose greedy completion is right
    pass@1, pass@k   the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models
                     Trained on Code", Eq. 1): the chance that at least one of k samples is right
    maj@k            fraction of prompts where the most common final answer among the k samples is right
"""

import json
import math
from collections import Counter
from pathlib import Path

import torch
from trl.data_utils import is_conversational, maybe_apply_chat_template

from rewards import completion_text, extract_answer

CORRECTNESS_REWARDS = ("accuracy",)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct: 1 - C(n-c, k) / C(n, k) (Chen et al. 2021, Eq. 1).

    >>> pass_at_k(n=8, c=2, k=1), pass_at_k(n=8, c=0, k=8), pass_at_k(n=8, c=1, k=8)
    (0.25, 0.0, 1.0)
    """
    if n - c < k:
        return 1.0
    # The product form avoids huge binomials: C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k / i)
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def majority_answer(texts: list[str]) -> int | None:
    """Index of a sample carrying the most common extracted final answer, or None if no sample has one.

    >>> majority_answer(["so 4", "it is 5", "4"])
    0
    """
    answers = [extract_answer(t) for t in texts]
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return None
    best = counts.most_common(1)[0][0]
    return answers.index(best)


@torch.no_grad()
def generate(model, tokenizer, prompts: list[str], num_samples: int, temperature: float | None,
             max_new_tokens: int, batch_size: int = 16) -> tuple[list[list[str]], list[list[list[int]]]]:
    """Generate `num_samples` completions per prompt text (greedy when temperature is None).

    Returns texts and token ids, both indexed [prompt][sample]; generation stops at eos.
    """
    device = next(model.parameters()).device
    padding_side, tokenizer.padding_side = tokenizer.padding_side, "left"
    texts, ids = [], []
    for start in range(0, len(prompts), batch_size):
        batch = tokenizer(prompts[start:start + batch_size], return_tensors="pt", padding=True,
                          add_special_tokens=False).to(device)
        sampling = dict(do_sample=True, temperature=temperature, top_p=1.0, top_k=0) if temperature else dict(do_sample=False)
        out = model.generate(**batch, max_new_tokens=max_new_tokens, num_return_sequences=num_samples,
                             pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, **sampling)
        for row in out[:, batch["input_ids"].shape[1]:].tolist():
            if tokenizer.eos_token_id in row:
                row = row[: row.index(tokenizer.eos_token_id)]
            row = [t for t in row if t != tokenizer.pad_token_id]
            ids.append(row)
            texts.append(tokenizer.decode(row, skip_special_tokens=True))
    tokenizer.padding_side = padding_side
    group = lambda xs: [xs[i:i + num_samples] for i in range(0, len(xs), num_samples)]  # noqa: E731
    return group(texts), group(ids)


def score(reward_func, dataset, texts: list[list[str]], ids: list[list[list[int]]]) -> list[list[float | None]]:
    """Score completions [prompt][sample] with a reward function, passing each row's columns as kwargs."""
    k = len(texts[0])
    conversational = is_conversational({"prompt": dataset[0]["prompt"]})
    flat = [t for sample in texts for t in sample]
    completions = [[{"role": "assistant", "content": t}] for t in flat] if conversational else flat
    columns = {c: [v for v in dataset[c] for _ in range(k)] for c in dataset.column_names}
    columns["prompts"] = columns.pop("prompt")
    rewards = reward_func(completions=completions, completion_ids=[i for s in ids for i in s], **columns)
    return [rewards[i:i + k] for i in range(0, len(rewards), k)]


def mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def evaluate(model, tokenizer, dataset, reward_funcs, num_samples: int, temperature: float, max_new_tokens: int,
             seed: int) -> dict:
    """Evaluate `model` on the prompts of `dataset`; returns {reward name: {metric: value}}."""
    was_training = model.training
    model.eval()
    prompts = [maybe_apply_chat_template({"prompt": p}, tokenizer)["prompt"] for p in dataset["prompt"]]
    with torch.random.fork_rng():  # leave the training run's random state untouched
        torch.manual_seed(seed)  # the same sampling noise before and after training
        sampled, sampled_ids = generate(model, tokenizer, prompts, num_samples, temperature, max_new_tokens)
    greedy, greedy_ids = generate(model, tokenizer, prompts, 1, None, max_new_tokens)
    model.train(was_training)

    results = {}
    for func in reward_funcs:
        rewards = score(func, dataset, sampled, sampled_ids)
        greedy_rewards = [r[0] for r in score(func, dataset, greedy, greedy_ids)]
        metrics = {"mean_reward": mean(r for rs in rewards for r in rs)}
        if func.__name__ not in CORRECTNESS_REWARDS:
            metrics["greedy_reward"] = mean(greedy_rewards)
        else:
            scored = [(rs, texts) for rs, texts in zip(rewards, sampled) if None not in rs]
            correct = [sum(r == 1.0 for r in rs) for rs, _ in scored]
            votes = [majority_answer(texts) for _, texts in scored]
            metrics |= {
                "greedy_accuracy": mean(float(r == 1.0) for r in greedy_rewards if r is not None),
                "pass@1": mean(pass_at_k(num_samples, c, 1) for c in correct),
                f"pass@{num_samples}": mean(pass_at_k(num_samples, c, num_samples) for c in correct),
                f"maj@{num_samples}": mean(float(v is not None and rs[v] == 1.0) for (rs, _), v in zip(scored, votes)),
            }
        results[func.__name__] = metrics
    return results


def eval_split(train_dataset, eval_dataset, train_split: str, test_split: str, seed: int):
    """Return (train, eval, where the eval prompts come from); without an eval split, hold out a seeded 10% of train.

    The held-out prompts leave the training set, so the evaluation stays held out.
    """
    if eval_dataset is not None:
        return train_dataset, eval_dataset, f"split '{test_split}'"
    split = train_dataset.train_test_split(test_size=0.1, seed=seed)
    source = f"{len(split['test'])} prompts held out of '{train_split}' (seed {seed})"
    print(f"no '{test_split}' split: evaluating on {source}")
    return split["train"], split["test"], source


class BeforeAfterEval:
    """Evaluate the policy before and after training, then write `eval.json` and print a table.

    Runs on the main process only; call `run()` there with the unwrapped policy.

    Args:
        dataset: eval prompts (a `prompt` column plus the columns the rewards need); the first
            `max_prompts` are used.
        source: where the prompts come from, recorded in eval.json (e.g. "split 'test'").
        Remaining arguments: as for `evaluate()`.
    """

    def __init__(self, dataset, source: str, tokenizer, reward_funcs, num_samples: int, max_prompts: int,
                 temperature: float, max_new_tokens: int, seed: int):
        self.dataset = dataset.select(range(min(len(dataset), max_prompts)))
        self.settings = dict(source=source, num_prompts=len(self.dataset), num_samples=num_samples,
                             temperature=temperature, max_new_tokens=max_new_tokens, seed=seed)
        self.tokenizer, self.reward_funcs = tokenizer, reward_funcs
        self.results = {}

    def run(self, model, when: str) -> None:
        s = self.settings
        print(f"evaluating ({when}): {s['num_prompts']} prompts x {s['num_samples']} samples + greedy")
        self.results[when] = evaluate(model, self.tokenizer, self.dataset, self.reward_funcs, s["num_samples"],
                                      s["temperature"], s["max_new_tokens"], s["seed"])

    def write(self, output_dir: str) -> None:
        path = Path(output_dir) / "eval.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**self.settings, **self.results}, indent=2) + "\n")
        print(f"\nheld-out evaluation, {self.settings['source']}:\n"
              f"{format_table(self.results['before'], self.results['after'])}\n  written to {path}")


def format_table(before: dict, after: dict) -> str:
    """A before/after table, one line per reward and metric."""
    lines = [f"{'reward':<14}{'metric':<18}{'before':>8}{'after':>8}"]
    fmt = lambda v: f"{v:8.3f}" if v is not None else f"{'-':>8}"  # noqa: E731
    for name, metrics in after.items():
        for metric, value in metrics.items():
            lines.append(f"{name:<14}{metric:<18}{fmt(before.get(name, {}).get(metric))}{fmt(value)}")
    return "\n".join(lines)

