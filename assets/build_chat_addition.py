"""Build the bundled chat task for a real model: sums of two numbers from 0 to 20, asked as a chat.

    python assets/build_chat_addition.py          # -> assets/chat-addition/{train,test}.jsonl

Each row is a one-turn conversation and its gold answer, which the `accuracy` reward reads:

    {"prompt": [{"role": "user", "content": "What is 12 + 13? Reply with just the number."}], "answer": "25"}

Why this task: SmolLM2-135M-Instruct (assets/convert_gguf.py) is right on it some of the time, so both algorithms have
signal from the first step. Measured by benchmarks/task_baselines.py (BENCHMARKS.md, 9a) on 32 prompts x 4 samples
of 16 tokens at temperature 0.7: right 0.38 of the time, with 17 of 32 prompts right on some samples and wrong on
others, which is where GRPO's group baseline has something to compare. Without "Reply with just the number." it
explains at length (0.27); at temperature 1.0 it is right a third as often; single-digit sums and products are
mostly right when greedy, two-digit sums rarely right. The recipes add the system prompt "Be brief.", 13 tokens
shorter than the chat template's default one, for the same accuracy.

The test split holds whole pairs out: when 3 + 4 is a test prompt, neither 3 + 4 nor 4 + 3 is a training prompt, so
the held-out accuracy measures what the policy learned about adding, not what it remembers. Seeded; instant.
"""

import argparse
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUESTION = "What is {a} + {b}? Reply with just the number."


def build(seed: int, n_test: int, largest: int) -> tuple[list[dict], list[dict]]:
    """(train, test): every ordered pair (a, b) with 0 <= a, b <= largest, split by unordered pair."""
    pairs = sorted({(min(a, b), max(a, b)) for a in range(largest + 1) for b in range(largest + 1)})
    random.Random(seed).shuffle(pairs)
    row = lambda a, b: {"prompt": [{"role": "user", "content": QUESTION.format(a=a, b=b)}], "answer": str(a + b)}  # noqa: E731
    test, train = [], []
    for a, b in pairs:
        if len(test) < n_test:
            test.append(row(*random.Random(f"{seed}-{a}-{b}").sample([a, b], 2)))  # one order of the pair
        else:
            train += [row(a, b)] + ([row(b, a)] if a != b else [])
    random.Random(seed).shuffle(train)
    return train, test


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n_test", type=int, default=64, help="held-out prompts, one per pair")
    parser.add_argument("--largest", type=int, default=20, help="the largest number in a sum")
    parser.add_argument("--out", type=Path, default=HERE / "chat-addition")
    args = parser.parse_args()
    train, test = build(args.seed, args.n_test, args.largest)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", train), ("test", test)):
        (args.out / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {args.out}: {len(train)} training and {len(test)} test prompts")


if __name__ == "__main__":
    main()
