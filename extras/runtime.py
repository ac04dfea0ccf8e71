"""How a run of the scripts starts and ends, and what a CPU needs that a GPU does not (docs/outputs.md):

    start(script, trl)   before the libraries load: Ctrl-C in one line; on a machine without a GPU, OpenMP threads
                         that sleep while they wait; the trl named first, and, run by another environment's Python,
                         the same command in the script's own (PPO's .venv-ppo, which setup.sh makes)
    run(main, *args)     main() with the upstream notices silenced, Ctrl-C as one line that says which checkpoint is
                         kept, and the trainer freed before Python's shutdown
    score_completions_only()
                         on a CPU, trl 1.16's chunked LM head scores the completions' positions only

This module imports only the standard library at its top: a script imports it before torch.
"""

import gc
import os
import signal
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def start(script: str, trl: str, environment: str | None = None) -> None:
    """What a run does before it imports torch, transformers and trl (10-25 s). `environment`: the virtual environment
    beside the script that has its `trl`, where a run by another Python goes on."""
    signal.signal(signal.SIGINT, lambda signum, frame: sys.exit("\ninterrupted"))  # not the libraries' traceback
    # On a CPU shared with other work, a torch thread that waits for the others sleeps instead of spinning on a core
    # they need: the default runs beside another torch job take 1.3-1.4x their time on an idle machine, not 4-8x, and
    # idle no longer (BENCHMARKS.md, section 13). OpenMP reads it once, when torch loads it; a GPU machine is left be.
    if not any(Path("/dev").glob("nvidia[0-9]*")):
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
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


def run(main, script_args, training_args, model_args) -> None:
    """main() as a run of the script: no upstream notice that every run would print and that says nothing about it,
    and Ctrl-C as one line, after the trainer's progress bar has closed, saying how to go on if a checkpoint is
    kept."""
    from extras.outputs import quiet

    signal.signal(signal.SIGINT, signal.default_int_handler)  # from here, Ctrl-C ends training as below
    interrupted = False
    try:
        with quiet():
            main(script_args, training_args, model_args)
    except KeyboardInterrupt:
        interrupted = True
    gc.collect()  # free the trainer while Python is whole: freed at shutdown, gloo can abort it (pytorch#179291)
    if interrupted:
        from transformers.trainer_utils import get_last_checkpoint

        kept = Path(training_args.output_dir).is_dir() and get_last_checkpoint(training_args.output_dir)
        sys.exit(f"\ninterrupted; {kept} is kept: the same command with --resume_from_checkpoint last continues "
                 "from it" if kept else "\ninterrupted")


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
