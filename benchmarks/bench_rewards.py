"""How fast is the `accuracy` reward on the answers GSM8K-style models write, next to `trl.rewards.accuracy_reward`?

For each answer style it scores the same completions (half right, half off by one) with both rewards, in one
process, one after the other, and prints completions per second and the ratio. Both get the gold as a plain number
(TRL's reward does not read GSM8K's "#### N" golds; ours does). Timing is wall-clock of whole calls, the way a
trainer calls a reward: one call per batch of `--batch` completions.

    python benchmarks/bench_rewards.py                 # ~1-2 min on 2 cores
    python benchmarks/bench_rewards.py --n 512 --trl_n 128

The "symbolic" style (a LaTeX fraction against a decimal gold) is the slow path that goes through math-verify in
both rewards; it is shown for reference, and is not one of GSM8K's styles.
"""

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trl.rewards import accuracy_reward as trl_accuracy_reward  # noqa: E402

from rewards import accuracy_reward  # noqa: E402

# style -> completion text for the answer `value` (an int)
STYLES = {
    "plain": lambda v: f"She had {v - 3} apples and bought 3 more, so she has {v} apples.",
    "####": lambda v: f"{v - 3} + 3 = {v}\n#### {v}",
    "\\boxed{}": lambda v: f"Adding them up, the total is \\boxed{{{v}}}.",
    "<answer>": lambda v: f"<think>{v - 3} + 3 = {v}</think>\n<answer>{v}</answer>",
    "units": lambda v: f"<answer>{v} dollars</answer>",
    "commas": lambda v: f"In total they raised {v:,}.",
    "$": lambda v: f"The answer is ${v}.",
    ".00": lambda v: f"So it costs ${v}.00",
    "symbolic": lambda v: f"The ratio is \\boxed{{\\frac{{{v}}}{{4}}}}",
}


def batch(style: str, n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """n completions of one style, half right and half off by one, with their gold answers."""
    rng = random.Random(seed)
    values = [rng.randint(1000 if style == "commas" else 10, 99_999) for _ in range(n)]
    completions = [STYLES[style](v + (i % 2)) for i, v in enumerate(values)]
    golds = [str(v / 4) if style == "symbolic" else str(v) for v in values]
    return completions, golds


def rate(reward, completions, golds, batch_size: int) -> tuple[float, list]:
    """Completions per second over whole calls of `batch_size` completions, and the rewards."""
    rewards = []
    start = time.perf_counter()
    for i in range(0, len(completions), batch_size):
        rewards += reward(completions[i:i + batch_size], golds[i:i + batch_size])
    return len(completions) / (time.perf_counter() - start), rewards


def ours(completions, golds):
    return accuracy_reward(completions, answer=golds)


def trls(completions, golds):
    return trl_accuracy_reward([[{"role": "assistant", "content": c}] for c in completions], golds)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2048, help="completions per style for ours")
    parser.add_argument("--trl_n", type=int, default=256, help="completions per style for TRL's (it is slower)")
    parser.add_argument("--batch", type=int, default=256, help="completions per call (a GRPO step's batch)")
    args = parser.parse_args()

    print(f"completions/s, calls of {args.batch}; ours on {args.n} completions per style, TRL's on {args.trl_n}")
    print(f"| {'style':<10} | {'ours':>8} | {'trl':>8} | {'ours/trl':>8} | {'ours right':>10} | {'trl right':>9} |")
    print("|---|---:|---:|---:|---:|---:|")
    for style in STYLES:
        completions, golds = batch(style, args.n)
        rate(ours, completions[:16], golds[:16], args.batch)  # warm up (imports, regex compilation)
        ours_rate, ours_rewards = rate(ours, completions, golds, args.batch)
        trl_rate, trl_rewards = rate(trls, completions[:args.trl_n], golds[:args.trl_n], args.batch)
        # half the completions are right: the fraction scored 1.0 should be 0.50
        ours_right = sum(r == 1.0 for r in ours_rewards) / len(ours_rewards)
        trl_right = sum(r == 1.0 for r in trl_rewards) / len(trl_rewards)
        print(f"| {style:<10} | {ours_rate:8.0f} | {trl_rate:8.0f} | {ours_rate / trl_rate:8.1f} | "
              f"{ours_right:10.2f} | {trl_right:9.2f} |", flush=True)


if __name__ == "__main__":
    main()
