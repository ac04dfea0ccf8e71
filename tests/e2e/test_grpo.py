"""End-to-end runs of grpo_trl_example.py as a subprocess, with tiny settings, the way a user runs it."""

import json
import re
from pathlib import Path

import pytest
import torch
from conftest import (ADDITION, REPO, assert_adapter_trained, assert_held_out_summary, assert_no_preventable_warnings,
                      assert_run_summary, assert_summary_means, assert_trained, read_jsonl, run_script, spied,
                      spied_calls, write_jsonl)

from rewards import REWARDS, accuracy_reward

SCRIPT = "grpo_trl_example.py"
TINY = ["--max_steps", 4, "--logging_steps", 1, "--eval_strategy", "no"]  # ~10 s per run on 2 cores


def answer_of(prompt: str) -> str:
    a, b = prompt.rstrip("=").split("+")
    return str(int(a) + int(b))


def test_default_task_outputs(tmp_path):
    out = tmp_path / "out"
    # a fresh process, as every other run in one process is not (tests/warm_python.py): what it prints is all its own
    proc = run_script(SCRIPT, "--output_dir", out, "--max_steps", 4, "--logging_steps", 1, "--eval_strategy", "steps",
                      "--eval_steps", 2, cwd=tmp_path, fresh=True)
    assert_no_preventable_warnings(proc.stdout + proc.stderr)
    assert "step 4/4: reward " in proc.stdout.replace("\r", "\n")  # each log in one short line
    assert not (out / "README.md").exists()  # no hub model card unless --push_to_hub

    # metrics.jsonl: one line per logging step, with the total reward and each reward function's mean
    metrics = read_jsonl(out / "metrics.jsonl")
    train_logs = [m for m in metrics if "reward" in m]
    assert [m["step"] for m in train_logs] == [1, 2, 3, 4]
    # keys docs/outputs.md lists, and those training_curves.png draws (tests/unit/test_plots.py)
    assert all({"kl", "loss", "rewards/accuracy/mean", "completions/mean_length"} <= set(m) for m in train_logs)
    # issue 84: the held-out evaluation at the eval steps but the last, which "after" measures, on the test split;
    # TRL's own, the mean reward over --num_generations samples of every test prompt, only where a metric asks for it
    assert [m["step"] for m in metrics if "heldout/accuracy/pass@1" in m] == [2]
    assert not [m for m in metrics if "eval_reward" in m]
    assert [p["step"] for p in json.loads((out / "eval.json").read_text())["during"]] == [2]
    assert "held-out at step 2 (" in proc.stdout and "s of it held-out evaluation" in proc.stdout

    # completions.jsonl: each logged completion with its reward, which must be the accuracy of that completion
    rows = read_jsonl(out / "completions.jsonl")
    assert len(rows) == 4 * 16  # 4 logging steps x (2 prompts x 8 generations)
    train_prompts = {r["prompt"] for r in read_jsonl(ADDITION / "train.jsonl")}
    for row in rows:
        assert row["prompt"] in train_prompts
        assert row["accuracy"] == accuracy_reward([row["completion"]], answer=[answer_of(row["prompt"])])[0]
    for m in train_logs:  # the logged rewards are the means over that step's completions
        accuracies = [r["accuracy"] for r in rows if r["step"] == m["step"]]
        assert m["reward"] == pytest.approx(m["rewards/accuracy/mean"]) == pytest.approx(sum(accuracies) / 16)

    assert_run_summary(out, proc.stdout, steps=4)
    # the default run keeps no checkpoint, as PPO's: `--save_strategy steps --save_steps N` asks for them
    assert not list(out.glob("checkpoint-*"))

    # the trained policy is a plain causal LM, trained, that loads and generates
    assert_trained(out)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    ids = tokenizer("2+3=", return_tensors="pt").input_ids
    assert model.generate(ids, max_new_tokens=2, do_sample=False).shape[1] > ids.shape[1]


