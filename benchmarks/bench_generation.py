"""Generation's share of GRPO step time, and what reusing generations (num_iterations, steps_per_generation) does.

    python benchmarks/bench_generation.py                  # bundled tiny model, 4-token completions, ~2-3 min
    python benchmarks/build_model.py                       # once, for the run below
    python benchmarks/bench_generation.py --model_name_or_path benchmarks/outputs/llama-71m \\
        --max_completion_length 16 --steps 12 --repeats 1      # ~71M model, 16-token completions, ~4 min

The timings are TRL's own profiling metrics. GRPOTrainer times its blocks with `profiling_context` /
`profiling_decorator` (trl/extras/profiling.py) under the names "profiling/Time taken: GRPOTrainer.<block>", but
only forwards them to wandb / mlflow / trackio: with `--report_to none` they reach neither the logs nor
metrics.jsonl. timed_run.py records them as they are produced. The blocks used here:

  GRPOTrainer.transformers.generate   the `model.generate` call (non-vLLM path), all completions of one generation batch
  GRPOTrainer._prepare_inputs         everything before the loss: on a generation step, generation, decoding, the
                                      rewards, the reference's log-probs (beta > 0) and, when generations are reused,
                                      the old policy's log-probs; on the other steps, a slice of the buffer
  GRPOTrainer._calculate_rewards      the reward functions, inside _prepare_inputs
  GRPOTrainer.compute_loss            the policy's forward pass and the loss (the backward pass is not inside it)
The table splits a step into: generate | rewards | the rest of _prepare_inputs (the reference's and the old
policy's forward passes, padding, advantages) | compute_loss | the remainder of the wall-clock step (backward pass,
optimizer step, logging and callbacks).

Each configuration runs grpo_trl_example.py for `--steps` optimizer steps, 16 completions per step; the first
`--warmup` steps are dropped and the rest, a whole number of 4-step cycles (the longest generation period here),
are timed. Shares: each block's time over the wall-clock time of the timed steps (first timed step's on_step_begin
to the last one's on_step_end), per run, median over rounds; being ratios within one run, they hold up on a busy
machine. Step time: seconds per step of each 4-step cycle, the median and the fastest over all rounds' cycles; on a
shared machine a cycle is either undisturbed or slowed by another job, so the fastest approximates a quiet machine.
Both still move a lot from run to run there. The steadier estimate of step time against (1, 1) comes from the shares:
compute_loss plus the backward pass, optimizer step and logging are the same work per step in every configuration
(one forward and backward pass on 16 completions, one Adam step, one log), so if that work is a fraction f of a step,
step time is proportional to 1 / f, and step time vs (1, 1) = f(1, 1) / f(config).

  num_iterations k       generate every k steps and take k optimizer steps on the same completions (GRPO's mu)
  steps_per_generation k generate 16*k completions at once, every k steps, and use a different 16 for each step
Both need 16 * steps_per_generation to be a multiple of num_generations (8): true for every setting here.
"""

import argparse
from pathlib import Path

