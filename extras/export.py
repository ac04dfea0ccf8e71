"""After training: a run's model merged into one standalone folder, written as a GGUF file, and looked at
(docs/after-training.md). Each writes only new files, beside the run's:

    python -m extras.export RUN_DIR --merge                  # RUN_DIR/merged: the model alone, LoRA merged in
    python -m extras.export RUN_DIR --gguf q8_0              # RUN_DIR/gguf/model-q8_0.gguf: llama.cpp, Ollama
    python -m extras.export RUN_DIR --chat "What is 12 + 13?"    # the model answering, sampled as the run sampled
    python -m extras.export RUN_DIR --chat                   # prompts typed one after another (an empty line ends)

RUN_DIR is a run's --output_dir (or a checkpoint in it): a full fine-tune, or a LoRA adapter, merged into the base
its adapter_config.json names (a QLoRA adapter into its base dequantized: the weights it trained against). --chat
also takes a .gguf file. The GGUF holds what llama.cpp reads: the architecture's hyperparameters, the tokenizer
(byte-level BPE: its tokens, merges, special tokens, pre-tokenizer and chat template) and each weight, for the Llama
and Qwen2 families; any other stops in one line naming llama.cpp's own converter. `gguf` writes and quantizes.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

# The GGUF types `gguf` writes: name -> (its tensor type, llama.cpp's file type). Norms and biases stay f32, and a
# weight whose rows do not split into the type's blocks too (SmolLM2's 576-wide rows fit none of the k-quants)
TYPES = {"f32": ("F32", "ALL_F32"), "f16": ("F16", "MOSTLY_F16"), "bf16": ("BF16", "MOSTLY_BF16"),
         "q8_0": ("Q8_0", "MOSTLY_Q8_0"), "q5_1": ("Q5_1", "MOSTLY_Q5_1"), "q5_0": ("Q5_0", "MOSTLY_Q5_0"),
         "q4_1": ("Q4_1", "MOSTLY_Q4_1"), "q4_0": ("Q4_0", "MOSTLY_Q4_0")}
# transformers' architecture -> gguf's, and whether llama.cpp wants Q and K's rows in its rotary order (Llama's)
ARCHITECTURES = {"LlamaForCausalLM": ("LLAMA", True), "Qwen2ForCausalLM": ("QWEN2", False)}
CONVERTER = "llama.cpp's convert_hf_to_gguf.py converts the merged folder (--merge)"


def trained_model(run: Path, dtype=torch.float32):
    """(model, tokenizer) of a run's folder: a full model as saved, or a LoRA adapter merged into its base. A QLoRA
    adapter (its run's summary.json says --load_in_4bit/8bit) merges into its base quantized as it trained, then
    dequantized: the weights its adapter learned against, not the base's own."""
    tokenizer = AutoTokenizer.from_pretrained(run)
    if not (run / "adapter_config.json").exists():
        return AutoModelForCausalLM.from_pretrained(run, dtype=dtype), tokenizer
    from peft import PeftConfig, PeftModel

    base = PeftConfig.from_pretrained(run).base_model_name_or_path
    settings = run_settings(run)
    quantization = quantization_of(run, settings)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype, quantization_config=quantization,
                                                 revision=settings.get("model_revision"))  # the run's base
    if quantization is not None:
        model = model.dequantize(dtype=dtype)
    return PeftModel.from_pretrained(model, run).merge_and_unload(), tokenizer


def quantization_of(run: Path, settings: dict):
    """The BitsAndBytesConfig a QLoRA run loaded its base with, from its summary.json's `settings`, or None."""
    if not settings:  # a run that did not finish writes none: its adapter is merged into the base as it is
        print(f"no summary.json beside {run}: the adapter merges into its base as saved (a QLoRA adapter's base "
              "would be quantized first: finish or resume its run for its summary.json)")
    if not (settings.get("load_in_4bit") or settings.get("load_in_8bit")):
        return None
    from trl import ModelConfig, get_quantization_config

    known = set(ModelConfig.__dataclass_fields__)
    return get_quantization_config(ModelConfig(**{key: value for key, value in settings.items() if key in known}))


def new_path(path: Path) -> Path:
    """`path`, where nothing is yet: an export writes beside the run, and never over a file (docs/outputs.md)."""
    if path.exists() and not (path.is_dir() and not any(path.iterdir())):
        sys.exit(f"error: {path} exists: move it, or name another place with --out")
    return path


def merge(model, tokenizer, out: Path) -> None:
    """The model alone in `out`: weights, config, generation config, tokenizer and its chat template."""
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    print(f"merged: {out} ({sum(f.stat().st_size for f in out.iterdir()) / 2**20:.0f} MiB), a model folder that "
          f"transformers, TRL and these scripts load (--model_name_or_path {out})")


