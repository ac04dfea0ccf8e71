"""Bad input gets one clear sentence, early, naming the problem and what would be valid."""

from pathlib import Path

import pytest
from conftest import ADDITION, REPO, SCRIPTS, run_script, write_jsonl

SCRIPT = "grpo_trl_example.py"
TINY = ["--max_steps", 2, "--logging_steps", 1, "--eval_num_samples", 0]


def fails_with(tmp_path, *args, env=None):
    """Run the GRPO script, expect failure, and return its stderr."""
    proc = run_script(SCRIPT, *args, "--output_dir", tmp_path / "out", cwd=tmp_path, env=env, check=False)
    assert proc.returncode != 0
    return proc.stderr


def test_dotted_reward_that_cannot_be_imported(tmp_path, fails_early):
    error = fails_early(tmp_path, "--reward_funcs", "no_such_module.fn")
    assert named(error, "no_such_module.fn", "No module named 'no_such_module'")


@pytest.mark.slow  # trains until the reward is called
def test_reward_that_raises_names_the_function_and_sample(tmp_path):
    (tmp_path / "fragile.py").write_text(
        "def picky(completions, answer, **kwargs):\n"
        "    return [1.0 / (int(a) - 9) for a in answer]  # ZeroDivisionError on rows whose answer is 9\n")
    data = write_jsonl(tmp_path / "nines.jsonl", [{"prompt": "4+5=", "answer": "9"}] * 8)
    stderr = fails_with(tmp_path, "--dataset_name", data, "--reward_funcs", "fragile.picky", *TINY,
                        env={"PYTHONPATH": str(tmp_path)})
    assert "RewardError: reward 'picky' raised ZeroDivisionError on sample 0" in stderr
    assert "ZeroDivisionError: float division by zero" in stderr  # the original error is kept


@pytest.mark.slow  # trains until the reward is called
def test_reward_with_bad_output(tmp_path):
    """A reward's output is checked where GRPOTrainer calls it, on the whole batch of the step (16 completions);
    tests/unit/test_rewards.py checks each kind of bad output (nan, inf, a string, the wrong count) on the checker
    itself."""
    (tmp_path / "odd_rewards.py").write_text("def odd(completions, **kwargs):\n    return [1.0]\n")
    stderr = fails_with(tmp_path, "--reward_funcs", "odd_rewards.odd", *TINY, env={"PYTHONPATH": str(tmp_path)})
    assert "reward 'odd' returned 1 values for 16 completions" in stderr


def named(error: str, *parts) -> bool:
    """An error line names each of `parts` (a flag, the value given, what there is instead)."""
    return error.startswith("error: ") and all(str(part) in error for part in parts)


def test_missing_prompt_column_lists_the_columns(tmp_path, fails_early):
    assert named(fails_early(tmp_path, "--dataset_prompt_column", "question"), "--dataset_prompt_column question",
                 "prompt, answer")


def test_empty_dataset(tmp_path, fails_early):
    (tmp_path / "empty.jsonl").write_text("")
    assert named(fails_early(tmp_path, "--dataset_name", tmp_path / "empty.jsonl"), "empty.jsonl is empty")


def test_missing_train_split_lists_the_splits(tmp_path, fails_early):
    error = fails_early(tmp_path, "--dataset_name", ADDITION, "--dataset_train_split", "training")
    assert named(error, "training", "'train', 'test'")


def test_batch_geometry_suggests_valid_sizes(tmp_path, fails_early):
    error = fails_early(tmp_path, "--per_device_train_batch_size", 12, "--num_generations", 8)
    assert named(error, "num_generations (8)", "--per_device_train_batch_size 8 or 16")


def test_model_path_that_is_not_a_directory(tmp_path, fails_early):
    assert named(fails_early(tmp_path, "--dataset_name", ADDITION, "--model_name_or_path", "./no-such-model"),
                 "--model_name_or_path ./no-such-model", "no such")


def test_hub_id_while_offline(tmp_path, fails_early):
    # fails_early sets HF_HUB_OFFLINE=1
    error = fails_early(tmp_path, "--dataset_name", ADDITION, "--model_name_or_path", "some-org/some-model")
    assert named(error, "--model_name_or_path some-org/some-model", "offline")


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_recipe_run_from_another_folder_says_where_its_paths_are_read_from(tmp_path, fails_early, script):
    """The repository's recipe from another folder: its relative model path is no folder there, so the run stops at
    once (no hub retries), naming the working directory and the folder to run from."""
    recipe = REPO / "recipes" / "tiny" / f"{script.split('_')[0]}.yaml"
    error = fails_early(tmp_path, "--config", recipe, script=script)
    assert error == ("error: --model_name_or_path assets/tiny-llama-addition: no such file or folder here, and the hub "
                     "is offline (HF_HUB_OFFLINE=1) and its cache has no such model; relative paths, in a recipe too, "
                     f"are read from the working directory, {tmp_path}; it is in {REPO}: run from there")


