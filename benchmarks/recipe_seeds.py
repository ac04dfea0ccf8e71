"""Run a recipe over seeds (and, optionally, over a sweep of settings) and report what each run learned and cost.

    python benchmarks/recipe_seeds.py --config recipes/SmolLM2-135M-Instruct/grpo/config_chat_addition.yaml \
        --seeds 1 2 3
    python benchmarks/recipe_seeds.py --config recipes/SmolLM2-135M-Instruct/grpo/config_chat_addition.yaml \
        --seeds 1 --variant lr3e-5 "--learning_rate 3e-5" --variant lora "--use_peft --learning_rate 2e-4" \
        --parallel 2 --threads 1
    python benchmarks/recipe_seeds.py --config recipes/SmolLM2-135M-Instruct/grpo/config_chat_addition.yaml \
        --seeds 1 2 3 --python trl-1.12 .venv-ppo/bin/python --python trl-1.16 .venv/bin/python --parallel 2 --threads 1

Each run is `python <script> --config <recipe> --seed S <variant flags>`, from the repo root, offline; with
`--python NAME PATH`, each variant runs under each interpreter named (two environments side by side: the same seed's
runs are next to each other in the queue, so that with --parallel 2 they share the machine alike). The table gives
per run: held-out pass@1 (sampled as training samples) and greedy accuracy before and after training, the pass@1
gain, the gain per minute of the whole run (start-up and evaluation included), the training reward over the first
and last 20% of logged steps, the wall time and the peak RSS; then mean, sd, min and max over seeds per variant.
results.json and results.png (held-out accuracy after training, per variant and seed) go beside the runs.

Times depend on the machine: the fp32 matmul rate is measured at the start, with the runs' thread count, and printed
with the table. Sweeps may run two at a time, one thread each (`--parallel 2 --threads 1`): that compares what the
settings learn, at half speed each; time a recipe alone, with both threads (`--threads 2`, the default).
A run that finished (its run.json holds the same command) is reported, not run again, so a sweep that was
interrupted resumes where it stopped.
"""

import argparse
import json
import shlex
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml
from harness import OUTPUTS, REPO, matmul_gflops, repo_relative, run_logged, seeds_table

RUNS = REPO / OUTPUTS / "recipe_seeds"
SCRIPTS = {"grpo": "grpo_trl_example.py", "ppo": "ppo_trl_example.py"}


def script_of(config: Path) -> str:
    """The script a recipe is for, from its folder (recipes/<model>/<algo>/...)."""
    algo = next((part for part in reversed(config.parts) if part in SCRIPTS), None)
    if algo is None:
        raise SystemExit(f"error: {config} is under no grpo/ or ppo/ folder; which script it is for is unknown")
    return SCRIPTS[algo]


def outputs_of(config: Path) -> Path:
    """benchmarks/outputs/recipe_seeds/<model>-<algo>-<recipe name>: one folder per recipe."""
    return RUNS / "-".join(config.parts[-3:]).removesuffix(".yaml")


