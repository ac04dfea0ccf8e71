"""A template you can copy: each script with rewards.py alone trains a model and data of the user's with every TRL
option, from a recipe or from flags alone; the checks that keep training right come with it; with extras/ too it gains
every extra; with the files its docstring lists it runs its default run; and a copy missing what a run needs says in
one sentence what to copy."""

import ast
import json
import re
import shutil

import pytest
import yaml
from conftest import ADDITION, REPO, TINY_MODEL, assert_adapter_trained, assert_trained, run_script

SCRIPTS = ["grpo_trl_example.py", "ppo_trl_example.py"]
# A recipe of the user's: the tiny model's settings for a few steps, and no extra
RECIPE = {
    "grpo_trl_example.py": "max_steps: 2\nnum_generations: 8\nper_device_train_batch_size: 16\n"
                           "max_completion_length: 4\nlearning_rate: 3.0e-4\nlogging_steps: 1\nreport_to: none\n",
    "ppo_trl_example.py": "total_episodes: 32\nper_device_train_batch_size: 16\nnum_mini_batches: 1\n"
                          "response_length: 4\nstop_token: eos\nnum_sample_generations: 0\nreport_to: none\n"
                          "use_peft: true\nlora_target_modules: [q_proj, v_proj]\n",
}


def default_run_files(script: str) -> list[str]:
    """The files the script's docstring says its default run reads, beside it."""
    docstring = ast.get_docstring(ast.parse((REPO / script).read_text()))
    found = re.search(r"The default run, which names no model, also\s+reads\n\n    (.+)", docstring)
    assert found, f"{script}'s docstring does not list the files its default run reads"
    return found.group(1).split()


def copy(folder, names: list[str]):
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, folder / name,
                                                                     **{"ignore": shutil.ignore_patterns("__pycache__")}
                                                                     if (REPO / name).is_dir() else {})