@pytest.mark.slow  # a real process, with the hub on
def test_a_hub_id_is_looked_up_once_briefly(tmp_path, fails_early):
    """With the hub on and no network (the hub's address refuses), one lookup of 5 s at most, not huggingface_hub's
    retries (23 s and more), as for a dataset."""
    error = fails_early(tmp_path, "--model_name_or_path", "no-such-org-x9/no-such-model", "--dataset_name", ADDITION,
                        env={"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"}, in_process=False)
    assert error.startswith("error: --model_name_or_path no-such-org-x9/no-such-model: no such file or folder here, "
                            "and the hub could not be reached to look it up"), error


# Every model a run names, the reward and value models included, is checked before loading; a bundled folder that is
# built, not shipped, names the command that builds it (an RLHF recipe before its reward model is built)
NAMED_PATHS = [
    ("grpo_trl_example.py", "--reward_model_name_or_path", "assets/sentiment-reward-model",
     "it is built, not shipped: `python assets/build_reward_model.py` builds it"),
    ("grpo_trl_example.py", "--model_name_or_path", "assets/SmolLM2-135M-Instruct",
     "it is built, not shipped: `python assets/convert_gguf.py` builds it"),
    ("ppo_trl_example.py", "--reward_model_path", "assets/sentiment-reward-model",
     "it is built, not shipped: `python assets/build_reward_model.py` builds it"),
    ("ppo_trl_example.py", "--value_model_path", "./no-such-value-model", ""),
    ("ppo_trl_example.py", "--sft_model_path", "no/such/policy", ""),
]


@pytest.mark.parametrize("script, flag, path, hint", [pytest.param(*case, marks=pytest.mark.ppo_trainer)
                                                      if case[0][0] == "p" else case for case in NAMED_PATHS])
def test_every_named_model_is_checked_before_loading(tmp_path, fails_early, script, flag, path, hint):
    """A bundled folder built in the clone (SmolLM2, once set-up converted it) is named where it is, not as one to
    build."""
    (tmp_path / "assets").mkdir()  # as in the repository: `assets/...` is a path, not a hub id
    if (REPO / path).exists():
        hint = f"it is in {REPO}: run from there"
    error = fails_early(tmp_path, flag, path, "--dataset_name", ADDITION, script=script)
    assert error.startswith(f"error: {flag} {path}: no such file or directory; relative paths, in a recipe too, are "
                            f"read from the working directory, {tmp_path}") and error.endswith(hint), error


def test_each_built_folder_is_its_builders_default():
    from extras.checks import BUILT

    for folder, command in BUILT.items():
        builder = REPO / command.split()[-1]
        assert f'"{Path(folder).name}"' in builder.read_text(), (folder, builder)


@pytest.mark.slow  # a real process
def test_missing_gold_column_stops_before_any_model_loads(tmp_path, addition_rows, fails_early):
    """`accuracy` on data whose gold column is not `answer`: one sentence naming the columns there and the flag that
    maps one, before any model loads (without the check the reward is None for every sample and nothing is learned)."""
    data = write_jsonl(tmp_path / "gold.jsonl", [{"prompt": r["prompt"], "gold": r["answer"]} for r in addition_rows])
    error = fails_early(tmp_path, "--dataset_name", data, "--eval_num_samples", 0, in_process=False)  # a real process
    assert named(error, "'answer'", "prompt, gold", "--dataset_answer_column")


@pytest.mark.parametrize("flags, parts", [
    (["--dataset_streaming", "true"], ["--dataset_streaming", "--dataset_train_split 'train[:10%]'"]),
    (["--ignore_bias_buffers", "true"], ["--ignore_bias_buffers"]),
    (["--reward_model_name_or_path", "./no-such-rm"], ["--reward_model_name_or_path ./no-such-rm", "no such"]),
    (["--reward_weights", 1.0, 2.0], ["2 --reward_weights", "1 rewards"]),
    (["--dataset_answer_column", "gold"], ["--dataset_answer_column gold", "prompt, answer"]),
    (["--overlong_buffer", "half"], ["--overlong_buffer", "'half'"]),
    (["--reward_funcs", "acuracy"], ["'acuracy'", "accuracy"]),
])
def test_options_that_cannot_work_stop_early(tmp_path, flags, parts, fails_early):
    assert named(fails_early(tmp_path, *flags), *parts)


