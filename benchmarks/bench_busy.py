"""What other work on the same cores does to a default run, with 1 torch thread and with torch's default (one per
core): the measurement behind the scripts' advice for a busy machine (docs/outputs.md, "A busy machine").

Runs the default GRPO run, and the default PPO run cut to 10 updates (--total_episodes 640), each with
OMP_NUM_THREADS=1 and with torch's default thread count, on the idle machine and beside "other work": one
busy-looping Python process per core. Prints each run's wall time and, side by side, busy against idle and 1 thread
against the default; with the machine's fp32 matmul rate, measured idle at the start.

    python benchmarks/bench_busy.py        # 8 runs, ~15 min on 2 cores
"""

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

from harness import OUTPUTS, REPO, machine, matmul_gflops

RUNS = {"grpo": ["grpo_trl_example.py"], "ppo": ["ppo_trl_example.py", "--total_episodes", "640"]}


def spin():
    while True:
        pass


def timed(name: str, threads: int, busy: bool) -> float:
    """Seconds of one run from launch to exit, started from the repo root, offline."""
    out = OUTPUTS / "busy" / f"{name}-{'busy' if busy else 'idle'}-{threads or 'default'}threads"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env.pop("OMP_NUM_THREADS", None)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    load = [multiprocessing.Process(target=spin, daemon=True) for _ in range(os.cpu_count() if busy else 0)]
    for process in load:
        process.start()
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *RUNS[name], "--output_dir", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    for process in load:
        process.terminate()
    if proc.returncode != 0:
        raise RuntimeError(f"{name} exited with {proc.returncode}:\n{proc.stderr[-3000:]}")
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scripts", nargs="+", choices=sorted(RUNS), default=sorted(RUNS))
    args = parser.parse_args()
    print(machine(), f"\nfp32 matmul, idle: {matmul_gflops(0):.0f} GFLOP/s with the default threads, "
          f"{matmul_gflops(1):.0f} with 1", flush=True)
    results = {}
    for name in args.scripts:
        for busy in (False, True):
            for threads in (1, 0):
                results[f"{name} {'busy' if busy else 'idle'} {threads or 'default'}"] = seconds = timed(
                    name, threads, busy)
                print(f"{name:5} {'busy' if busy else 'idle'}  {threads or 'default':>7} threads: {seconds:6.1f} s",
                      flush=True)
    print("\n| run | threads | idle s | busy s | busy / idle |\n|---|---|---:|---:|---:|")
    for name in args.scripts:
        for threads in ("1", "default"):
            idle, busy = results[f"{name} idle {threads}"], results[f"{name} busy {threads}"]
            print(f"| {name} | {threads} | {idle:.1f} | {busy:.1f} | {busy / idle:.1f} |")
    Path(REPO / OUTPUTS / "busy").mkdir(parents=True, exist_ok=True)
    (REPO / OUTPUTS / "busy" / "results.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
