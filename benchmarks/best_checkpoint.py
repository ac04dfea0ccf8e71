"""Which checkpoint to keep when the training reward can be gamed (BENCHMARKS.md, section 28).

GRPO on SmolLM2-135M-Instruct on the bundled chat-addition task (the recipe's settings), trained by a reward that
pays for length (`length`: most at half the 16-token budget, where "Reply with just the number" answers in 2)
while accuracy is what the task measures, with the held-out evaluation every --every steps. For each seed, the step
each metric ranks best: held-out accuracy pass@1 (what --metric_for_best_model accuracy/pass@1 keeps), the held-out
training reward, and TRL's own evaluation (its eval_reward: the training reward on the test split), beside the last
step. Seeds run side by side, one thread each.

    python benchmarks/best_checkpoint.py                 # seeds 1 and 2, 30 steps, evaluated every 6 steps
"""

import argparse
import json
import shlex
import sys
from concurrent.futures import ThreadPoolExecutor

from harness import OUTPUTS, REPO, machine, matmul_gflops, run_logged

RECIPE = "recipes/SmolLM2-135M-Instruct/grpo/config_chat_addition.yaml"
TRUE, PROXY = ("accuracy", "pass@1"), ("length", "mean_reward")  # what the task measures; what training pays for


def command(seed: int, args) -> list[str]:
    out = OUTPUTS / "best_checkpoint" / f"seed{seed}"
    return [sys.executable, "grpo_trl_example.py", "--config", RECIPE, "--seed", seed, "--max_steps", args.steps,
            "--reward_funcs", "length", "--eval_reward_funcs", "accuracy", "--eval_strategy", "steps",
            "--eval_steps", args.every, "--save_strategy", "steps", "--save_steps", args.every,
            "--save_only_model", "true", "--save_total_limit", 2, "--metric_for_best_model", "/".join(TRUE),
            "--load_best_model_at_end", "true", "--output_dir", out]


def ranked(points: dict[int, float]) -> int:
    """The step with the highest value, the earliest of a tie (as Trainer keeps it)."""
    return max(points, key=lambda step: (points[step], -step))


def pick(points: dict[int, float], true: dict[int, float], errors: dict[int, float]) -> str:
    """The step `points` rank best, with the held-out accuracy there."""
    step = ranked(points)
    return f"step {step} ({true[step]:.3f} ± {errors[step]:.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--every", type=int, default=6)
    parser.add_argument("--report_only", action="store_true", help="the table from the runs' folders, run before")
    args = parser.parse_args()
    if not args.report_only:
        rate = matmul_gflops(threads=1)
        print(f"{machine()}; fp32 matmul {rate:.0f} GFLOP/s on 1 thread")
        commands = {seed: [str(part) for part in command(seed, args)] for seed in args.seeds}
        for cmd in commands.values():
            print(shlex.join(cmd))
        (REPO / OUTPUTS / "best_checkpoint").mkdir(parents=True, exist_ok=True)
        with ThreadPoolExecutor(len(commands)) as pool:
            list(pool.map(lambda seed: run_logged(commands[seed],
                                                  REPO / OUTPUTS / "best_checkpoint" / f"seed{seed}.log"), commands))
    print("| seed | held-out accuracy pass@1 at each evaluated step | best by it | by the held-out training reward "
          "| by TRL's eval_reward | last | kept ('after') |")
    print("|---|---|---|---|---|---|---|")
    for seed in args.seeds:
        out = REPO / OUTPUTS / "best_checkpoint" / f"seed{seed}"
        report = json.loads((out / "eval.json").read_text())
        true = {p["step"]: p["metrics"][TRUE[0]][TRUE[1]] for p in report["during"]}
        errors = {p["step"]: p["standard_error"][TRUE[0]][TRUE[1]] for p in report["during"]}
        proxy = {p["step"]: p["metrics"][PROXY[0]][PROXY[1]] for p in report["during"]}
        trls = {m["step"]: m["eval_reward"] for m in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
                if "eval_reward" in m}
        curve = ", ".join(f"{step}: {value:.3f}" for step, value in sorted(true.items()))
        best = report["best"]
        picks = " | ".join(pick(points, true, errors) for points in (true, proxy, trls))
        print(f"| {seed} | before {report['before'][TRUE[0]][TRUE[1]]:.3f}; {curve} | {picks} | step "
              f"{best['last_step']} ({best['last_value']:.3f} ± {best['last_error']:.3f}) | "
              f"{report['after'][TRUE[0]][TRUE[1]]:.3f} |")
        lengths = ", ".join(f"{step}: {value:.3f}" for step, value in sorted(proxy.items()))
        print(f"  seed {seed}: held-out length reward at each step: before "
              f"{report['before'][PROXY[0]][PROXY[1]]:.3f}; {lengths}")
        change = best.get("change") or {}
        if change:
            print(f"  seed {seed}: last - best {change['change']:+.3f} ± {change['standard_error']:.3f} (paired)")


if __name__ == "__main__":
    main()