def users_own(tmp_path, script):
    """A model, data and recipe of the user's (here the repository's, under other paths)."""
    mine = tmp_path / "mine"
    shutil.copytree(TINY_MODEL, mine / "model")
    shutil.copytree(ADDITION, mine / "data")
    (mine / "recipe.yaml").write_text(f"model_name_or_path: {mine / 'model'}\ndataset_name: {mine / 'data'}\n"
                                      + RECIPE[script])
    return mine


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_copy_with_rewards_alone_trains_and_names_the_extras_a_flag_needs(script, tmp_path, monkeypatch):
    folder = tmp_path / "my-project"
    copy(folder, [script, "rewards.py"])
    monkeypatch.setattr("conftest.REPO", folder)  # run_script runs the script of this folder
    env = {"PYTHONPATH": ""}  # nothing of the repository importable but what was copied
    mine = users_own(tmp_path, script)
    trained = run_script(script, "--config", mine / "recipe.yaml", "--output_dir", tmp_path / "out", cwd=tmp_path,
                         env=env)
    assert f"extras/ is not beside {script}: no summary.json, records, plots, held-out evaluation" in trained.stdout
    (assert_adapter_trained if script.startswith("ppo") else lambda out: assert_trained(out, mine / "model"))(
        tmp_path / "out")
    assert not (tmp_path / "out" / "summary.json").exists()  # the run's records are an extra

    ppo = script.startswith("ppo")
    needs = [("--eval_num_samples", 2, "evaluation"), ("--eval_only", "true", "ppo" if ppo else "eval_only"),
             ("--resume_from_checkpoint", "last", "ppo" if ppo else "run_folder"),
             ("--save_total_limit", 1, "run_folder")]  # whose rotation takes a checkpoint-* of the user's
    needs += [] if ppo else [("--resume_from_checkpoint", "true", "run_folder")]  # it failed after loading
    needs += [("--stop_on_no_signal", "true", "watchdogs")] + ([] if ppo else [("--tools", "calculator", "tools")])
    (tmp_path / "no" / "checkpoint-1-best").mkdir(parents=True)
    for flag, value, extra in needs:
        refused = run_script(script, "--config", mine / "recipe.yaml", flag, value, "--output_dir", tmp_path / "no",
                             cwd=tmp_path, env=env, check=False)
        said = (f"{flag} in a folder with checkpoints" if flag == "--save_total_limit" else f"{flag} {value}"
                if extra == "run_folder" else flag)  # a checkpoint's path resumes without it
        assert refused.returncode == 1 and refused.stderr.strip().splitlines()[-1] == (
            f"error: {said} needs extras/{extra}.py: copy the extras/ folder beside {script}")
    # An option refused with extras/ is refused without: one that drops the rewards' columns, set away from its default
    refused = run_script(script, "--config", mine / "recipe.yaml", "--remove_unused_columns", "true" if not ppo else
                         "false", "--output_dir", tmp_path / "no", cwd=tmp_path, env=env, check=False)
    assert refused.returncode == 1 and refused.stderr.strip().splitlines()[-1].startswith(
        "error: --remove_unused_columns is not supported here: ")
    # --overwrite_output_dir, which the copy took and ignored, is gone: TRL's parser refuses it, as any unknown option
    refused = run_script(script, "--config", mine / "recipe.yaml", "--overwrite_output_dir", "true", "--output_dir",
                         tmp_path / "no", cwd=tmp_path, env=env, check=False)
    assert refused.returncode == 1 and (
        "not used by the HfArgumentParser: ['--overwrite_output_dir', 'true']" in refused.stderr)
    refused = run_script(script, "--output_dir", tmp_path / "no", cwd=tmp_path, env=env, check=False)
    recipe = f"recipes/tiny/{script.split('_')[0]}.yaml"
    assert refused.returncode == 1 and refused.stderr.strip().splitlines()[-1] == (
        "error: --model_name_or_path is missing: name your model (a hub id or a folder); a run that names none is the "
        f"default run, which reads {recipe} and extras/, not beside {script}")
    # --help, the first thing typed in a copy, needs no recipe: it shows what a run that names its model gets
    shown = run_script(script, "--help", cwd=tmp_path, env=env)
    assert "--model_name_or_path" in shown.stdout and "--learning_rate" in shown.stdout

    # From flags alone, as TRL's own script runs: TRL's defaults, not the default run's recipe
    flags = [str(a) for key, value in yaml.safe_load(RECIPE[script]).items()
             for a in (f"--{key}", *(value if isinstance(value, list) else [value]))]
    saves = [] if script.startswith("ppo") else ["--save_strategy", "steps", "--save_steps", 1]
    run_script(script, "--model_name_or_path", mine / "model", "--dataset_name", mine / "data", *flags, *saves,
               "--output_dir", tmp_path / "from-flags", cwd=tmp_path, env=env)
    (assert_adapter_trained if script.startswith("ppo") else lambda out: assert_trained(out, mine / "model"))(
        tmp_path / "from-flags")
    if saves:  # GRPOTrainer resumes a checkpoint named by its path (`last` is an extra): its state, marked, goes on
        state = tmp_path / "from-flags" / "checkpoint-1" / "trainer_state.json"
        state.write_text(state.read_text().replace('"log_history": [', '"log_history": [{"resumed": 1}, ', 1))
        run_script(script, "--model_name_or_path", mine / "model", "--dataset_name", mine / "data", *flags, *saves,
                   "--max_steps", 3, "--resume_from_checkpoint", state.parent, "--output_dir", tmp_path / "from-flags",
                   cwd=tmp_path, env=env)
        history = json.loads((tmp_path / "from-flags" / "checkpoint-3" / "trainer_state.json").read_text())[
            "log_history"]
        assert history[0] == {"resumed": 1} and [e["step"] for e in history[1:] if "loss" in e] == [1, 2, 3]

    # A check that keeps training right lives in the script: one weight for two rewards would weigh the second by 0
    if script.startswith("ppo"):
        refused = run_script(script, "--config", mine / "recipe.yaml", "--reward_funcs", "accuracy", "length",
                             "--reward_weights", "0.1", "--output_dir", tmp_path / "no", cwd=tmp_path, env=env,
                             check=False)
        assert refused.returncode == 1 and refused.stderr.strip().splitlines()[-1] == (
            "error: 1 --reward_weights for 2 rewards (accuracy, length): give one weight per reward")


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_copy_with_the_files_its_docstring_lists_runs_its_default_run(script, tmp_path, monkeypatch):
    folder = tmp_path / "my-project"
    copy(folder, [script, "rewards.py", *default_run_files(script)])
    monkeypatch.setattr("conftest.REPO", folder)
    env = {"PYTHONPATH": ""}
    out = tmp_path / "out"
    tiny = (["--max_steps", 2] if script.startswith("grpo") else
            ["--total_episodes", 32, "--per_device_train_batch_size", 16, "--num_mini_batches", 1])
    run_script(script, "--output_dir", out, *tiny, "--eval_num_samples", 2, cwd=tmp_path, env=env)
    assert_trained(out)
    assert all((out / name).is_file() for name in ("eval.json", "summary.json", "metrics.jsonl", "reward_curve.png"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_copy_without_the_bundled_files_names_them(script, tmp_path, monkeypatch):
    """The Python files and the default recipe only: the default run stops before anything loads, naming the folders
    to copy and the flags that replace them, in one sentence (not after a hub lookup of a path that is no hub id)."""
    folder = tmp_path / "my-project"
    copy(folder, [script, "rewards.py", *(f for f in default_run_files(script) if f[:6] != "assets")])
    monkeypatch.setattr("conftest.REPO", folder)
    proc = run_script(script, "--output_dir", tmp_path / "out", cwd=tmp_path, env={"PYTHONPATH": ""}, check=False)
    assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1] == (
        f"error: the default run reads assets/tiny-llama-addition and assets/addition, which are not beside {script}: "
        "copy them from the repository with it, or give your own with --model_name_or_path and --dataset_name")
    assert not (tmp_path / "out").exists()
