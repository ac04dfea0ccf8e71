"""docs/your-own-run.md, run from the page: its shell blocks in order, in a folder of their own outside the clone,
as a copier runs them. The training commands are cut short (fewer steps, prompts and samples, flags appended, which
override the page's), and `MODEL`, which the page asks a copier to set to their model, names a tiny chat model of a
family other than SmolLM2's (Qwen2's template and tokenizer: tests/model_zoo.py): loading SmolLM2 twice was most of
the test's 4 minutes, and what it checks is the page's folder, data, reward module, flags and environments.
Everything else is as written."""

import json
import os
import re
import subprocess

import model_zoo
import pytest
from conftest import REPO, THREADS, read_jsonl

PAGE = REPO / "docs" / "your-own-run.md"
# appended to each training command: the page's runs take minutes; these decide whether its files and flags work
CUTS = {"outputs/grpo": "--max_steps 1 --eval_max_prompts 2 --eval_num_samples 2",
        "outputs/ppo": "--total_episodes 8 --eval_max_prompts 2 --eval_num_samples 2"}


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", PAGE.read_text(), re.S | re.M)


@pytest.mark.slow
def test_the_worked_example_runs_as_written(tmp_path):
    """The folder, the data, the reward and both commands: each run trains on the page's reward, evaluates the test
    split with it, and saves; the copy runs outside the clone, PPO on the clone's .venv-ppo."""
    model = model_zoo.build_qwen2(tmp_path / "my-model")
    script = "\n".join(blocks("bash"))
    assert script.count("CLONE=~/rl-templates") == 1 and "~/my-run" in script
    assert script.count("MODEL=$CLONE/assets/SmolLM2-135M-Instruct ") == 1
    script = script.replace("CLONE=~/rl-templates", f"CLONE={REPO}").replace("~/my-run", str(tmp_path / "my-run"))
    script = script.replace("MODEL=$CLONE/assets/SmolLM2-135M-Instruct ", f"MODEL={model} ")
    for out, cut in CUTS.items():
        assert script.count(f"--output_dir {out}\n") == 1, out
        script = script.replace(f"--output_dir {out}\n", f"--output_dir {out} {cut}\n")
    env = {**os.environ, **THREADS, "HF_HUB_OFFLINE": "1", "PATH": f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = tmp_path / "my-run"
    assert proc.stdout.count("held-out evaluation, split 'test', 2 prompts") == 2, proc.stdout[-3000:]
    assert "ppo_trl_example.py on trl 1.12.0" in proc.stdout and "grpo_trl_example.py on trl 1.16.0" in proc.stdout
    for algo, saved in [("grpo", "model.safetensors"), ("ppo", "adapter_model.safetensors")]:
        out = run / "outputs" / algo
        assert (out / saved).is_file() and not list(out.glob("checkpoint-*")), sorted(p.name for p in out.iterdir())
        assert any("rewards/opposite/mean" in row or "objective/scores" in row for row in read_jsonl(
            out / "metrics.jsonl")), algo
        after = json.loads((out / "eval.json").read_text())["after"]["opposite"]
        assert {"mean_reward", "greedy_accuracy", "pass@1", "pass@2", "maj@2"} <= set(after), algo


def test_the_worked_examples_defaults_are_trls():
    """The page's table of what a first run changes names TRL's defaults as TRL has them."""
    from trl import GRPOConfig

    defaults = GRPOConfig(output_dir="x", use_cpu=True, bf16=False)
    rows = dict(re.findall(r"^\| `--(\w+) [^`]+` \| ([^|]+?) \|", PAGE.read_text(), re.M))
    assert set(rows) == {"max_completion_length", "learning_rate", "max_steps", "eval_num_samples", "save_strategy",
                         "temperature"}
    assert rows["max_steps"] == f"{defaults.num_train_epochs:g} epochs" and defaults.max_steps == -1
    for name in ("max_completion_length", "learning_rate", "temperature"):
        assert float(rows[name]) == getattr(defaults, name), name
    assert rows["save_strategy"] == f"`{defaults.save_strategy.value}`"