def pre_tokenizer(backend: dict, model_type: str) -> str:
    """llama.cpp's name for how the tokenizer splits text before its merges, read from its tokenizer.json
    (`backend`)."""
    if model_type == "qwen2":
        return "qwen2"
    pre = backend.get("pre_tokenizer") or {}
    parts = pre.get("pretokenizers", [pre])
    kinds = [(part.get("type"), part.get("individual_digits"), part.get("use_regex")) for part in parts]
    if kinds == [("ByteLevel", None, True)]:
        return "gpt2"
    if kinds == [("Digits", True, None), ("ByteLevel", None, True)]:
        return "smollm"
    sys.exit(f"error: the tokenizer's pre-tokenizer ({[kind for kind, _, _ in kinds]}) is none this export knows "
             f"llama.cpp's name for; {CONVERTER}")


def write_gguf(model, tokenizer, out: Path, kind: str) -> None:
    """`model` and `tokenizer` as one GGUF file of `kind` (TYPES) at `out`."""
    import gguf
    import numpy as np

    config = model.config
    architecture = (config.architectures or [type(model).__name__])[0]
    if architecture not in ARCHITECTURES:
        sys.exit(f"error: GGUF export writes the Llama and Qwen2 families; this is {architecture}: {CONVERTER}")
    arch_name, rotary_order = ARCHITECTURES[architecture]
    backend = json.loads(tokenizer.backend_tokenizer.to_str())
    if backend["model"]["type"] != "BPE" or backend["model"].get("byte_fallback"):
        sys.exit(f"error: GGUF export writes byte-level BPE tokenizers (SmolLM2's, Qwen2's); this one is "
                 f"{backend['model']['type']}: {CONVERTER}")
    rope = getattr(config, "rope_parameters", None) or {"rope_theta": getattr(config, "rope_theta", 10000.0)}
    if rope.get("rope_type", "default") != "default":
        sys.exit(f"error: GGUF export writes plain rotary embeddings; these are {rope['rope_type']}: {CONVERTER}")
    arch = getattr(gguf.MODEL_ARCH, arch_name)
    tensor_type = getattr(gguf.GGMLQuantizationType, TYPES[kind][0])
    file_type = getattr(gguf.LlamaFileType, TYPES[kind][1])
    heads = config.num_attention_heads
    kv_heads = config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads

    out.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(out, gguf.MODEL_ARCH_NAMES[arch])
    writer.add_name(Path(getattr(config, "_name_or_path", "") or out.stem).name)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(rope["rope_theta"])
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_file_type(file_type)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)

    # The tokenizer: its tokens by id (the embedding's rows past them as unused padding), each one's kind, and
    # SpecialVocab's merges, special token ids, add_bos/eos and chat template, read from the tokenizer's own files
    rows = model.get_input_embeddings().weight.shape[0]
    vocab = {token_id: token for token, token_id in tokenizer.get_vocab().items()}
    added = {token_id: entry.special for token_id, entry in tokenizer.added_tokens_decoder.items()}
    tokens = [vocab.get(i, f"[PAD{i}]") for i in range(rows)]
    kinds = [gguf.TokenType.UNUSED if i not in vocab else gguf.TokenType.CONTROL if added.get(i) else
             gguf.TokenType.USER_DEFINED if i in added else gguf.TokenType.NORMAL for i in range(rows)]
    writer.add_vocab_size(rows)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre_tokenizer(backend, config.model_type))
    writer.add_token_list(tokens)
    writer.add_token_types(kinds)
    with tempfile.TemporaryDirectory() as folder:
        tokenizer.save_pretrained(folder)
        gguf.SpecialVocab(folder, load_merges=True, n_vocab=rows).add_to_gguf(writer, quiet=True)

    names = gguf.get_tensor_name_map(arch, config.num_hidden_layers)
    tied = getattr(config, "tie_word_embeddings", False)
    block = gguf.GGML_QUANT_SIZES[tensor_type][0]
    for name, tensor in model.state_dict().items():
        if tied and name == "lm_head.weight":
            continue  # llama.cpp reads the output layer from token_embd where there is no output.weight
        data = tensor.detach().float().numpy()
        if rotary_order and name.endswith(("q_proj.weight", "k_proj.weight")):  # HF's rotary halves, per head,
            count = heads if "q_proj" in name else kv_heads  # as llama.cpp's interleaved pairs
            data = data.reshape(count, 2, data.shape[0] // count // 2, -1).swapaxes(1, 2).reshape(data.shape)
        gguf_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            sys.exit(f"error: no GGUF name for {name}: {CONVERTER}")
        if data.ndim == 2 and tensor_type != gguf.GGMLQuantizationType.F32 and data.shape[1] % block == 0:
            writer.add_tensor(gguf_name, gguf.quants.quantize(np.ascontiguousarray(data), tensor_type),
                              raw_dtype=tensor_type)
        else:
            writer.add_tensor(gguf_name, np.ascontiguousarray(data, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"gguf: {out} ({out.stat().st_size / 2**20:.0f} MiB, {kind}), for llama.cpp (llama-cli -m {out}), "
          f"Ollama (a Modelfile's FROM {out}) or LM Studio")


def gguf_model(path: Path):
    """(model, tokenizer) of a GGUF file, as transformers reads it: dequantized to fp32."""
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    return model, AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


def run_settings(path: Path) -> dict:
    """The settings of the run whose summary.json is in `path`'s folder (or, for a checkpoint or a file, its
    parent's), {} where none is."""
    from extras.summary import run_settings as read

    folder = path.parent if path.is_file() else path
    return read(folder / "summary.json") or read(folder.parent / "summary.json")


def chat(model, tokenizer, settings: dict, prompts: list[str]) -> None:
    """Each prompt answered through the chat template (with the run's system prompt), sampled as the run sampled
    (its temperature, top-p/k, min-p, repetition penalty and completion length), streamed as it comes."""
    from transformers import TextStreamer

    length = settings.get("max_completion_length") or settings.get("response_length") or 256
    sampling = {key: settings[key] for key in ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
                if settings.get(key) is not None}
    if "response_length" in settings:  # PPO's: trl 1.12 samples with no top-k or top-p, whatever the model's config
        sampling |= {"top_k": 0, "top_p": 1.0}
    print(f"sampling as the run did: {sampling}, up to {length} tokens" if settings else
          f"sampling at the model's defaults, up to {length} tokens (no summary.json beside it)")
    model.eval()
    typed = not prompts
    while True:
        prompt = prompts.pop(0) if prompts else (input("\nprompt> ") if typed else "")
        if not prompt:
            return
        system = settings.get("system_prompt")
        if tokenizer.chat_template:
            messages = ([{"role": "system", "content": system}] if system else []) + [
                {"role": "user", "content": prompt}]
            inputs = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                                   return_dict=True, **(settings.get("chat_template_kwargs") or {}))
        else:
            inputs = tokenizer(prompt, return_tensors="pt")
        if not typed:
            print(f"\n> {prompt}")
        with torch.no_grad():
            model.generate(**inputs, max_new_tokens=length, do_sample=sampling.get("temperature", 1.0) > 0,
                           pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id, **sampling,
                           streamer=TextStreamer(tokenizer, skip_prompt=True, skip_special_tokens=True))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m extras.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a run's --output_dir or a checkpoint in it (--chat: or a .gguf)")
    parser.add_argument("--merge", action="store_true", help="the model alone, LoRA merged in: RUN/merged")
    parser.add_argument("--gguf", choices=TYPES, help="a GGUF file of this type: RUN/gguf/model-TYPE.gguf")
    parser.add_argument("--chat", nargs="*", metavar="PROMPT", help="answer these prompts, or those typed")
    parser.add_argument("--out", type=Path, help="where --merge or --gguf writes, in place of the defaults")
    args = parser.parse_args(argv)
    if not (args.merge or args.gguf or args.chat is not None):
        parser.error("nothing to do: give --merge, --gguf TYPE or --chat")
    if args.out and args.merge and args.gguf:
        parser.error("--out names one place: give --merge and --gguf in two commands")
    if not args.run.exists():
        sys.exit(f"error: {args.run}: no such run folder or file")
    if args.chat is not None and args.run.suffix == ".gguf":
        return chat(*gguf_model(args.run), run_settings(args.run), args.chat)
    # Beside a checkpoint, not in it (it is the run's, and listed as it is: docs/outputs.md); GGUF in a folder of its
    # own, where transformers reads it (a run's adapter_config.json would send it to the base)
    checkpoint = args.run.name.startswith("checkpoint-")
    folder, name = (args.run.parent, f"-{args.run.name}") if checkpoint else (args.run, "")
    merged = new_path(args.out or folder / f"merged{name}") if args.merge else None
    gguf_file = new_path(args.out or folder / "gguf" / f"model{name}-{args.gguf}.gguf") if args.gguf else None
    model, tokenizer = trained_model(args.run)
    if merged:
        merge(model, tokenizer, merged)
    if gguf_file:
        write_gguf(model, tokenizer, gguf_file, args.gguf)
    if args.chat is not None:
        chat(model, tokenizer, run_settings(args.run), args.chat)


if __name__ == "__main__":
    main()
