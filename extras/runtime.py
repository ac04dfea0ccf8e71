"""How a run of the scripts starts and ends, and what a CPU needs that a GPU does not (docs/outputs.md):

    start(script, trl)   before the libraries load: Ctrl-C in one line; on a machine without a GPU, OpenMP threads
                         that sleep while they wait; no notice the imports would print (IMPORT_NOTICES); the trl named
                         first, and, run by another environment's Python, the same command in the script's own (PPO's
                         .venv-ppo, which setup.sh makes)
    run(main, parse)     main() on the parsed command, with the upstream notices silenced, Ctrl-C as one line that
                         says which checkpoint is kept, a refusal said once per launch, and the trainer freed before
                         Python's shutdown
    score_completions_only()
                         on a CPU, trl 1.16's chunked LM head scores the completions' positions only

This module imports only the standard library at its top: a script imports it before torch.
"""

import atexit
import gc
import hashlib
import logging
import os
import signal
import sys
import threading
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


# Ctrl-C: a run that has not ended this many seconds after it, because a library's bare `except:` caught what the
# handler raised (datasets' fingerprinting does, inside Dataset.map), ends then, from a thread of its own
GRACE = 3.0
INTERRUPTED = 130  # the exit status of a process Ctrl-C ended (128 + SIGINT), as shells and tools read it
_run = {"started": False, "output_dir": None}  # set by run(): Ctrl-C then ends training, and says what is kept
_pressed = threading.Event()  # Ctrl-C was pressed
_handled = threading.Event()  # the interrupt reached run(), or Python is exiting

# Notices a library logs while it is imported that say nothing about the run, by logger and the words they begin with
# (extras/outputs.py's `quiet` silences those a run prints later)
IMPORT_NOTICES = {
    # bitsandbytes 0.50, which peft imports, on a CPU with AVX512-BF16: its faster 4-bit matmul would be a kernel
    # downloaded from the hub at run time (the `kernels` package); without it, bitsandbytes' own kernel runs
    "bitsandbytes.backends.cpu.ops": "Failed to load CPU gemm_4bit_forward from kernels-community",
    # and, with transformers 5.25's `kernels`, the hub's check of that kernel's publisher, skipped offline
    "kernels._internals.hf_hub": "Skipping publisher trust check for 'kernels-community/",
}


def start(script: str, trl: str, environment: str | None = None) -> None:
    """What a run does before it imports torch, transformers and trl (10-25 s). `environment`: the virtual environment
    beside the script that has its `trl`, where a run by another Python goes on."""
    signal.signal(signal.SIGINT, interrupt)  # Ctrl-C in one line, not the libraries' traceback
    atexit.register(_handled.set)
    silence_import_notices()
    # On a CPU shared with other work, a torch thread that waits for the others sleeps instead of spinning on a core
    # they need: the default runs beside another torch job take 1.3-1.4x their time on an idle machine, not 4-8x, and
    # idle no longer (BENCHMARKS.md, section 13). OpenMP reads it once, when torch loads it; a GPU machine is left be.
    if not any(Path("/dev").glob("nvidia[0-9]*")):
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # DeepSpeed compiles its ops into one cache: setup.sh's two environments build them from two paths, and each would
    # rebuild the other's at every switch (a minute of C++ for its CPU communication op). One cache each
    environment_id = hashlib.sha1(sys.prefix.encode()).hexdigest()[:8]
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(Path.home() / ".cache" / "torch_extensions" / environment_id))
    name = Path(script).name
    try:
        installed = version("trl")
    except PackageNotFoundError:  # a Python without trl: the script says what to run it in
        installed = None
    # setup.sh makes an environment for each script (docs/versions.md): run from the other one, with the other trl, a
    # script goes on in its own, the same command, before it loads torch (a launcher's every process does)
    own = (Path(script).resolve().parent / environment).resolve() if environment else None
    first = os.environ.get("RANK", "0") == "0"  # a launcher's other processes print nothing of their own here
    if own and installed != trl and (own / "bin" / "python").exists() and Path(sys.prefix).resolve() != own:
        if first:
            print(f"{f'trl {installed}' if installed else 'no trl'} here: {name} goes on in {own.name}, with trl "
                  f"{trl}", flush=True)
        os.execv(own / "bin" / "python", [own / "bin" / "python", *sys.argv])
    if installed and first:
        print(f"{name} on trl {installed}" + ("" if installed == trl else f", untested: the tests run on trl {trl}"))


