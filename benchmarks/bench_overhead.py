"""Wrapper overhead: grpo_trl_example.py against a bare GRPOTrainer call (bare_grpo.py), same model, data and seed.

    python benchmarks/bench_overhead.py                 # the bundled tiny model: 6 x 2 runs of 40 steps, ~2-3 min
    python benchmarks/build_model.py                    # once, for the run below
    python benchmarks/bench_overhead.py --model_name_or_path benchmarks/outputs/llama-71m --steps 24 --warmup 3 \
        --repeats 3                                     # ~71M model, 3 x 2 runs of 24 steps, ~5 min

Runs the two as subprocesses under timed_run.py, interleaved (script, bare, script, bare, ...), each for `--steps`
optimizer steps with a log at every step (`--logging_steps 1`: the worst case for the script, whose RunRecorder
appends to metrics.jsonl and completions.jsonl at every log, and whose NoSignalWatchdog reads every log). Both runs
train identically (same seed, same losses: the benchmark checks); the script adds its callbacks, the argument
parsing and checks, and the end-of-run files.

Printed:
  - wall-clock step time: from one step's on_step_begin to the next, after `--warmup` steps; median per run.
    Ratio script / bare per pair of runs, then the median of those ratios (the headline), the ratio of the pooled
    medians and the ratio of each variant's fastest run. On a shared machine, a run's speed depends on what else
    is running, so pairs can disagree; the spread is printed.
  - TRL's own `step_time` metric, which times GRPOTrainer.training_step only (generation, scoring, forward and
    backward): it cannot see the optimizer step, logging or callbacks.
  - the time spent inside the script's own callbacks (those the bare run lacks: RunRecorder, NoSignalWatchdog), per
    step, measured inside the script's runs: immune to run-to-run noise, it is what the wrapper adds to a step.
  - the accuracy reward's time per call, from TRL's profiling: the script wraps it in rewards.CheckedReward, which
    checks every value it returns; the bare run calls the function itself.
  - start-up: from launching the process to the start of the first training step.
"""

import argparse
from pathlib import Path

from harness import (COMMON_FLAGS, OUTPUTS, TINY_MODEL, command, machine, median, run, show, startup_s, step_times,
                     threads_env, trl_step_times)

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--model_name_or_path", default=str(TINY_MODEL))
parser.add_argument("--steps", type=int, default=40, help="optimizer steps per run")
parser.add_argument("--warmup", type=int, default=5, help="steps dropped from the start of each run")
parser.add_argument("--repeats", type=int, default=6, help="runs of each variant, interleaved")
parser.add_argument("--max_completion_length", type=int, default=4)
parser.add_argument("--threads", type=int, default=1,
                    help="OMP_NUM_THREADS for the runs (0: torch's default, one per core). 1 by default: on a shared "
                         "2-core machine, torch's multi-threaded kernels slow down many times over whenever another "
                         "job holds a core, which swamps a few-percent effect")
args = parser.parse_args()
env = threads_env(args.threads)

out = OUTPUTS / "overhead" / Path(args.model_name_or_path).name
shared = ["--model_name_or_path", args.model_name_or_path, "--max_steps", args.steps,
          "--max_completion_length", args.max_completion_length]
variants = {
    "script": ("grpo_trl_example.py", [*shared, *COMMON_FLAGS]),
    "bare": ("benchmarks/bare_grpo.py", [*shared, "--logging_steps", 1]),
}
print(machine(), env or "")
for name, (script, flags) in variants.items():
    print(f"{name}: {show(command(script, [*flags, '--output_dir', out / name]), env)}")


def callback_names(record) -> set[str]:
    return {name for spent in record["callbacks"].values() for name in spent}


def own_callbacks_ms(record, names) -> float:
    """Median milliseconds per step spent in the callbacks `names` (the script's own, absent from the bare run)."""
    spent = [sum(v.get(n, 0.0) for n in names) for s, v in record["callbacks"].items() if int(s) > args.warmup]
    return median(spent) * 1000 if spent else 0.0


