"""Every recipe in recipes/ runs end to end for 2 steps, with its own settings.

Only what this machine cannot have is replaced: the model by a tiny random model of the same architecture
(tests/model_zoo.py), the hub dataset by a local one of the same layout, vLLM by TRL's own generation, and the
lengths and step counts by tiny ones. LoRA targets, activation checkpointing, schedulers, eval, system prompts,
save limits, reward models: all run as the recipe sets them. SmolLM2-135M-Instruct's recipes run on the real model,
in tests/e2e/test_smollm2.py.
"""

import json
from pathlib import Path

import model_zoo
import pytest
import yaml
from conftest import REPO, read_jsonl, run_script

# SmolLM2-135M-Instruct's recipes run on the real model itself, under a spy, in tests/e2e/test_smollm2.py
RECIPES = sorted(p for p in (REPO / "recipes").glob("*/*/*.yaml")
                 if not p.is_relative_to(REPO / "recipes" / "SmolLM2-135M-Instruct"))
MODEL_KEYS = ("model_name_or_path", "sft_model_path", "reward_model_path", "value_model_path")


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory) -> dict:
    """The local stand-ins, built once: models by (architecture, reward model?), datasets by layout."""
    tmp = tmp_path_factory.mktemp("stand-ins")
    return {
        ("qwen", False): model_zoo.build_qwen2(tmp / "qwen2"),
        ("qwen", True): model_zoo.build_qwen2(tmp / "qwen2-rm", reward_model=True),
        ("pythia", False): model_zoo.build_pythia(tmp / "pythia"),
        ("pythia", True): model_zoo.build_pythia(tmp / "pythia-rm", reward_model=True),
        "gsm8k": model_zoo.write_gsm8k(tmp / "gsm8k"),
        "tldr": model_zoo.write_tldr(tmp / "tldr"),
    }


def stand_in_flags(recipe: dict, algo: str, stand_ins: dict, out: Path) -> list:
    flags = ["--output_dir", out]
    for key in MODEL_KEYS:
        if recipe.get(key):
            arch = next(a for a in ("qwen", "pythia") if a in recipe[key].lower())
            flags += [f"--{key}", stand_ins[arch, "reward" in recipe[key].lower()]]
    flags += ["--dataset_name", stand_ins[next(d for d in ("gsm8k", "tldr") if d in recipe["dataset_name"])]]
    if recipe.get("use_vllm"):
        flags += ["--use_vllm", "false"]
    flags += ["--gradient_accumulation_steps", 1]  # one micro-batch per optimizer step
    if algo == "grpo":
        flags += ["--max_steps", 2, "--max_completion_length", 8, "--logging_steps", 1]
        if recipe.get("eval_strategy") == "steps":
            flags += ["--eval_steps", 2]
        if recipe.get("save_strategy") == "steps":
            flags += ["--save_steps", 1]
    else:  # two PPO updates
        flags += ["--total_episodes", 2 * recipe["per_device_train_batch_size"], "--response_length", 8]
    return flags


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: str(p.relative_to(REPO / "recipes")))
def test_recipe_runs(path, stand_ins, tmp_path):
    recipe, algo = yaml.safe_load(path.read_text()), path.parent.name
    out = tmp_path / "out"
    run_script(f"{algo}_trl_example.py", "--config", path, *stand_in_flags(recipe, algo, stand_ins, out),
               cwd=tmp_path, timeout=400)

    summary = json.loads((out / "summary.json").read_text())
    assert summary["global_step"] == 2
    metrics = read_jsonl(out / "metrics.jsonl")
    assert [m["step"] for m in metrics if "reward" in m] == [1, 2]
    # the recipe's own settings ran
    settings = {**summary["script_args"], **summary["training_args"], **summary["model_args"]}
    for key in ("learning_rate", "lr_scheduler_type", "use_peft", "lora_target_modules", "system_prompt",
                "reward_funcs", "reward_weights", "beta", "num_generations", "activation_checkpointing",
                "save_total_limit", "kl_coef", "missing_eos_penalty", "dataset_config", "dataset_prompt_column"):
        if key in recipe:
            assert settings[key] == recipe[key], key
    if recipe.get("use_peft"):
        assert json.loads((out / "adapter_config.json").read_text())["target_modules"]
        assert set(json.loads((out / "adapter_config.json").read_text())["target_modules"]) == set(
            recipe["lora_target_modules"])
    else:
        assert (out / "model.safetensors").exists()
    if algo == "grpo" and recipe.get("eval_strategy") == "steps":
        assert [m["step"] for m in metrics if "eval_reward" in m] == [2]
    if algo == "grpo" and recipe.get("save_strategy") == "steps":  # save_total_limit keeps the newest ones
        kept = sorted(p.name for p in out.glob("checkpoint-*"))
        assert kept == ["checkpoint-1", "checkpoint-2"][-recipe.get("save_total_limit", 2):]
    names = [n for n in recipe.get("reward_funcs", [])] or ["reward_model"]
    rows = read_jsonl(out / "completions.jsonl")
    assert rows and all(name in rows[0] for name in names)