from harness import COMMON_FLAGS, OUTPUTS, TINY_MODEL, command, machine, median, run, show, threads_env

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--model_name_or_path", default=str(TINY_MODEL))
parser.add_argument("--max_completion_length", type=int, default=4)
parser.add_argument("--steps", type=int, default=24, help="optimizer steps per run; steps - warmup must divide by 4")
parser.add_argument("--warmup", type=int, default=4, help="steps dropped from the start of each run")
parser.add_argument("--repeats", type=int, default=3, help="rounds; each runs every configuration once")
parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS for the runs (0: torch's default)")
args = parser.parse_args()
env = threads_env(args.threads)
CONFIGS = [(1, 1), (2, 1), (4, 1), (1, 4)]  # (num_iterations, steps_per_generation)
period = max(k * s for k, s in CONFIGS)
if args.warmup % period or (args.steps - args.warmup) % period or args.steps <= args.warmup:
    raise SystemExit(f"--warmup and --steps - --warmup must be positive multiples of {period}, a generation cycle")

GENERATE, REWARDS, PREPARE, LOSS = (f"GRPOTrainer.{b}" for b in
                                    ("transformers.generate", "_calculate_rewards", "_prepare_inputs", "compute_loss"))
out = OUTPUTS / "generation" / Path(args.model_name_or_path).name
flags = ["--model_name_or_path", args.model_name_or_path, "--max_steps", args.steps,
         "--max_completion_length", args.max_completion_length, "--per_device_train_batch_size", 16,
         "--num_generations", 8, "--beta", 0.04, "--save_strategy", "no", *COMMON_FLAGS]


def config_flags(k, s):
    return [*flags, "--num_iterations", k, "--steps_per_generation", s]


print(machine(), env or "")
for k, s in CONFIGS:
    print(f"num_iterations {k}, steps_per_generation {s}: "
          f"{show(command('grpo_trl_example.py', [*config_flags(k, s), '--output_dir', out / f'it{k}-spg{s}']), env)}")


def breakdown(record) -> dict:
    """Seconds per optimizer step over the timed steps: wall clock, and TRL's profiled blocks."""
    timed = range(args.warmup + 1, args.steps + 1)
    begins, ends = dict(record["step_begin"]), dict(record["step_end"])
    wall = ends[args.steps] - begins[args.warmup + 1]
    blocks = {name: sum(t for n, step, t in record["profiling"] if n == name and step in timed)
              for name in (GENERATE, REWARDS, PREPARE, LOSS)}
    calls = sum(1 for n, step, _ in record["profiling"] if n == GENERATE and step in timed)
    # Seconds per step of each generation cycle (`period` steps): the unit in which every configuration repeats.
    cycles = [((begins[c + period] if c + period in begins else ends[c + period - 1]) - begins[c]) / period
              for c in range(args.warmup + 1, args.steps + 1, period)]
    return {"step": wall / len(timed), **{n: t / len(timed) for n, t in blocks.items()},
            "generate_calls_per_step": calls / len(timed), "cycles": cycles}


results = {c: [] for c in CONFIGS}
for repeat in range(args.repeats):
    for k, s in CONFIGS:
        name = f"it{k}-spg{s}-{repeat}"
        record = run("grpo_trl_example.py", [*config_flags(k, s), "--output_dir", out / name], out / f"{name}.json",
                     env)
        b = breakdown(record)
        results[(k, s)].append(b)
        print(f"  round {repeat} num_iterations {k} steps_per_generation {s}: {b['step'] * 1000:7.1f} ms/step, "
              f"generate {b[GENERATE] / b['step']:.0%}, before the loss {b[PREPARE] / b['step']:.0%}", flush=True)

print(f"\n{args.model_name_or_path}, {args.max_completion_length}-token completions, 16 per step, beta 0.04; "
      f"steps {args.warmup + 1}-{args.steps} of {args.steps}, median over {args.repeats} round(s)")
print("| num_iterations | steps_per_generation | generate calls / step | ms / step: median cycle (fastest) "
      "| step time vs (1, 1): from the shares [median cycle, fastest] | generate | rewards "
      "| rest of _prepare_inputs (ref / old log-probs) | compute_loss | backward, optimizer, logging |")
print("|---|---|---|---|---|---|---|---|---|---|")


def training_share(config):
    """Median share of compute_loss + backward, optimizer and logging: the same work per step in every configuration."""
    return median([(b[LOSS] + b["step"] - b[PREPARE]) / b["step"] for b in results[config]])



def cycle_stats(config):
    cycles = [c for b in results[config] for c in b["cycles"]]
    return median(cycles), min(cycles)


base_median, base_fastest = cycle_stats((1, 1))
for k, s in CONFIGS:
    rs = results[(k, s)]
    cycle_median, cycle_fastest = cycle_stats((k, s))
    parts = {
        "generate": [b[GENERATE] for b in rs],
        "rewards": [b[REWARDS] for b in rs],
        "prepare_rest": [b[PREPARE] - b[GENERATE] - b[REWARDS] for b in rs],
        "loss": [b[LOSS] for b in rs],
        "remainder": [b["step"] - b[PREPARE] - b[LOSS] for b in rs],
    }
    shares = " | ".join(f"{median([v / b['step'] for v, b in zip(vs, rs)]):.0%}" for vs in parts.values())
    print(f"| {k} | {s} | {median([b['generate_calls_per_step'] for b in rs]):.2f} "
          f"| {cycle_median * 1000:.1f} ({cycle_fastest * 1000:.1f}) "
          f"| {training_share((1, 1)) / training_share((k, s)):.2f} "
          f"[{cycle_median / base_median:.2f}, {cycle_fastest / base_fastest:.2f}] | {shares} |")
print(f"(a cycle is {period} steps; the shares are of the timed steps' wall-clock time, per run, median over rounds)")
