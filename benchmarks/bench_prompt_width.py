"""What one long prompt in a dataset costs PPO: before issue 47 the script left-padded every prompt to the dataset's
longest, so one outlier widened every rollout; now PPOTrainer's collator pads each batch to its own longest.

Runs ppo_trl_example.py as it is and as it was at --before (a git revision), on the bundled addition prompts alone and
with one long prompt added, with the same settings, one run after another, and prints each run's wall time and the
time of the outlier runs against the plain ones; with the machine's fp32 matmul rate, measured at the start.
The width each rollout's prompts take is computed from the dataset for both ways of padding (the mean over random
batches of the run's size, as PPOTrainer's shuffled dataloader draws them).

    python benchmarks/bench_prompt_width.py                   # 4 runs of the tiny model, ~10 min on 2 cores
    python benchmarks/bench_prompt_width.py --model smollm2   # SmolLM2's chat recipe, 10 updates: ~55 min
    python benchmarks/bench_prompt_width.py --model smollm2 --versions after   # today's script alone: ~12 min
"""

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import OUTPUTS, REPO, machine, matmul_gflops

BEFORE = "7700543"  # the last commit that padded every prompt to the dataset's longest
MODELS = {  # name: (the script's flags, the outlier's repeated text, how many times)
    "tiny": (["--config", "recipes/tiny/ppo.yaml", "--per_device_train_batch_size", "8", "--total_episodes", "640",
              "--eval_num_samples", "0"], "1+1=", 12),
    "smollm2": (["--config", "recipes/SmolLM2-135M-Instruct/ppo/config_chat_addition.yaml", "--total_episodes", "160",
                 "--eval_num_samples", "0"], "Take your time and answer in one number. ", 40),
}


def dataset_with_outlier(source: Path, out: Path, text: str, times: int) -> None:
    """`source`'s splits, the train split with one more prompt: `text` repeated `times` times, then a sum."""
    out.mkdir(parents=True, exist_ok=True)
    for split in source.glob("*.jsonl"):
        shutil.copy(split, out / split.name)
    rows = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    first = rows[0]
    prompt = first["prompt"]
    if isinstance(prompt, list):  # a conversation: the outlier is its last message, made long
        long = [*prompt[:-1], {**prompt[-1], "content": text * times + prompt[-1]["content"]}]
    else:
        long = text * times + prompt
    rows.append({**first, "prompt": long})
    (out / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def mean_widths(script_flags: list[str], dataset: Path, batch: int, draws: int = 10000) -> tuple[float, float]:
    """The prompt width of a rollout, from the prompts as the script loads them (its load_prompts and prompt_ids):
    the longest in train and test together, as the script padded before, and the mean of a train batch's longest."""
    sys.path.insert(0, str(REPO))
    import yaml
    from transformers import AutoTokenizer

    from ppo_trl_example import PPOScriptArguments, load_prompts, prompt_ids

    recipe = yaml.safe_load((REPO / script_flags[script_flags.index("--config") + 1]).read_text())
    tokenizer = AutoTokenizer.from_pretrained(REPO / recipe["model_name_or_path"])
    args = PPOScriptArguments(dataset_name=str(dataset), system_prompt=recipe.get("system_prompt"),
                              dataset_train_split=recipe.get("dataset_train_split", "train"),
                              dataset_test_split=recipe.get("dataset_test_split", "test"))
    train, test = load_prompts(args)
    lengths = [len(prompt_ids(tokenizer, prompt)) for prompt in train["prompt"]]
    longest = max(lengths + [len(prompt_ids(tokenizer, prompt)) for prompt in (test["prompt"] if test else [])])
    rng = random.Random(0)
    per_batch = [max(rng.sample(lengths, batch)) for _ in range(draws)]
    return longest, sum(per_batch) / draws


def timed(script: Path, flags: list[str], dataset: Path, out: Path) -> float:
    """The run's wall time, in seconds."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, str(script), *flags, "--dataset_name", str(dataset), "--output_dir",
                           str(out)], cwd=REPO, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{script} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def update_s(out: Path) -> float:
    """The median seconds from one update's log to the next (metrics.jsonl's wall_time)."""
    times = [json.loads(line)["wall_time"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    return statistics.median(b - a for a, b in zip(times, times[1:]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=MODELS, default="tiny")
    parser.add_argument("--before", default=BEFORE, help="The git revision of the script to compare with.")
    parser.add_argument("--versions", nargs="+", choices=["before", "after"], default=["before", "after"])
    args = parser.parse_args()
    flags, text, times = MODELS[args.model]
    work = REPO / OUTPUTS / "prompt_width" / args.model
    shutil.rmtree(work / "before", ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)

    # The script as it was, with its rewards.py and extras/
    old = work / "before"
    old.mkdir()
    archive = subprocess.run(["git", "archive", args.before, "ppo_trl_example.py", "rewards.py", "extras"], cwd=REPO,
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)

    import yaml

    recipe = yaml.safe_load((REPO / flags[flags.index("--config") + 1]).read_text())
    plain = REPO / recipe["dataset_name"]
    outlier = work / "with_outlier"
    dataset_with_outlier(plain, outlier, text, times)
    batch = recipe["per_device_train_batch_size"] * recipe.get("gradient_accumulation_steps", 1)
    if "--per_device_train_batch_size" in flags:
        batch = int(flags[flags.index("--per_device_train_batch_size") + 1])

    print(f"{machine()}; fp32 matmul {matmul_gflops():.0f} GFLOP/s")
    for name, dataset in [("plain", plain), ("one long prompt", outlier)]:
        longest, per_batch = mean_widths(flags, dataset, batch)
        print(f"{name}: prompt width of a rollout of {batch}: dataset's longest {longest}, batch's longest "
              f"{per_batch:.1f} on average")
    times_s = {}
    scripts = {"before": old / "ppo_trl_example.py", "after": REPO / "ppo_trl_example.py"}
    for version in args.versions:
        script = scripts[version]
        for name, dataset in [("plain", plain), ("one long prompt", outlier)]:
            out = work / f"{version}-{name.replace(' ', '_')}"
            shutil.rmtree(out, ignore_errors=True)
            wall = timed(script, flags, dataset, out)
            times_s[version, name] = update_s(out)
            print(f"{version:6s} {name:16s} {wall:6.1f} s in all, {times_s[version, name]:6.1f} s an update (median)",
                  flush=True)
    for version in args.versions:
        ratio = times_s[version, "one long prompt"] / times_s[version, "plain"]
        print(f"{version}: an update with the long prompt in the data / without = {ratio:.2f}")


if __name__ == "__main__":
    main()
