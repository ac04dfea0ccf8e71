"""--lora_target_modules checked against the model's own module names before anything loads, read from its checkpoint's
weight names (checks.py calls it where a run names LoRA targets).
"""

import re
import sys
from pathlib import Path


def check_lora_targets(targets: list[str] | str, model: str, revision: str) -> None:
    """Each of --lora_target_modules names a module of the model (peft matches the end of a name; TRL passes one
    name alone as a regular expression, which peft matches whole): peft would refuse a list none of which matches
    with a traceback, and silently train fewer modules when only some match. The module names are read from the
    checkpoint's weight names, in its safetensors headers: building the model, even empty, enters transformers'
    loading paths, and under ZeRO-3 DeepSpeed's zero.Init wraps that build and fails on every rank."""
    if targets == "all-linear":
        return
    weights = checkpoint_weights(model, revision)
    if not weights:  # a .bin checkpoint, a LoRA adapter's folder (--eval_only), or out of reach: peft checks it
        return
    modules = {name.rsplit(".", 1)[0] for name in weights}
    if isinstance(targets, str):
        missing = [] if any(re.fullmatch(targets, name) for name in modules) else [targets]
    else:
        missing = [t for t in targets if not any(name == t or name.endswith(f".{t}") for name in modules)]
    if missing:  # the layers' linear weights: two-dimensional, inside a numbered block
        layers = sorted({name.removesuffix(".weight").rsplit(".", 1)[-1] for name, shape in weights.items()
                         if name.endswith(".weight") and len(shape) == 2 and re.search(r"\.\d+\.", name)})
        sys.exit(f"error: --lora_target_modules {' '.join(missing)}: {model} has no such module; its layers' linear "
                 f"modules are {', '.join(layers)} (or give all-linear)")


def checkpoint_weights(model: str, revision: str | None) -> dict[str, list[int]]:
    """A checkpoint's weight names and shapes, from its safetensors headers alone: a local folder, the hub's cache,
    or the hub. Empty where it has none."""
    from safetensors import safe_open

    folder = Path(model)
    if not folder.is_dir():
        from huggingface_hub import constants, get_safetensors_metadata, try_to_load_from_cache

        if not constants.HF_HUB_OFFLINE:
            try:
                metadata = get_safetensors_metadata(model, revision=revision, timeout=5)
                return {name: info.shape for file in metadata.files_metadata.values()
                        for name, info in file.tensors.items()}
            except Exception:  # no safetensors, no such repository, or no network: the cache, else peft's check
                pass
        config = try_to_load_from_cache(model, "config.json", revision=revision)
        if not isinstance(config, str):
            return {}
        folder = Path(config).parent  # the cached snapshot
    shapes = {}
    for file in sorted(folder.glob("*.safetensors")):
        if file.name.startswith("adapter_model"):
            continue
        with safe_open(file, framework="pt") as weights:
            for name in weights.keys():
                shapes[name] = weights.get_slice(name).get_shape()
    return shapes
