"""How fast is the `code` reward's sandbox on the bundled code task, now against an earlier version of it?

Loads `extras/code_sandbox.py` as it is and as it was at `--before` (a git revision; `code_sandbox.py` before it
moved to extras/), then scores the bundled task's
reference solutions (`assets/build_code_task.py`: each task's solution against its own tests, all scoring 1) with
each, alternating the two for `--rounds` rounds in one process, and prints completions per second and the ratio.
`--crowd N` first leaves N empty files in a directory of /tmp, as pytest, pip and `tempfile.mkdtemp` leave theirs
(mode 0700), and removes them at the end; CODE_SANDBOX picks the mode (as root, the unshare and rlimits modes clean
/tmp after each run).

    python benchmarks/bench_code_reward.py --before 49345f6       # ~1 min on 2 cores
    CODE_SANDBOX=rlimits python benchmarks/bench_code_reward.py --before afa4c7c --crowd 200000   # section 20
"""

import argparse
import importlib.util
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look the module up by name
    spec.loader.exec_module(module)
    return module


def bundled_jobs() -> list[tuple[str, list[str]]]:
    builder = load(REPO / "assets" / "build_code_task.py", "build_code_task")
    train, test = builder.build_rows()
    tests_of = {row["prompt"]: row["tests"] for row in train + test}
    jobs = []
    for signature, description, solution, _ in builder.TASKS:
        tests = tests_of[builder.PROMPT.format(signature=signature, description=description)]
        jobs.append((solution, tests.splitlines() if isinstance(tests, str) else tests))
    return jobs


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="git revision of the earlier code_sandbox.py")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--crowd", type=int, default=0, help="files to leave in /tmp while it runs")
    args = parser.parse_args()

    shown = [subprocess.run(["git", "show", f"{args.before}:{path}"], cwd=REPO, capture_output=True, text=True)
             for path in ("extras/code_sandbox.py", "code_sandbox.py")]
    old_source = next(s.stdout for s in shown if s.returncode == 0)
    old_path = Path(tempfile.mkdtemp()) / "code_sandbox_before.py"
    old_path.write_text(old_source)
    versions = {"before": load(old_path, "code_sandbox_before"),
                "now": load(REPO / "extras" / "code_sandbox.py", "code_sandbox")}
    jobs = bundled_jobs()
    print(f"{len(jobs)} reference solutions per round, mode {versions['now'].sandbox_mode()}, {args.rounds} rounds, "
          f"{args.crowd} files in /tmp")
    crowd = Path(tempfile.mkdtemp(prefix="bench-crowd-", dir="/tmp"))
    try:
        for i in range(args.crowd):
            folder = crowd / str(i // 1000)
            folder.mkdir(exist_ok=True)
            (folder / str(i)).touch()
        rates = measure(versions, jobs, args.rounds)
    finally:
        shutil.rmtree(crowd)
    for name, values in rates.items():
        print(f"{name:>7}: {statistics.median(values):6.1f} completions/s (median of {len(values)}; "
              f"min {min(values):.1f}, max {max(values):.1f})")
    print(f"now / before: {statistics.median(rates['now']) / statistics.median(rates['before']):.2f}")


def measure(versions: dict, jobs: list, rounds: int) -> dict[str, list[float]]:
    """Completions per second of each version, a round each in turn."""
    rates = {name: [] for name in versions}
    for _ in range(rounds):
        for name, module in versions.items():
            start = time.perf_counter()
            scores = module.run_many(jobs)
            rates[name].append(len(jobs) / (time.perf_counter() - start))
            assert scores == [1.0] * len(jobs), (name, scores)
    return rates


if __name__ == "__main__":
    main()
