"""Weights that train in bf16 or fp16 under a plain optimizer lose most of their updates (an update below a weight's
precision rounds away): each script stops before loading any model when a run would do it (docs/scaling.md)."""

import json
import shutil
from types import SimpleNamespace

import pytest
from conftest import ALGOS, TINY_MODEL, ppo_script

import grpo_trl_example as grpo

# dtype, --use_peft, --lora_modules_to_save, DeepSpeed, (GRPO stops, PPO stops)
CASES = [
    ("float32", False, None, False, (False, False)),
    ("bfloat16", False, None, False, (True, True)),
    ("float16", False, None, False, (True, True)),
    ("bfloat16", True, None, False, (False, True)),  # LoRA's adapters are fp32 (peft); PPO's value model is not LoRA
    ("bfloat16", True, ["lm_head"], False, (True, True)),  # a module to save trains in full, in the base's dtype
    ("bfloat16", False, None, True, (False, False)),  # DeepSpeed trains an fp32 master copy
    ("auto", False, None, False, (False, False)),  # the tiny model's checkpoint is fp32
    ("auto-bf16", False, None, False, (True, True)),  # "auto" on a bf16 checkpoint loads bf16
]


def check_precision(algo, model_args, training_args, path, value_path=None):
    """Each script's check as its main() calls it: GRPO's on the policy, PPO's on the policy and its value model."""
    if algo == "grpo":
        grpo.check_precision(model_args, training_args, path, None, False, "--bf16 true")
    else:
        ppo_script().check_precision(model_args, training_args, path, value_path or path, False, "`accelerate ...`")


def bf16_checkpoint(folder):
    """A copy of the tiny model whose config says bf16, as "auto" reads it."""
    shutil.copytree(TINY_MODEL, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "dtype": "bfloat16"}))
    return folder


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("dtype, peft, modules_to_save, deepspeed, stops", CASES)
def test_a_run_that_would_train_half_precision_weights_stops_before_loading(tmp_path, monkeypatch, dtype, peft,
                                                                            modules_to_save, deepspeed, stops, algo):
    path = TINY_MODEL
    if dtype == "auto-bf16":
        path = bf16_checkpoint(tmp_path / "bf16-model")
        dtype = "auto"
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", str(deepspeed).lower())
    model_args = SimpleNamespace(dtype=dtype, use_peft=peft, lora_modules_to_save=modules_to_save,
                                 model_name_or_path=str(path), model_revision="main")
    training_args = SimpleNamespace(deepspeed=None, trust_remote_code=False)
    if stops[algo == "ppo"]:
        with pytest.raises(SystemExit, match=r"rounds most updates away: use --dtype float32"):
            check_precision(algo, model_args, training_args, str(path))
    else:
        check_precision(algo, model_args, training_args, str(path))


@pytest.mark.ppo_trainer
@pytest.mark.parametrize("peft", [False, True], ids=["full", "lora"])
def test_ppo_reads_the_value_models_own_dtype(tmp_path, peft):
    """--dtype auto with --value_model_path at a bf16 checkpoint (a reward model, as TRL's PPO example starts its value
    model) and an fp32 policy: the value model would train in bf16, with LoRA or without."""
    model_args = SimpleNamespace(dtype="auto", use_peft=peft, lora_modules_to_save=None, model_revision="main")
    training_args = SimpleNamespace(deepspeed=None)
    with pytest.raises(SystemExit, match=r"would train the value model \(.*bf16-value\) in bfloat16 under a plain"):
        check_precision("ppo", model_args, training_args, str(TINY_MODEL), bf16_checkpoint(tmp_path / "bf16-value"))
    check_precision("ppo", model_args, training_args, str(TINY_MODEL), str(TINY_MODEL))  # both fp32


