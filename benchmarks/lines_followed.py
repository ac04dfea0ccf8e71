"""What a default GRPO run makes its reader follow: the project's Python files it runs code from, their lines (the
count issue 86 sets a goal on: every line of each file a run enters), and the lines it executes.

    .venv/bin/python benchmarks/lines_followed.py                # the default run, traced whole
    .venv/bin/python benchmarks/lines_followed.py --max_steps 20  # any flags of grpo_trl_example.py

The run writes to a temporary folder. Tracing slows it about 2x; only the project's own frames are traced line by
line.
"""

import runpy
import sys
import tempfile
import threading
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
executed = defaultdict(set)  # file -> the line numbers run


def trace(frame, event, arg):
    path = frame.f_code.co_filename
    if not path.startswith(str(ROOT)) or "/." in path[len(str(ROOT)):]:  # the project's, not a .venv's
        return None
    executed[path].add(frame.f_lineno)

    def lines(frame, event, arg):
        executed[path].add(frame.f_lineno)
        return lines

    return lines


with tempfile.TemporaryDirectory() as out:
    script = str(ROOT / "grpo_trl_example.py")
    sys.argv = [script, "--output_dir", f"{out}/run", *sys.argv[1:]]
    sys.path.insert(0, str(ROOT))
    threading.settrace(trace)
    sys.settrace(trace)
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        sys.settrace(None)

files = sorted(executed, key=lambda path: -len(Path(path).read_text().splitlines()))
print(f"\n{'file':32} {'lines':>6} {'executed':>9}")
for path in files:
    print(f"{Path(path).relative_to(ROOT)!s:32} {len(Path(path).read_text().splitlines()):6} {len(executed[path]):9}")
total = sum(len(Path(path).read_text().splitlines()) for path in files)
print(f"{'total, ' + str(len(files)) + ' files':32} {total:6} {sum(map(len, executed.values())):9}")
