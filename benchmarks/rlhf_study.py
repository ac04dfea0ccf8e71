"""PPO against GRPO in RLHF with a learned reward model, offline: the study of BENCHMARKS.md, sections 18 and 24.

    python benchmarks/rlhf_study.py                  # the reward model, then 3 seeds of each recipe (~50 min, 2 cores)
    python benchmarks/rlhf_study.py --seeds 1 --skip_build

1. Builds the reward model (assets/build_reward_model.py: SmolLM2's completions on the sentiment task, labelled by
   VADER) unless --skip_build, and reads its held-out agreement with VADER from its build.json.
2. Runs the GRPO and the PPO recipe on it (recipes/SmolLM2-135M-Instruct/*/config_sentiment_rm*.yaml) per seed, the
   two side by side on one thread each (--parallel, --threads), on the same budget of completions (320 each).
3. Reports per run, from eval.json (64 held-out prompts x 2 samples, before and after): the learned reward, the true
   reward (VADER's compound, -1 to 1) and the KL to the starting policy; each gain per 1,000 completions and per
   minute of the whole run; the wall time; and how often the reward model orders the run's own completions as the
   true reward does, among its first and its last 5 steps'. Then mean and sd over seeds per algorithm.
4. Draws overoptimisation.png: over training, the learned reward of the completions each step trained on (as the
   trainer logged it) and their true reward (VADER on the same completions, from completions.jsonl), a line a seed.
   Where the learned reward keeps rising and the true one stops, the policy has found the reward model's blind
   spots (Gao et al. 2022, "Scaling laws for reward model overoptimization").
5. Draws rlhf_study.png (docs/rlhf_study.png is one): each run's true gain, and against its KL, beside earlier
   studies' (--beside: by default section 18's, on a weaker reward model, and its recipes on this one), and this
   study's rewards over training, mean over seeds.

Times depend on the machine: the fp32 matmul rate is measured before each run and given beside its time. A run that
finished (its run.json holds the same command, the same recipe settings and the same reward model's build.json) is
reported, not run again.
"""

import argparse
import json
import shlex
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import matplotlib
import yaml
from harness import OUTPUTS, REPO, matmul_gflops, repo_relative, run_logged, seeds_table

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, str(REPO))
from rewards import sentiment_reward  # noqa: E402

RUNS = REPO / OUTPUTS / "rlhf_study"
KEPT = REPO / "benchmarks" / "results" / "rlhf_study"  # the studies' results, committed (section 24's: results.json)
# drawn beside a study: section 18's, and section 18's recipes on section 23's reward model (section 24)
EARLIER = [KEPT / "reward_model_68.json", KEPT / "reward_model_84_recipes_of_18.json"]
RECIPES = {"grpo": ("grpo_trl_example.py", "recipes/SmolLM2-135M-Instruct/grpo/config_sentiment_rm.yaml",
                    ".venv/bin/python"),
           "ppo": ("ppo_trl_example.py", "recipes/SmolLM2-135M-Instruct/ppo/config_sentiment_rm_lora.yaml",
                   ".venv-ppo/bin/python")}  # each script on the trl its header pins, in setup.sh's environments
TRUE = "sentiment"


def run(algo: str, seed: int, flags: list[str], threads: int, reward_model: dict) -> dict:
    """One recipe's run against the reward model whose build.json is `reward_model`, or its result where one finished
    with the same command, recipe and reward model."""
    script, config, python = RECIPES[algo]
    out = RUNS / f"{algo}-seed{seed}"
    cmd = [str(REPO / python), script, "--config", config, "--seed", str(seed), "--output_dir", repo_relative(out),
           *flags]
    command = shlex.join(["python", *cmd[1:]])
    done = out / "run.json"
    # what the command leaves unsaid: the recipe's settings (not its comments) and the reward model
    inputs = {"recipe": yaml.safe_load((REPO / config).read_text()), "reward_model": reward_model}
    if done.exists():
        finished = json.loads(done.read_text())
        if finished["command"] == command and {key: finished.pop(key, None) for key in inputs} == inputs:
            return finished
    out.parent.mkdir(parents=True, exist_ok=True)
    rate = matmul_gflops(threads)  # each run's own: the machine's rate moves between runs
    start = time.time()
    peak = run_logged(cmd, out.with_suffix(".log"), threads=threads)
    wall = time.time() - start
    report = json.loads((out / "eval.json").read_text())
    learned = next(name for name in report["after"] if name not in (TRUE, "kl"))  # the reward model's name
    completions = sum(1 for _ in open(out / "completions.jsonl"))
    result = {"algo": algo, "seed": seed, "command": command, "completions": completions}
    for key, name in (("true", TRUE), ("learned", learned)):
        before = report["before"][name]["mean_reward"]
        after = report["after"][name]["mean_reward"]
        result |= {f"{key} before": before, f"{key} after": after, f"{key} gain": after - before,
                   f"{key} gain/1k completions": (after - before) / completions * 1000,
                   f"{key} gain/min": (after - before) / wall * 60}
    result |= {"kl after": report["after"].get("kl", {}).get("to_reference"), "wall s": wall, "peak RSS MiB": peak,
               "GFLOP/s": rate}
    done.write_text(json.dumps(result | inputs, indent=2) + "\n")
    return result


