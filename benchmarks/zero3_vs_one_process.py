"""Does GRPO (or PPO) under DeepSpeed ZeRO-3 on 2 CPU processes learn as one process does, seed for seed?

For each seed: the tiny task for --steps steps (PPO: updates) under `accelerate launch --config_file
accelerate_configs/zero3.yaml --num_processes 2`, and in one process with the same global batch (GRPO: 32 completions
a step, 16 per process; PPO: the default run's 64 an update, 32 per process). The processes sample with their own
random streams, so the two runs cannot agree completion for completion; what must agree is the reward curve, within
the spread this measures. Prints and saves, per seed, the mean reward of each run over its steps and their
difference; tests/e2e/test_multiprocess.py allows a little more than the largest difference.

    python benchmarks/zero3_vs_one_process.py            # GRPO, 5 seeds, ~3 min on 2 cores
    python benchmarks/zero3_vs_one_process.py --script ppo
"""

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness import COMMON_FLAGS, OUTPUTS, REPO, matmul_gflops, run_logged

LAUNCH = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", "accelerate_configs/zero3.yaml",
          "--num_processes", "2", "--mixed_precision", "no"]


def mean_reward(out: Path) -> float:
    return statistics.mean(json.loads(line)["reward"] for line in (REPO / out / "metrics.jsonl").open()
                           if '"reward"' in line)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", choices=["grpo", "ppo"], default="grpo")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--output_dir", type=Path)
    args = parser.parse_args()
    name = "zero3_vs_one_process" + ("_ppo" if args.script == "ppo" else "") + (
        f"_{args.steps}_steps" if args.steps != 10 else "")  # the tests' length, 4, beside the first study's 10
    args.output_dir = args.output_dir or OUTPUTS / name
    script, batch = f"{args.script}_trl_example.py", {"grpo": 16, "ppo": 32}[args.script]  # per process
    # PPO refuses COMMON_FLAGS' options (its loop never reads them), and PPOTrainer logs every update anyway
    length = [*COMMON_FLAGS, "--max_steps", str(args.steps)] if args.script == "grpo" else [
        "--total_episodes", str(2 * batch * args.steps), "--eval_num_samples", "0"]
    rate = matmul_gflops(2)  # the yardstick for the wall time printed at the end
    print(f"fp32 matmul: {rate:.1f} GFLOP/s on 2 threads", flush=True)
    start, rows = time.time(), []
    for seed in args.seeds:
        flags = [*length, "--seed", str(seed), "--save_strategy", "no"]
        zero3, one = args.output_dir / f"zero3-{seed}", args.output_dir / f"one-{seed}"
        runs = [[*LAUNCH, script, *flags, "--per_device_train_batch_size", str(batch), "--output_dir", str(zero3)],
                [sys.executable, script, *flags, "--per_device_train_batch_size", str(2 * batch),
                 "--output_dir", str(one)]]
        with ThreadPoolExecutor(2) as pool:  # side by side: 3 processes on 2 cores, one torch thread each
            (REPO / args.output_dir).mkdir(parents=True, exist_ok=True)
            list(pool.map(lambda cmd: run_logged(cmd, REPO / args.output_dir / f"{Path(cmd[-1]).name}.log"), runs))
        row = {"seed": seed, "zero3": round(mean_reward(zero3), 4), "one": round(mean_reward(one), 4)}
        row["difference"] = round(row["zero3"] - row["one"], 4)
        rows.append(row)
        print(row, flush=True)
    largest = max(abs(r["difference"]) for r in rows)
    minutes = (time.time() - start) / 60
    result = {"command": " ".join(["python", *sys.argv]), "script": script, "steps": args.steps,
              "matmul_gflops": round(rate, 1), "minutes": round(minutes, 1), "runs": rows,
              "largest_difference": largest}
    path = REPO / "benchmarks" / "results" / f"{name}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"largest difference of the mean rewards over {args.steps} steps: {largest:.3f}; {minutes:.1f} min at "
          f"{rate:.1f} GFLOP/s; {path}")


if __name__ == "__main__":
    main()
