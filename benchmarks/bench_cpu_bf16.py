"""bf16 mixed precision against fp32 on this CPU: its capabilities, its fp32 and bf16 matmul rates, and each run's
step time in both, side by side, so that a time measured on one machine is never read as another's.

    python benchmarks/bench_cpu_bf16.py                      # the default runs and the SmolLM2 recipes, 2 rounds
    python benchmarks/bench_cpu_bf16.py --runs smollm2-grpo --rounds 3
    python benchmarks/bench_cpu_bf16.py --runs                  # generation alone (cpu_bf16_generation.json)

Each run trains a few steps (PPO: updates) with the held-out evaluation off, alternating fp32 (`--bf16 false`) and
bf16 (`--bf16 true`) round by round, so that the machine's drift falls on both alike; a step's time is the
wall-clock time between two logged steps' records in metrics.jsonl (generation, scoring, the update), from the
second step on (the first holds warm-up). Prints and saves the median step time of each, and their ratio; then
SmolLM2's generation alone (16 chat prompts, 32 new tokens each, greedy) with its weights held four ways, fp32,
under autocast as weights that train, under autocast frozen (LoRA's base), and in bf16, round by round alike.
"""

import argparse
import json
import statistics
import sys
import time

from harness import OUTPUTS, REPO, run_logged

RUNS = {  # name: script and flags; each a default run or a recipe, cut to a few steps
    "tiny-grpo": ["grpo_trl_example.py", "--max_steps", "12", "--logging_steps", "1"],
    "tiny-ppo": ["ppo_trl_example.py", "--total_episodes", "768"],  # 12 updates of 64
    "smollm2-grpo": ["grpo_trl_example.py", "--config", "recipes/SmolLM2-135M-Instruct/grpo/config_chat_addition.yaml",
                     "--max_steps", "5", "--logging_steps", "1"],
    "smollm2-ppo": ["ppo_trl_example.py", "--config",
                    "recipes/SmolLM2-135M-Instruct/ppo/config_chat_addition_lora.yaml", "--total_episodes", "80"],
}


def matmul_rate(dtype, threads: int = 2, size: int = 2048, repeats: int = 10) -> float:
    """This CPU's matrix-multiply rate in `dtype`, GFLOP/s."""
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    for _ in range(2):
        a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * size**3 * repeats / (time.perf_counter() - start) / 1e9


GENERATION = ["fp32", "autocast", "autocast, frozen", "bf16 weights"]


def generation_seconds(model, tokenizer, held: str) -> float:
    """One `generate` call's time for 16 chat prompts x 32 new tokens, the model's weights held as `held` says."""
    import torch

    chats = [[{"role": "user", "content": f"What is {i} + {2 * i + 3}?"}] for i in range(16)]
    tokenizer.padding_side = "left"
    batch = tokenizer.apply_chat_template(chats, add_generation_prompt=True, padding=True, return_tensors="pt",
                                          return_dict=True)
    model.to(torch.bfloat16 if held == "bf16 weights" else torch.float32)
    model.requires_grad_(held != "autocast, frozen")  # autocast keeps a cast copy only of a weight that trains
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=held.startswith("autocast")):
        start = time.perf_counter()
        model.generate(**batch, max_new_tokens=32, min_new_tokens=32, do_sample=False,
                       pad_token_id=tokenizer.pad_token_id)
        return time.perf_counter() - start


def step_seconds(out) -> list[float]:
    """Seconds between consecutive training logs, from the second step on."""
    times = [json.loads(line)["wall_time"] for line in (REPO / out / "metrics.jsonl").open() if '"reward"' in line]
    return [b - a for a, b in zip(times[1:], times[2:])]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="*", choices=list(RUNS), default=list(RUNS))  # none: generation alone
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import torch

    capabilities = torch.cpu.get_capabilities()
    shown = {key: capabilities.get(key) for key in ("cpu_name", "avx2", "avx512_f", "avx512_bf16", "amx_bf16")}
    rates = {str(dtype).removeprefix("torch."): round(matmul_rate(dtype, args.threads), 1)
             for dtype in (torch.float32, torch.bfloat16)}
    print(f"CPU: {shown}\nmatmul on {args.threads} threads: {rates} GFLOP/s", flush=True)
    results = {}
    for name in args.runs:
        script, *flags = RUNS[name]
        times = {"fp32": [], "bf16": []}
        for round_ in range(args.rounds):
            for precision in ("fp32", "bf16"):
                out = OUTPUTS / "bench_cpu_bf16" / f"{name}-{precision}-{round_}"
                (REPO / out).parent.mkdir(parents=True, exist_ok=True)
                cmd = [sys.executable, script, *flags, "--eval_num_samples", "0", "--save_strategy", "no",
                       "--report_to", "none", "--bf16", "true" if precision == "bf16" else "false",
                       "--output_dir", str(out)]
                run_logged(cmd, REPO / f"{out}.log", threads=args.threads)
                times[precision] += step_seconds(out)
        row = {p: round(statistics.median(t), 3) for p, t in times.items()}
        row["bf16/fp32"] = round(row["bf16"] / row["fp32"], 2)
        results[name] = row
        print(f"{name}: median step {row['fp32']} s in fp32, {row['bf16']} s in bf16: {row['bf16/fp32']}x", flush=True)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    smollm2 = REPO / "assets" / "SmolLM2-135M-Instruct"
    model, tokenizer = AutoModelForCausalLM.from_pretrained(smollm2), AutoTokenizer.from_pretrained(smollm2)
    torch.set_num_threads(args.threads)
    generation_seconds(model, tokenizer, "fp32")  # warm-up
    seconds = {held: [] for held in GENERATION}
    for _ in range(args.rounds + 1):
        for held in GENERATION:
            seconds[held].append(generation_seconds(model, tokenizer, held))
    generation = {held: round(statistics.median(t), 2) for held, t in seconds.items()}
    print("SmolLM2 generation, 16 prompts x 32 tokens: " + ", ".join(
        f"{held} {t} s ({t / generation['fp32']:.2f}x)" for held, t in generation.items()), flush=True)
    record = {"command": " ".join(["python", *sys.argv]), "cpu": shown, "matmul_gflops": rates,
              "threads": args.threads, "rounds": args.rounds, "runs": results, "generation_seconds": generation}
    path = REPO / "benchmarks" / "results" / ("cpu_bf16.json" if args.runs else "cpu_bf16_generation.json")
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"written to {path}")


if __name__ == "__main__":
    main()
