"""assets/build_reward_model.py's pieces that need no build: the stop token a hand-written completion ends with."""

import importlib.util

import model_zoo
import pytest
from conftest import CHAT_TEMPLATE, REPO, TINY_MODEL
from transformers import AutoTokenizer, GenerationConfig


@pytest.fixture(scope="module")
def builder():
    spec = importlib.util.spec_from_file_location("build_reward_model", REPO / "assets" / "build_reward_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stops_of(path) -> list[int]:
    """The builder's stop tokens: the tokenizer's eos and the generation config's, sorted."""
    tokenizer, eos = AutoTokenizer.from_pretrained(path), GenerationConfig.from_pretrained(path).eos_token_id
    return sorted({tokenizer.eos_token_id, *(eos if isinstance(eos, list) else [eos])} - {None})


def test_a_completion_ends_with_the_turn_end_of_a_model_with_several_stop_tokens(builder, tmp_path):
    """Qwen2.5-Instruct stops at `<|im_end|>` and `<|endoftext|>`; its answers end with `<|im_end|>`, the turn end its
    chat template writes, which the smallest id (here `<|endoftext|>`) is not."""
    twin = model_zoo.build_qwen2_twin(tmp_path / "qwen")
    tokenizer, stops = AutoTokenizer.from_pretrained(twin), stops_of(twin)
    assert len(stops) == 2 and min(stops) == tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert builder.turn_end(tokenizer, stops) == tokenizer.convert_tokens_to_ids("<|im_end|>")


def test_a_completion_ends_with_the_eos_of_a_model_with_one(builder):
    """SmolLM2's one stop token, and a tokenizer whose chat template writes no stop token at all (the bundled model's,
    with a template of the tests'): the tokenizer's eos."""
    tokenizer = AutoTokenizer.from_pretrained(TINY_MODEL)
    tokenizer.chat_template = CHAT_TEMPLATE
    assert builder.turn_end(tokenizer, stops_of(TINY_MODEL)) == tokenizer.eos_token_id
