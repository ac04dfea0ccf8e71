"""How a training step's time and peak memory grow with completion length, completions per step and model size,
for both scripts.

    python benchmarks/cost_curves.py            # 3 axes x 3 points x 2 scripts, ~10 min on 2 cores
    python benchmarks/cost_curves.py --quick    # shorter runs and the two smaller models only, ~4 min

Models: three Llamas with random weights and the bundled character tokenizer, built by build_model.py into
benchmarks/outputs/ (0.4M, 6.5M and 71M parameters; random weights write random characters, so completions nearly
always run to the length limit: time and memory do not depend on what is written). From a base point (the 6.5M
model, 32-token completions, 16 completions per step) one axis moves at a time:

    completion length      8, 32, 128 tokens     (GRPO --max_completion_length, PPO --response_length)
    completions per step   8, 16, 32             (GRPO: 2 prompts x --num_generations 4, 8, 16;
                                                  PPO: --per_device_train_batch_size, one completion per prompt)
    model size             0.4M, 6.5M, 71M parameters

`--smollm2` measures the real model instead (assets/SmolLM2-135M-Instruct, assets/convert_gguf.py) on its chat task,
each script from its recipe in recipes/SmolLM2-135M-Instruct/ (16 completions a step), at two completion lengths
(16 and 64 tokens), with full fine-tuning and with LoRA (r 16 on every linear layer); then at the recipes' own point
with activation checkpointing on, and GRPO with `--cache_implementation static` and with `--use_transformers_paged`
(continuous batching): both torch threads, one run at a time, 3 steps each, the first one not counted. Each run goes
through timed_run.py, which counts every linear layer's matmul FLOPs (generation, forward and backward, activation
recomputation included), so the table also gives each step's FLOPs, its achieved GFLOP/s, and that rate as a fraction
of the fp32 matmul rate measured at the start of the same benchmark: how close a step comes to what the CPU can do.

    python benchmarks/cost_curves.py --smollm2                  # 12 runs, ~25 min on 2 cores

A step is one optimizer step for GRPO and one PPO update for PPO (its 4 epochs over the batch, in
--num_mini_batches 1), so the fair unit is time per completion: the step's time divided by its completions. The
step time is the median interval between consecutive logged steps (metrics.jsonl's wall_time, --logging_steps 1)
after the first; the memory is the run's peak RSS (its rusage). One thread per run (OMP_NUM_THREADS=1), one run at
a time. Writes cost_curves.json and cost_curves.png to --output_dir and prints a table.
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from harness import ONE_THREAD_OFFLINE, repo_relative, run_logged  # noqa: E402

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
MODELS = {  # name -> build_model.py's size flags
    "0.4M": ["--hidden_size", "64", "--intermediate_size", "176", "--num_hidden_layers", "8",
             "--num_attention_heads", "4"],
    "6.5M": ["--hidden_size", "256", "--intermediate_size", "704", "--num_hidden_layers", "8",
             "--num_attention_heads", "8"],
    "71M": [],  # build_model.py's default: hidden 768, MLP 2048, 10 layers
}
BASE = {"model": "6.5M", "length": 32, "completions": 16}
AXES = {"length": [8, 32, 128], "completions": [8, 16, 32], "model": list(MODELS)}


def model_path(name: str, output_dir: Path) -> Path:
    path = output_dir / f"random-llama-{name}"
    if not (path / "config.json").exists():
        subprocess.run([sys.executable, str(BENCH / "build_model.py"), "--output_dir", str(path), *MODELS[name]],
                       check=True, cwd=REPO, env={**os.environ, **ONE_THREAD_OFFLINE})
    return path


def flags(script: str, point: dict, steps: int, model: Path, out: Path) -> list[str]:
    common = ["--model_name_or_path", repo_relative(model), "--output_dir", repo_relative(out), "--eval_strategy", "no",
              "--eval_num_samples", "0", "--report_to", "none", "--save_strategy", "no", "--seed", "0"]
    if script == "grpo":
        group = point["completions"] // 2
        return [*common, "--max_steps", str(steps), "--logging_steps", "1", "--num_generations", str(group),
                "--per_device_train_batch_size", str(point["completions"]),
                "--max_completion_length", str(point["length"])]
    return [*common, "--total_episodes", str(steps * point["completions"]),
            "--per_device_train_batch_size", str(point["completions"]), "--num_mini_batches", "1",
            "--response_length", str(point["length"])]


def measure(script: str, point: dict, steps: int, output_dir: Path) -> dict:
    out = output_dir / "runs" / f"{script}-{point['model']}-L{point['length']}-C{point['completions']}"
    cmd = [sys.executable, f"{script}_trl_example.py",
           *flags(script, point, steps, model_path(point["model"], output_dir), out)]
    out.mkdir(parents=True, exist_ok=True)
    peak_rss_mib = run_logged(cmd, out.with_suffix(".log"))
    times = [json.loads(line)["wall_time"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    step = statistics.median(b - a for a, b in zip(times[1:], times[2:]))  # from the second logged step on
    return {"script": script, **point, "step_s": round(step, 3),
            "ms_per_completion": round(1000 * step / point["completions"], 2),
            "peak_rss_mib": peak_rss_mib, "command": " ".join(["python", *cmd[1:]])}


SMOLLM2_RECIPES = {"grpo": "recipes/SmolLM2-135M-Instruct/grpo/config_chat_addition.yaml",
                   "ppo": "recipes/SmolLM2-135M-Instruct/ppo/config_chat_addition.yaml"}
LORA = ["--use_peft", "--lora_r", "16", "--lora_alpha", "32", "--lora_target_modules", "all-linear"]
# (script, completion length, LoRA?, extra flags): both scripts at two lengths, full and LoRA; then, at the recipes'
# own point, activation checkpointing (off by default on a CPU) and GRPO's generation options that might help a CPU
SMOLLM2_POINTS = [(script, length, lora, [])
                  for script in ("grpo", "ppo") for length in (16, 64) for lora in (False, True)]
SMOLLM2_POINTS += [("grpo", 16, False, ["--activation_checkpointing", "true"]),
                   ("ppo", 16, False, ["--activation_checkpointing", "true"]),
                   ("grpo", 16, False, ["--cache_implementation", "static"]),
                   ("grpo", 16, False, ["--use_transformers_paged", "true"])]


def measure_smollm2(script: str, length: int, lora: bool, flags: list[str], steps: int, output_dir: Path) -> dict:
    """One SmolLM2 run of `steps` steps from the script's recipe, timed and FLOP-counted (timed_run.py)."""
    from harness import run, step_flops

    name = "-".join(["smollm2", script, f"L{length}", "lora" if lora else "full", *[f.strip("-") for f in flags]])
    out = output_dir / "runs" / name
    length_flag = "--max_completion_length" if script == "grpo" else "--response_length"
    size = ["--max_steps", str(steps)] if script == "grpo" else ["--total_episodes", str(steps * 16)]  # 16 a step
    args = ["--config", SMOLLM2_RECIPES[script], "--output_dir", repo_relative(out), "--eval_num_samples", "0",
            length_flag, str(length), *size, *(LORA if lora else []), *flags]  # both log every step
    record = run(f"{script}_trl_example.py", args, out.with_suffix(".json"), env={"OMP_NUM_THREADS": "2"},
                 time_v=True, timeout=3600)
    steps = step_flops(record)  # the first step, which warms up, left out
    seconds = statistics.median(s["s"] for s in steps)
    flops = statistics.median(s["flops"] for s in steps)
    return {"script": script, "length": length, "lora": lora, "flags": " ".join(flags), "step_s": round(seconds, 2),
            "ms_per_completion": round(1000 * seconds / 16, 1), "tflop_per_step": round(flops / 1e12, 3),
            "gflops": round(flops / seconds / 1e9, 1), "peak_rss_mib": round(record["max_rss_mib"]),
            "command": " ".join(["python", f"{script}_trl_example.py", *args])}