def test_conversational_prompts_with_system_prompt(tmp_path, chat_model, addition_rows):
    """--system_prompt opens every conversation, in place of the system message some prompts already have; and a run
    that names its model without a recipe takes TRL's defaults, as TRL's own script does."""
    own_system = [{"role": "system", "content": "Subtract."}]
    data = write_jsonl(tmp_path / "chat.jsonl",
                       [{"prompt": own_system[:i % 2] + [{"role": "user", "content": r["prompt"]}],
                         "answer": r["answer"]} for i, r in enumerate(addition_rows)])
    out = tmp_path / "out"
    launcher, env, spy = spied(tmp_path)
    run_script(SCRIPT, "--model_name_or_path", chat_model, "--dataset_name", data, "--max_completion_length", 8,
               "--system_prompt", "Add.", "--output_dir", out, *TINY, cwd=tmp_path, launcher=launcher, env=env)
    # TRL's GRPOConfig turns activation (gradient) checkpointing on by default, on the policy (TRL switches it off
    # and on again around each step's no-grad forward passes, so it is enabled more than once); on a CPU the script's
    # default keeps the activations instead
    checkpointed = set(spied_calls(spy, "activation_checkpointing_enable"))
    assert checkpointed == ({"LlamaForCausalLM"} if torch.cuda.is_available() else set())
    rows = read_jsonl(out / "completions.jsonl")
    assert rows and all(isinstance(r["completion"], str) for r in rows)
    # prompts are logged as the model saw them: system prompt first, chat template applied
    user_turns = {f"system: Add.\nuser: {r['prompt']}\nassistant: " for r in addition_rows}
    assert {r["prompt"] for r in rows} <= user_turns
    summary = json.loads((out / "summary.json").read_text())
    assert summary["script_args"]["system_prompt"] == "Add." and summary["global_step"] == 4
    from dataclasses import fields

    from trl import GRPOConfig

    trl_default = {f.name: f.default for f in fields(GRPOConfig)}
    assert summary["training_args"]["learning_rate"] == trl_default["learning_rate"] != 3e-4  # not recipes/tiny's


def test_gsm8k_layout_with_prompt_column(tmp_path, addition_rows):
    """question/answer columns and '#### N' gold answers train with no preprocessing."""
    data = write_jsonl(tmp_path / "gsm8k.jsonl",
                       [{"question": r["prompt"], "answer": f"Add the digits.\n#### {r['answer']}"}
                        for r in addition_rows])
    out = tmp_path / "out"
    run_script(SCRIPT, "--dataset_name", data, "--dataset_prompt_column", "question", "--eval_num_samples", 2,
               "--output_dir", out, *TINY, cwd=tmp_path)
    rows = read_jsonl(out / "completions.jsonl")
    # no test split: the before/after evaluation holds out a seeded 10% of train
    report = json.loads((out / "eval.json").read_text())
    assert report["num_prompts"] == 8 and "held out of 'train' (seed 42)" in report["source"]
    # the starting policy is right ~2/3 of the time: a parsed GSM8K gold must give some reward, in the evaluation
    # (16 samples, all wrong with probability (1/3)^16) as in training
    assert report["before"]["accuracy"]["pass@2"] > 0 and report["after"]["accuracy"]["pass@2"] > 0
    assert sum(r["accuracy"] for r in rows) > 0
    for row in rows:
        assert row["accuracy"] == accuracy_reward([row["completion"]], answer=[answer_of(row["prompt"])])[0]


def test_yaml_config_and_cli_override(tmp_path):
    out = tmp_path / "out"
    config = tmp_path / "recipe.yaml"
    # `length` with a budget of 4 tokens scores completions of 2 tokens 1.0, others less: a second, different reward;
    # `overlong` with its buffer the whole budget (a reward's setting in the recipe) penalises every completion
    config.write_text(f"output_dir: {out}\nmax_steps: 6\nlearning_rate: 1.0e-4\nlogging_steps: 1\n"
                      f"model_name_or_path: {REPO / 'assets' / 'tiny-llama-addition'}\n"
                      f"dataset_name: {REPO / 'assets' / 'addition'}\nmax_completion_length: 4\n"
                      "num_generations: 8\nper_device_train_batch_size: 16\nreport_to: none\n"
                      "reward_funcs: [accuracy, length, overlong]\nreward_weights: [1.0, 0.5, 0.25]\n"
                      "overlong_buffer: 1.0\nactivation_checkpointing: false\n")
    launcher, env, spy = spied(tmp_path)
    run_script(SCRIPT, "--config", config, "--max_steps", 3, cwd=tmp_path, launcher=launcher, env=env)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["global_step"] == 3  # the flag beat the YAML
    assert summary["training_args"]["learning_rate"] == 1e-4  # the YAML beat the default
    assert summary["script_args"]["reward_funcs"] == ["accuracy", "length", "overlong"]
    assert spied_calls(spy, "activation_checkpointing_enable") == []  # off

    # the weights are applied: the reward is 1.0 x accuracy + 0.5 x length + 0.25 x overlong, per completion and so
    # per step
    rows = read_jsonl(out / "completions.jsonl")
    weights = {"accuracy": 1.0, "length": 0.5, "overlong": 0.25}
    for m in read_jsonl(out / "metrics.jsonl"):
        assert m["reward"] == pytest.approx(sum(w * m[f"rewards/{k}/mean"] for k, w in weights.items()))
        step_rows = [r for r in rows if r["step"] == m["step"]]
        expected = sum(w * r[k] for r in step_rows for k, w in weights.items()) / len(step_rows)
        assert m["reward"] == pytest.approx(expected)
    assert {r["length"] for r in rows} != {1.0}  # the rewards differ, so a swapped weight would show
    # the option reached the reward: under the default buffer (the last quarter) completions of 1-3 tokens score 0
    assert all(-1.0 <= r["overlong"] < 0 for r in rows)


