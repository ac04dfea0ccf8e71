"""Peak memory (CPU RSS) of the training scripts on a ~71M-parameter model: full fine-tuning against LoRA for GRPO,
and a reward model against reward functions for PPO.

    python benchmarks/build_model.py && python benchmarks/build_model.py --reward_model   # once, ~10 s
    python benchmarks/bench_memory.py                      # GRPO and PPO, 2 rounds, ~4 min on 2 cores
    python benchmarks/bench_memory.py --only grpo --gradient_checkpointing   # as the recipes run, ~3 min

Every run is the real script with flags, under `/usr/bin/time -v`; the number is its "Maximum resident set size",
the kernel's high-water mark of the process's resident memory (ru_maxrss), which no polling can miss. The scripts
run as one process (no dataloader workers), so that is the whole run. timed_run.py also reads the same counter when
training ends: the peak of the whole process (which also saves the model) is printed next to it.
The variants run interleaved (one round = every variant once), and each variant's median over rounds is reported.

What sits in memory, fp32, N parameters, Adam:
  GRPO full fine-tuning, beta > 0: policy (4N bytes) + gradients (4N) + Adam moments (8N) + reference copy (4N)
  GRPO full fine-tuning, beta = 0: the same without the reference (TRL loads none)
  GRPO LoRA, beta > 0:             the frozen base (4N) + the adapter, its gradients and Adam moments; the reference
                                   is the base with the adapter disabled, so it costs nothing. With the default
                                   --lora_target_modules (None) peft adapts q_proj and v_proj only (0.49M parameters
                                   here); grpo_lora_all_linear adapts all seven projections, as the recipes do (2.3M)
  PPO, reward functions:           policy + its gradients and moments (16N), reference (4N), value model + its
                                   gradients and moments (16N)
  PPO, reward model:               the same + the reward model (4N)
plus the framework itself (python, torch, transformers, trl, datasets), measured as the 0.4M-parameter tiny model.
"""

import argparse

