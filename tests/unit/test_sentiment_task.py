"""The bundled sentiment task (assets/build_sentiment_task.py): seeded, its splits share no made-up name, and the
bundled files are what the builder writes."""

import json
import re
import subprocess
import sys

from conftest import REPO, read_jsonl

sys.path.insert(0, str(REPO / "assets"))
from build_sentiment_task import build  # noqa: E402

NAME = re.compile(r'"The [A-Z][a-z]+ [A-Z][a-z]+"|from ([A-Z][a-z]+)|the [a-z ]+ ([A-Z][a-z]+)')


def names(rows) -> set[str]:
    found = set()
    for row in rows:
        for match in NAME.finditer(row["prompt"][0]["content"]):
            found |= {group for group in match.groups() if group} or {match.group(0)}
    return found


def test_the_splits_share_no_made_up_name():
    train, test = build(seed=0, n_train=512, n_test=64)
    assert len(train) == 512 and len(test) == 64
    assert names(test) and names(train)
    assert not names(train) & names(test)


def test_seeded():
    assert build(seed=3, n_train=50, n_test=10) == build(seed=3, n_train=50, n_test=10)
    assert build(seed=3, n_train=50, n_test=10) != build(seed=4, n_train=50, n_test=10)


def test_the_bundled_files_are_the_builders(tmp_path):
    subprocess.run([sys.executable, "assets/build_sentiment_task.py", "--out", str(tmp_path)], cwd=REPO, check=True,
                   capture_output=True)
    for split in ("train", "test"):
        assert read_jsonl(tmp_path / f"{split}.jsonl") == read_jsonl(REPO / "assets" / "sentiment" / f"{split}.jsonl")
    rows = read_jsonl(REPO / "assets" / "sentiment" / "train.jsonl")
    assert all(list(row) == ["prompt"] and row["prompt"][0]["role"] == "user" for row in rows)
    assert json.dumps(rows).isascii()  # every character is one the bundled tiny tokenizer knows