def run(config: Path, variant: str, flags: list[str], python: str, seed: int, threads: int) -> dict:
    out = outputs_of(config) / f"{variant}-seed{seed}"
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [python, script_of(config), "--config", repo_relative(config), "--seed", str(seed),
           "--output_dir", repo_relative(out), *flags]
    command = shlex.join(["python" if python == sys.executable else python, *cmd[1:]])
    done = out / "run.json"  # a finished run is not run again: an interrupted sweep resumes where it stopped
    if done.exists() and json.loads(done.read_text())["command"] == command:
        return json.loads(done.read_text())
    start = time.time()
    peak = run_logged(cmd, out.parent / f"{out.name}.log", threads=threads)  # a name may hold a dot: trl-1.16
    wall = time.time() - start
    report = json.loads((out / "eval.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    before, after = report["before"]["accuracy"], report["after"]["accuracy"]
    result = {"variant": variant, "seed": seed, "command": command,
            "pass@1 before": before["pass@1"], "pass@1 after": after["pass@1"],
            "gain": after["pass@1"] - before["pass@1"], "gain/min": (after["pass@1"] - before["pass@1"]) / wall * 60,
            "greedy before": before["greedy_accuracy"], "greedy after": after["greedy_accuracy"],
            "reward first": summary["reward_first_20pct"], "reward last": summary["reward_last_20pct"],
            "wall s": wall, "train s": summary["train_runtime"],
            "step s": summary["train_runtime"] / summary["global_step"], "peak RSS MiB": peak}
    done.write_text(json.dumps(result, indent=2) + "\n")
    return result


def figure(rows: list[dict], path: Path, title: str) -> None:
    """Held-out pass@1 and greedy accuracy after training, one dot per seed and a bar for the mean, per variant; the
    grey line is the mean before training (the same starting model for every variant)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = list(dict.fromkeys(r["variant"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(4 + 1.1 * len(variants), 4), sharey=True)
    for ax, metric in zip(axes, ("pass@1", "greedy")):
        for i, variant in enumerate(variants):
            values = [r[f"{metric} after"] for r in rows if r["variant"] == variant]
            ax.bar(i, statistics.mean(values), color="C0", alpha=0.35)
            ax.plot([i] * len(values), values, "o", color="C0")
        ax.axhline(statistics.mean(r[f"{metric} before"] for r in rows), color="grey", linestyle="--",
                   label="before training")
        ax.set_xticks(range(len(variants)), variants, rotation=30, ha="right", fontsize=8)
        ax.set_title(f"held-out {metric} after training", fontsize=10)
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, required=True, help="a recipe under recipes/<model>/<grpo|ppo>/")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--variant", nargs=2, action="append", metavar=("NAME", "FLAGS"),
                        help="a named set of extra flags; repeat for a sweep (default: the recipe as it is)")
    parser.add_argument("--python", nargs=2, action="append", metavar=("NAME", "PATH"),
                        help="an interpreter to run each variant under, e.g. another environment's; repeat to compare")
    parser.add_argument("--parallel", type=int, default=1, help="runs at a time")
    parser.add_argument("--threads", type=int, default=2, help="torch threads per run")
    args = parser.parse_args()
    config = args.config.resolve()
    variants = [(name, shlex.split(flags)) for name, flags in args.variant or [("recipe", "")]]
    pythons = args.python or [(None, sys.executable)]
    jobs = []
    for seed in args.seeds:  # the same seed's runs next to each other
        for name, flags in variants:
            for env, python in pythons:
                label = name if env is None else f"{env}-{name}" if args.variant else env
                jobs.append((label, flags, python, seed))
    rate = matmul_gflops(args.threads)
    print(f"{len(jobs)} runs of {repo_relative(config)}, {args.parallel} at a time, {args.threads} thread(s) each; "
          f"fp32 matmul {rate:.0f} GFLOP/s on {args.threads} thread(s)", flush=True)
    print("recipe:", json.dumps(yaml.safe_load(config.read_text())), flush=True)

    def one(job):
        result = run(config, *job, args.threads)
        print(f"  {result['variant']} seed {result['seed']}: pass@1 {result['pass@1 before']:.3f} -> "
              f"{result['pass@1 after']:.3f}, greedy {result['greedy before']:.3f} -> {result['greedy after']:.3f}, "
              f"{result['wall s']:.0f} s, {result['peak RSS MiB']:.0f} MiB", flush=True)
        return result

    with ThreadPoolExecutor(args.parallel) as pool:
        results = list(pool.map(one, jobs))
    path = outputs_of(config) / "results.json"
    path.write_text(json.dumps({"recipe": yaml.safe_load(config.read_text()), "matmul_gflops": rate,
                                "threads": args.threads, "parallel": args.parallel, "runs": results}, indent=2) + "\n")
    figure(results, path.with_suffix(".png"), f"{repo_relative(config)}, {len(args.seeds)} seed(s) per variant")
    table = seeds_table(results, "variant", ("mean", "sd", "min", "max"))
    print(f"\nfp32 matmul {rate:.0f} GFLOP/s on {args.threads} thread(s); {args.parallel} run(s) at a time\n"
          f"{table}\n\nwritten to {repo_relative(path)} and {repo_relative(path.with_suffix('.png'))}")


if __name__ == "__main__":
    main()