def test_lora_saves_an_adapter(tmp_path):
    """--use_peft saves the adapter alone, trained, and reproducibly: the adapter's random initialisation is seeded
    (GRPOTrainer builds it before Trainer seeds), so two runs with one --seed save the same weights."""
    from conftest import safetensors_weights

    lora = ["--use_peft", "--lora_r", 4, "--lora_alpha", 8, "--lora_target_modules", "q_proj", "v_proj", *TINY]
    out, again = tmp_path / "out", tmp_path / "again"
    for output_dir in (out, again):  # fresh processes: forks of one interpreter would share its random state
        run_script(SCRIPT, *lora, "--output_dir", output_dir, cwd=tmp_path, fresh=True)
    first, second = (safetensors_weights(o / "adapter_model.safetensors") for o in (out, again))
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)
    assert (out / "adapter_config.json").exists() and (out / "adapter_model.safetensors").exists()
    assert not (out / "model.safetensors").exists()  # only the adapter, not a second copy of the model
    adapter = json.loads((out / "adapter_config.json").read_text())
    assert adapter["r"] == 4 and set(adapter["target_modules"]) == {"q_proj", "v_proj"}
    assert_adapter_trained(out)

    from peft import AutoPeftModelForCausalLM

    assert AutoPeftModelForCausalLM.from_pretrained(out) is not None


