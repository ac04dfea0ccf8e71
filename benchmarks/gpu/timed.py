"""benchmarks/timed_run.py (step clock, TRL's profiling timers, nn.Linear FLOP count) plus, in the same record, the
seconds spent in `generate` up to each log, and the CUDA allocator's peak:

    BENCH_RECORD=record.json python benchmarks/gpu/timed.py SCRIPT ARGS...

A log's interval minus the generate seconds inside it is the step's training part, for GRPO and PPO alike (PPOTrainer
has no profiling timers of its own)."""

import atexit
import os
import runpy
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import timed_run  # noqa: E402  (patches Trainer.train, nn.Linear.forward and TRL's profiling on import)
import torch  # noqa: E402
from transformers import GenerationMixin  # noqa: E402

timed_run.RECORD["generate_calls"] = []  # [time.time() at the end, seconds]
_generate = GenerationMixin.generate


def timed_generate(self, *args, **kwargs):
    start = time.perf_counter()
    out = _generate(self, *args, **kwargs)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    timed_run.RECORD["generate_calls"].append([time.time(), time.perf_counter() - start])
    return out


GenerationMixin.generate = timed_generate


def cuda_peak():
    if torch.cuda.is_available():
        timed_run.RECORD["cuda_max_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
        timed_run.RECORD["cuda_max_reserved_gib"] = torch.cuda.max_memory_reserved() / 2**30


atexit.register(cuda_peak)  # registered after timed_run's own, so it runs first and that one writes it
script = os.path.abspath(sys.argv[1])
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(script)
runpy.run_path(script, run_name="__main__")
