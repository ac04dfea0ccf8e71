"""The GPU check's table: each step's exit code and time, learning against the CPU's margins, step time split into
generation and training, peak memory and MFU, then the micro-benchmark. W=/tmp/gpucheck python summarize.py OUT.md"""

import csv
import datetime
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import step_flops  # noqa: E402

W = os.environ["W"]
RUNS, LOGS = f"{W}/runs", f"{W}/logs"


def load(path, default=None):
    if not os.path.exists(path):
        return default
    with open(path) as f:
        return json.load(f)


peak = load(f"{W}/peak.json", {})
measured, datasheet = peak.get("bf16_matmul_tflops_measured"), peak.get("bf16_dense_peak_tflops_datasheet", 989.4)
with open(f"{W}/results.tsv") as f:
    steps = list(csv.reader(f, delimiter="\t"))
samples = []  # nvidia-smi every 500 ms: (time, MiB used, utilisation %)
if os.path.exists(f"{LOGS}/smi.csv"):
    with open(f"{LOGS}/smi.csv") as f:
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            try:
                when = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                samples.append((when, float(parts[1]), float(parts[2])))
            except (ValueError, IndexError):
                pass
# The default runs' margins in tests/e2e (mean - 3 sd over 8 CPU seeds, BENCHMARKS.md section 4)
CPU_MARGINS = {"grpo": dict(last=0.75, rise=0.08, gain=0.01), "ppo": dict(last=0.87, rise=0.12, gain=0.21)}


def last_error(name):
    if not os.path.exists(f"{LOGS}/{name}.log"):
        return ""
    with open(f"{LOGS}/{name}.log", errors="replace") as f:
        lines = [line.strip() for line in f if line.strip()]
    errors = [line for line in lines if line.startswith("error:") or "Error" in line]
    return (errors[-1] if errors else lines[-1] if lines else "")[:160]


def learning(name):
    summary = load(f"{RUNS}/{name}/summary.json")
    if summary is None:
        return ""
    first, last = summary.get("reward_first_20pct"), summary.get("reward_last_20pct")
    mode = summary.get("distributed", {})
    text = f"{mode.get('mode')} on {mode.get('device')}; steps {summary.get('global_step')}; reward {first} -> {last}"
    gain = None
    report = load(f"{RUNS}/{name}/eval.json")
    if report:
        before, after = report["before"], report["after"]
        reward = next(iter(after))
        b, a = before[reward].get("pass@1"), after[reward].get("pass@1")
        if b is not None and a is not None:
            gain = a - b
            text += (f"; held-out pass@1 {b:.3f} -> {a:.3f} ({gain:+.3f}), greedy "
                     f"{before[reward].get('greedy_accuracy')} -> {after[reward].get('greedy_accuracy')}")
    algorithm = "grpo" if name.startswith("grpo") else "ppo"
    if "default" in name and isinstance(last, (int, float)) and isinstance(first, (int, float)):
        margin = CPU_MARGINS[algorithm]
        checks = [f"last {'>=' if last >= margin['last'] else '<'} {margin['last']}",
                  f"rise {'>=' if last - first >= margin['rise'] else '<'} {margin['rise']}"]
        if gain is not None:
            checks.append(f"pass@1 gain {'>=' if gain >= margin['gain'] else '<'} {margin['gain']}")
        text += " [CPU margins: " + ", ".join(checks) + "]"
    return text


def timing(name):
    """Median over logged steps (the first two left out: warm-up) of the step's time, its generate seconds, and the
    nn.Linear FLOPs counted in it and outside generate; with the allocator's peak."""
    record = load(f"{RUNS}/{name}/record.json")
    if record is None:
        return ""
    rows = [(s["s"], sum(seconds for end, seconds in record["generate_calls"] if s["end"] - s["s"] < end <= s["end"]),
             s["flops"], s["flops"] - s["generate_flops"]) for s in step_flops(record)[1:]]
    text = ""
    if rows:
        seconds, generate, flops, train_flops = (statistics.median(column) for column in zip(*rows))
        train_tflops = train_flops / max(seconds - generate, 1e-9) / 1e12
        text = (f"; step {seconds:.2f} s, generate {generate:.2f} s ({generate / seconds:.0%}); "
                f"{flops / seconds / 1e12:.3g} TFLOP/s over the step = {flops / seconds / 1e12 / datasheet:.3g} of "
                f"datasheet; outside generate {train_tflops:.3g} TFLOP/s"
                + (f" = {train_tflops / measured:.3g} of measured matmul" if measured else ""))
    if record.get("cuda_max_allocated_gib") is not None:
        text += (f"; torch peak {record['cuda_max_allocated_gib']:.1f} GiB allocated, "
                 f"{record['cuda_max_reserved_gib']:.1f} reserved")
    return text


