"""Where a GRPO step's time goes on a CPU, and how close each part comes to the machine's matmul rate.

    python benchmarks/step_split.py --variant recipe "" \
        --variant wide "--per_device_train_batch_size 32"          # ~6 min on 2 cores

Each variant is the SmolLM2 GRPO recipe (or `--config`) plus its flags, run for `--steps` steps through timed_run.py,
alone, on both threads, without the held-out evaluation. For the steps after the first (which warms up), the median
of: the step's time and its completions; generation's time (TRL's `transformers.generate` timer) and its share; the
rate of generation's matmuls (the FLOPs counted inside `generate`), of the rest of the step (forward, backward and
optimizer, against the time left), and of the whole step, each as a fraction of the fp32 matmul rate measured at the
start of the same run. Writes benchmarks/results/step_split.json.
"""

import argparse
import json
import shlex
import statistics
import sys

from harness import BENCH, REPO, matmul_gflops, repo_relative, run, step_flops

RECIPE = "recipes/SmolLM2-135M-Instruct/grpo/config_chat_addition.yaml"


def split(record: dict) -> dict:
    """Per-step medians after the first step, from the FLOP counts at each log and TRL's generate timer."""
    generate_s = {}
    for name, step, seconds in record["profiling"]:
        if name.endswith("transformers.generate"):
            generate_s[step] = generate_s.get(step, 0.0) + seconds
    steps = [{**s, "gen_s": generate_s.get(s["step"], 0.0)} for s in step_flops(record)]
    med = {key: statistics.median(s[key] for s in steps) for key in ("s", "gen_s", "flops", "generate_flops")}
    args = record["args"]
    completions = args["per_device_train_batch_size"] * args["gradient_accumulation_steps"]
    return {"completions": completions, "step_s": med["s"], "ms_per_completion": 1000 * med["s"] / completions,
            "generate_s": med["gen_s"], "generate_share": med["gen_s"] / med["s"],
            "generate_gflops": med["generate_flops"] / med["gen_s"] / 1e9 if med["gen_s"] else None,
            "rest_gflops": (med["flops"] - med["generate_flops"]) / (med["s"] - med["gen_s"]) / 1e9,
            "step_gflops": med["flops"] / med["s"] / 1e9}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=RECIPE)
    parser.add_argument("--variant", nargs=2, action="append", metavar=("NAME", "FLAGS"), required=True)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    rate = matmul_gflops(2)
    print(f"fp32 matmul: {rate:.1f} GFLOP/s on 2 threads", flush=True)
    results = []
    for name, flags in args.variant:
        out = BENCH / "outputs" / "step_split" / name
        cli = ["--config", args.config, "--output_dir", repo_relative(out), "--eval_num_samples", "0",
               "--max_steps", str(args.steps), "--logging_steps", "1", *shlex.split(flags)]
        record = run("grpo_trl_example.py", cli, out.with_suffix(".json"), env={"OMP_NUM_THREADS": "2"}, timeout=3600)
        r = {"variant": name, "flags": flags, **split(record), "command": shlex.join(["python", "grpo_trl_example.py",
                                                                                      *cli])}
        for key in ("generate", "rest", "step"):
            if r[f"{key}_gflops"] is not None:
                r[f"{key}_of_matmul"] = r[f"{key}_gflops"] / rate
        results.append({key: round(value, 3) if isinstance(value, float) else value for key, value in r.items()})
        print(f"{name}: {r['completions']} completions, {r['step_s']:.1f} s/step ({r['ms_per_completion']:.0f} ms "
              f"each), generate {r['generate_s']:.1f} s ({r['generate_share']:.0%}); of the matmul rate: generate "
              f"{r.get('generate_of_matmul', 0):.2f}, the rest {r['rest_of_matmul']:.2f}, the step "
              f"{r['step_of_matmul']:.2f}", flush=True)
    path = REPO / "benchmarks" / "results" / "step_split.json"
    path.write_text(json.dumps({"command": shlex.join(["python", "benchmarks/step_split.py", *sys.argv[1:]]),
                                "matmul_gflops": round(rate, 1), "results": results}, indent=1) + "\n")
    print(f"written to {path.relative_to(REPO)}")


if __name__ == "__main__":
    main()
