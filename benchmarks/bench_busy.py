"""What other work on the same cores does to a run, by torch's thread count and OpenMP's wait policy: the measurement
behind the scripts' thread defaults on a CPU (docs/scaling.md, "A shared CPU").

Runs the default GRPO run, the default PPO run cut to 10 updates (--total_episodes 640) and the SmolLM2 GRPO recipe
cut to 4 steps without evaluation, each with 1 torch thread, with 2 (torch's default here: one per core), and with 2
and OMP_WAIT_POLICY=PASSIVE (a waiting thread sleeps instead of spinning), on the idle machine and beside other
work: another torch job multiplying matrices on 2 threads (`--load torch`, the default), or one busy-looping Python
process per core (`--load loops`). Prints each run's wall time and, side by side, busy against idle; with the
machine's fp32 matmul rate, measured idle at the start.

    python benchmarks/bench_busy.py                      # 18 runs, ~12 min on 2 cores
    python benchmarks/bench_busy.py --runs grpo ppo      # the default runs alone
"""

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

from harness import OUTPUTS, REPO, fresh, machine, matmul_gflops

RUNS = {
    "grpo": ["grpo_trl_example.py"],
    "ppo": ["ppo_trl_example.py", "--total_episodes", "640"],
    "smollm2": ["grpo_trl_example.py", "--config", "recipes/SmolLM2-135M-Instruct/grpo/config_chat_addition.yaml",
                "--max_steps", "4", "--eval_num_samples", "0"],
}
# name -> (torch threads, OMP_WAIT_POLICY); threads None: torch's default, one per core
SETTINGS = {"1 thread": ("1", None), "2 threads": (None, None), "2 threads, passive": (None, "PASSIVE")}
TORCH_JOB = "import torch\ntorch.set_num_threads(2)\na = torch.randn(1024, 1024)\nwhile True:\n    a @ a\n"


def spin():
    while True:
        pass


def other_work(load: str) -> list:
    if load == "torch":
        return [subprocess.Popen([sys.executable, "-c", TORCH_JOB])]
    processes = [multiprocessing.Process(target=spin, daemon=True) for _ in range(os.cpu_count())]
    for process in processes:
        process.start()
    return processes


def timed(name: str, setting: str, load: str | None) -> float:
    """Seconds of one run from launch to exit, started from the repo root, offline, beside `load` (None: idle)."""
    threads, policy = SETTINGS[setting]
    out = OUTPUTS / "busy" / f"{name}-{load or 'idle'}-{setting.replace(' ', '').replace(',', '-')}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    for key, value in (("OMP_NUM_THREADS", threads), ("OMP_WAIT_POLICY", policy)):
        env.pop(key, None)
        if value is not None:
            env[key] = value
    others = other_work(load) if load else []
    time.sleep(1 if others else 0)  # the other work under way
    start = time.perf_counter()
    proc = subprocess.run(fresh([sys.executable, *RUNS[name], "--output_dir", str(out)]), cwd=REPO, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    for process in others:
        process.terminate()
    for process in others:
        process.wait() if isinstance(process, subprocess.Popen) else process.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{name} exited with {proc.returncode}:\n{proc.stderr[-3000:]}")
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", choices=list(RUNS), default=list(RUNS))
    parser.add_argument("--load", choices=["torch", "loops"], default="torch")
    args = parser.parse_args()
    print(machine(), f"\nfp32 matmul, idle: {matmul_gflops(0):.0f} GFLOP/s with the default threads, "
          f"{matmul_gflops(1):.0f} with 1; other work: {args.load}", flush=True)
    results = {}
    for name in args.runs:
        for setting in SETTINGS:
            for load in (None, args.load):
                results[f"{name} | {setting} | {load or 'idle'}"] = seconds = timed(name, setting, load)
                print(f"{name:8} {setting:20} {load or 'idle':6} {seconds:6.1f} s", flush=True)
    print(f"\n| run | torch threads | idle s | beside {args.load} s | busy / idle |\n|---|---|---:|---:|---:|")
    for name in args.runs:
        for setting in SETTINGS:
            idle, busy = results[f"{name} | {setting} | idle"], results[f"{name} | {setting} | {args.load}"]
            print(f"| {name} | {setting} | {idle:.1f} | {busy:.1f} | {busy / idle:.2f} |")
    Path(REPO / OUTPUTS / "busy").mkdir(parents=True, exist_ok=True)
    (REPO / OUTPUTS / "busy" / f"results-{args.load}.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
