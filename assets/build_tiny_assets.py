"""Build the bundled tiny models and tasks: the default one the scripts train on, and a harder one.

    python assets/build_tiny_assets.py                    # the default task
    python assets/build_tiny_assets.py --task addition3   # the harder task

It writes, next to this file:
    addition/train.jsonl, addition/test.jsonl     single-digit addition, {"prompt": "3+4=", "answer": "7"}
    tiny-llama-addition/                          a ~0.4M-parameter Llama with a character-level tokenizer,
                                                  briefly supervised on the train split with TRL's SFTTrainer
or, with --task addition3:
    addition3/train.jsonl, addition3/test.jsonl   the sum of three digits, {"prompt": "3+4+5=", "answer": "12"}
    tiny-llama-addition3/                         the same architecture and tokenizer, supervised the same way

The SFT is deliberately short: the starting policy answers correctly only part of the time
when sampled at temperature 1 (about half on `addition`, about a fifth on `addition3`), so RL
has something to improve. The outputs are committed,
so nobody needs to run this; it exists so the files can be rebuilt and audited. Runs on CPU
in well under a minute and is seeded, so a rebuild gives the same data and a similar model
(bit-exactness across machines is not promised by torch).

The tokenizer has no pad token on purpose, like GPT-2's: the training scripts must cope.
The architecture is Llama rather than Qwen2 because transformers 5 loads any `qwen2` checkpoint
with Qwen2's own byte-level tokenizer, which would silently drop this tokenizer's spaces.
"""

import argparse
import json
import random
from pathlib import Path

import torch
from datasets import Dataset
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, set_seed
from trl import SFTConfig, SFTTrainer

HERE = Path(__file__).resolve().parent
EOS = "<|endoftext|>"
UNK = "<unk>"


def build_tokenizer() -> PreTrainedTokenizerFast:
    # One token per character: printable ASCII and newline, plus eos and unk. Decoding fuses tokens back together.
    chars = [chr(i) for i in range(32, 127)] + ["\n"]
    vocab = {tok: i for i, tok in enumerate([EOS, UNK] + chars)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, unk_token=UNK, model_max_length=64)


def all_rows(task: str) -> list[dict]:
    digits = range(10)
    if task == "addition":
        return [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a in digits for b in digits]
    return [{"prompt": f"{a}+{b}+{c}=", "answer": str(a + b + c)} for a in digits for b in digits for c in digits]


# task: (default SFT steps, test prompts). addition3 has 1000 prompts; 100 held out keep its eval cheap.
TASKS = {"addition": (150, 20), "addition3": (200, 100)}


def build_data(task: str, seed: int, n_test: int) -> tuple[list[dict], list[dict]]:
    rows = all_rows(task)
    random.Random(seed).shuffle(rows)
    return rows[n_test:], rows[:n_test]


@torch.no_grad()
def sampled_accuracy(model, tokenizer, rows: list[dict], samples: int = 8) -> float:
    """Fraction of temperature-1 samples whose text equals the answer: the same thing `accuracy` rewards."""
    correct = 0
    for row in rows:
        ids = tokenizer(row["prompt"], return_tensors="pt").input_ids.repeat(samples, 1)
        out = model.generate(ids, do_sample=True, temperature=1.0, max_new_tokens=4,
                             pad_token_id=tokenizer.eos_token_id)
        texts = tokenizer.batch_decode(out[:, ids.shape[1] :], skip_special_tokens=True)
        correct += sum(t.strip() == row["answer"] for t in texts)
    return correct / (samples * len(rows))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=sorted(TASKS), default="addition")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sft_steps", type=int, help="few on purpose, to leave room for RL (default: the task's)")
    parser.add_argument("--n_test", type=int, help="held-out prompts (default: the task's)")
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    default_steps, default_n_test = TASKS[args.task]
    sft_steps = args.sft_steps or default_steps
    set_seed(args.seed)

    # ---- Data ----
    train, test = build_data(args.task, args.seed, args.n_test or default_n_test)
    data_dir = args.out / args.task
    data_dir.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", train), ("test", test)):
        with open(data_dir / f"{name}.jsonl", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)

    # ---- Model ----
    tokenizer = build_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=96,
        intermediate_size=384,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        pad_token_id=None,
    )
    model = LlamaForCausalLM(config)
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, vocab {len(tokenizer)}")

    # ---- SFT ----
    # SFTTrainer needs a pad token; use eos for this step only, and save the tokenizer without it.
    sft_tokenizer = build_tokenizer()
    sft_tokenizer.pad_token = EOS
    sft_data = Dataset.from_list([{"prompt": r["prompt"], "completion": r["answer"]} for r in train])
    sft_args = SFTConfig(
        output_dir=str(args.out / ".sft_tmp"),
        max_steps=sft_steps,
        per_device_train_batch_size=32,
        learning_rate=3e-3,
        lr_scheduler_type="constant",
        logging_steps=20,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        seed=args.seed,
    )
    SFTTrainer(model=model, args=sft_args, train_dataset=sft_data, processing_class=sft_tokenizer).train()
    model.eval()
    print(f"sampled (T=1) accuracy after SFT: train {sampled_accuracy(model, tokenizer, train):.2f}, "
          f"test {sampled_accuracy(model, tokenizer, test):.2f}")

    # ---- Save ----
    model_dir = args.out / f"tiny-llama-{args.task}"
    # The pad GRPOTrainer gives a tokenizer without one, its eos: the configs agree with it, and nothing warns
    model.config.pad_token_id = model.generation_config.pad_token_id = tokenizer.eos_token_id
    model.config.use_cache = True  # SFT turned the KV cache off; generation wants it
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    print(f"wrote {model_dir} and {data_dir}")


if __name__ == "__main__":
    main()
