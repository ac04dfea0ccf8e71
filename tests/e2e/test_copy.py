"""A template you can copy: each script, with exactly the files its docstring lists beside it and nothing else of the
repository, trains from an empty folder on a model and data of the user's."""

import ast
import re
import shutil

import pytest
from conftest import ADDITION, TINY_MODEL, assert_adapter_trained, assert_trained, run_script

TINY = {
    "grpo_trl_example.py": ["--max_steps", 2, "--logging_steps", 1, "--eval_strategy", "no"],
    "ppo_trl_example.py": ["--total_episodes", 32, "--per_device_train_batch_size", 16, "--num_mini_batches", 1],
}


def needed_files(script: str) -> list[str]:
    """The files the script's docstring says it needs beside it, read from the docstring itself."""
    from conftest import REPO

    docstring = ast.get_docstring(ast.parse((REPO / script).read_text()))
    found = re.search(r"the files it needs beside it[^:]*:\n\n    (.+)\n", docstring)
    assert found, f"{script}'s docstring does not list the files it needs"
    return found.group(1).split()


@pytest.mark.parametrize("script", sorted(TINY))
def test_a_copy_with_the_files_its_docstring_lists_trains(script, tmp_path, monkeypatch):
    from conftest import REPO

    copy = tmp_path / "my-project"
    for name in [script, *needed_files(script)]:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, copy / name)
    monkeypatch.setattr("conftest.REPO", copy)  # run_script runs the script of this folder
    work = tmp_path / "work"
    work.mkdir()
    env = {"PYTHONPATH": ""}  # nothing of the repository importable but what was copied
    out = work / "out"
    lora = ["--use_peft", "--lora_target_modules", "q_proj", "v_proj"] if script.startswith("ppo") else []
    run_script(script, "--model_name_or_path", TINY_MODEL, "--dataset_name", ADDITION, "--output_dir", out,
               *TINY[script], *lora, cwd=work, env=env)
    if lora:
        assert_adapter_trained(out)
    else:
        assert_trained(out)
    assert (out / "summary.json").is_file() and (out / "reward_curve.png").is_file()

    if script.startswith("grpo"):  # tools.py was not copied, and the copy says so rather than import the repo's
        refused = run_script(script, "--model_name_or_path", TINY_MODEL, "--dataset_name", ADDITION, "--output_dir",
                             work / "tools", "--tools", "calculator", cwd=work, env=env, check=False)
        assert refused.returncode == 1
        assert refused.stderr.strip().splitlines()[-1] == (
            "error: --tools and --environment_factory need tools.py beside this script (the tool registry and its "
            "checks): copy it from the repository")