def main_smollm2(args) -> None:
    from harness import matmul_gflops

    rate = matmul_gflops(2)
    print(f"fp32 matmul: {rate:.1f} GFLOP/s on 2 threads", flush=True)
    results = []
    for script, length, lora, flags in SMOLLM2_POINTS:
        try:
            r = measure_smollm2(script, length, lora, flags + shlex.split(args.extra_args), args.steps or 3,
                                args.output_dir)
        except RuntimeError as err:  # an option this machine cannot run: say so, and measure the rest
            failed = str(err).strip().splitlines()[-1][:200]
            print(f"{script:4} length {length:>3} {'LoRA' if lora else 'full'} {' '.join(flags)}: failed: {failed}")
            results.append({"script": script, "length": length, "lora": lora, "flags": " ".join(flags),
                            "failed": failed})
            continue
        r["of_matmul_rate"] = round(r["gflops"] / rate, 2)
        results.append(r)
        print(f"{script:4} length {length:>3} {'LoRA' if lora else 'full'} {r['flags']}: {r['step_s']:6.1f} s/step, "
              f"{r['ms_per_completion']:7.1f} ms/completion, {r['tflop_per_step']:.2f} TFLOP/step, "
              f"{r['gflops']:5.1f} GFLOP/s = {r['of_matmul_rate']:.2f} of matmul, peak RSS {r['peak_rss_mib']} MiB",
              flush=True)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "cost_curves_smollm2.json").write_text(json.dumps(
        {"command": " ".join(["python", "benchmarks/cost_curves.py", *sys.argv[1:]]), "matmul_gflops": rate,
         "results": results}, indent=1) + "\n")
    print("\n| script | length | LoRA | flags | s/step | ms/completion | TFLOP/step | GFLOP/s | of matmul "
          "| peak RSS MiB |\n|---|---:|---|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        cells = (f"failed: {r['failed']} | | | | |" if "failed" in r else
                 f"{r['step_s']} | {r['ms_per_completion']} | {r['tflop_per_step']} | {r['gflops']} | "
                 f"{r['of_matmul_rate']} | {r['peak_rss_mib']} |")
        print(f"| {r['script'].upper()} | {r['length']} | {'yes' if r['lora'] else 'no'} | {r['flags']} | {cells}")


