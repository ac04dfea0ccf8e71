"""Shared test helpers: run a training script the way a user does, and build tiny variants of the bundled model."""

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TINY_MODEL = REPO / "assets" / "tiny-llama-addition"
ADDITION = REPO / "assets" / "addition"

# A chat template made only of characters the bundled character-level tokenizer knows.
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accelerate_ddp(num_processes: int = 2, port: int | None = None, machines: tuple[int, int] | None = None) -> list[str]:
    """`accelerate launch` with accelerate_configs/ddp.yaml; on a CPU-only machine the processes talk over gloo.

    `machines=(machine_rank, num_machines)` launches one "machine" of a multi-node run, all on 127.0.0.1.
    """
    launcher = ["-m", "accelerate.commands.launch", "--config_file", str(REPO / "accelerate_configs" / "ddp.yaml"),
                "--num_processes", str(num_processes), "--main_process_port", str(port or free_port())]
    if machines is not None:
        launcher += ["--machine_rank", str(machines[0]), "--num_machines", str(machines[1]),
                     "--main_process_ip", "127.0.0.1"]
    return launcher


def run_script(script: str, *args, cwd: Path, env: dict | None = None, check: bool = True, timeout: int = 300,
               launcher: list[str] = ()):
    """Run `python [launcher] <script> <args>` from `cwd` with the hub switched off, as a user would.

    Fails the test with the script's output if it exits non-zero and `check` is set.
    """
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **(env or {})}
    proc = subprocess.run(
        [sys.executable, *launcher, str(REPO / script), *map(str, args)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
    )
    if check and proc.returncode != 0:
        pytest.fail(f"{script} exited with {proc.returncode}\n--- stdout ---\n{proc.stdout[-3000:]}"
                    f"\n--- stderr ---\n{proc.stderr[-6000:]}")
    return proc


def assert_run_summary(out: Path, stdout: str, steps: int) -> None:
    """What every single-process run of the bundled task must leave: summary.json, both plots, the printed summary."""
    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == 1 and summary["global_step"] == steps and summary["train_runtime"] > 0
    assert summary["versions"]["trl"] == "1.12.0"
    assert 0.0 <= summary["reward_first_20pct"] <= 1.0 and 0.0 <= summary["reward_last_20pct"] <= 1.0
    assert summary["script_args"]["reward_funcs"] == ["accuracy"]
    assert summary["training_args"]["use_cpu"] is True and summary["training_args"]["bf16"] is False
    assert (out / "reward_curve.png").read_bytes()[:4] == (out / "training_curves.png").read_bytes()[:4] == b"\x89PNG"
    assert "mean reward, last 20% of logged steps" in stdout


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
