"""Build the ~71M-parameter Llama the memory and generation benchmarks train: random weights, seeded, saved locally.

    python benchmarks/build_model.py                          # -> benchmarks/outputs/llama-71m (~285 MB, not committed)
    python benchmarks/build_model.py --reward_model           # -> benchmarks/outputs/llama-71m-rm, for PPO

Hidden 768, MLP 2048, 10 layers, 12 heads (no GQA), the bundled character tokenizer (98 tokens, eos = 0), fp32.
With so small a vocabulary the embeddings are negligible and the parameters sit in the transformer blocks, as they
do in a real model: 10 x (4 x 768^2 attention + 3 x 768 x 2048 MLP) = 70.8M. The weights are random, so the model
writes random characters: that is enough to measure memory and time, which do not depend on what it writes
(completions nearly always run to `max_completion_length`: eos is 1 token in 98).

`--reward_model` builds the same network as a LlamaForSequenceClassification with one output (num_labels=1), the
reward model `ppo_trl_example.py --reward_model_path` takes, with the same tokenizer as the policy.
"""

import argparse
from pathlib import Path

import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, LlamaForSequenceClassification

BENCH = Path(__file__).resolve().parent
TOKENIZER = BENCH.parent / "assets" / "tiny-llama-addition"

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--output_dir", default=None, help="default: benchmarks/outputs/llama-71m[-rm]")
parser.add_argument("--reward_model", action="store_true", help="a one-output sequence classifier instead of a LM")
parser.add_argument("--hidden_size", type=int, default=768)
parser.add_argument("--intermediate_size", type=int, default=2048)
parser.add_argument("--num_hidden_layers", type=int, default=10)
parser.add_argument("--num_attention_heads", type=int, default=12)
args = parser.parse_args()

tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
config = LlamaConfig(
    vocab_size=len(tokenizer),
    hidden_size=args.hidden_size,
    intermediate_size=args.intermediate_size,
    num_hidden_layers=args.num_hidden_layers,
    num_attention_heads=args.num_attention_heads,
    num_key_value_heads=args.num_attention_heads,
    max_position_embeddings=256,
    tie_word_embeddings=True,
    eos_token_id=tokenizer.eos_token_id,
    pad_token_id=tokenizer.pad_token_id,
    bos_token_id=None,
    num_labels=1,
)
torch.manual_seed(0)
model = (LlamaForSequenceClassification if args.reward_model else LlamaForCausalLM)(config)
n = sum(p.numel() for p in model.parameters())
out = Path(args.output_dir or BENCH / "outputs" / ("llama-71m-rm" if args.reward_model else "llama-71m"))
model.save_pretrained(out)
tokenizer.save_pretrained(out)
print(f"{n / 1e6:.1f}M parameters ({n * 4 / 2**20:.0f} MiB in fp32) -> {out}")