def plot(results: list[dict], axes: dict, path: Path) -> None:
    fig, panels = plt.subplots(2, len(axes), figsize=(4.5 * len(axes), 7))
    for column, (axis, values) in enumerate(axes.items()):
        for script, color in (("grpo", "tab:blue"), ("ppo", "tab:orange")):
            rows = [next(r for r in results if r["script"] == script and r[axis] == value
                         and all(r[k] == BASE[k] for k in BASE if k != axis)) for value in values]
            xs = list(range(len(values)))
            panels[0][column].plot(xs, [r["ms_per_completion"] for r in rows], "o-", color=color, label=script.upper())
            panels[1][column].plot(xs, [r["peak_rss_mib"] for r in rows], "o-", color=color, label=script.upper())
        for row in (0, 1):
            panels[row][column].set_xticks(range(len(values)), [str(v) for v in values])
            panels[row][column].set_xlabel({"length": "completion length (tokens)",
                                            "completions": "completions per step", "model": "parameters"}[axis])
            panels[row][column].grid(alpha=0.3)
            panels[row][column].legend()
        panels[0][column].set_ylabel("ms per completion")
        panels[1][column].set_ylabel("peak RSS (MiB)")
    fig.suptitle(f"cost of a step, one axis at a time from {BASE} (CPU, one thread)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 steps a run, the 0.4M and 6.5M models only")
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default 6; 3 with --quick)")
    parser.add_argument("--output_dir", type=Path, default=BENCH / "outputs" / "cost_curves")
    parser.add_argument("--smollm2", action="store_true", help="the real model, from its recipes (see above)")
    parser.add_argument("--extra_args", default="", help="with --smollm2: flags added to every run")
    args = parser.parse_args()
    if args.smollm2:
        return main_smollm2(args)
    steps = args.steps or (3 if args.quick else 6)
    axes = {**AXES, "model": ["0.4M", "6.5M"] if args.quick else AXES["model"]}
    points = []
    for axis, values in axes.items():
        for value in values:
            point = {**BASE, axis: value}
            if point not in points:
                points.append(point)
    start = time.time()
    results = []
    for point in points:
        for script in ("grpo", "ppo"):
            results.append(measure(script, point, steps, args.output_dir))
            r = results[-1]
            print(f"{script:4} model {r['model']:>4} length {r['length']:>3} completions {r['completions']:>2}: "
                  f"{r['step_s']:7.3f} s/step, {r['ms_per_completion']:7.2f} ms/completion, "
                  f"peak RSS {r['peak_rss_mib']:6.0f} MiB", flush=True)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "cost_curves.json").write_text(json.dumps(
        {"command": " ".join(["python", "benchmarks/cost_curves.py", *sys.argv[1:]]), "base": BASE, "steps": steps,
         "results": results}, indent=1) + "\n")
    plot(results, axes, args.output_dir / "cost_curves.png")
    print(f"\n{len(results)} runs in {(time.time() - start) / 60:.1f} min; "
          f"{args.output_dir / 'cost_curves.json'}, cost_curves.png")


if __name__ == "__main__":
    main()