def adapter_moved(name):
    """QLoRA: the share of lora_A's entries that moved from the run's first checkpoint to its saved adapter, and their
    dtype (in bf16 at the recipes' learning rate most would not: trl casts them, grpo_trl_example.py undoes it)."""
    checkpoints = sorted((p for p in os.listdir(f"{RUNS}/{name}") if p.startswith("checkpoint-")),
                         key=lambda p: int(p.split("-")[1])) if os.path.isdir(f"{RUNS}/{name}") else []
    final = f"{RUNS}/{name}/adapter_model.safetensors"
    if "qlora" not in name or not checkpoints or not os.path.exists(final):
        return ""
    from safetensors.torch import load_file

    first, last = load_file(f"{RUNS}/{name}/{checkpoints[0]}/adapter_model.safetensors"), load_file(final)
    lora_a = [k for k in first if "lora_A" in k]
    moved = sum((first[k] != last[k]).sum().item() for k in lora_a) / sum(first[k].numel() for k in lora_a)
    return f"; lora_A ({first[lora_a[0]].dtype}) entries moved after {checkpoints[0]}: {moved:.1%}"


out = [f"# GPU check: {peak.get('name', 'no GPU')} ({peak.get('mem_gib', '?')} GiB), torch {peak.get('torch')} CUDA "
       f"{peak.get('torch_cuda')}, bf16 matmul {measured} TFLOP/s measured ({datasheet} datasheet)", "",
       "| step | rc | s | GPU MiB peak (all processes) | GPU util % | result |", "|---|---:|---:|---:|---:|---|"]
for name, rc, start, end in steps:
    start, end = float(start), float(end)
    window = [(mib, util) for when, mib, util in samples if start <= when <= end]
    mib = int(max(m for m, _ in window)) if window else ""
    util = round(statistics.mean(u for _, u in window)) if window else ""
    result = learning(name) + timing(name) + adapter_moved(name)
    if not result and (rc != "0" or name.startswith("refuse")):
        result = last_error(name)
    out.append(f"| {name} | {rc} | {end - start:.0f} | {mib} | {util} | {result.lstrip('; ')} |")

micro = load(f"{W}/micro.json")
if micro:
    out += ["", f"## Qwen2.5-0.5B's shape outside the trainers ({micro['params'] / 1e6:.0f}M parameters, "
            f"{micro['linear_params'] / 1e6:.0f}M in matmuls with lm_head)", "",
            "| what | batch | s | TFLOP/s | MFU (datasheet) | of measured matmul | tokens/s | peak GiB |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in micro["fwd_bwd"]:
        what = f"forward+backward, seq {r['seq']}, checkpointing {'on' if r['activation_checkpointing'] else 'off'}"
        out.append(f"| {what} | {r['batch']} | " + ("OOM | | | | | |" if r.get("oom") else
                   f"{r['seconds']} | {r['tflops']} | {r['mfu_datasheet']} | {r['of_measured_matmul']} | "
                   f"{r['tokens_per_s']} | {r['peak_gib']} |"))
    for r in micro["generate"]:
        what = f"generate {r['prompt']}+{r['new_tokens']} ({r.get('ms_per_token_step', '?')} ms a token step)"
        out.append(f"| {what} | {r['batch']} | " + ("OOM | | | | | |" if r.get("oom") else
                   f"{r['seconds']} | {r['tflops']} | {r['mfu_datasheet']} | | {r['new_tokens_per_s']} | "
                   f"{r['peak_gib']} |"))
    for r in micro.get("lm_head", []):
        if "error" in r:
            out.append(f"| log-probs: {r['error']} | | | | | | | |")
            continue
        what = (f"log-probs forward+backward, {r['prompt']}+{r['completion']}, " + ("trl 1.12's materialised logits"
                if r["head"] == "materialised" else "trl's chunked LM head (>= 1.15)"))
        if "max_abs_diff_logp" in r:
            what += f" (max abs difference {r['max_abs_diff_logp']:.2g})"
        out.append(f"| {what} | {r['batch']} | " + ("OOM | | | | | |" if r.get("oom") else
                   f"{r['seconds']} | | | | {r['tokens_per_s']} | {r['peak_gib']} |"))
    out += ["", f"Liger's fused GRPO loss against materialised logits: `{json.dumps(micro.get('liger'))}`"]
if os.path.exists(f"{W}/skipped.txt"):
    with open(f"{W}/skipped.txt") as f:
        out += ["", "Skipped:", *[f"- {line.strip()}" for line in f]]
text = "\n".join(out) + "\n"
with open(sys.argv[1], "w") as f:
    f.write(text)
print(text)