def reward_ms(record) -> float:
    """Median milliseconds per call of the accuracy reward, as TRL profiles it (`GRPOTrainer.<reward __name__>`):
    in the script that includes rewards.py's output checks (CheckedReward), in the bare run the bare function."""
    calls = [t for name, step, t in record["profiling"]
             if name in ("GRPOTrainer.accuracy", "GRPOTrainer.accuracy_reward") and step > args.warmup]
    return median(calls) * 1000


records = {name: [] for name in variants}
for repeat in range(args.repeats):
    for name, (script, flags) in variants.items():
        record = run(script, [*flags, "--output_dir", out / f"{name}-{repeat}"], out / f"{name}-{repeat}.json", env)
        records[name].append(record)
        print(f"  repeat {repeat} {name:6s}: median step {median(step_times(record, args.warmup)) * 1000:7.1f} ms, "
              f"TRL step_time {median(trl_step_times(record, args.warmup)) * 1000:7.1f} ms, "
              f"all callbacks {own_callbacks_ms(record, callback_names(record)):5.2f} ms/step, "
              f"start-up {startup_s(record):5.1f} s, "
              f"process {record['wall_s']:5.1f} s", flush=True)

# The runs must differ only in the wrapper: the same resolved GRPOConfig and the same training trajectory.
a, b = records["script"][0]["args"], records["bare"][0]["args"]
ignore = {"output_dir", "logging_dir", "model_init_kwargs", "eval_steps"}
diff = {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if k not in ignore and a.get(k) != b.get(k)}
print(f"\nGRPOConfig fields that differ (script, bare), besides {sorted(ignore)}: {diff or 'none'}")
losses = [[log["loss"] for log in records[n][0]["logs"] if "loss" in log] for n in variants]
print(f"same loss at every step in both runs: {losses[0] == losses[1]}")


def ratios(metric):
    per_pair = [metric(s) / metric(b) for s, b in zip(records["script"], records["bare"])]
    pooled = [median([metric(r) for r in records[n]]) for n in variants]
    fastest = [min(metric(r) for r in records[n]) for n in variants]
    return per_pair, pooled, fastest


n = len(step_times(records["script"][0], args.warmup))
print(f"\n{args.model_name_or_path}: {args.steps} steps per run, {n} timed after {args.warmup} warm-up, "
      f"{args.repeats} runs of each, interleaved")
for label, metric, unit, scale in [
    ("wall-clock step", lambda r: median(step_times(r, args.warmup)), "ms", 1000),
    ("TRL step_time", lambda r: median(trl_step_times(r, args.warmup)), "ms", 1000),
    ("start-up (to step 1)", startup_s, "s ", 1),
    ("whole process", lambda r: r["wall_s"], "s ", 1),
]:
    per_pair, (s, b), (s_min, b_min) = ratios(metric)
    print(f"  {label:20s} script {s * scale:7.1f} {unit}  bare {b * scale:7.1f} {unit}  "
          f"ratio: median of pairs {median(per_pair):.3f} [{min(per_pair):.2f}-{max(per_pair):.2f}], "
          f"pooled {s / b:.3f}, fastest runs {s_min / b_min:.3f}")
own = sorted(callback_names(records["script"][0]) - callback_names(records["bare"][0]))
own_ms = median([own_callbacks_ms(r, own) for r in records["script"]])
step = median([median(step_times(r, args.warmup)) for r in records["script"]]) * 1000
print(f"  the script's own callbacks ({', '.join(own)}), timed inside its runs: {own_ms:.2f} ms per step = "
      f"{own_ms / step:.1%} of its median step ({step:.1f} ms): step-time ratio {step / (step - own_ms):.3f} "
      "from the callbacks alone")
r_script, r_bare = (median([reward_ms(r) for r in records[n]]) for n in variants)
print(f"  the accuracy reward per call (TRL's profiling): script {r_script:.2f} ms, bare {r_bare:.2f} ms: the script's "
      f"reward checks add {r_script - r_bare:+.2f} ms per step ({(r_script - r_bare) / step:+.1%})")
print("  (the whole-process time of the script also covers saving the model, summary.json and the plots)")