def test_user_reward_by_dotted_path(tmp_path):
    (tmp_path / "my_rewards.py").write_text(
        "def short_answer(completions, answer, **kwargs):\n"
        "    # uses a dataset column, like a real reward would\n"
        "    assert len(answer) == len(completions)\n"
        "    return [1.0 if len(c) <= 3 else 0.0 for c in completions]\n"
    )
    # one .parquet file: a train split and no test split, so TRL's periodic eval (on by default) is turned off
    import pandas as pd

    pd.DataFrame(read_jsonl(ADDITION / "train.jsonl")).to_parquet(tmp_path / "addition.parquet")
    out = tmp_path / "out"
    proc = run_script(SCRIPT, "--dataset_name", tmp_path / "addition.parquet", "--reward_funcs", "accuracy",
                      "my_rewards.short_answer", "--reward_weights", 1.0, 0.0, "--output_dir", out, "--max_steps", 4,
                      "--logging_steps", 1, "--eval_strategy", "steps", "--eval_steps", 2, "--eval_num_samples", 0,
                      cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert f"no 'test' split in {tmp_path / 'addition.parquet'}: evaluation is off" in proc.stdout
    metrics = read_jsonl(out / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2, 3, 4]  # training logs only: no eval at steps 2 and 4
    assert all("rewards/short_answer/mean" in m and not any(k.startswith("eval_") for k in m) for m in metrics)
    rows = read_jsonl(out / "completions.jsonl")
    assert all(r["short_answer"] == float(len(r["completion"]) <= 3) for r in rows)
    # weight 0 on short_answer: the total reward is the accuracy alone
    assert all(m["reward"] == pytest.approx(m["rewards/accuracy/mean"]) for m in metrics)


def test_unknown_reward_is_a_clear_error(tmp_path, fails_early):
    assert fails_early(tmp_path, "--reward_funcs", "acuracy") == (
        f"error: unknown reward 'acuracy'; choose one of: {', '.join(REWARDS)}, "
        "or give a dotted path like my_rewards.my_fn")


def test_default_run_learns(tmp_path):
    """The default run (seed 42): the mean reward over the last 20% of logged steps beats the first 20%, and held-out
    pass@1 and greedy accuracy on the test split improve, as the closing summary says.

    Margins: mean - 3 sd over 8 seeds (1-7, 42), measured by `python benchmarks/learning_seeds.py` with one thread,
    as here (BENCHMARKS.md, "Does the default run learn?"): the rise 0.170 +- 0.027 (min 0.140), the last 20%
    0.804 +- 0.015 (min 0.784), the pass@1 gain 0.155 +- 0.046 (min 0.106), the greedy gain 0.200 +- 0.038 (min
    0.150). Seed 42: rise 0.180, pass@1 0.469 -> 0.575, greedy +0.200. The numbers are CPU numbers, so the run stays
    on CPU on a GPU machine too.
    """
    out = tmp_path / "out"
    (tmp_path / "probe" / "sitecustomize.py").parent.mkdir()
    (tmp_path / "probe" / "sitecustomize.py").write_text(IMPORT_PROBE)
    proc = run_script(SCRIPT, "--output_dir", out, "--use_cpu", "true", cwd=tmp_path,  # the default run
                      env={"PYTHONPATH": str(tmp_path / "probe"), "IMPORT_LOG": str(tmp_path / "imported.json")})
    summary = assert_summary_means(out, proc.stdout)  # 30 logs: 6 in each 20%
    assert summary["global_step"] == 300
    assert summary["reward_last_20pct"] - summary["reward_first_20pct"] >= 0.08
    assert summary["reward_last_20pct"] >= 0.75

    report = json.loads((out / "eval.json").read_text())
    assert report["source"] == "split 'test'" and report["num_prompts"] == 20 and report["num_samples"] == 8
    before, after = report["before"]["accuracy"], report["after"]["accuracy"]
    assert set(after) == {"mean_reward", "greedy_accuracy", "pass@1", "pass@8", "maj@8"}
    assert after["pass@1"] - before["pass@1"] >= 0.01
    assert after["greedy_accuracy"] - before["greedy_accuracy"] >= 0.08
    assert re.search(r"^reward +metric +before +after$", proc.stdout, re.M)  # the closing table
    assert re.search(r"^accuracy +pass@1 +[0-9.]+±[0-9.]+ +[0-9.]+±[0-9.]+$", proc.stdout, re.M)
    assert_held_out_summary(out, proc.stdout)

    # The project's Python this run imported: the script, rewards.py and the extras it turns on (their lines are
    # a figure to report, not a limit: a cap bought compressed code, issue 47)
    imported = [Path(f).resolve() for f in json.loads((tmp_path / "imported.json").read_text())]
    lines = {str(p.relative_to(REPO)): len(p.read_text().splitlines()) for p in imported
             if p.is_relative_to(REPO) and p.relative_to(REPO).parts[0] in (SCRIPT, "rewards.py", "extras")}
    assert set(lines) == {SCRIPT, "rewards.py", "extras/__init__.py", "extras/checks.py", "extras/cli.py",
                          "extras/evaluation.py", "extras/outputs.py", "extras/plots.py", "extras/run_folder.py",
                          "extras/runtime.py", "extras/stats.py", "extras/summary.py", "extras/watchdogs.py"}
    print(f"the default run imports {sum(lines.values())} lines of the project's Python: {lines}")  # a figure


# What a run reads, by file: written at exit by a sitecustomize.py on PYTHONPATH (so the run is a fresh process)
IMPORT_PROBE = """
import atexit, json, os, sys

def record():
    with open(os.environ["IMPORT_LOG"], "w") as f:
        files = {m.__file__ for m in list(sys.modules.values()) if getattr(m, "__file__", None)}
        json.dump(sorted(files | {sys.argv[0]}), f)  # the script: by exit, __main__ is no longer its module

atexit.register(record)
"""


@pytest.mark.parametrize("recipe", sorted((REPO / "recipes").glob("*/grpo/*.yaml")), ids=lambda p: p.parent.parent.name)
def test_recipes_parse(recipe):
    """Every GRPO recipe's keys are real options with values they take, none refused (extras/cli.py), and it names
    its own model and data."""
    import grpo_trl_example as script

    script_args, _, model_args = script.parse_args(["--config", str(recipe)])
    assert model_args.model_name_or_path and script_args.dataset_name


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message")
@pytest.mark.parametrize("flags, message", [
    (["--use_vllm"], "error: --use_vllm needs a CUDA GPU and none is visible"),
    (["--load_in_4bit"], "add --use_peft"),
    (["--use_liger_kernel", "true"], "error: --use_liger_kernel needs a CUDA GPU"),
])
def test_gpu_only_options_fail_early_on_cpu(tmp_path, flags, message, fails_early):
    assert message in fails_early(tmp_path, *flags)


# Rewards of the prompt alone: every completion of a prompt scores alike. 0.2 and 0.7 (issue 83): TRL's
# frac_reward_zero_std counted their groups as spread (a float32 std of 1.6e-8 against isclose's 1e-8), and the
# watchdog was silent for the partial credit the docs recommend
BY_PROMPT = """
def one(completions, **kwargs):
    return [1.0] * len(completions)


def partial(prompts, completions, **kwargs):
    return [0.2 if len(str(prompt)) % 2 else 0.7 for prompt in prompts]
"""


@pytest.mark.parametrize("stop, reward", [(True, "one"), (False, "partial")], ids=["stop-1.0", "warn-only-0.2-0.7"])
def test_no_signal_watchdog(tmp_path, stop, reward):
    """A reward of the prompt alone gives every completion of a group the same reward: the watchdog warns once,
    explains the zero loss at beta=0, and with --stop_on_no_signal ends the run early but cleanly; without it the run
    goes on."""
    (tmp_path / "by_prompt.py").write_text(BY_PROMPT)
    out = tmp_path / "out"
    proc = run_script(SCRIPT, "--reward_funcs", f"by_prompt.{reward}", "--beta", 0, "--max_steps", 20 if stop else 6,
                      "--logging_steps", 1, "--eval_strategy", "no", "--no_signal_patience", 3,
                      *(["--stop_on_no_signal"] if stop else []), "--output_dir", out, cwd=tmp_path,
                      env={"PYTHONPATH": str(tmp_path)})
    assert proc.stdout.count("WARNING: no learning signal for 3 logging steps (step 3): groups_without_spread") == 1
    assert "--num_generations" in proc.stdout and ("Stopping training (--stop_on_no_signal)" in proc.stdout) is stop
    assert [m["groups_without_spread"] for m in read_jsonl(out / "metrics.jsonl") if "reward" in m] == [1.0] * (
        3 if stop else 6)
    assert proc.stdout.count("NOTE: loss is 0 with beta=0") == (reward == "one")  # 0.2s' float32 std: not quite 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["global_step"] == (3 if stop else 6) and (out / "model.safetensors").exists()


def test_sampling_epochs_and_a_named_test_split(tmp_path, addition_rows):
    """--num_generations, --temperature, --num_train_epochs (with --max_steps -1), --dataset_test_split and
    --eval_max_prompts each change what the run does."""
    data = tmp_path / "data"
    data.mkdir()
    write_jsonl(data / "train.jsonl", addition_rows[:8])
    write_jsonl(data / "validation.jsonl", addition_rows[70:])
    out = tmp_path / "out"
    run_script(SCRIPT, "--dataset_name", data, "--dataset_test_split", "validation", "--num_generations", 4,
               "--per_device_train_batch_size", 8, "--max_steps", -1, "--num_train_epochs", 2, "--temperature", 0.05,
               "--logging_steps", 1, "--eval_strategy", "no", "--eval_num_samples", 2, "--eval_max_prompts", 3,
               "--output_dir", out, cwd=tmp_path)
    # 8 prompts, 2 per step (8 completions / 4 generations), twice: 8 steps, each prompt once per epoch
    assert json.loads((out / "summary.json").read_text())["global_step"] == 8
    rows = read_jsonl(out / "completions.jsonl")
    by_step = {step: [r for r in rows if r["step"] == step] for step in range(1, 9)}
    assert all(len(step_rows) == 8 and len({r["prompt"] for r in step_rows}) == 2 for step_rows in by_step.values())
    for epoch in (range(1, 5), range(5, 9)):
        assert sorted(r["prompt"] for step in epoch for r in by_step[step][::4]) == sorted(
            r["prompt"] for r in addition_rows[:8])
    # temperature 0.05 is nearly greedy: the 4 completions of a prompt are (almost always) the same text
    groups = [[r["completion"] for r in step_rows if r["prompt"] == p] for step_rows in by_step.values()
              for p in {r["prompt"] for r in step_rows}]
    assert sum(len(set(group)) == 1 for group in groups) >= 0.9 * len(groups)

    report = json.loads((out / "eval.json").read_text())
    assert report["source"] == "split 'validation'" and report["num_prompts"] == 3 and report["num_samples"] == 2
    assert report["temperature"] == 0.05


def test_a_moving_reference_moves(tmp_path):
    """TRL's --sync_ref_model: the logged KL to the reference shows which reference each setting keeps.

    The reference moves at the end of step 2 (--ref_model_sync_steps 2). Until then the three runs are the same run
    (same seed, one thread), and step 3 starts from the same policy and samples the same completions, so only the
    reference differs when step 3's KL is measured: a full sync (--ref_model_mixup_alpha 1) copied the policy (KL about
    0), a static reference kept the start (the largest KL), TRL's default mix (ref <- 0.6 * policy + 0.4 * ref) moved
    part of the way and lies between.
    """
    kl = {}
    for mode, flags in [("static", []), ("mix", ["--sync_ref_model", "true"]),
                        ("sync", ["--sync_ref_model", "true", "--ref_model_mixup_alpha", 1.0])]:
        out = tmp_path / mode
        run_script(SCRIPT, *flags, "--ref_model_sync_steps", 2, "--output_dir", out, "--max_steps", 3,
                   "--logging_steps", 1, "--eval_num_samples", 0, "--save_strategy", "no", "--use_cpu", "true",
                   cwd=tmp_path)  # on CPU, where one seed gives one run, bit for bit
        kl[mode] = [m["kl"] for m in read_jsonl(out / "metrics.jsonl")]
    assert kl["static"][:2] == kl["mix"][:2] == kl["sync"][:2]  # the same run until the first sync
    assert kl["static"][0] == pytest.approx(0, abs=1e-7) and kl["static"][1] > 1e-5  # step 1: policy == reference
    assert kl["sync"][2] < 1e-3 * kl["static"][2]
    assert 0.1 * kl["static"][2] < kl["mix"][2] < 0.9 * kl["static"][2]


def test_the_last_step_is_logged_whatever_logging_steps_says(tmp_path):
    """A run that ends between two logging steps still logs its last step: its reward, its completions, and a summary
    with numbers (before, a run shorter than one logging interval printed nan)."""
    out = tmp_path / "out"
    proc = run_script(SCRIPT, "--max_steps", 3, "--logging_steps", 2, "--eval_strategy", "no", "--save_strategy", "no",
                      "--output_dir", out, cwd=tmp_path)
    assert [m["step"] for m in read_jsonl(out / "metrics.jsonl") if "reward" in m] == [2, 3]
    assert sorted({r["step"] for r in read_jsonl(out / "completions.jsonl")}) == [2, 3]
    summary = assert_summary_means(out, proc.stdout)
    assert summary["global_step"] == 3 and "nan" not in proc.stdout
    assert (out / "model.safetensors").exists()


@pytest.mark.parametrize("max_steps, logging_steps, logged", [(6, 10, [6]), (7, 3, [3, 6, 7]), (6, 3, [3, 6])])
def test_run_recorder_logs_the_last_step(tmp_path, max_steps, logging_steps, logged):
    """The rule, with transformers' own flow callback deciding the other logging steps, as in a run: shorter than
    one logging interval (6 steps with logging_steps 10 used to log nothing and print nan), ending between two,
    ending on one."""
    from transformers import TrainerControl, TrainerState, TrainingArguments
    from transformers.trainer_callback import DefaultFlowCallback

    from extras.outputs import RunRecorder

    args = TrainingArguments(output_dir=str(tmp_path), logging_steps=logging_steps, use_cpu=True, report_to=[])
    state, callbacks = TrainerState(max_steps=max_steps, logging_steps=logging_steps), [DefaultFlowCallback(),
                                                                                        RunRecorder(tmp_path, list)]
    steps = []
    for step in range(1, max_steps + 1):
        state.global_step, control = step, TrainerControl()
        for callback in callbacks:
            control = callback.on_step_end(args, state, control) or control
        steps += [step] if control.should_log else []
    assert steps == logged


# A reward for the wrong answer: training on it makes the held-out accuracy fall
WRONG = """
from rewards import get_reward_funcs

accuracy = get_reward_funcs(["accuracy"], 8)[0]


def wrong(completions, **kwargs):
    return [None if r is None else 1.0 - r for r in accuracy(completions, **kwargs)]
"""


@pytest.mark.parametrize("script, length", [("grpo_trl_example.py", ["--max_steps", 60]),
                                            ("ppo_trl_example.py", ["--total_episodes", 640])])  # 10 updates
def test_the_closing_summary_says_when_a_run_made_the_policy_worse(tmp_path, script, length):
    """Issue 75: a PPO run took held-out pass@1 from 0.087 to 0.013 and its summary said nothing. Trained to answer
    wrong, each script ends its summary saying the held-out accuracy fell by more than twice its paired error, the
    error of the prompts' own changes, which summary.json and eval.json keep."""
    (tmp_path / "wrong.py").write_text(WRONG)
    out = tmp_path / "out"
    proc = run_script(script, *length, "--reward_funcs", "wrong.wrong", "--eval_reward_funcs", "accuracy",
                      "--eval_strategy", "steps", "--eval_steps", 0.5, "--output_dir", out, cwd=tmp_path,
                      env={"PYTHONPATH": str(tmp_path)})
    report, summary = (json.loads((out / name).read_text()) for name in ("eval.json", "summary.json"))
    # issue 84: the held-out curve, half way, in eval.json, metrics.jsonl and on the plot, in both scripts
    [middle] = report["during"]
    assert middle["step"] == report["after_step"] // 2 and set(middle["metrics"]) >= {"wrong", "accuracy"}
    logged = [m for m in read_jsonl(out / "metrics.jsonl") if "heldout/accuracy/pass@1" in m]
    assert [(m["step"], m["heldout/accuracy/pass@1"]) for m in logged] == [
        (middle["step"], middle["metrics"]["accuracy"]["pass@1"])]
    from extras.plots import held_out_curve

    assert [step for step, _, _ in held_out_curve(report)[2]] == [0, middle["step"], report["after_step"]]
    change = report["change"]["accuracy"]["pass@1"]
    before, after = report["before"]["accuracy"]["pass@1"], report["after"]["accuracy"]["pass@1"]
    assert change["change"] == pytest.approx(after - before) and change["change"] < -2 * change["standard_error"]
    assert summary["held_out_change"]["accuracy"]["pass@1"] == change
    closing = proc.stdout[proc.stdout.rindex("mean reward, first 20%"):]
    assert (f"held-out accuracy pass@1, before -> after: {before:.3f} -> {after:.3f}, {change['change']:+.3f} ± "
            f"{change['standard_error']:.3f} over the same 20 prompts: worse, by more than twice its error") in closing
    assert "WARNING: the run made the policy worse on the held-out prompts: accuracy pass@1" in closing


@pytest.mark.parametrize("script, length", [("grpo_trl_example.py", ["--max_steps", 2]),
                                            ("ppo_trl_example.py", ["--total_episodes", 128])])
@pytest.mark.parametrize("bf16", [True, False])
def test_bf16_computes_in_bf16_and_trains_fp32_weights(tmp_path, script, length, bf16):
    """--bf16 true on a CPU (GRPO's default where it computes bf16): bf16 autocast over fp32 weights, as on a GPU, which
    the run says and summary.json keeps; PPOTrainer takes it from accelerate's launcher, which the script sets."""
    out = tmp_path / "out"
    proc = run_script(script, *length, "--eval_num_samples", 2, "--eval_max_prompts", 4, "--bf16", str(bf16).lower(),
                      "--output_dir", out, cwd=tmp_path)
    weights = json.loads((out / "summary.json").read_text())["weights"]
    assert weights["trained"] == ["float32"] and weights.get("compute") == ("bf16 autocast" if bf16 else None)
    assert ("weights: trained in float32, computed under bf16 autocast" in proc.stdout) is bf16
    # issue 83: the held-out table says what the policy computed in: GRPO's under autocast, PPO's sampled unwrapped
    computed = "bf16 autocast" if bf16 and script == "grpo_trl_example.py" else "float32"
    assert f"held-out evaluation, split 'test', 4 prompts, computed in {computed} (each value" in proc.stdout
