"""How much does the default run learn, and how much does that vary with the seed?

Runs the no-argument GRPO and PPO commands (the ones the learning tests run, with one torch thread) over several
seeds, then prints per seed and over seeds: the mean reward over the first and the last 20% of logged steps, its
rise, held-out pass@1 before and after training, and the gain in held-out greedy accuracy. `tools` runs the bundled
tool task (`--config recipes/tiny/tools.yaml`) and reports its tool-call rate and accuracy, first and last 20%,
instead.
The learning tests' margins are set from this spread (mean - 3 standard deviations, rounded down), and
BENCHMARKS.md records the table.

    python benchmarks/learning_seeds.py                       # seeds 1-7 and 42, GRPO and PPO, ~15 min on 2 cores
    python benchmarks/learning_seeds.py --scripts ppo --seeds 1 2 3
    python benchmarks/learning_seeds.py --scripts tools       # ~3 min

Runs go two at a time, each pinned to one thread (OMP_NUM_THREADS=1): with one thread a run's numbers depend only
on its seed, not on the machine's load, so the test that reruns seed 42 gets the number measured here.
"""

import argparse
import json
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness import repo_relative, run_logged

REPO = Path(__file__).resolve().parents[1]
OUTPUTS = REPO / "benchmarks" / "outputs" / "learning_seeds"
# The commands the learning tests run: tests/e2e/test_grpo.py and tests/e2e/test_ppo.py (test_default_run_learns), and
# tests/e2e/test_tools.py (test_tool_task_learns).
SCRIPTS = {"grpo": ("grpo_trl_example.py", []),
           "ppo": ("ppo_trl_example.py", []),
           "tools": ("grpo_trl_example.py", ["--config", "recipes/tiny/tools.yaml"])}


def run(script: str, seed: int) -> dict:
    out = OUTPUTS / f"{script}-seed{seed}"
    path, flags = SCRIPTS[script]
    out.parent.mkdir(parents=True, exist_ok=True)
    run_logged([sys.executable, path, "--seed", str(seed), "--output_dir", repo_relative(out), *flags],
               out.with_suffix(".log"))
    summary = json.loads((out / "summary.json").read_text())
    if script == "tools":
        (calls_first, calls_last), (first, last) = (summary["first_last_20pct"][key] for key in (
            "tools/call_frequency", "rewards/accuracy/mean"))
        return {"script": script, "seed": seed, "calls first": calls_first, "calls last": calls_last,
                "calls rise": calls_last - calls_first, "accuracy first": first, "accuracy last": last,
                "accuracy rise": last - first}
    report = json.loads((out / "eval.json").read_text())
    before, after = report["before"]["accuracy"], report["after"]["accuracy"]
    first, last = summary["reward_first_20pct"], summary["reward_last_20pct"]
    return {"script": script, "seed": seed, "first": first, "last": last, "rise": last - first,
            "pass@1 before": before["pass@1"], "pass@1 after": after["pass@1"],
            "pass@1 gain": after["pass@1"] - before["pass@1"],
            "greedy gain": after["greedy_accuracy"] - before["greedy_accuracy"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scripts", nargs="+", choices=sorted(SCRIPTS), default=["grpo", "ppo"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5, 6, 7, 42])
    parser.add_argument("--parallel", type=int, default=2, help="runs at a time (one thread each)")
    args = parser.parse_args()
    jobs = [(script, seed) for script in args.scripts for seed in args.seeds]
    commands = [f"OMP_NUM_THREADS=1 python {SCRIPTS[s][0]} --seed S {' '.join(SCRIPTS[s][1])}" for s in args.scripts]
    print(f"{len(jobs)} runs, {args.parallel} at a time: {'; '.join(commands)}", flush=True)
    with ThreadPoolExecutor(args.parallel) as pool:
        results = list(pool.map(lambda job: run(*job), jobs))
    OUTPUTS.mkdir(parents=True, exist_ok=True)
    (OUTPUTS / "results.json").write_text(json.dumps(results, indent=2) + "\n")

    for script in args.scripts:
        rows = [r for r in results if r["script"] == script]
        keys = [k for k in rows[0] if k not in ("script", "seed")]
        print(f"\n{script}: {len(rows)} seeds")
        print(f"| {'seed':>5} | " + " | ".join(f"{k:>13}" for k in keys) + " |")
        print("|" + "---:|" * (len(keys) + 1))
        for r in rows:
            print(f"| {r['seed']:>5} | " + " | ".join(f"{r[k]:13.3f}" for k in keys) + " |")
        for name, stat in [("mean", statistics.mean), ("sd", statistics.stdev), ("min", min), ("max", max)]:
            print(f"| {name:>5} | " + " | ".join(f"{stat([r[k] for r in rows]):13.3f}" for k in keys) + " |")
        floor = {k: statistics.mean([r[k] for r in rows]) - 3 * statistics.stdev([r[k] for r in rows]) for k in keys}
        print("| m-3sd | " + " | ".join(f"{floor[k]:13.3f}" for k in keys) + " |")


if __name__ == "__main__":
    main()
