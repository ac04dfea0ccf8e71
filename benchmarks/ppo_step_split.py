"""Where a PPO update's time goes, beside a GRPO step's: the two RLHF recipes for a few updates each, on both threads,
without their held-out evaluation, each on its own trl (BENCHMARKS.md, section 23).

    python benchmarks/ppo_step_split.py      # ~5 min at 234 GFLOP/s; needs assets/sentiment-reward-model
    python benchmarks/ppo_step_split.py --updates 3 --ppo_flags "--num_ppo_epochs 2"

timed_run.py clocks the parts of PPOTrainer's update (trl 1.12 has no timers of its own): the rollout's generation,
the reference's forward pass, the value model and the reward model over the rollout; the update's forward passes
(policy and value together), backward and optimizer steps; "other" is the rest of the update (advantages, whitening,
logging). For GRPO, TRL's own timers: generation (`transformers.generate`) inside the step, the rest of the step
(the reference's and the policy's forward, the reward model, the backward and the optimizer). Times are the mean over
the run's updates, the first (which warms up) included; the fp32 matmul rate is measured at the start.
"""

import argparse
import shlex
from pathlib import Path

import yaml

from harness import BENCH, REPO, matmul_gflops, repo_relative, run

RECIPES = {"ppo": ("ppo_trl_example.py", "recipes/SmolLM2-135M-Instruct/ppo/config_sentiment_rm_lora.yaml",
                   ".venv-ppo/bin/python"),
           "grpo": ("grpo_trl_example.py", "recipes/SmolLM2-135M-Instruct/grpo/config_sentiment_rm.yaml",
                    ".venv/bin/python")}
PARTS = ["rollout: generation", "rollout: reference forward", "rollout: value model", "rollout: reward model",
         "update: policy and value forward", "update: backward", "update: optimizer step"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=5, help="PPO updates, and GRPO steps, of 16 completions")
    parser.add_argument("--ppo_flags", default="", help="more flags for the PPO run")
    parser.add_argument("--grpo_flags", default="", help="more flags for the GRPO run")
    args = parser.parse_args()
    rate = matmul_gflops(2)
    print(f"fp32 matmul: {rate:.0f} GFLOP/s on 2 threads", flush=True)
    rows = {}
    for algo, (script, config, python) in RECIPES.items():
        out = BENCH / "outputs" / "ppo_step_split" / algo
        out.parent.mkdir(parents=True, exist_ok=True)
        recipe = yaml.safe_load((REPO / config).read_text())  # the recipe without its held-out evaluation
        recipe = {key: value for key, value in recipe.items() if not key.startswith("eval_")}
        (out.parent / f"{algo}.yaml").write_text(yaml.safe_dump(recipe))
        budget = ["--total_episodes", str(16 * args.updates)] if algo == "ppo" else ["--max_steps", str(args.updates)]
        cli = ["--config", repo_relative(out.parent / f"{algo}.yaml"), "--output_dir", repo_relative(out), *budget,
               *shlex.split(getattr(args, f"{algo}_flags"))]
        print(f"{algo}: {shlex.join(['python', script, *cli])}", flush=True)
        record = run(script, cli, out.with_suffix(".json"), env={"OMP_NUM_THREADS": "2"}, timeout=3600,
                     python=str(REPO / python))
        training = record["t_train_end"] - record["t_train_begin"]
        if algo == "ppo":
            parts = {name: seconds / args.updates for name, seconds in record["ppo_parts"].items()}
        else:  # TRL's timers: generate inside the step, and the rest
            generate = sum(s for name, _, s in record["profiling"] if name.endswith("transformers.generate"))
            parts = {"rollout: generation": generate / args.updates}
        parts["other" if algo == "ppo" else "the rest of the step"] = training / args.updates - sum(parts.values())
        rows[algo] = (training / args.updates, parts)
    names = PARTS + ["other", "the rest of the step"]
    print(f"\n| | s per update of 16 | {' | '.join(names)} |\n|---|---:|{'---:|' * len(names)}")
    for algo, (per_update, parts) in rows.items():
        cells = [f"{parts[n]:.2f} ({parts[n] / per_update:.0%})" if n in parts else "" for n in names]
        print(f"| {algo.upper()} | {per_update:.2f} | {' | '.join(cells)} |")
    print(f"\nat {rate:.0f} GFLOP/s (fp32 matmul, 2 threads); records in {repo_relative(Path(out).parent)}")


if __name__ == "__main__":
    main()
