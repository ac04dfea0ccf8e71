"""Loading prompts (data.load_prompt_dataset, shared by both scripts): every input the README lists for
--dataset_name and --dataset_config, in-process. The scripts' own use of it runs end to end in test_grpo.py."""

import json

import pytest
from conftest import write_jsonl

from data import load_prompt_dataset
from rewards import accuracy_reward

ROWS = [{"prompt": f"{a}+{a}=", "answer": str(2 * a)} for a in range(6)]


def write_file(path, rows=ROWS):
    """`rows` as a .jsonl, .json (a JSON array), .csv or .parquet file, by the suffix of `path`."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    {".jsonl": lambda: write_jsonl(path, rows), ".json": lambda: path.write_text(json.dumps(rows)),
     ".csv": lambda: frame.to_csv(path, index=False), ".parquet": lambda: frame.to_parquet(path)}[path.suffix]()
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".parquet"])
def test_a_single_file_is_the_train_split(tmp_path, suffix):
    dataset = load_prompt_dataset(str(write_file(tmp_path / f"prompts{suffix}")))
    assert list(dataset) == ["train"]
    # every row, both columns (a CSV's numeric column comes back as numbers, which `accuracy` reads as well)
    assert [{**row, "answer": str(row["answer"])} for row in dataset["train"]] == ROWS
    rows = dataset["train"]
    assert accuracy_reward([f"so {r['answer']}" for r in ROWS], answer=rows["answer"]) == [1.0] * len(ROWS)


def test_another_file_type_is_refused(tmp_path):
    (tmp_path / "prompts.txt").write_text("1+1=\n")
    with pytest.raises(SystemExit, match=r"error: cannot read '.*prompts.txt': use a \.jsonl, \.json, \.csv, "
                                         r"\.parquet file, or a folder"):
        load_prompt_dataset(str(tmp_path / "prompts.txt"))


def test_a_folder_gives_one_split_per_file(tmp_path):
    write_file(tmp_path / "train.jsonl")
    write_file(tmp_path / "validation.jsonl", ROWS[:2])
    dataset = load_prompt_dataset(str(tmp_path))
    assert sorted(dataset) == ["train", "validation"] and len(dataset["validation"]) == 2


def test_an_empty_split_file_in_a_folder_is_named(tmp_path):
    write_file(tmp_path / "train.jsonl")
    (tmp_path / "test.jsonl").write_text("")
    with pytest.raises(SystemExit, match=r"error: .*test.jsonl is empty"):
        load_prompt_dataset(str(tmp_path))


def test_dataset_config_picks_the_config(tmp_path):
    """A dataset with two configs, laid out as on the hub (a README listing each config's files)."""
    configs = {"main": ROWS[:3], "socratic": [{**row, "prompt": "Why? " + row["prompt"]} for row in ROWS[3:]]}
    readme = "---\nconfigs:\n"
    for name, rows in configs.items():
        (tmp_path / name).mkdir()
        write_file(tmp_path / name / "train.jsonl", rows)
        readme += f"- config_name: {name}\n  data_files:\n  - split: train\n    path: {name}/train.jsonl\n"
    (tmp_path / "README.md").write_text(readme + "---\n")
    for name, rows in configs.items():
        assert [dict(row) for row in load_prompt_dataset(str(tmp_path), dataset_config=name)["train"]] == rows


def test_columns_are_mapped_and_the_system_prompt_added(tmp_path):
    path = write_file(tmp_path / "qa.jsonl", [{"question": r["prompt"], "gold": r["answer"]} for r in ROWS])
    dataset = load_prompt_dataset(str(path), prompt_column="question", answer_column="gold", system_prompt="Add.")
    system, user = {"role": "system", "content": "Add."}, {"role": "user", "content": "0+0="}
    assert dataset["train"][0] == {"prompt": [system, user], "answer": "0"}


@pytest.mark.parametrize("script", ["grpo_trl_example", "ppo_trl_example"])
def test_the_streaming_refusals_advice_works(script):
    """--dataset_streaming is refused with advice to take a slice with --dataset_train_split: that slice loads (a
    split name with `datasets`' slicing: `train[:10%]`), and a slice of the held-out split too."""
    import importlib
    import re
    from types import SimpleNamespace

    from conftest import ADDITION
    from data import load_splits

    advice = importlib.import_module(script).UNSUPPORTED_OPTIONS["dataset_streaming"]
    split = re.search(r"--dataset_train_split '([^']+)'", advice).group(1)
    args = SimpleNamespace(dataset_name=str(ADDITION), dataset_config=None, dataset_prompt_column="prompt",
                           system_prompt=None, dataset_train_split=split, dataset_answer_column=None,
                           dataset_test_split="test[:5]", eval_num_samples=0)
    train, held_out, _ = load_splits(args, seed=0, reward_funcs=[accuracy_reward])
    assert len(train) == 8 and len(held_out) == 5  # 10% of the 80 training prompts; 5 of the 20 held out
