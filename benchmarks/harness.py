"""Shared by the bench_*.py scripts: run a training script under timed_run.py and read back what it recorded."""

import itertools
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
# Paths relative to the repo root, where every run starts, so the printed commands can be pasted as they are.
OUTPUTS = Path("benchmarks/outputs")  # ignored by the repo's .gitignore (`outputs/`)
TINY_MODEL = Path("assets/tiny-llama-addition")
BIG_MODEL = OUTPUTS / "llama-71m"  # built by build_model.py
# Flags every benchmark run shares: no eval, no reporting, a log (and so a RunRecorder write) at every step.
COMMON_FLAGS = ["--eval_strategy", "no", "--report_to", "none", "--logging_steps", "1"]


# One torch thread per run, so that a run's numbers depend on its seed rather than the machine's load; no hub.
ONE_THREAD_OFFLINE = {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def repo_relative(path: Path) -> str:
    """`path` relative to the repo root, where every run starts, when it lies inside the repo (so a recorded command
    holds no machine's paths and can be pasted from the root); else as it is."""
    path = Path(path).resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def run_logged(cmd: list[str], log_path: Path, threads: int = 1) -> float:
    """Run `cmd` from the repo root offline with `threads` torch threads (ONE_THREAD_OFFLINE by default), its output in
    `log_path`; return its peak RSS in MiB.

    The peak is the run's own (os.wait4's rusage, ru_maxrss), not that of other runs going on beside it.
    """
    env = {**os.environ, **ONE_THREAD_OFFLINE, "OMP_NUM_THREADS": str(threads)}
    cmd = fresh(cmd)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{shlex.join(cmd)} exited with {os.waitstatus_to_exitcode(status)}; see {log_path}")
    return round(usage.ru_maxrss / 1024, 1)


def threads_env(threads: int) -> dict:
    """OMP_NUM_THREADS for the runs: 0 leaves torch's default (one thread per core)."""
    return {"OMP_NUM_THREADS": str(threads)} if threads else {}


def command(script: str, args: list, python: str = sys.executable) -> list[str]:
    """`python benchmarks/timed_run.py <script> <args>`, the command line a run uses (relative to the repo root)."""
    return [python, str(BENCH.relative_to(REPO) / "timed_run.py"), script, *map(str, args)]


def fresh(cmd: list) -> list:
    """`cmd`, its --output_dir freed first where it runs a script: a benchmark reruns into its own folders, and a script
    refuses a folder that holds a run. The earlier run there is moved aside, to NAME.earlier-N, never removed."""
    words = list(map(str, cmd))
    if any(w.endswith("_trl_example.py") for w in words) and "--output_dir" in words and (
            "--resume_from_checkpoint" not in words):
        out = REPO / words[words.index("--output_dir") + 1]
        if out.is_dir() and any(out.iterdir()):
            out.rename(next(aside for n in itertools.count(1)
                            if not (aside := out.with_name(f"{out.name}.earlier-{n}")).exists()))
    return cmd


def show(cmd: list[str], env: dict | None = None, time_v: bool = False) -> str:
    """A command from command() as a user would type it from the repo root."""
    words = [f"{k}={v}" for k, v in (env or {}).items()] + (["/usr/bin/time", "-v"] if time_v else [])
    return " ".join(words + [shlex.join(["python", *cmd[1:]])])


def run(script: str, args: list, record_path: Path, env: dict | None = None, time_v: bool = False,
        timeout: int = 900, python: str = sys.executable) -> dict:
    """Run `script` under timed_run.py from the repo root, offline, and return its record.

    The record (see timed_run.py) gains `t_launch` (time.time() just before the process is started), `wall_s`, and
    with `time_v`, `max_rss_mib`: the "Maximum resident set size" that `/usr/bin/time -v` reports for the process.
    """
    record_path = REPO / record_path
    record_path.parent.mkdir(parents=True, exist_ok=True)
    record_path.unlink(missing_ok=True)
    cmd = command(script, args, python)
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(REPO),
                "BENCH_RECORD": str(record_path), **(env or {})}
    if time_v:
        cmd = ["/usr/bin/time", "-v", *cmd]
    t_launch = time.time()
    proc = subprocess.run(fresh(cmd), cwd=REPO, env=full_env, capture_output=True, text=True, timeout=timeout)
    wall = time.time() - t_launch
    if proc.returncode != 0 or not record_path.exists():
        raise RuntimeError(f"{show(cmd)} exited with {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    record = json.loads(record_path.read_text())
    record["t_launch"] = t_launch
    record["wall_s"] = wall
    if time_v:
        match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
        record["max_rss_mib"] = int(match.group(1)) / 1024
    record_path.write_text(json.dumps(record))  # keep what was added, for a later look at the run
    return record


def step_times(record: dict, warmup: int) -> list[float]:
    """Wall-clock seconds per optimizer step, from one step's on_step_begin to the next one's, after `warmup` steps.

    Each interval holds the whole step: fetching the batch, generation and scoring, forward/backward, the optimizer
    step, and the logging that follows it (TRL's log and every callback's on_log, ours included).
    """
    begins = dict(record["step_begin"])
    return [begins[s + 1] - begins[s] for s in sorted(begins) if s > warmup and s + 1 in begins]


def trl_step_times(record: dict, warmup: int) -> list[float]:
    """TRL's own `step_time` metric (GRPOTrainer.training_step only) per logged step after `warmup` steps."""
    return [log["step_time"] for log in record["logs"] if "step_time" in log and log["step"] > warmup]


def step_flops(record: dict) -> list[dict]:
    """Each logged step after the first, from `flops_at_log`: its number, the time of its log, its seconds (log to
    log), and the nn.Linear FLOPs run in it, in all and inside `generate`."""
    logs = record["flops_at_log"]  # [time, forward, backward, generate's FLOPs so far, step] at each step's log
    return [{"step": b[4], "end": b[0], "s": b[0] - a[0], "flops": (b[1] - a[1]) + (b[2] - a[2]),
             "generate_flops": b[3] - a[3]} for a, b in zip(logs, logs[1:])]


def startup_s(record: dict) -> float:
    """Seconds from launching the process to the start of the first training step."""
    return dict(record["step_begin"])[1] - record["t_launch"]


def median(values):
    return statistics.median(values)


def machine() -> str:
    import platform

    import torch

    return (f"{os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), torch {torch.__version__}, "
            f"{torch.get_num_threads()} torch threads, {time.strftime('%Y-%m-%d')}")


def matmul_gflops(threads: int = 0, size: int = 2048, repeats: int = 10) -> float:
    """This machine's fp32 matrix-multiply rate in GFLOP/s, with `threads` torch threads (0: torch's default), measured
    now: the yardstick for every time a benchmark reports, since machines here differ by 2.5x in it."""
    import torch

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    a, b = torch.randn(size, size), torch.randn(size, size)
    for _ in range(2):  # warm up
        a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    seconds = time.perf_counter() - start
    torch.set_num_threads(before)
    return 2 * size**3 * repeats / seconds / 1e9


def seeds_table(rows: list[dict], group: str, stats: tuple[str, ...] = ("mean", "sd")) -> str:
    """Markdown: a row per run (its `group` and seed, then every other key but the command), and for each group of
    more than one run a row per statistic over its runs; a missing value (None) is "-"."""
    functions = {"mean": statistics.mean, "sd": statistics.stdev, "min": min, "max": max}
    keys = [k for k in rows[0] if k not in (group, "seed", "command")]

    def cell(value) -> str:
        return "-" if value is None else f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"

    lines = [f"| {group} | seed | " + " | ".join(keys) + " |", "|---|---:|" + "---:|" * len(keys)]
    for name in dict.fromkeys(r[group] for r in rows):
        mine = [r for r in rows if r[group] == name]
        lines += [f"| {name} | {r['seed']} | " + " | ".join(cell(r[k]) for k in keys) + " |" for r in mine]
        if len(mine) > 1:
            columns = [[r[k] for r in mine] for k in keys]
            for stat in stats:
                lines.append(f"| {name} | {stat} | " + " | ".join(
                    cell(None if None in column else functions[stat](column)) for column in columns) + " |")
    return "\n".join(lines)
