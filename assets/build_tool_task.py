"""Build the bundled tool task: three-digit addition, which the tiny model cannot do in its head but can do with
the `calculator` tool, and a tiny chat model that calls the tool on only some prompts.

    python assets/build_tool_task.py

It writes, next to this file:
    tool-addition/train.jsonl, tool-addition/test.jsonl
        {"prompt": [{"role": "user", "content": "964+494="}], "answer": "1458"}
    tiny-llama-tools/   a ~0.5M-parameter Llama with Qwen2.5's chat template, which trl recognises for tool-call
                        parsing (trl.chat_template_utils.add_response_schema), and a byte-level BPE tokenizer
                        trained on this task's conversations, digits one per token

The SFT shows the model conversations rendered by the chat template, with the calculator's schema in the system
prompt. Its first turn calls the calculator on `--tool_fraction` of the prompts and answers at once on the rest;
and every prompt also teaches the answer that follows the calculator's result (reading it back is the hard part
for a model this small). So the starting policy calls the tool on some prompts (0.28 of samples), and is then
mostly right, and answers from memory, always wrongly, on the others; GRPO with the `accuracy` reward
raises both the tool-call rate and the accuracy (tests/e2e/test_tools.py, BENCHMARKS.md section 4). The outputs are
committed; this script exists so they can be rebuilt and audited. Seeded; about 4 minutes on 2 CPU cores. It
prints a check of the result: tool-call rate 0.28, accuracy 0.80 with a call and 0.00 without, for the
committed model.

Why the tokenizer: Qwen2.5's template puts ~700 characters of tool instructions and schema in every prompt. A
character-level tokenizer makes that 740 tokens; BPE trained on the rendered conversations merges the fixed text
into a few tokens (47 for the whole prompt), and keeps each digit a token of its own, as arithmetic needs.
The prompt text is the template's and the calculator's docstring: change either and rebuild.
"""

import argparse
import json
import random
import re
import sys
from pathlib import Path

import torch
from datasets import Dataset
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, set_seed
from trl import SFTConfig, SFTTrainer
from trl.chat_template_utils import qwen2_5_chat_template

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from extras.tools import calculator  # noqa: E402

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # Qwen2.5's: pad, turn start, turn end (= eos)
MARKERS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)


def problem(rng: random.Random) -> dict:
    a, b = rng.randint(100, 999), rng.randint(100, 999)
    return {"prompt": [{"role": "user", "content": f"{a}+{b}="}], "answer": str(a + b)}


def build_data(rng: random.Random, n_train: int, n_test: int) -> tuple[list[dict], list[dict]]:
    """(train, test): distinct problems, drawn from `rng`."""
    rows, seen = [], set()
    while len(rows) < n_train + n_test:
        row = problem(rng)
        if row["prompt"][0]["content"] not in seen:
            seen.add(row["prompt"][0]["content"])
            rows.append(row)
    return rows[n_test:], rows[:n_test]


def with_tool(row: dict) -> list[dict]:
    """The conversation in which the model calls the calculator, reads the result and repeats it."""
    expression = row["prompt"][-1]["content"].removesuffix("=")
    call = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": expression}}}
    return [*row["prompt"], {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "name": "calculator", "content": calculator(expression)},
            {"role": "assistant", "content": row["answer"]}]


def without_tool(row: dict) -> list[dict]:
    return [*row["prompt"], {"role": "assistant", "content": row["answer"]}]


def build_tokenizer(conversations: list[list[dict]], vocab_size: int) -> PreTrainedTokenizerFast:
    template = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"_": 0}, unk_token="_")))
    template.chat_template = qwen2_5_chat_template
    texts = [template.apply_chat_template(c, tools=[calculator], tokenize=False) for c in conversations]
    bpe = Tokenizer(models.BPE())
    # Digits one per token; no split at spaces, so the template's fixed text merges into long tokens.
    bpe.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r"\d"), behavior="isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        model_max_length=256)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    tokenizer.add_tokens(MARKERS)  # as in Qwen2.5: tokens of their own, not special, so they survive decoding
    tokenizer.chat_template = qwen2_5_chat_template
    return tokenizer


def sft_examples(tokenizer, rows: list[dict], tool_fraction: float, rng: random.Random) -> list[dict]:
    """Prompt/completion pairs, cut where the model speaks. Per row: the first turn calls the calculator with
    probability `tool_fraction`, else answers at once; and, whatever the first turn did, the answer that follows
    the tool's result, so that every row teaches reading the result while only some teach calling the tool."""
    examples = []
    for row in rows:
        called = with_tool(row)
        first = called if rng.random() < tool_fraction else without_tool(row)
        examples.append(cut(tokenizer, first, len(row["prompt"])))
        examples.append(cut(tokenizer, called, len(called) - 1))
    return examples


