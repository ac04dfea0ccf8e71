"""The bundled tasks are what their build scripts make: the committed files can be rebuilt and audited."""

import json
import random
import sys

import pytest
from conftest import REPO, read_jsonl

sys.path.insert(0, str(REPO / "assets"))
import build_tiny_assets  # noqa: E402
import build_tool_task  # noqa: E402

from tools import calculator  # noqa: E402


@pytest.mark.parametrize("task", sorted(build_tiny_assets.TASKS))
def test_arithmetic_tasks_are_their_builders_output(task):
    _, n_test = build_tiny_assets.TASKS[task]
    train, test = build_tiny_assets.build_data(task, 0, n_test)  # the builder's default seed
    assert read_jsonl(REPO / "assets" / task / "train.jsonl") == train
    assert read_jsonl(REPO / "assets" / task / "test.jsonl") == test
    rows = train + test
    assert len({r["prompt"] for r in rows}) == len(rows) == {"addition": 100, "addition3": 1000}[task]
    assert all(str(sum(map(int, r["prompt"].removesuffix("=").split("+")))) == r["answer"] for r in rows)
    model = json.loads((REPO / "assets" / f"tiny-llama-{task}" / "config.json").read_text())
    assert model["architectures"] == ["LlamaForCausalLM"]


def test_tool_task_is_its_builders_output():
    train, test = build_tool_task.build_data(random.Random(0), 2000, 200)  # the builder's defaults
    assert read_jsonl(REPO / "assets" / "tool-addition" / "train.jsonl") == train
    assert read_jsonl(REPO / "assets" / "tool-addition" / "test.jsonl") == test
    prompts = [r["prompt"][0]["content"] for r in train + test]
    assert len(set(prompts)) == len(prompts) == 2200
    assert all(calculator(r["prompt"][0]["content"]) == r["answer"] for r in train + test)
    assert all(len(r["answer"]) >= 3 for r in train + test)  # three-digit sums: beyond the tiny model's head