def silence_import_notices() -> list:
    """IMPORT_NOTICES not printed, from now on; returns the list of those silenced, which grows as they come."""
    silenced = []

    def keep(record: logging.LogRecord) -> bool:
        if record.getMessage().startswith(IMPORT_NOTICES[record.name]):
            silenced.append(record.getMessage())
            return False
        return True

    for name in IMPORT_NOTICES:
        logging.getLogger(name).addFilter(keep)
    return silenced


def interrupt(signum, frame) -> None:
    """Ctrl-C: before run(), the process ends (`interrupted`); in it, training ends as run() says. Either way, unless
    that happens within GRACE seconds, because a library caught it and went on, the run ends then; a second Ctrl-C
    ends it at once."""
    if _pressed.is_set():
        leave()
    _pressed.set()
    timer = threading.Timer(GRACE, lambda: _handled.is_set() or leave())
    timer.daemon = True  # it never holds a run that ends
    timer.start()
    if not _run["started"]:
        stop("\ninterrupted")
    raise KeyboardInterrupt


def said() -> str:
    """What an interrupted run says: how to go on, if a checkpoint is kept."""
    out = _run["output_dir"]
    if out is None or not Path(out).is_dir():
        return "\ninterrupted"
    from extras.run_folder import last_checkpoint

    kept = last_checkpoint(out)  # what --resume_from_checkpoint last resumes
    return (f"\ninterrupted; {kept} is kept: the same command with --resume_from_checkpoint last continues from it"
            if kept else "\ninterrupted")


def leave() -> None:
    """End the process now, from any thread, past whatever catches exceptions."""
    if speaks():
        sys.stderr.write(said() + "\n")
        sys.stderr.flush()
    os._exit(INTERRUPTED)


def stop(message: str) -> None:
    """End the run as interrupted: `message`, said by the process that speaks, and Ctrl-C's exit status."""
    if speaks():
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
    raise SystemExit(INTERRUPTED)


def run(main, parse_args) -> None:
    """main() on what parse_args() returns, as a run of the script (`run_main`), with a refusal said once per launch:
    every process of a launch parses the same command, reads the same folders and stops at the same check, so the
    first process of each machine (LOCAL_RANK 0) says why, and the others leave quietly, with the same exit status."""
    try:
        run_main(main, *parse_args())
    except SystemExit as stop:
        if isinstance(stop.code, str) and not speaks():
            raise SystemExit(1) from None
        raise


def run_main(main, script_args, training_args, model_args) -> None:
    """main(): no upstream notice that every run would print and that says nothing about it, and Ctrl-C as one line,
    after the trainer's progress bar has closed, saying how to go on if a checkpoint is kept."""
    from extras.outputs import quiet

    score_completions_only()  # on a CPU, trl 1.16's LM head scores the completions only, not the prompts: 6-7x faster
    _run.update(started=True, output_dir=training_args.output_dir)  # from here, Ctrl-C ends training as below
    try:
        with quiet():
            main(script_args, training_args, model_args)
    except BaseException:  # Ctrl-C; or, after one a library caught (datasets' fingerprinting), whatever ended the run
        if not _pressed.is_set():
            raise
    gc.collect()  # free the trainer while Python is whole: freed at shutdown, gloo can abort it (pytorch#179291)
    if _pressed.is_set():  # the run ended by a Ctrl-C, or before GRACE after one that a library caught: said alike
        _handled.set()
        stop(said())


def speaks() -> bool:
    """Whether this process says why a run stops: the first of its machine, or a process of no launcher."""
    return os.environ.get("LOCAL_RANK", "0") == "0"


def score_completions_only() -> None:
    """GRPOTrainer (trl 1.16) computes log-probabilities through a chunked LM head that never builds the full logits.
    On a GPU with Triton it scores only the completions' positions; elsewhere every position of every row, the prompt
    and the left padding included, and its backward recomputes each logits tile: trl's reason is static shapes for
    Neuron's compiler, which an eager device does not need. On a CPU this scores only the completions', as trl 1.12
    did (logits_to_keep): the same log-probabilities and gradients (tests/unit/test_trl_private_api.py), for the
    policy and the reference, the LM head's pass 6-7 times faster (BENCHMARKS.md, section 22). trl decides it by its
    private `_use_triton`, read at each forward; a GPU keeps trl's own choice."""
    import trl.trainer.utils as trl_utils

    on_triton = getattr(trl_utils, "_use_triton", None)
    if on_triton is not None:  # none before trl 1.13, which computed the completions' logits alone
        trl_utils._use_triton = lambda device: on_triton(device) or device.type == "cpu"
