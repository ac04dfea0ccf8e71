"""Tiny random models of real architectures, with real kinds of tokenizer, built offline for the tests.

The bundled model (a character-level Llama) proves that the training loop works, but it cannot show what real
checkpoints do to a script: a byte-level BPE tokenizer, a chat template that injects its own system prompt, a
tokenizer that adds BOS, no pad token, a reward model with another tokenizer. Each builder here writes a
`save_pretrained` directory in about a second, standing in for a hub checkpoint that the tests cannot download.

    build_qwen2()      Qwen2.5-Instruct: byte-level BPE, ChatML template with Qwen's default system prompt, pad token
    build_qwen2_twin() Qwen2.5-0.5B-Instruct's GPU-shaped twin: its 151,936-row vocabulary and shipped generation
                       config (two stop tokens), for what a GPU recipe costs and reads
    build_pythia()     Pythia (GPT-NeoX): GPT-2-style byte-level BPE with no pad token; also as a reward model
    build_bos_llama()  the bundled Llama with a tokenizer that adds BOS to plain text, as Llama/Mistral/Gemma do
    write_gsm8k()      a GSM8K-layout dataset folder (config `main`, `question` / `answer` with "#### N")
    write_tldr()       a trl-lib/tldr-layout dataset folder (`prompt` ending in "TL;DR:", `completion`)
"""

import importlib.resources
import json
import random
import shutil
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
TINY_MODEL = REPO / "assets" / "tiny-llama-addition"

# Text for the BPE tokenizers to learn merges from: enough to encode prompts, numbers and tags compactly.
WORDS = ("the a of to and in is it that for on was with as he she they you we her his at by an be this from or "
         "had not but what all were when there can more if no out so said up one about how many each then total "
         "apples eggs dollars cookies people miles hours buy sold left has have add sum answer think step post "
         "subreddit title summary wrote reddit my friend today week work money time day year help advice please"
         ).split()


def corpus(n: int = 400, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12)))
        a, b = rng.randint(0, 999), rng.randint(0, 99)
        lines.append(f"{words.capitalize()}? {a}+{b}={a + b}. <think>{a} + {b}</think>\n<answer>{a + b}</answer> "
                     f"#### {a + b}\nTL;DR: {words}.")
    return lines


def byte_level_bpe(special_tokens: list[str], vocab_size: int = 600):
    """A byte-level BPE (GPT-2 / Qwen / Pythia style): every string encodes, and decodes back unchanged."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special_tokens, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(corpus(), trainer)
    return tokenizer


def build_qwen2(out_dir: Path, reward_model: bool = False, vocab_size: int | None = None) -> Path:
    """Stands in for Qwen/Qwen2.5-0.5B-Instruct: a Qwen2 with Qwen's special tokens and its real chat template
    (trl ships it), which adds "You are Qwen, created by Alibaba Cloud..." when a chat has no system message.
    No BOS; `<|endoftext|>` pads, `<|im_end|>` ends a turn (eos). `reward_model`: a one-label sequence classifier.
    `vocab_size`: the embedding's rows, if more than the tokenizer's tokens (Qwen2.5 has 151,936 for 151,665)."""
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM, Qwen2ForSequenceClassification

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=byte_level_bpe(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]),
        eos_token="<|im_end|>", pad_token="<|endoftext|>",
    )
    tokenizer.chat_template = (importlib.resources.files("trl") / "chat_templates" / "qwen2_5.jinja").read_text()
    config = Qwen2Config(vocab_size=vocab_size or len(tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         tie_word_embeddings=not reward_model, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=None, num_labels=1)
    torch.manual_seed(0)
    model = (Qwen2ForSequenceClassification if reward_model else Qwen2ForCausalLM)(config)
    return _save(model, tokenizer, out_dir)


QWEN25_VOCAB = 151_936  # Qwen2.5's (and Qwen2's) embedding rows
PYTHIA_VOCAB = 50_304  # Pythia's


def build_qwen2_twin(out_dir: Path, reward_model: bool = False) -> Path:
    """Qwen2.5-0.5B-Instruct's GPU-shaped twin, for the GPU recipes: build_qwen2's tiny widths and tokenizer under
    Qwen's module names, with its 151,936-row vocabulary, which costs the memory a width does not (every logit, the
    embedding), tied to the output layer as Qwen2.5-0.5B's is; and as a policy, the generation config Qwen2.5-Instruct
    ships: two stop tokens (`<|im_end|>` ends a turn, `<|endoftext|>` the text), sampling settings of its own. The
    model's ids past the tokenizer's decode to nothing, as Qwen's unused rows do."""
    out_dir = build_qwen2(out_dir, reward_model=reward_model, vocab_size=QWEN25_VOCAB)
    if not reward_model:
        from transformers import AutoTokenizer, GenerationConfig

        tokenizer = AutoTokenizer.from_pretrained(out_dir)
        turn_end, text_end = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
        GenerationConfig(bos_token_id=text_end, pad_token_id=text_end, eos_token_id=[turn_end, text_end],
                         do_sample=True, repetition_penalty=1.1, temperature=0.7, top_p=0.8, top_k=20,
                         ).save_pretrained(out_dir)  # Qwen2.5-0.5B-Instruct's generation_config.json, in its ids
    return out_dir