def cut(tokenizer, conversation: list[dict], turn: int) -> dict:
    """The text up to assistant message `turn` as the prompt, that message (up to its <|im_end|>, the eos) as the
    completion, both as the chat template renders the whole conversation."""
    prompt = tokenizer.apply_chat_template(conversation[:turn], tools=[calculator], tokenize=False,
                                           add_generation_prompt=True)
    full = tokenizer.apply_chat_template(conversation[: turn + 1], tools=[calculator], tokenize=False)
    return {"prompt": prompt, "completion": full[len(prompt):].removesuffix("\n")}


@torch.no_grad()
def tool_episodes(model, tokenizer, rows: list[dict], samples: int = 4, max_new_tokens: int = 24) -> dict:
    """Tool-call rate and accuracy, with and without a call, over `samples` temperature-1 episodes per row, with one
    round of tool calls as GRPO runs them. A check of the build; the measurement is the GRPO run's own metrics."""
    calls = correct = correct_with_call = 0
    for row in [row for row in rows for _ in range(samples)]:
        conversation = list(row["prompt"])
        text = generate(model, tokenizer, conversation, max_new_tokens)
        if match := TOOL_CALL.search(text):
            calls += 1
            try:
                call = json.loads(match.group(1))
                result = calculator(**call["arguments"])
            except (ValueError, KeyError, TypeError):
                continue  # a malformed call: the episode fails
            conversation += [
                {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": call}]},
                {"role": "tool", "name": "calculator", "content": result},
            ]
            text = generate(model, tokenizer, conversation, max_new_tokens)
        right = text.removesuffix(tokenizer.eos_token).strip() == row["answer"]
        correct += right
        correct_with_call += right and match is not None
    episodes = samples * len(rows)
    return {"tool-call rate": calls / episodes, "accuracy": correct / episodes,
            "accuracy with a call": correct_with_call / max(calls, 1),
            "accuracy without": (correct - correct_with_call) / max(episodes - calls, 1)}


def generate(model, tokenizer, conversation: list[dict], max_new_tokens: int) -> str:
    ids = tokenizer.apply_chat_template(conversation, tools=[calculator], add_generation_prompt=True,
                                        return_tensors="pt", return_dict=True)["input_ids"]
    out = model.generate(ids, do_sample=True, temperature=1.0, max_new_tokens=max_new_tokens,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(out[0, ids.shape[1]:])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n_train", type=int, default=2000)
    parser.add_argument("--n_test", type=int, default=200)
    parser.add_argument("--tool_fraction", type=float, default=0.3, help="SFT conversations that call the tool")
    parser.add_argument("--sft_steps", type=int, default=1200)
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    set_seed(args.seed)
    rng = random.Random(args.seed)

    # ---- Data ----
    train, test = build_data(rng, args.n_train, args.n_test)
    data_dir = args.out / "tool-addition"
    data_dir.mkdir(parents=True, exist_ok=True)
    for name, split in (("train", train), ("test", test)):
        with open(data_dir / f"{name}.jsonl", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in split)

    # ---- Tokenizer and model ----
    tokenizer = build_tokenizer([c(row) for row in train[:500] for c in (with_tool, without_tool)], vocab_size=1024)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=96, intermediate_size=384, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
    )
    model = LlamaForCausalLM(config)
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, vocab {len(tokenizer)}; "
          f"prompt: {len(tokenizer.apply_chat_template(train[0]['prompt'], tools=[calculator])['input_ids'])} tokens")

    # ---- SFT ----
    examples = sft_examples(tokenizer, train, args.tool_fraction, rng)
    sft_args = SFTConfig(
        output_dir=str(args.out / ".sft_tmp"), max_steps=args.sft_steps, per_device_train_batch_size=32,
        learning_rate=3e-3, lr_scheduler_type="cosine", logging_steps=50, save_strategy="no", report_to=[],
        use_cpu=True, bf16=False, seed=args.seed, disable_tqdm=True,
    )
    SFTTrainer(model=model, args=sft_args, train_dataset=Dataset.from_list(examples),
               processing_class=tokenizer).train()
    model.eval()
    model.config.use_cache = True  # SFT turned the KV cache off; generation wants it
    report = tool_episodes(model, tokenizer, test[:50])
    print("after SFT, sampled at T=1 on 50 test prompts:", ", ".join(f"{k} {v:.2f}" for k, v in report.items()))

    # ---- Save ----
    model_dir = args.out / "tiny-llama-tools"
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    print(f"wrote {model_dir} and {data_dir}")


if __name__ == "__main__":
    main()
