"""A warm Python for the tests' single-process script runs: one interpreter per pytest worker imports torch,
transformers, trl and the rest once, then forks a child for each run, which runs the script as `python script.py`
does (`runpy` as `__main__`, sys.argv, sys.path[0], the working directory, the environment, stdout and stderr to files,
stdin from /dev/null) and exits as Python exits (atexit, non-daemon threads joined, its own exit code).

Why: importing those libraries takes ~8 s of CPU on this project's 2-core machine and a tiny run ~10-20 s, so imports
were over half of the suite's time (README, Test). What a forked run shares with the warm interpreter is only what
those imports did, and `start` checks that they printed and warned nothing, so a run's output is what a fresh process
prints. The imports run after extras/runtime.py's silence_import_notices, as a script's do; for a script without it
beside (a bare copy), the child first prints what that silenced, as the copy's own imports would (bitsandbytes'
notice, on a CPU with AVX512-BF16). `conftest.run_script` uses it only where that
holds (see `can_fork`); multi-process launches, a sitecustomize.py on PYTHONPATH and environment variables the
libraries read on import get a real subprocess.
"""

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

RUNTIME = Path(__file__).resolve().parents[1] / "extras" / "runtime.py"

# Imported once by the warm interpreter: the heavy libraries both scripts import, except modules that warn on import
# (trl.experimental: a run must print that warning itself) or whose import a script configures (matplotlib's backend).
IMPORTS = ["torch", "transformers", "datasets", "accelerate", "peft", "trl"]
ATTRIBUTES = [("trl", "GRPOTrainer"), ("trl", "GRPOConfig"), ("trl", "TrlParser"), ("trl", "ModelConfig")]

# Environment variables that these libraries (or the interpreter) may read while importing: a run that sets one of
# them differently from the warm interpreter gets a fresh process. The warm interpreter also records every variable
# the imports look up by name through os.environ; these prefixes cover those read in C (OMP_NUM_THREADS) or by a scan.
READ_ON_IMPORT = ("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TORCH", "PYTORCH_", "OMP_", "MKL_", "KMP_", "OPENBLAS_",
                  "CUDA", "NCCL_", "ACCELERATE_", "TRL_", "PEFT_", "DATASETS_", "TOKENIZERS_", "PYTHON",
                  "LD_", "XDG_", "TMPDIR", "TRACKIO_", "WANDB_", "GRADIO_", "MPL")

SERVER = r'''
import json, os, runpy, sys, warnings

def serve(imports, attributes, runtime):
    protocol = os.fdopen(os.dup(1), "w")
    log = os.open(os.environ.pop("WARM_IMPORT_LOG"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)  # what the imports print, and their warnings, go to a file that must stay empty
    os.dup2(log, 2)
    import importlib.util  # extras/runtime.py under a name of its own: a copied script imports its own extras
    spec = importlib.util.spec_from_file_location("warm_runtime", runtime)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    silenced = module.silence_import_notices()  # as a script does before its imports
    read = set()  # the environment variables the imports read: by name, or all of them in a copy (a safe excess)
    class Recording(type(os.environ)):
        def __getitem__(self, key):
            read.add(key)
            return super().__getitem__(key)
    plain, os.environ.__class__ = os.environ.__class__, Recording
    with warnings.catch_warnings(record=True) as caught:  # under the filters a fresh process has: what it would show
        import importlib
        for name in imports:
            importlib.import_module(name)
        for module, name in attributes:
            getattr(sys.modules[module], name)
    os.environ.__class__ = plain
    sys.stdout.flush()
    sys.stderr.flush()
    for w in caught:
        os.write(log, f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}\n".encode())
    protocol.write(json.dumps({"env": dict(os.environ), "read": sorted(read), "silenced": silenced}) + "\n")  # ready
    protocol.flush()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            protocol.close()
            run(**request)  # never returns
        protocol.write(f"{pid}\n")
        protocol.flush()
        _, status = os.waitpid(pid, 0)
        protocol.write(f"{os.waitstatus_to_exitcode(status)}\n")
        protocol.flush()

def run(argv, cwd, env, stdout, stderr, notices):
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    for fd, path in ((1, stdout), (2, stderr)):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    sys.stderr.writelines(f"{notice}\n" for notice in notices)  # as logging prints a warning with no handler set
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
    sys.path[1:1] = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit:
        raise
    except BaseException:
        sys.excepthook(*sys.exc_info())  # as the interpreter reports an uncaught exception
        sys.exit(1)
    sys.exit(0)  # leaves through the interpreter's own exit: atexit handlers, threads joined, streams flushed

serve(json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3])
'''


class WarmPython:
    """One warm interpreter, started with `env`; `run` forks a child of it per script run."""

    def __init__(self, env: dict, workdir: Path, python: str = sys.executable):
        self.env, self.workdir, self.python = dict(env), workdir, python
        workdir.mkdir(parents=True, exist_ok=True)
        import_log = workdir / "imports.log"
        self.proc = subprocess.Popen(
            [python, "-c", SERVER, json.dumps(IMPORTS), json.dumps(ATTRIBUTES), str(RUNTIME)],
            env={**self.env, "WARM_IMPORT_LOG": str(import_log)}, cwd=workdir, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.pending = b""
        ready = json.loads(self.readline(timeout=300))
        # the environment as the imports left it (torch sets TORCHINDUCTOR_CACHE_DIR, as it does in pytest's process),
        # and the variables they looked up by name (trackio, which trl imports, reads TRACKIO_DIR then)
        self.env_after_imports, self.read_on_import = ready["env"], set(ready["read"])
        self.silenced = ready["silenced"]  # notices runtime.silence_import_notices kept from printing
        printed = import_log.read_text()
        if printed:  # a run of its own would print this: forking would hide it
            self.close()
            raise RuntimeError(f"importing {IMPORTS} printed or warned, so a forked run would not:\n{printed}")
        self.runs = 0

    def can_fork(self, env: dict) -> bool:
        """Whether a run with `env` would see the same imports as a fresh process."""
        changed = {k for k in set(env) | set(self.env)
                   if env.get(k) != self.env.get(k) and env.get(k) != self.env_after_imports.get(k)} - {"PYTHONPATH"}
        paths = [Path(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        return (not any(k.startswith(READ_ON_IMPORT) or k in self.read_on_import for k in changed)
                and not any((p / name).exists() for p in paths for name in ("sitecustomize.py", "usercustomize.py")))

    def run(self, argv: list[str], cwd: Path, env: dict, timeout: float) -> subprocess.CompletedProcess:
        self.runs += 1
        out, err = self.workdir / f"run{self.runs}.out", self.workdir / f"run{self.runs}.err"
        silences = (Path(argv[0]).parent / "extras" / "runtime.py").exists()  # what the script's imports print
        request = dict(argv=list(map(str, argv)), cwd=str(cwd), env=env, stdout=str(out), stderr=str(err),
                       notices=[] if silences else self.silenced)
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        pid = int(self.readline(timeout=60))
        try:
            returncode = int(self.readline(timeout))
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            self.readline(timeout=60)
            raise subprocess.TimeoutExpired(argv, timeout, out.read_text(), err.read_text()) from None
        stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
        out.unlink()
        err.unlink()
        return subprocess.CompletedProcess([self.python, *argv], returncode, stdout, stderr)

    def readline(self, timeout: float) -> str:
        """The warm interpreter's next line, without its newline; TimeoutError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError(f"the warm interpreter exited with {self.proc.wait()}")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode()

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        shutil.rmtree(self.workdir, ignore_errors=True)
