"""The prompts of a run, shared by `grpo_trl_example.py` and `ppo_trl_example.py`. To train on your own data, start
here: `--dataset_name` takes a hub id, a local folder or one file, and the rest of its columns reach the rewards.

    load_splits()          the training and held-out splits, with the reward columns checked
    load_prompt_dataset()  a hub id or a local file/folder -> DatasetDict with a `prompt` column
    take_split()           a split, or a slice of one (`train[:10%]`)
    check_reward_columns() a clear error, before any model loads, for a column a reward needs and the data lacks
"""

from pathlib import Path

from accelerate import PartialState
from datasets import DatasetDict, ReadInstruction, concatenate_datasets, load_dataset

from options import RunArguments


# File extensions `--dataset_name` accepts for a single local file, and the `datasets` builder for each.
LOCAL_FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


def load_prompt_dataset(
    dataset_name: str,
    dataset_config: str | None = None,
    prompt_column: str = "prompt",
    system_prompt: str | None = None,
    train_split: str = "train",
    answer_column: str | None = None,
) -> DatasetDict:
    """Load prompts from the hub or from disk and put them in TRL's `prompt` column.

    Args:
        dataset_name: a hub id (`openai/gsm8k`), a local folder that `datasets` can read
            (e.g. `train.jsonl` + `test.jsonl`), or a single .jsonl/.json/.csv/.parquet file (its only split is
            `train`).
        dataset_config: the hub dataset's config name (`main` for GSM8K), if it has several.
        prompt_column: the column holding the prompt; it is renamed to `prompt`. It may hold a string
            (standard format) or a list of `{"role", "content"}` messages (conversational format).
        system_prompt: if set, every prompt becomes conversational with this system message first.
        train_split: the split that must exist.
        answer_column: if set, this column is renamed to `answer`, the gold answer that `accuracy` reads.

    Returns:
        A DatasetDict; a missing train split, an empty split or a missing prompt column stops the script with
        a message naming what is there. Every other column (e.g. `answer`) is kept: the reward functions receive it
        as a kwarg.
    """
    path = Path(dataset_name).expanduser()
    if not path.exists() and (dataset_name.startswith((".", "/", "~")) or dataset_name.count("/") > 1
                              or path.suffix in LOCAL_FILE_BUILDERS):  # a path, not a hub id: no hub lookup
        raise SystemExit(f"error: --dataset_name {dataset_name}: no such file or directory")
    if path.is_file() and path.suffix not in LOCAL_FILE_BUILDERS:
        raise SystemExit(f"error: cannot read '{path}': use a {', '.join(LOCAL_FILE_BUILDERS)} file, or a folder")
    # `datasets` fails on an empty data file with a bare StopIteration (one file) or "Instruction 'test' corresponds
    # to no data" (a split file in a folder)
    for file in [path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []:
        if file.suffix in LOCAL_FILE_BUILDERS and file.stat().st_size == 0:
            raise SystemExit(f"error: {file} is empty")
    if path.is_file():
        dataset = load_dataset(LOCAL_FILE_BUILDERS[path.suffix], data_files={"train": str(path)})
    else:  # a local folder, or a dataset on the hub
        dataset = load_dataset(dataset_name, name=dataset_config)

    if train_split.split("[")[0] not in dataset:
        raise SystemExit(f"error: no split '{train_split}' in {dataset_name}; its splits are: {', '.join(dataset)}. "
                         "Choose one with --dataset_train_split")
    for name, split in dataset.items():
        if len(split) == 0:
            raise SystemExit(f"error: split '{name}' of {dataset_name} is empty")
        if prompt_column not in split.column_names:
            raise SystemExit(f"error: no prompt column '{prompt_column}' in split '{name}' of {dataset_name}; its "
                             f"columns are: {', '.join(split.column_names)}. Choose one with --dataset_prompt_column")
    for column, role, flag in [(prompt_column, "prompt", "--dataset_prompt_column"),
                               (answer_column, "answer", "--dataset_answer_column")]:
        if column is None or column == role:
            continue
        for name, split in dataset.items():
            if column not in split.column_names:
                raise SystemExit(f"error: {flag} {column}: no such column in split '{name}' of {dataset_name}; its "
                                 f"columns are: {', '.join(split.column_names)}")
        dataset = DatasetDict({
            name: (split.remove_columns(role) if role in split.column_names else split).rename_column(column, role)
            for name, split in dataset.items()
        })

    if system_prompt:

        def add_system_prompt(prompt):
            messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
            return {"prompt": [{"role": "system", "content": system_prompt}] + messages}

        dataset = dataset.map(add_system_prompt, input_columns="prompt")
    return dataset


# How to supply a column a reward needs without preprocessing, where a flag exists for it.
COLUMN_FLAGS = {"answer": "--dataset_answer_column", "solution": "--dataset_answer_column",
                "prompt": "--dataset_prompt_column"}


def load_splits(script_args: RunArguments, seed: int, reward_funcs: list) -> tuple:
    """(train split, held-out split or None, where the held-out prompts come from), as both scripts read them.

    One process prepares the data while the others wait, then read it from the cache (as TRL's scripts do). The
    before/after evaluation (--eval_num_samples) holds out a seeded 10% of train when the data has no test split.
    A column a reward needs but the data lacks stops the run here, before any model loads.
    """
    from evaluation import eval_split

    with PartialState().main_process_first():
        dataset = load_prompt_dataset(
            script_args.dataset_name, script_args.dataset_config, script_args.dataset_prompt_column,
            script_args.system_prompt, script_args.dataset_train_split, script_args.dataset_answer_column,
        )
    train = take_split(dataset, script_args.dataset_train_split, "--dataset_train_split")
    held_out = (take_split(dataset, script_args.dataset_test_split, "--dataset_test_split")
                if script_args.dataset_test_split.split("[")[0] in dataset else None)
    source = None
    if script_args.eval_num_samples > 0:
        train, held_out, source = eval_split(train, held_out, script_args.dataset_train_split,
                                             script_args.dataset_test_split, seed)
    for split in (train, held_out):
        if split is not None:
            check_reward_columns(reward_funcs, split.column_names, script_args.dataset_name)
    return train, held_out, source


def take_split(dataset: DatasetDict, spec: str, flag: str):
    """A split by name, or slices of splits as `datasets` writes them: `train[:10%]`, `train[100:200]+test`.

    >>> from datasets import Dataset
    >>> len(take_split(DatasetDict(train=Dataset.from_dict({"x": list(range(80))})), "train[:10%]", "--flag"))
    8
    """
    try:
        parts = ReadInstruction.from_spec(spec).to_absolute({name: len(split) for name, split in dataset.items()})
    except ValueError as err:
        raise SystemExit(f"error: {flag} {spec}: {err}") from None
    splits = [dataset[part.splitname].select(range(part.from_, part.to)) for part in parts]
    return splits[0] if len(splits) == 1 else concatenate_datasets(splits)


def check_reward_columns(reward_funcs, column_names: list[str], dataset_name: str) -> None:
    """Stop, before any model loads, when a reward needs a dataset column that is not there.

    What a reward needs comes from `rewards.required_columns` (its `@reward_spec`, else its signature). Without
    this check `accuracy` on a dataset with no gold column returns None for every sample and trains on nothing.
    """
    for func in reward_funcs:
        for need in getattr(func, "columns", ()):
            names = (need,) if isinstance(need, str) else tuple(need)
            if any(n in column_names for n in names):
                continue
            flag = COLUMN_FLAGS.get(names[0])
            how = (f"map yours onto it with {flag} <column>" if flag else
                   f"rename yours to '{names[0]}' in the data")
            raise SystemExit(
                f"error: reward '{func.__name__}' needs a column {' or '.join(repr(n) for n in names)}, and "
                f"{dataset_name} has: {', '.join(column_names)}; {how}"
            )