@pytest.mark.slow  # a real process
def test_ppo_prompt_holding_its_pad_token(tmp_path, fails_early):
    """PPO pads with the bundled tokenizer's `<unk>`, which it also writes for a character it does not know: such a
    prompt would lose that token to the padding mask, so the run stops before any weights load."""
    data = write_jsonl(tmp_path / "data.jsonl", [{"prompt": "1+2=" if i else "α+2=", "answer": "3"} for i in range(64)])
    error = fails_early(tmp_path, "--dataset_name", data, "--eval_num_samples", 0, script="ppo_trl_example.py",
                        in_process=False)
    assert error.startswith("error: a prompt holds the pad token '<unk>', which PPO would mask out as padding")


@pytest.mark.parametrize("script", SCRIPTS)
def test_eval_with_no_prompts(tmp_path, script, fails_early):
    assert named(fails_early(tmp_path, "--eval_num_samples", 2, "--eval_max_prompts", 0, script=script),
                 "--eval_max_prompts 0", "--eval_num_samples 0")


@pytest.mark.parametrize("script", SCRIPTS)
def test_eval_rewards_with_no_evaluation(tmp_path, script, fails_early):
    assert named(fails_early(tmp_path, "--eval_num_samples", 0, "--eval_reward_funcs", "length", script=script),
                 "--eval_reward_funcs length", "--eval_num_samples K")


@pytest.mark.parametrize("flags", [["--beta", 0], ["--use_peft"]])
def test_a_moving_reference_needs_a_reference_of_its_own(tmp_path, fails_early, flags):
    """GRPOTrainer would raise this only after loading the model; here it stops before."""
    assert named(fails_early(tmp_path, "--sync_ref_model", "true", *flags), "--sync_ref_model", "--beta", "--use_peft")


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_dataset_without_a_prompt_column_names_the_flag(tmp_path, script, addition_rows, fails_early):
    data = write_jsonl(tmp_path / "questions.jsonl", [{"question": r["prompt"], "answer": r["answer"]}
                                                      for r in addition_rows])
    assert named(fails_early(tmp_path, "--dataset_name", data, script=script),
                 "no `prompt` column", "question, answer", "--dataset_prompt_column")


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_bare_dataset_name_offline_says_so_at_once(tmp_path, script, fails_early):
    """Neither a file nor a folder here, and offline (fails_early sets HF_HUB_OFFLINE=1): one line, not a hub
    traceback."""
    assert named(fails_early(tmp_path, "--dataset_name", "my_data", script=script),
                 "--dataset_name my_data: no such file or folder here", "hub")


