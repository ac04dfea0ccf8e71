"""Versions of what the scripts import (and from where), the GPU, and its bf16 matmul rate: the yardstick for MFU.

    python benchmarks/gpu/env_check.py PEAK.json
"""

import importlib
import json
import os
import sys

import torch

for name in ["torch", "triton", "transformers", "trl", "datasets", "peft", "accelerate", "huggingface_hub",
             "tokenizers", "safetensors", "numpy", "pyarrow", "fsspec", "pandas", "regex", "math_verify", "gguf",
             "matplotlib", "yaml", "liger_kernel", "bitsandbytes", "deepspeed", "pydantic"]:
    try:
        module = importlib.import_module(name)
        where = os.path.dirname(os.path.dirname(getattr(module, "__file__", "") or ""))
        print(f"{name:16s} {str(getattr(module, '__version__', '?')):16s} {where}")
    except Exception as err:  # noqa: BLE001 -- a report: the import check that follows stops the run
        print(f"{name:16s} NOT IMPORTABLE: {type(err).__name__}: {str(err)[:200]}")

info = {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available()}
if torch.cuda.is_available():
    props = torch.cuda.get_device_properties(0)
    info.update(name=props.name, sms=props.multi_processor_count, mem_gib=round(props.total_memory / 2**30, 1),
                capability=list(torch.cuda.get_device_capability()), bf16_supported=torch.cuda.is_bf16_supported())
    n = 8192
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for _ in range(3):
        a @ b
    times = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    info["bf16_matmul_tflops_measured"] = round(2 * n**3 / sorted(times)[len(times) // 2] / 1e12, 1)
info["bf16_dense_peak_tflops_datasheet"] = 989.4  # H100 and H200 SXM, dense (NVIDIA's datasheets)
with open(sys.argv[1], "w") as f:
    json.dump(info, f, indent=1)
print(json.dumps(info))