from harness import BIG_MODEL, OUTPUTS, REPO, TINY_MODEL, command, machine, median, run, show, threads_env

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--model_name_or_path", default=str(BIG_MODEL))
parser.add_argument("--reward_model_path", default=str(OUTPUTS / "llama-71m-rm"))
parser.add_argument("--only", choices=["grpo", "ppo"], default=None, help="run one algorithm's variants only")
parser.add_argument("--repeats", type=int, default=2, help="rounds; each runs every variant once")
parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS for the runs (0: torch's default)")
parser.add_argument("--gradient_checkpointing", action="store_true",
                    help="run every variant with --gradient_checkpointing true, as the recipes do (default: off, "
                         "the scripts' default)")
args = parser.parse_args()
env = threads_env(args.threads)
if args.only != "grpo" and not (REPO / "ppo_trl_example.py").exists():
    raise SystemExit("ppo_trl_example.py not found: run with --only grpo")
for path in [args.model_name_or_path] + ([args.reward_model_path] if args.only != "grpo" else []):
    if not (REPO / path).exists():
        raise SystemExit(f"{path} not found: build it with benchmarks/build_model.py (see --help)")

out = OUTPUTS / ("memory-gc" if args.gradient_checkpointing else "memory")
big = ["--model_name_or_path", args.model_name_or_path]
ALL_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# GRPO: 2 optimizer steps (Adam's moments exist from the first), 16 completions of 16 tokens per step.
grpo = ["--max_steps", 2, "--max_completion_length", 16, "--per_device_train_batch_size", 16, "--num_generations", 8,
        "--save_strategy", "no", "--eval_strategy", "no", "--report_to", "none", "--logging_steps", 1]
# PPO: 2 PPO updates of 16 prompts, 16-token responses, one PPO epoch per update (the peak is the same with more:
# the epochs reuse the same buffers; they only take longer).
ppo = [*big, "--total_episodes", 32, "--per_device_train_batch_size", 16, "--response_length", 16,
       "--num_ppo_epochs", 1, "--report_to", "none", "--logging_steps", 1]
if args.gradient_checkpointing:
    grpo += ["--activation_checkpointing", "true"]
    ppo += ["--activation_checkpointing", "true"]
variants = {}
if args.only != "ppo":
    variants |= {
        "grpo_full_beta0.04": ("grpo_trl_example.py", [*big, *grpo, "--beta", 0.04]),
        "grpo_lora_beta0.04": ("grpo_trl_example.py", [*big, *grpo, "--beta", 0.04, "--use_peft"]),
        # LoRA on every linear layer, as the recipes set it (the default targets peft's choice: q_proj, v_proj).
        "grpo_lora_all_linear": ("grpo_trl_example.py", [*big, *grpo, "--beta", 0.04, "--use_peft",
                                                         "--lora_target_modules", *ALL_LINEAR]),
        "grpo_full_beta0": ("grpo_trl_example.py", [*big, *grpo, "--beta", 0.0]),
        # The same run on the bundled 0.4M-parameter model: what python, torch and the libraries take by themselves.
        "framework_baseline": ("grpo_trl_example.py", ["--model_name_or_path", TINY_MODEL, *grpo, "--beta", 0.04]),
    }
if args.only != "grpo":
    variants |= {
        "ppo_reward_funcs": ("ppo_trl_example.py", ppo),
        "ppo_reward_model": ("ppo_trl_example.py", [*ppo, "--reward_model_path", args.reward_model_path]),
    }

print(machine(), env or "")
for name, (script, flags) in variants.items():
    print(f"{name}: {show(command(script, [*flags, '--output_dir', out / name]), env, time_v=True)}")

peaks = {name: [] for name in variants}
at_train_end = {name: [] for name in variants}
for repeat in range(args.repeats):
    for name, (script, flags) in variants.items():
        record = run(script, [*flags, "--output_dir", out / f"{name}-{repeat}"], out / f"{name}-{repeat}.json", env,
                     time_v=True)
        peaks[name].append(record["max_rss_mib"])
        at_train_end[name].append(record.get("peak_rss_mib_train_end", float("nan")))
        model = record.get("model")  # parameter counts; GRPO only (PPOTrainer overrides train(), see timed_run.py)
        counts = (f", trainable {model['trainable_params'] / 1e6:.2f}M of {model['params'] / 1e6:.1f}M, reference "
                  f"copy {model['ref_model_params'] / 1e6:.1f}M" if model else "")
        print(f"  round {repeat} {name:20s}: peak {record['max_rss_mib']:7.0f} MiB (at the end of training "
              f"{at_train_end[name][-1]:7.0f} MiB), {record['wall_s']:5.1f} s{counts}", flush=True)

peak = {name: median(v) for name, v in peaks.items()}
print(f"\nmedian peak RSS over {args.repeats} round(s), MiB (spread over rounds)")
for name in variants:
    print(f"  {name:20s} {peak[name]:7.0f}  ({min(peaks[name]):.0f}-{max(peaks[name]):.0f}); at the end of training "
          f"{median(at_train_end[name]):.0f}")
if args.only != "ppo":
    # The framework's own memory during training: the baseline's counter at the end of training. (Its peak comes
    # later, from the end-of-run plots, while every 71M run peaks during training.)
    base = median(at_train_end["framework_baseline"])
    full, lora, noref = peak["grpo_full_beta0.04"], peak["grpo_lora_beta0.04"], peak["grpo_full_beta0"]
    print(f"GRPO LoRA / full fine-tuning (beta 0.04): {lora / full:.3f}  (goal <= 0.6); LoRA on all linear layers: "
          f"{peak['grpo_lora_all_linear'] / full:.3f}")
    print(f"GRPO full beta 0 / full beta 0.04:        {noref / full:.3f}")
    all_linear = peak["grpo_lora_all_linear"]
    print(f"  above the framework during training ({base:.0f} MiB): full {full - base:.0f} MiB, "
          f"LoRA {lora - base:.0f} MiB, LoRA all linear {all_linear - base:.0f} MiB, "
          f"full beta 0 {noref - base:.0f} MiB; "
          f"LoRA / full {(lora - base) / (full - base):.3f}, all linear {(all_linear - base) / (full - base):.3f}")
if args.only != "grpo":
    print(f"PPO reward model / reward functions: {peak['ppo_reward_model'] / peak['ppo_reward_funcs']:.3f} "
          f"(+{peak['ppo_reward_model'] - peak['ppo_reward_funcs']:.0f} MiB)")
