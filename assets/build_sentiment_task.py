"""Build the bundled sentiment task, for RLHF against a learned reward model: a sentence or two about a made-up film,
product, place or day, or a review's opening to continue.

    python assets/build_sentiment_task.py          # -> assets/sentiment/{train,test}.jsonl

Each row is a one-turn conversation; the `sentiment` reward (rewards.py, VADER's compound score) reads only the
completion, so there is no answer column:

    {"prompt": [{"role": "user", "content": "Continue this review in one sentence: \\"The blender arrived late, and"}]}

Why this task: the true reward, VADER, is a lexicon that can always be computed, so a reward model learned from its
preferences (assets/build_reward_model.py) can be checked against it, as RLHF can not check a human's. The prompts mix
requests that SmolLM2-135M-Instruct answers warmly with openings that lead it towards complaint, so that it starts
mid-range: its measured start is in BENCHMARKS.md, section 18. Every name is made up from syllables, and the test
prompts' subjects never appear in training. Seeded; instant.
"""

import argparse
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SYLLABLES = ["ka", "lo", "mer", "vi", "dan", "tor", "sa", "bel", "ru", "fen", "o", "mis", "tal", "ve", "zor", "ni"]
PRODUCTS = ["blender", "backpack", "desk lamp", "phone case", "kettle", "bicycle", "umbrella", "headphones", "tent",
            "coffee grinder", "office chair", "toaster", "raincoat", "keyboard", "suitcase", "alarm clock"]
PLACES = ["cafe", "hotel", "bakery", "museum", "train station", "bookshop", "gym", "dentist", "library", "market"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "holiday", "first day"]
REQUESTS = [
    'Write one or two sentences about the film "{title}".',
    'Write one or two sentences about the {product} from {brand}.',
    "Write one or two sentences about your {day} at the {place} {name}.",
]
OPENINGS = [
    "The {product} from {brand} arrived two days late, and",
    "I watched \"{title}\" on a rainy evening, and",
    "We waited an hour for a table at the {place} {name}, and",
    "The {product} from {brand} stopped working after a week, so",
    "My {day} at the {place} {name} started with a long queue, and",
    "The second half of \"{title}\" was",
    "Honestly, the {product} from {brand} is",
    "The staff at the {place} {name} were",
]
CONTINUE = 'Continue this review in one sentence: "{opening}"'


def made_up(rng: random.Random, parts: int) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(parts)).capitalize()


def prompt(rng: random.Random, subject: dict) -> str:
    """One request or review opening about `subject`'s made-up names; about half each."""
    if rng.random() < 0.5:
        return rng.choice(REQUESTS).format(**subject)
    return CONTINUE.format(opening=rng.choice(OPENINGS).format(**subject))


def subject(rng: random.Random) -> dict:
    return dict(title=f"The {made_up(rng, 2)} {made_up(rng, 3)}", brand=made_up(rng, 2), name=made_up(rng, 3),
                product=rng.choice(PRODUCTS), place=rng.choice(PLACES), day=rng.choice(DAYS))


def build(seed: int, n_train: int, n_test: int) -> tuple[list[dict], list[dict]]:
    """(train, test): one prompt per made-up subject; no title, brand or name is in both splits."""
    rng = random.Random(seed)
    rows = {"train": [], "test": []}
    seen = {"train": set(), "test": set()}
    while len(rows["train"]) < n_train or len(rows["test"]) < n_test:
        split = "test" if len(rows["test"]) < n_test else "train"
        names = subject(rng)
        other = seen["train" if split == "test" else "test"]
        keys = {names["title"], names["brand"], names["name"]}
        if keys & other:
            continue
        seen[split] |= keys
        rows[split].append({"prompt": [{"role": "user", "content": prompt(rng, names)}]})
    return rows["train"], rows["test"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n_train", type=int, default=512)
    parser.add_argument("--n_test", type=int, default=64)
    parser.add_argument("--out", type=Path, default=HERE / "sentiment")
    args = parser.parse_args()
    train, test = build(args.seed, args.n_train, args.n_test)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", train), ("test", test)):
        (args.out / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {args.out}: {len(train)} training and {len(test)} test prompts")


if __name__ == "__main__":
    main()
