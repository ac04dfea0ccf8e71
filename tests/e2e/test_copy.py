"""A template you can copy: each script, with exactly the files its docstring lists beside it and nothing else of the
repository, runs its default task from an empty folder, and trains on a model and data of the user's; without the
bundled files, it says in one sentence what to copy or which flags to give."""

import ast
import re
import shutil

import pytest
from conftest import ADDITION, REPO, TINY_MODEL, assert_adapter_trained, assert_trained, run_script

TINY = {
    "grpo_trl_example.py": ["--max_steps", 2, "--logging_steps", 1, "--eval_num_samples", 2],
    "ppo_trl_example.py": ["--total_episodes", 32, "--per_device_train_batch_size", 16, "--num_mini_batches", 1,
                           "--eval_num_samples", 2],
}
LORA = ["--use_peft", "--lora_target_modules", "q_proj", "v_proj"]


def needed_files(script: str) -> list[str]:
    """The files the script's docstring says it needs beside it, read from the docstring itself."""
    docstring = ast.get_docstring(ast.parse((REPO / script).read_text()))
    found = re.search(r"the files it needs beside it[^:]*:\n\n((?:    .+\n)+)", docstring)
    assert found, f"{script}'s docstring does not list the files it needs"
    return found.group(1).split()


def copy_to(folder, names):
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, folder / name)


@pytest.mark.parametrize("script", sorted(TINY))
def test_a_copy_with_the_files_its_docstring_lists_trains(script, tmp_path, monkeypatch):
    copy = tmp_path / "my-project"
    copy_to(copy, [script, *needed_files(script)])
    monkeypatch.setattr("conftest.REPO", copy)  # run_script runs the script of this folder
    work = tmp_path / "work"
    work.mkdir()
    env = {"PYTHONPATH": ""}  # nothing of the repository importable but what was copied

    # its default run, on the files it was copied with
    run_script(script, "--output_dir", work / "default", *TINY[script], cwd=work, env=env)
    assert_trained(work / "default")
    assert (work / "default" / "eval.json").is_file()

    # a model and data of the user's (here the repository's, under other paths); PPO with a LoRA policy
    mine = work / "mine"
    shutil.copytree(TINY_MODEL, mine / "model")
    shutil.copytree(ADDITION, mine / "data")
    lora = LORA if script.startswith("ppo") else []
    run_script(script, "--model_name_or_path", mine / "model", "--dataset_name", mine / "data", "--output_dir",
               work / "out", *TINY[script], *lora, cwd=work, env=env)
    (assert_adapter_trained if lora else lambda out: assert_trained(out, mine / "model"))(work / "out")
    assert (work / "out" / "summary.json").is_file() and (work / "out" / "reward_curve.png").is_file()

    if script.startswith("grpo"):  # tools.py was not copied, and the copy says so rather than import the repo's
        refused = run_script(script, "--output_dir", work / "tools", "--tools", "calculator", "--eval_num_samples", 0,
                             cwd=work, env=env, check=False)
        assert refused.returncode == 1
        assert refused.stderr.strip().splitlines()[-1] == (
            "error: --tools and --environment_factory need tools.py beside this script (the tool registry and its "
            "checks): copy it from the repository")


@pytest.mark.parametrize("script", sorted(TINY))
def test_a_copy_without_the_bundled_files_names_them(script, tmp_path, monkeypatch):
    """The Python files alone: the default run stops before anything loads, naming the folders to copy and the flags
    that replace them, in one sentence (not after a hub lookup of a path that is not a hub id)."""
    copy = tmp_path / "my-project"
    copy_to(copy, [script, *(name for name in needed_files(script) if not name.startswith("assets/"))])
    monkeypatch.setattr("conftest.REPO", copy)
    proc = run_script(script, "--output_dir", tmp_path / "out", cwd=tmp_path, env={"PYTHONPATH": ""}, check=False)
    assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1] == (
        f"error: the default run reads assets/tiny-llama-addition and assets/addition, which are not beside {script}: "
        "copy them from the repository with it, or give your own with --model_name_or_path and --dataset_name")
    assert not (tmp_path / "out").exists()
