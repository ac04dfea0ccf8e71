"""The GPU recipes' evaluations and checkpoints fall inside their runs, on 1 GPU and on 8, and their evaluations cost
what their comments say: a recipe's step counts are arithmetic on its settings and its dataset's size.

An interval in steps that fits one process overshoots eight (GSM8K's epoch is 934 steps on 1 GPU, 116 on 8: at
`eval_steps: 200` the 8-GPU run evaluated and saved nothing before its end); Trainer reads a value below 1 as a
fraction of the run's steps, which fits both.
"""

import math
import re

import pytest
import yaml
from conftest import REPO

# The train splits' sizes of the hub datasets the GPU recipes name (their dataset cards), which the tests cannot load
TRAIN_ROWS = {"openai/gsm8k": 7473, "trl-lib/tldr": 116722}
GPU_RECIPES = sorted(p for p in (REPO / "recipes").glob("*/grpo/*.yaml")
                     if yaml.safe_load(p.read_text())["dataset_name"] in TRAIN_ROWS)


def optimizer_steps(recipe: dict, processes: int) -> int:
    """GRPOTrainer's steps for a run: max_steps, or an epoch's whole groups of the prompts one optimizer step takes
    from every process (its sampler drops the last partial one), times the epochs."""
    if recipe.get("max_steps", -1) > 0:
        return recipe["max_steps"]
    per_step = recipe["per_device_train_batch_size"] * recipe.get("gradient_accumulation_steps", 1) * processes
    prompts_per_step = per_step // recipe["num_generations"]
    return TRAIN_ROWS[recipe["dataset_name"]] // prompts_per_step * recipe.get("num_train_epochs", 3)


def times(interval: float, steps: int) -> int:
    """How often an interval in steps, or as a fraction of the run (below 1, as Trainer reads it), falls in `steps`."""
    return steps // (math.ceil(interval * steps) if interval < 1 else int(interval))


def test_gsm8ks_epoch_is_the_steps_its_recipes_give():
    recipe = yaml.safe_load((REPO / "recipes" / "Qwen2.5-0.5B-Instruct" / "grpo" / "config_gsm8k.yaml").read_text())
    assert (optimizer_steps(recipe, 1), optimizer_steps(recipe, 8)) == (934, 116)


@pytest.mark.parametrize("processes", [1, 8])
@pytest.mark.parametrize("recipe_path", GPU_RECIPES, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_evaluations_and_checkpoints_fall_inside_the_run(recipe_path, processes):
    recipe = yaml.safe_load(recipe_path.read_text())
    steps = optimizer_steps(recipe, processes)
    if recipe.get("eval_strategy") == "steps":
        assert times(recipe["eval_steps"], steps) >= 2, "no evaluation before the run's end"
    if recipe.get("save_strategy") == "steps":
        assert times(recipe["save_steps"], steps) >= 2, "no checkpoint before the run's end"


@pytest.mark.parametrize("recipe_path", GPU_RECIPES, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_an_evaluation_is_a_bounded_slice_whose_cost_the_recipe_states(recipe_path):
    """An evaluation over a whole test split (GSM8K's 1,319 prompts x 8) costs more generation than a run on 8 GPUs
    trains with: a recipe that evaluates takes a slice, and its comment's figures are its settings'."""
    text = recipe_path.read_text()
    recipe = yaml.safe_load(text)
    if recipe.get("eval_strategy") != "steps":
        return
    prompts = int(re.fullmatch(r"\w+\[:(\d+)\]", recipe["dataset_test_split"])[1])
    completions = prompts * recipe.get("num_generations_eval", recipe["num_generations"])
    per_step = recipe["per_device_train_batch_size"] * recipe["gradient_accumulation_steps"]
    evaluations = times(recipe["eval_steps"], optimizer_steps(recipe, 1))
    said = " ".join(line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))
    assert f"{prompts} test prompts x {recipe['num_generations']} = {completions:,} completions" in said
    assert f"{completions // per_step} steps' worth" in said
    assert f"add {round(100 * evaluations * completions / (optimizer_steps(recipe, 1) * per_step))}%" in said


def test_the_ppo_recipe_gives_its_memory_by_the_measured_formula():
    """The Qwen PPO recipe's comment gives benchmarks/ppo_memory.py's formula at its settings, with the k measured
    there (benchmarks/results/ppo_memory.json): the scores it keeps, the peak, and the smaller rollout's peak."""
    import json
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    import ppo_memory

    k = json.loads((REPO / "benchmarks" / "results" / "ppo_memory.json").read_text())["k"]
    figures = ppo_memory.recipe_figures(k)
    text = (REPO / "recipes" / "Qwen2.5-0.5B-Instruct" / "ppo" / "config_gsm8k.yaml").read_text()
    said = " ".join(line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))
    assert f"64 x 512 x 151,936 x 4 B = {figures['kept_scores_gb']} GB" in said
    assert f"{figures['peak_gb']} GB at the peak" in said
    smaller = ppo_memory.predicted_mib(32, 512, 8, ppo_memory.GPU_PROMPT_WIDTH, k) * 2**20 / 1e9
    assert f"(rollouts of 32) peak at {smaller:.1f} GB" in said