def build_pythia(out_dir: Path, reward_model: bool = False, vocab_size: int | None = None) -> Path:
    """Stands in for EleutherAI/pythia-* and the cleanrl TL;DR SFT and reward models of TRL's PPO example:
    a GPT-NeoX whose GPT-2-style tokenizer has `<|endoftext|>` as BOS and eos and no pad token.
    Policy and reward model built here share one tokenizer, as PPO needs. `vocab_size`: the embedding's rows
    (PYTHIA_VOCAB for Pythia's)."""
    from transformers import (GPTNeoXConfig, GPTNeoXForCausalLM, GPTNeoXForSequenceClassification,
                              PreTrainedTokenizerFast)

    tokenizer = PreTrainedTokenizerFast(tokenizer_object=byte_level_bpe(["<|endoftext|>"]),
                                        bos_token="<|endoftext|>", eos_token="<|endoftext|>")
    config = GPTNeoXConfig(vocab_size=vocab_size or len(tokenizer), hidden_size=32, intermediate_size=64,
                           num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=512, rotary_pct=0.25,
                           bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, num_labels=1)
    torch.manual_seed(1 if reward_model else 0)
    model = (GPTNeoXForSequenceClassification if reward_model else GPTNeoXForCausalLM)(config)
    return _save(model, tokenizer, out_dir)


def build_bos_llama(out_dir: Path) -> Path:
    """The bundled tiny Llama, trained weights and all, with a tokenizer that puts BOS before plain text, as
    Llama, Mistral and Gemma tokenizers do (`add_special_tokens=False` leaves it out). BOS is a new token, so the
    embeddings grow by one row."""
    from tokenizers import processors
    from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

    original = AutoTokenizer.from_pretrained(TINY_MODEL)
    backend = original.backend_tokenizer
    backend.add_special_tokens(["<s>"])
    bos_id = backend.token_to_id("<s>")
    backend.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                           special_tokens=[("<s>", bos_id)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token=original.eos_token,
                                        unk_token=original.unk_token)
    model = AutoModelForCausalLM.from_pretrained(TINY_MODEL)
    model.resize_token_embeddings(len(tokenizer))
    model.config.bos_token_id = model.generation_config.bos_token_id = bos_id
    return _save(model, tokenizer, out_dir)


def _save(model, tokenizer, out_dir: Path) -> Path:
    if getattr(model, "generation_config", None) is not None:  # a causal LM
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return Path(out_dir)


def _write_splits(out_dir: Path, splits: dict[str, list[dict]], config: str | None = None) -> Path:
    """A dataset folder as on the hub: one jsonl per split, under a named config when `config` is given."""
    folder = Path(out_dir) / (config or "")
    folder.mkdir(parents=True, exist_ok=True)
    for split, rows in splits.items():
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    if config:
        files = "".join(f"  - split: {split}\n    path: {config}/{split}.jsonl\n" for split in splits)
        (Path(out_dir) / "README.md").write_text(f"---\nconfigs:\n- config_name: {config}\n  data_files:\n{files}---\n")
    return Path(out_dir)


def write_gsm8k(out_dir: Path, n_train: int = 160, n_test: int = 8) -> Path:
    """GSM8K's layout (openai/gsm8k, config `main`): `question`, and an `answer` that reasons and ends in "#### N"."""
    rng = random.Random(0)

    def row():
        a, b = rng.randint(1, 50), rng.randint(1, 50)
        return {"question": f"Tom has {a} apples and buys {b} more. How many apples does he have?",
                "answer": f"He has {a} + {b} = <<{a}+{b}={a + b}>>{a + b} apples.\n#### {a + b}"}

    return _write_splits(out_dir, {"train": [row() for _ in range(n_train)], "test": [row() for _ in range(n_test)]},
                         config="main")


def write_tldr(out_dir: Path, n: int = 160) -> Path:
    """trl-lib/tldr's layout: a `prompt` (a Reddit post ending in "TL;DR:") and a reference `completion`."""
    rng = random.Random(1)

    def row():
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 30)))
        return {"prompt": f"SUBREDDIT: r/advice\nTITLE: {words[:30]}\nPOST: {words}\nTL;DR:",
                "completion": f" {words[:40]}"}

    return _write_splits(out_dir, {"train": [row() for _ in range(n)], "validation": [row() for _ in range(8)]})


def copy_bundled(out_dir: Path) -> Path:
    return Path(shutil.copytree(TINY_MODEL, out_dir))