@pytest.mark.parametrize("algo", ALGOS)
def test_no_bundled_recipe_trains_half_precision_weights(algo):
    """Every recipe, as its script parses it: none holds trained weights in bf16 under a plain optimizer."""
    from conftest import REPO

    from extras import cli

    script = grpo if algo == "grpo" else ppo_script()
    for recipe in sorted(REPO.glob("recipes/*/*/*.yaml")) + sorted(REPO.glob("recipes/tiny/*.yaml")):
        if ("/ppo/" in str(recipe) or recipe.name == "ppo.yaml") != (algo == "ppo") or recipe.name == "tools.yaml":
            continue  # the other script's; tools.yaml, the tiny tool task, is fp32 as the tiny recipes
        _, training_args, model_args = cli.parse(script.make_parser(), script.REFUSED, ["--config", str(recipe)])
        assert model_args.dtype != "auto", recipe  # "auto" would need the hub to tell
        check_precision(algo, model_args, training_args, "unused: the dtype is named")


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("native", [True, False], ids=["avx512_bf16", "no-native-bf16"])
def test_a_cpu_computes_in_bf16_where_it_does_so_natively(algo, native, monkeypatch, capsys, tmp_path):
    """Issue 76: every CPU run was fp32, where a CPU with AVX512-BF16 or AMX multiplies bf16 2.8-4x faster; where
    bf16 is emulated it is slower than fp32. GRPO's default follows the capability (forced both ways here, whatever
    this machine has); PPO's stays fp32 on both, its LoRA recipe less reliable in bf16 over 6 seeds (BENCHMARKS 27).
    The settings line says which and why, and --bf16 overrides either way. The tiny model's recipes keep fp32 on every
    CPU: bf16 gains it nothing."""
    import torch

    script = grpo if algo == "grpo" else ppo_script()
    if torch.cuda.is_available():
        pytest.skip("the CPU's choice; a GPU keeps TRL's")
    flags = {"avx512_bf16": native, "amx_bf16": False}
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {**flags, "avx2": True})
    named = ["--model_name_or_path", str(TINY_MODEL), "--dataset_name", "d"]  # the default run's recipe keeps fp32
    default = native and algo == "grpo"
    assert script.make_parser().parse_args_into_dataclasses([])[1].bf16 is default
    assert script.parse_args(named)[1].bf16 is default
    said = capsys.readouterr().out
    why = "the CPU computes bf16" if default else "PPO's default on a CPU" if algo == "ppo" else (
        "the CPU has no native bf16")
    assert f"{'bf16 mixed precision' if default else 'fp32'} ({why})" in said
    for asked in (True, False):
        assert script.parse_args([*named, "--bf16", str(asked).lower()])[1].bf16 is asked
        said = capsys.readouterr().out
        expected = why if asked is default else f"--bf16 {str(asked).lower()}"
        assert f"{'bf16 mixed precision' if asked else 'fp32'} ({expected})" in said
    recipe = tmp_path / "mine.yaml"  # a recipe's value is said as the recipe's, not as a flag typed (issue 82)
    recipe.write_text(f"bf16: {str(not default).lower()}\n")
    assert script.parse_args(["--config", str(recipe), *named])[1].bf16 is not default
    said = capsys.readouterr().out
    assert f"{'fp32' if default else 'bf16 mixed precision'} (bf16: {str(not default).lower()} in {recipe})" in said


def test_the_weights_line_names_a_frozen_reference_copy():
    """Issue 83: `frozen in -` while a full copy of the policy was held as the KL reference (GRPO at beta > 0 and PPO,
    without LoRA). Under LoRA there is no copy: the reference is the policy with its adapter off."""
    import torch

    from extras.outputs import describe_precision, precision

    policy = torch.nn.Linear(2, 2)
    trainer = SimpleNamespace(model=policy, ref_model=torch.nn.Linear(2, 2).to(torch.bfloat16).requires_grad_(False),
                              accelerator=SimpleNamespace(mixed_precision="no"))
    assert describe_precision(precision(trainer)) == "trained in float32; frozen in bfloat16"
    trainer.ref_model = None
    assert describe_precision(precision(trainer)) == "trained in float32; frozen in -"
