"""Random-weight stand-ins, built where they run, in seconds (weights of these shapes are too big to travel):

    python benchmarks/gpu/build_models.py OUT [SMOLLM2_TOKENIZER_FOLDER]

- OUT/qwen05b: Qwen2.5-0.5B-Instruct's exact shape (494M parameters, vocabulary 151936), bf16, with
  tests/model_zoo.py's byte-level BPE and Qwen2.5's chat template (trl ships it). The BPE has 600 tokens: ids the
  random model samples beyond them decode to nothing, so every completion runs to its full length and every reward is
  0: fine for time and memory, meaningless for learning.
- OUT/gsm8k: a dataset in GSM8K's layout for it.
- OUT/smollm2-random: SmolLM2-135M's shape with its real tokenizer and config, when its weights did not arrive.

With DRY=1 (the CPU rehearsal) the Qwen stand-in has Qwen's vocabulary but two tiny layers.
"""

import importlib.resources
import os
import sys
from pathlib import Path

import torch
from transformers import AutoConfig, AutoTokenizer, LlamaForCausalLM, PreTrainedTokenizerFast, Qwen2Config
from transformers import Qwen2ForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import model_zoo  # noqa: E402

out, dry = Path(sys.argv[1]), os.environ.get("DRY") == "1"
device = "cuda" if torch.cuda.is_available() else "cpu"
tokenizer = PreTrainedTokenizerFast(
    tokenizer_object=model_zoo.byte_level_bpe(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]),
    eos_token="<|im_end|>", pad_token="<|endoftext|>")
tokenizer.chat_template = (importlib.resources.files("trl") / "chat_templates" / "qwen2_5.jinja").read_text()
shape = (dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1)
         if dry else dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                          num_key_value_heads=2))
config = Qwen2Config(vocab_size=151936, max_position_embeddings=32768, rms_norm_eps=1e-6, tie_word_embeddings=True,
                     rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, bos_token_id=None,
                     eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, **shape)
torch.manual_seed(0)
with torch.device(device):
    model = Qwen2ForCausalLM(config).to(torch.bfloat16)
print("qwen2.5-0.5b-shaped:", sum(p.numel() for p in model.parameters()) / 1e6, "M parameters")
model.generation_config.eos_token_id = tokenizer.eos_token_id
model.generation_config.pad_token_id = tokenizer.pad_token_id
model.save_pretrained(out / "qwen05b")
tokenizer.save_pretrained(out / "qwen05b")
model_zoo.write_gsm8k(out / "gsm8k", n_train=320, n_test=16)

if len(sys.argv) > 2 and Path(sys.argv[2]).is_dir():
    tokenizer = AutoTokenizer.from_pretrained(sys.argv[2])
    with torch.device(device):
        model = LlamaForCausalLM(AutoConfig.from_pretrained(sys.argv[2]))  # fp32, as convert_gguf.py writes it
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out / "smollm2-random")
    tokenizer.save_pretrained(out / "smollm2-random")
    print("smollm2-random:", sum(p.numel() for p in model.parameters()) / 1e6, "M parameters")
