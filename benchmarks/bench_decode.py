"""How fast does SmolLM2-135M-Instruct generate on this CPU, against the memory-bandwidth bound, and what helps?

    python benchmarks/bench_decode.py            # ~3 min on 2 cores; assets/SmolLM2-135M-Instruct first (setup.sh)

All on the same threads, in one run: the fp32 matmul rate; the memory bandwidth (a torch `sum` over 256 MiB, and a
`copy_` of it); then `generate` as the SmolLM2 GRPO recipe samples (its chat prompts, temperature 0.7, 16 new tokens
forced so every row decodes the same number of steps) at 16 to 128 rows a call, each timed `--repeats` times, the
fastest kept. A token step is that call's time less a 1-token call's (the prompt's forward pass), over the steps
between. Its floor is the larger of reading the model's fp32 weights once (bytes / bandwidth) and its arithmetic
(2 x parameters x rows / matmul rate). The table gives each batch's time per token step against that floor, the
tokens per second, and the share of a call that torch's profiler puts in matrix products; then the batch of 16 with
a static KV cache, and with a static cache and its decode step compiled by torch.compile (inductor builds C++ on a
CPU; transformers compiles only on accelerators unless told to), its compile time apart. Writes
benchmarks/results/decode.json.
"""

import argparse
import json
import time

import torch
from harness import REPO, matmul_gflops
from torch.profiler import ProfilerActivity, profile
from transformers import AutoModelForCausalLM, AutoTokenizer, CompileConfig


def bandwidth(mib: int = 256, repeats: int = 5) -> tuple[float, float]:
    """GB/s read (a sum) and copied (bytes read plus written), the best of `repeats`."""
    a, b = torch.rand(mib * 2**18), torch.empty(mib * 2**18)
    read = copy = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        a.sum()
        read = max(read, a.nbytes / (time.perf_counter() - start) / 1e9)
        start = time.perf_counter()
        b.copy_(a)
        copy = max(copy, 2 * a.nbytes / (time.perf_counter() - start) / 1e9)
    return read, copy


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="assets/SmolLM2-135M-Instruct")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 32, 64, 128])
    parser.add_argument("--new_tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rate = matmul_gflops(args.threads)
    read, copy = bandwidth()
    print(f"fp32 matmul {rate:.1f} GFLOP/s, memory read {read:.1f} GB/s, copy {copy:.1f} GB/s "
          f"({args.threads} threads)", flush=True)

    tokenizer = AutoTokenizer.from_pretrained(REPO / args.model, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(REPO / args.model).eval()
    params = sum(p.numel() for p in model.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    prompts = [[{"role": "system", "content": "Be brief."},
                {"role": "user", "content": f"What is {a} + {b}? Reply with just the number."}]
               for a, b in [(3, 4), (12, 9), (7, 15), (18, 2)]]
    ids = [tokenizer.apply_chat_template(p, add_generation_prompt=True, return_dict=True)["input_ids"] for p in prompts]
    sampling = dict(max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, do_sample=True, temperature=0.7,
                    top_k=0, top_p=1.0, pad_token_id=tokenizer.pad_token_id)

    def batch(rows: int) -> dict:
        return tokenizer.pad({"input_ids": [ids[i % len(ids)] for i in range(rows)]}, return_tensors="pt")

    @torch.no_grad()
    def fastest(rows: int, new_tokens: int = args.new_tokens, **extra) -> float:
        inputs, times = batch(rows), []
        length = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens)
        model.generate(**inputs, **{**sampling, **length}, **extra)  # warm-up
        for _ in range(args.repeats):
            start = time.perf_counter()
            model.generate(**inputs, **{**sampling, **length}, **extra)
            times.append(time.perf_counter() - start)
        return min(times)

    @torch.no_grad()
    def matmul_share(rows: int) -> float:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            model.generate(**batch(rows), **sampling)
        events = prof.key_averages()
        total = sum(e.self_cpu_time_total for e in events)
        return sum(e.self_cpu_time_total for e in events if e.key in ("aten::mm", "aten::addmm", "aten::bmm")) / total

    rows_out = []
    for rows in args.batches:
        seconds = fastest(rows)
        step = (seconds - fastest(rows, new_tokens=1)) / (args.new_tokens - 1)
        floor = max(weight_bytes / (read * 1e9), 2 * params * rows / (rate * 1e9))
        row = {"rows": rows, "seconds": round(seconds, 3), "ms_per_token_step": round(1000 * step, 1),
               "floor_ms": round(1000 * floor, 1), "times_floor": round(step / floor, 2),
               "tokens_per_s": round(rows * args.new_tokens / seconds, 1), "matmul_share": round(matmul_share(rows), 3)}
        rows_out.append(row)
        print(row, flush=True)
    static, dynamic = fastest(args.batches[0], cache_implementation="static"), rows_out[0]["seconds"]
    print(f"static KV cache, {args.batches[0]} rows: {static:.3f} s against {dynamic:.3f} s dynamic "
          f"({dynamic / static:.2f}x)", flush=True)
    compile_config = CompileConfig(mode="default")
    compile_config._compile_all_devices = True  # transformers' own switch for compiling on a CPU
    compiled_cache = dict(cache_implementation="static", compile_config=compile_config)
    start = time.perf_counter()
    with torch.no_grad():
        model.generate(**batch(args.batches[0]), **sampling, **compiled_cache)
    first = time.perf_counter() - start
    compiled = fastest(args.batches[0], **compiled_cache)
    print(f"static KV cache, compiled, {args.batches[0]} rows: {compiled:.3f} s against {dynamic:.3f} s dynamic "
          f"({dynamic / compiled:.2f}x); its first call, compiling, {first:.0f} s", flush=True)
    result = {"command": "python benchmarks/bench_decode.py", "threads": args.threads, "matmul_gflops": round(rate, 1),
              "read_gb_s": round(read, 1), "copy_gb_s": round(copy, 1), "parameters": params,
              "weight_bytes": weight_bytes, "new_tokens": args.new_tokens, "batches": rows_out,
              "static_cache_seconds": round(static, 3), "compiled_seconds": round(compiled, 3),
              "compile_first_call_seconds": round(first, 1), "torch": torch.__version__}
    path = REPO / "benchmarks" / "results" / "decode.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"written to {path.relative_to(REPO)}")


if __name__ == "__main__":
    main()