def scored(algo: str, seed: int) -> dict:
    """{step: [(learned reward, true reward), ...]} of the completions each training step trained on: the learned as
    the trainer logged it, the true from VADER on the same completions (completions.jsonl)."""
    rows = [json.loads(line) for line in open(RUNS / f"{algo}-seed{seed}" / "completions.jsonl")]
    learned = next(k for k in rows[0] if k not in ("step", "prompt", "completion", TRUE))
    steps = {}
    for row, true in zip(rows, sentiment_reward([r["completion"] for r in rows]), strict=True):
        steps.setdefault(row["step"], []).append((row[learned], true))
    return dict(sorted(steps.items()))


def curve(by_step: dict) -> list[tuple]:
    """[(completions seen, learned reward, true reward), ...] from `scored`: per training step, the mean over the
    completions it trained on."""
    seen, points = 0, []
    for values in by_step.values():
        seen += len(values)
        points.append((seen, statistics.mean(v[0] for v in values), statistics.mean(v[1] for v in values)))
    return points


def agreement_drift(by_step: dict, steps: int = 5) -> dict:
    """How often the reward model orders two of the run's own completions as the true reward does (true scores 0.1 or
    more apart), among its first and its last `steps` steps' completions: a reward model that the policy has learned
    to fool is right less often on what the policy writes late. Scale-free, so comparable between reward models.
    `by_step`: `scored`'s."""
    by_step = list(by_step.values())
    out = {}
    for name, part in (("first", by_step[:steps]), ("last", by_step[-steps:])):
        values = [v for step in part for v in step]
        pairs = [(a, b) for i, a in enumerate(values) for b in values[i + 1:] if abs(a[1] - b[1]) >= 0.1]
        right = sum((a[0] - b[0]) * (a[1] - b[1]) > 0 for a, b in pairs)
        out[f"RM right, {name} {steps} steps"] = round(right / len(pairs), 3) if pairs else None  # None: all alike
    return out


def figure(all_curves: dict, path: Path, title: str) -> None:
    fig, axes = plt.subplots(1, len(all_curves), figsize=(5.5 * len(all_curves), 4), squeeze=False)
    for ax, (algo, by_seed) in zip(axes[0], all_curves.items()):
        twin = ax.twinx()
        for seed, points in by_seed.items():
            seen, learned, true = zip(*points)
            ax.plot(seen, smoothed(learned), color="C0", alpha=0.8, label="learned reward" if seed == min(by_seed)
                    else None)
            twin.plot(seen, smoothed(true), color="C3", alpha=0.8, linestyle="--",
                      label="true reward (VADER)" if seed == min(by_seed) else None)
        ax.set(xlabel="completions trained on", ylabel="learned reward (reward model's score)",
               title=f"{algo.upper()}, {len(by_seed)} seed(s): a line per seed, moving average of 5 steps")
        twin.set_ylabel("true reward (VADER compound)")
        ax.tick_params(axis="y", colors="C0")
        twin.tick_params(axis="y", colors="C3")
        lines = ax.get_legend_handles_labels()
        more = twin.get_legend_handles_labels()
        ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=8, loc="lower right")
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def comparison(studies: list[dict], all_curves: dict, path: Path) -> None:
    """Each study ({"label", "reward_model", "runs"}, this one last) beside the others: the true gain per run, the
    true gain against the KL it cost, and this study's rewards over training, mean over seeds."""
    fig, (gains, cost, steps) = plt.subplots(1, 3, figsize=(16, 4.5))
    names = []
    for i, study in enumerate(studies):
        agreement = study["reward_model"]["held_out_agreement"]["all"]
        names.append(f"reward model {agreement:.0%}\n{study['label']}")
        for j, algo in enumerate(RECIPES):
            runs = [r for r in study["runs"] if r["algo"] == algo]
            if not runs:
                continue
            true = [r["true gain"] for r in runs]
            x = i + (j - 0.5) * 0.3
            gains.scatter([x] * len(true), true, color=f"C{j}", alpha=0.7, label=algo.upper() if i == 0 else None)
            gains.hlines(statistics.mean(true), x - 0.12, x + 0.12, color=f"C{j}")
            measured = [r for r in runs if r["kl after"] is not None]  # none where GRPO ran without a reference
            cost.scatter([r["kl after"] for r in measured], [r["true gain"] for r in measured], color=f"C{j}",
                         marker="os^D"[i % 4], alpha=0.7,
                         label=f"{algo.upper()}, reward model {agreement:.0%}, {study['label']}")
    gains.axhline(0.3, color="grey", linestyle=":", label="the goal, +0.3")
    gains.set_xticks(range(len(studies)), names, fontsize=8)
    gains.set(ylabel="true reward's gain (VADER), held out", title="a dot per seed, a dash their mean")
    cost.set(xlabel="KL from the starting policy after training (nats)", ylabel="true reward's gain (VADER)",
             title="what each run's gain cost in KL")
    cost.legend(fontsize=6)
    twin = steps.twinx()
    for j, (algo, by_seed) in enumerate(all_curves.items()):
        rows = list(zip(*by_seed.values()))  # per step, each seed's (seen, learned, true)
        seen = [row[0][0] for row in rows]
        steps.plot(seen, smoothed([statistics.mean(p[2] for p in row) for row in rows]), color=f"C{j}",
                   label=f"{algo.upper()}: true (VADER)")
        twin.plot(seen, smoothed([statistics.mean(p[1] for p in row) for row in rows]), color=f"C{j}",
                  linestyle="--", label=f"{algo.upper()}: learned")
    steps.set(xlabel="completions trained on", ylabel="true reward (VADER), solid",
              title="this study: true (solid) and learned (dashed), mean over seeds")
    twin.set_ylabel("learned reward (each algorithm's reading), dashed")
    lines, more = steps.get_legend_handles_labels(), twin.get_legend_handles_labels()
    steps.legend(lines[0] + more[0], lines[1] + more[1], fontsize=7, loc="lower right")
    for ax in (gains, cost, steps):
        ax.grid(alpha=0.3)
    gains.legend(fontsize=7)
    fig.suptitle("RLHF against a learned reward model, SmolLM2-135M-Instruct on 2 CPU cores: 320 completions a run",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80, bbox_inches="tight")  # the twin axis's label inside
    plt.close(fig)


