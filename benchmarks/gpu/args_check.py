"""Parse and check every run the GPU check will start, as its script does before it loads anything: a mistyped flag,
a refused option or a missing path costs a second here instead of a run's minutes on the GPU.

    python benchmarks/gpu/args_check.py RUNS.txt      # one run a line: SCRIPT ARGS... (a launcher's flags left out)
"""

import contextlib
import importlib
import io
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the scripts' folder
from extras import runtime  # noqa: E402

runtime.silence_import_notices()  # as a run does before its imports: each line below is this check's own
from extras import checks  # noqa: E402
from extras import ppo as extras_ppo  # noqa: E402

failed = 0
with open(sys.argv[1]) as lines:
    for line in filter(str.strip, lines):
        script, *argv = shlex.split(line)
        module = importlib.import_module(script.removesuffix(".py"))
        sys.argv = [str(Path(script).resolve()), *argv]  # as the run's own: checks.check reads them
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the run's settings line: this check prints its own
                parsed = module.parse_args(argv)
            checks.check(*parsed)
            if script.startswith("ppo"):
                extras_ppo.check_options(*parsed[:2])
            print(f"ok    {line.strip()}")
        except SystemExit as stop:
            failed += 1
            print(f"FAIL  {line.strip()}\n      {stop.code}")
sys.exit(1 if failed else 0)
