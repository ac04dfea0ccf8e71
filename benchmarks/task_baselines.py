"""How often is a model right on each candidate task before any training? The measurement behind the bundled chat task.

    python benchmarks/task_baselines.py                       # SmolLM2-135M-Instruct, ~7 min on 2 cores
    python benchmarks/task_baselines.py --temperatures 1.0     # the same at temperature 1
    python benchmarks/task_baselines.py --model path/to/model --prompts 32

RL learns from differences in reward, so a task for both algorithms needs a starting policy that is right some of the
time: roughly 10-50% of samples, with many prompts right on some samples and wrong on others (GRPO's groups compare
exactly those). For each candidate (a kind of sum or product, a phrasing, a system prompt or the chat template's own,
a temperature) this samples `--samples` completions of 16 tokens for each of `--prompts` seeded prompts, plus one
greedy completion, and scores them with the `accuracy` reward, as training would. It prints sampled accuracy, the
prompts with mixed outcomes, greedy accuracy and the prompt length in tokens (every step pays for each one).
"""

import argparse
import random
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]
from harness import matmul_gflops  # noqa: E402
from rewards import get_reward_funcs  # noqa: E402

JUST = " Reply with just the number."
# name -> (system prompt or None for the chat template's own, question template, how to draw (a, b), the answer)
CANDIDATES = {
    "sum to 20": (None, "What is {a} + {b}?", lambda r: (r.randint(0, 20), r.randint(0, 20)), lambda a, b: a + b),
    "sum to 20, just the number": (None, "What is {a} + {b}?" + JUST, lambda r: (r.randint(0, 20), r.randint(0, 20)),
                                   lambda a, b: a + b),
    "sum to 20, just the number, 'Be brief.'": ("Be brief.", "What is {a} + {b}?" + JUST,
                                                lambda r: (r.randint(0, 20), r.randint(0, 20)), lambda a, b: a + b),
    "sum to 20, system 'Reply with just the number.'": ("Reply with just the number.", "What is {a} + {b}?",
                                                        lambda r: (r.randint(0, 20), r.randint(0, 20)),
                                                        lambda a, b: a + b),
    "single digits, just the number": (None, "What is {a} + {b}?" + JUST, lambda r: (r.randint(0, 9), r.randint(0, 9)),
                                       lambda a, b: a + b),
    "difference, just the number": (None, "What is {a} - {b}?" + JUST,
                                    lambda r: (lambda b, c: (b + c, b))(r.randint(0, 20), r.randint(0, 20)),
                                    lambda a, b: a - b),
    "product of digits, just the number": (None, "What is {a} times {b}?" + JUST,
                                           lambda r: (r.randint(2, 9), r.randint(2, 9)), lambda a, b: a * b),
    "two-digit sums, just the number": (None, "What is {a} + {b}?" + JUST,
                                        lambda r: (r.randint(10, 99), r.randint(10, 99)), lambda a, b: a + b),
}


@torch.no_grad()
def measure(model, tokenizer, accuracy, candidate, prompts: int, samples: int, temperature: float, seed: int) -> dict:
    system, question, draw, answer = candidate
    rng = random.Random(seed)
    pairs = [draw(rng) for _ in range(prompts)]
    chats = [([{"role": "system", "content": system}] if system else []) +
             [{"role": "user", "content": question.format(a=a, b=b)}] for a, b in pairs]
    ids = [tokenizer.apply_chat_template(c, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
           for c in chats]
    batch = tokenizer.pad({"input_ids": ids}, padding_side="left", return_tensors="pt")
    width = batch["input_ids"].shape[1]
    torch.manual_seed(seed)
    results = {}
    for mode, settings in [("sampled", dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0,
                                            num_return_sequences=samples)), ("greedy", dict(do_sample=False))]:
        out = model.generate(**batch, max_new_tokens=16, pad_token_id=tokenizer.pad_token_id, **settings)
        texts = tokenizer.batch_decode(out[:, width:], skip_special_tokens=True)
        k = len(texts) // prompts
        scores = accuracy(completions=texts, answer=[str(answer(a, b)) for a, b in pairs for _ in range(k)])
        right = [sum(s == 1.0 for s in scores[i * k:(i + 1) * k]) for i in range(prompts)]
        results[mode] = sum(right) / len(scores)
        if mode == "sampled":
            results["mixed"] = sum(0 < r < k for r in right)
            results["example"] = texts[0]
    results["prompt_tokens"] = round(sum(map(len, ids)) / len(ids), 1)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=REPO / "assets" / "SmolLM2-135M-Instruct")
    parser.add_argument("--prompts", type=int, default=48)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.7])
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model).eval()
    [accuracy] = get_reward_funcs(["accuracy"], 16)
    rate, start = matmul_gflops(), time.time()  # the yardstick for the time printed at the end
    print(f"{args.model.name}: {args.prompts} prompts x {args.samples} samples of 16 tokens, and greedy; fp32 matmul "
          f"{rate:.1f} GFLOP/s on {torch.get_num_threads()} threads\n")
    print("| candidate | temperature | sampled | prompts with mixed outcomes | greedy | prompt tokens | a sample |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, candidate in CANDIDATES.items():
        for temperature in args.temperatures:
            r = measure(model, tokenizer, accuracy, candidate, args.prompts, args.samples, temperature, args.seed)
            print(f"| {name} | {temperature} | {r['sampled']:.2f} | {r['mixed']}/{args.prompts} | {r['greedy']:.2f} | "
                  f"{r['prompt_tokens']} | {r['example'][:40]!r} |", flush=True)
    print(f"\n{(time.time() - start) / 60:.1f} min at {rate:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