def smoothed(values, window: int = 5) -> list[float]:
    return [statistics.mean(values[max(0, i - window + 1):i + 1]) for i in range(len(values))]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--algos", nargs="+", choices=sorted(RECIPES), default=["grpo", "ppo"])
    parser.add_argument("--skip_build", action="store_true", help="use the reward model already built")
    parser.add_argument("--flags", default="", help="extra flags for every run, e.g. '--max_steps 10'")
    parser.add_argument("--parallel", type=int, default=2, help="runs at a time: a seed's GRPO and PPO side by side")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--label", default="the recipes", help="this study's name in the comparison figure")
    parser.add_argument("--beside", nargs="*", type=Path, default=EARLIER,
                        help="earlier studies' results to draw beside this one's (default: the two kept in "
                             "benchmarks/results/rlhf_study/)")
    args = parser.parse_args()
    cores = args.threads * args.parallel
    rate = matmul_gflops(cores)
    print(f"fp32 matmul {rate:.0f} GFLOP/s on {cores} thread(s)", flush=True)
    RUNS.mkdir(parents=True, exist_ok=True)
    started = time.time()
    if not args.skip_build:
        run_logged([sys.executable, "assets/build_reward_model.py"], RUNS / "build_reward_model.log",
                   threads=cores)
    build = json.loads((REPO / "assets" / "sentiment-reward-model" / "build.json").read_text())
    print(f"reward model: held-out agreement with VADER {build['held_out_agreement']}, built in {build['seconds']} s",
          flush=True)

    def one(job: tuple[str, int]) -> tuple[dict, list]:
        algo, seed = job
        result = run(algo, seed, shlex.split(args.flags), args.threads, build)
        by_step = scored(algo, seed)  # VADER on its completions, once
        result |= agreement_drift(by_step)
        kl = "none measured" if result["kl after"] is None else f"{result['kl after']:.1f}"  # GRPO at beta 0
        print(f"  {algo} seed {seed}: true {result['true before']:.3f} -> {result['true after']:.3f}, learned "
              f"{result['learned before']:.3f} -> {result['learned after']:.3f}, KL {kl}, {result['wall s']:.0f} s; "
              "the reward model right on its first and last 5 steps' pairs: "
              f"{result['RM right, first 5 steps']}, {result['RM right, last 5 steps']}", flush=True)
        return result, curve(by_step)

    with ThreadPoolExecutor(args.parallel) as pool:
        done = list(pool.map(one, [(algo, seed) for seed in args.seeds for algo in args.algos]))
    results = [result for result, _ in done]
    all_curves = {algo: {r["seed"]: points for r, points in done if r["algo"] == algo} for algo in args.algos}
    path = RUNS / "results.json"
    study = {"label": args.label, "matmul_gflops": rate, "threads": args.threads, "parallel": args.parallel,
             "reward_model": build, "runs": results, "curves": all_curves,
             "study_seconds": round(time.time() - started)}
    path.write_text(json.dumps(study, indent=2) + "\n")
    figure(all_curves, RUNS / "overoptimisation.png", "RLHF against a learned reward model, SmolLM2-135M-Instruct")
    comparison([*(json.loads(p.read_text()) for p in args.beside), study], all_curves, RUNS / "rlhf_study.png")
    table = seeds_table(results, "algo")
    print(f"\nfp32 matmul {rate:.0f} GFLOP/s on {cores} thread(s); the study took "
          f"{(time.time() - started) / 60:.0f} min\n{table}\n\nwritten to {repo_relative(path)}, "
          f"{repo_relative(RUNS / 'overoptimisation.png')} and {repo_relative(RUNS / 'rlhf_study.png')}")


if __name__ == "__main__":
    main()
