"""Loading prompts (each script's load_prompts): every input the README lists for --dataset_name and --dataset_config,
in-process, and the mistakes that stop a run in one line (extras/checks.py checks the files before anything loads)."""

import json
from types import SimpleNamespace

import pytest
from conftest import ADDITION, ALGOS, ppo_script, write_jsonl

import grpo_trl_example
from extras import checks
from rewards import accuracy_reward

ROWS = [{"prompt": f"{a}+{a}=", "answer": str(2 * a)} for a in range(6)]


@pytest.fixture(params=ALGOS)
def load(request):
    """The script's load_prompts with its defaults, keyword arguments overriding them."""
    def load(dataset_name, **kwargs):
        args = {"dataset_name": str(dataset_name), "dataset_config": None, "dataset_train_split": "train",
                "dataset_test_split": "test", "dataset_prompt_column": "prompt", "dataset_answer_column": None,
                "system_prompt": None, **kwargs}
        script = grpo_trl_example if request.param == "grpo" else ppo_script()
        return script.load_prompts(SimpleNamespace(**args))

    return load


def write_file(path, rows=ROWS):
    """`rows` as a .jsonl, .json (a JSON array), .csv or .parquet file, by the suffix of `path`."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    {".jsonl": lambda: write_jsonl(path, rows), ".json": lambda: path.write_text(json.dumps(rows)),
     ".csv": lambda: frame.to_csv(path, index=False), ".parquet": lambda: frame.to_parquet(path)}[path.suffix]()
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".parquet"])
def test_a_single_file_is_the_train_split(tmp_path, suffix, load):
    train, test = load(write_file(tmp_path / f"prompts{suffix}"))
    assert test is None
    # every row, both columns (a CSV's numeric column comes back as numbers, which `accuracy` reads as well)
    assert [{**row, "answer": str(row["answer"])} for row in train] == ROWS
    assert accuracy_reward([f"so {r['answer']}" for r in ROWS], answer=train["answer"]) == [1.0] * len(ROWS)


def test_a_folder_gives_its_splits_and_a_split_may_be_sliced(tmp_path, load):
    write_file(tmp_path / "train.jsonl")
    write_file(tmp_path / "validation.jsonl", ROWS[:2])
    train, test = load(tmp_path, dataset_test_split="validation")
    assert len(train) == 6 and len(test) == 2
    train, test = load(ADDITION, dataset_train_split="train[:10%]", dataset_test_split="test[:5]")
    assert len(train) == 8 and len(test) == 5  # the --dataset_streaming refusal's advice


def test_dataset_config_picks_the_config(tmp_path, load):
    """A dataset with two configs, laid out as on the hub (a README listing each config's files)."""
    configs = {"main": ROWS[:3], "socratic": [{**row, "prompt": "Why? " + row["prompt"]} for row in ROWS[3:]]}
    readme = "---\nconfigs:\n"
    for name, rows in configs.items():
        (tmp_path / name).mkdir()
        write_file(tmp_path / name / "train.jsonl", rows)
        readme += f"- config_name: {name}\n  data_files:\n  - split: train\n    path: {name}/train.jsonl\n"
    (tmp_path / "README.md").write_text(readme + "---\n")
    for name, rows in configs.items():
        assert [dict(row) for row in load(tmp_path, dataset_config=name)[0]] == rows


def test_columns_are_mapped_and_the_system_prompt_added(tmp_path, load):
    path = write_file(tmp_path / "qa.jsonl", [{"question": r["prompt"], "gold": r["answer"]} for r in ROWS])
    train, _ = load(path, dataset_prompt_column="question", dataset_answer_column="gold", system_prompt="Add.")
    system, user = {"role": "system", "content": "Add."}, {"role": "user", "content": "0+0="}
    assert train[0] == {"prompt": [system, user], "answer": "0"}


@pytest.mark.parametrize("kwargs, named", [
    ({"dataset_train_split": "training"}, ["--dataset_name", "training", "'train', 'test'"]),  # the splits there are
    ({"dataset_prompt_column": "question"}, ["--dataset_prompt_column question", "prompt, answer"]),  # the columns
    ({"dataset_answer_column": "gold"}, ["--dataset_answer_column gold", "prompt, answer"]),
])
def test_a_split_or_column_that_is_not_there_is_one_line(load, kwargs, named):
    """The flag and the value that are wrong, and what there is instead."""
    with pytest.raises(SystemExit) as stop:
        load(ADDITION, **kwargs)
    assert str(stop.value).startswith("error: ") and all(n in str(stop.value) for n in named), stop.value


@pytest.mark.parametrize("name, write, named", [
    ("prompts.txt", "1+1=\n", "use a .jsonl, .json, .csv, .parquet file, or a folder"),
    ("empty.jsonl", "", "empty.jsonl is empty"),
    ("./no-such-data", None, "--dataset_name ./no-such-data: no such file or directory"),
])
def test_a_file_that_cannot_be_read_is_one_line_before_anything_loads(tmp_path, monkeypatch, name, write, named):
    monkeypatch.chdir(tmp_path)
    if write is not None:
        (tmp_path / name).write_text(write)
    script_args = SimpleNamespace(dataset_name=name, eval_only=False, eval_num_samples=0, eval_max_prompts=1)
    training_args = SimpleNamespace(use_cpu=True, report_to=[], trust_remote_code=False)
    model_args = SimpleNamespace(model_name_or_path=str(tmp_path), model_revision=None, load_in_4bit=False,
                                 load_in_8bit=False)
    with pytest.raises(SystemExit, match=named):
        checks.check(script_args, training_args, model_args)


def test_system_prompt_replaces_the_prompts_own(load, tmp_path):
    """--system_prompt opens every conversation and is its only system message: a prompt's own system message (first,
    or anywhere) would otherwise make two, which templates that require alternating roles refuse."""
    user = {"role": "user", "content": "1+1="}
    own = {"role": "system", "content": "Subtract."}
    rows = [{"prompt": p, "answer": "2"} for p in (
        "1+1=", [user], [own, user], [own, user, {"role": "assistant", "content": "2"}, own, user])]
    (tmp_path / "data").mkdir()
    write_jsonl(tmp_path / "data" / "train.jsonl", rows)
    train, _ = load(tmp_path / "data", system_prompt="Add.")
    for prompt in train["prompt"]:
        assert prompt[0] == {"role": "system", "content": "Add."}
        assert [m["role"] for m in prompt].count("system") == 1 and user in prompt
