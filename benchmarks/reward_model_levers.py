"""What each of the reward model builder's levers gives (BENCHMARKS.md, section 23): the builder trained again and
again on one pool of sampled completions (--reuse_samples), one lever changed a row, each row's agreement with the
true reward (held-out pairs by reading and by gap, and the hand-written completions) beside its training time.

    python assets/build_reward_model.py --prompts 512 --test_prompts 64 --samples 4 --pairs 64 --layers 1 \\
        --out benchmarks/outputs/rm-pool                      # the pool: 2,048 train and 256 test completions
    python benchmarks/reward_model_levers.py --pool benchmarks/outputs/rm-pool/samples.jsonl
    python benchmarks/reward_model_levers.py --pool ... --rows "the defaults" "2,000 pairs"   # some rows only

Every row trains on the same completions, the first 2 of each of the pool's first 256 prompts (as the builder's
defaults sample), and is checked on the same held-out pairs, the pool's.
"""

import argparse
import json
import sys
import time
from pathlib import Path

from harness import OUTPUTS, REPO, matmul_gflops, run_logged

# name: the builder's flags beside its defaults (4 layers, 4,000 pairs, learning rate 1e-3); every row trains on the
# first 2 completions of the pool's first 256 prompts, as the defaults sample
ROWS = {
    "the defaults": [],
    "2,000 pairs": ["--pairs", "2000"],
    "2,000 pairs, lr 3e-4": ["--pairs", "2000", "--learning_rate", "3e-4"],
    "2,000 pairs, lr 1e-4": ["--pairs", "2000", "--learning_rate", "1e-4"],
    "2,000 pairs, lr 2e-3": ["--pairs", "2000", "--learning_rate", "2e-3"],
    "2,000 pairs, lr 3e-4, 8 layers": ["--pairs", "2000", "--learning_rate", "3e-4", "--layers", "8"],
    "2,000 pairs, 16 a step": ["--pairs", "2000", "--batch_size", "16"],
    "2,000 pairs, no margin": ["--pairs", "2000", "--margin_scale", "0"],
    "pairs within prompts only": ["--pairs", "2000", "--within_prompts"],
    "2 layers": ["--layers", "2"],
    "the embeddings frozen": ["--freeze_embeddings"],
}
PROMPTS, SAMPLES = 256, 2


def subset(pool: list[dict], prompts: int, samples: int, path: Path) -> Path:
    """Write to `path` the pool's test lines and the first `samples` train completions of its first `prompts`."""
    seen = {}
    with open(path, "w") as f:
        for line in pool:
            if line["split"] == "train":
                seen[line["prompt_index"]] = seen.get(line["prompt_index"], 0) + 1
                if line["prompt_index"] >= prompts or seen[line["prompt_index"]] > samples:
                    continue
            f.write(json.dumps(line) + "\n")
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pool", type=Path, required=True, help="an earlier build's samples.jsonl")
    parser.add_argument("--rows", nargs="*", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    pool = [json.loads(line) for line in args.pool.read_text().splitlines()]
    out = REPO / OUTPUTS / "reward_model_levers"
    out.mkdir(parents=True, exist_ok=True)
    print("| lever | pairs | held-out | GRPO's reading | PPO's reading | gap >= 0.3 | "
          "hand-written (GRPO, PPO) | training | GFLOP/s |\n|---|---:|---:|---:|---:|---:|---|---:|---:|",
          flush=True)
    train = subset(pool, PROMPTS, SAMPLES, out / "samples.jsonl")
    for name in args.rows:
        slug = name.replace(" ", "-").replace(",", "")
        rate = matmul_gflops(args.threads)
        start = time.perf_counter()
        run_logged([sys.executable, "assets/build_reward_model.py", "--reuse_samples", str(train), "--out",
                    str(out / slug), *ROWS[name]], out / f"{slug}.log", threads=args.threads)
        build = json.loads((out / slug / "build.json").read_text())
        held, written = build["held_out_agreement"], build["handwritten_agreement"] or {}
        print(f"| {name} | {build['train_pairs']} | {held['all']:.3f} | {held['grpo']:.3f} | "
              f"{held['ppo']:.3f} | {held['gap>=0.3']:.3f} | {written.get('all')} ({written.get('grpo')}, "
              f"{written.get('ppo')}) | {build['seconds']['training']:.0f} s ({time.perf_counter() - start:.0f} s "
              f"all) | {rate:.0f} |", flush=True)


if __name__ == "__main__":
    main()