@pytest.mark.slow  # a real process, with the hub on
def test_a_bare_dataset_name_with_no_hub_to_reach_says_so_in_seconds(tmp_path, fails_early):
    """Online but with no network (the hub's address refuses): one line after one brief look-up, where datasets
    would retry for half a minute."""
    import time

    start = time.monotonic()
    error = fails_early(tmp_path, "--dataset_name", "my_data", in_process=False,
                        env={"HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert named(error, "--dataset_name my_data: no such file or folder here", "could not be reached")
    assert time.monotonic() - start < 60


def test_a_built_folder_in_the_clone_is_named_where_it_is(tmp_path, fails_early, monkeypatch):
    """A recipe run from another folder, its bundled model built in the clone: the error says where it is, not that
    it is to be built (it said `python assets/convert_gguf.py builds it` of a model already converted)."""
    from extras import checks

    (tmp_path / "assets").mkdir()
    monkeypatch.setattr(checks, "BUILT", {**checks.BUILT, "assets/addition": "python assets/build_tiny_assets.py"})
    error = fails_early(tmp_path, "--dataset_name", "assets/addition")
    assert error.endswith(f"it is in {REPO}: run from there") and "is built, not shipped" not in error, error


@pytest.mark.parametrize("targets", [["q_prj"], ["q_proj", "v_prj"], [".*\\.q_prj"]])
def test_lora_target_modules_the_model_lacks_are_named_with_those_it_has(tmp_path, targets, fails_early):
    """peft raises a traceback when no target matches, and trains fewer modules, silently, when only some do."""
    error = fails_early(tmp_path, "--use_peft", "--lora_target_modules", *targets)
    assert named(error, f"--lora_target_modules {targets[-1]}:", "no such module", "q_proj, up_proj, v_proj")


@pytest.mark.parametrize("script", SCRIPTS)
def test_one_lora_target_module_is_that_module_in_every_layer(tmp_path, script, fails_early):
    """TRL passes a single --lora_target_modules to peft as a regular expression of a whole module path, which
    `q_proj` never matches: the scripts pass one plain name as peft reads a list. The run gets past the check (and
    stops at a later one)."""
    error = fails_early(tmp_path, "--use_peft", "--lora_target_modules", "q_proj", "--eval_max_prompts", 0,
                        script=script)
    assert named(error, "--eval_max_prompts 0")


@pytest.mark.parametrize("script", SCRIPTS)
def test_conversations_for_a_tokenizer_without_a_chat_template(tmp_path, fails_early, script):
    """--system_prompt makes every prompt a conversation, which the bundled tokenizer cannot render: both scripts stop
    with the same line, before any model loads."""
    error = fails_early(tmp_path, "--system_prompt", "Be brief.", script=script)
    assert error.startswith("error: the prompts are conversations (lists of messages, or --system_prompt made them "
                            "so) and ") and error.endswith("tiny-llama-addition's tokenizer has no chat template to "
                                                           "render them")


# Values outside what each algorithm means: a KL penalty's weight below 0 is a bonus for drifting, a learning rate or
# temperature of 0 or less, a clip range below 0, a discount above 1, a negative sample count
OUT_OF_RANGE = [
    ("grpo_trl_example.py", "--beta", "-1", "0 or more"), ("grpo_trl_example.py", "--learning_rate", "0", "above 0"),
    ("grpo_trl_example.py", "--temperature", "0", "above 0"), ("grpo_trl_example.py", "--epsilon", "-0.1", "0 or"),
    ("grpo_trl_example.py", "--top_p", "1.5", "at most 1"), ("grpo_trl_example.py", "--eval_num_samples", "-1", "0"),
    ("ppo_trl_example.py", "--kl_coef", "-0.05", "0 or more"), ("ppo_trl_example.py", "--learning_rate", "-0.00001",
                                                                "above 0"),
    ("ppo_trl_example.py", "--temperature", "-1", "above 0"), ("ppo_trl_example.py", "--cliprange", "-0.2", "0 or"),
    ("ppo_trl_example.py", "--gamma", "1.5", "between 0 and 1"), ("ppo_trl_example.py", "--missing_eos_penalty",
                                                                   "-1", "0 or more"),
    ("ppo_trl_example.py", "--eval_num_samples", "-2", "0"),
]


@pytest.mark.parametrize("script, flag, value, meaning", [pytest.param(*case, marks=pytest.mark.ppo_trainer)
                                                         if case[0][0] == "p" else case for case in OUT_OF_RANGE])
def test_a_value_outside_what_the_algorithm_means_stops_before_loading(tmp_path, fails_early, script, flag, value,
                                                                        meaning):
    """`--beta -1` trained, as a bonus for moving away from the reference: each such value stops the run in one line
    saying what it must be, before anything loads."""
    error = fails_early(tmp_path, flag, value, script=script)
    assert error.startswith(f"error: {flag} {float(value):g}") or error.startswith(f"error: {flag} {value}"), error
    assert ": it must be " in error and meaning in error, error


@pytest.mark.parametrize("script", ["grpo_trl_example.py", "ppo_trl_example.py"])
def test_a_metric_for_the_best_model_that_no_evaluation_measures_stops_before_loading(tmp_path, script, fails_early):
    """Issue 84: --metric_for_best_model names a held-out metric as eval.json names it (reward/metric), or for GRPO
    one of TRL's evaluation's. A name no evaluation measures stops in one line listing those there are, before
    anything loads, where Trainer's KeyError came at the first evaluation; a held-out one needs the evaluation
    during training."""
    every = ["--eval_strategy", "steps", "--eval_steps", 10, "--save_strategy", "steps", "--save_steps", 10]
    error = fails_early(tmp_path, *every, "--metric_for_best_model", "accuracy/pass@l", script=script)
    assert error.startswith("error: --metric_for_best_model accuracy/pass@l is no metric this run measures; the "
                            "held-out evaluation's are accuracy/mean_reward, accuracy/greedy_accuracy, "
                            "accuracy/pass@1, ")
    assert ("kl/to_reference, and TRL's evaluation's loss, reward, reward_std, kl, entropy, rewards/accuracy/mean"
            in error) is (script == "grpo_trl_example.py")
    error = fails_early(tmp_path, "--metric_for_best_model", "accuracy/pass@1", "--eval_strategy", "no", script=script)
    assert error == ("error: --metric_for_best_model accuracy/pass@1 is the held-out evaluation's: it needs "
                     "--eval_num_samples K and --eval_strategy steps --eval_steps N")
