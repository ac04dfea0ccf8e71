"""The baseline for bench_overhead.py: a bare GRPOTrainer call with the settings grpo_trl_example.py resolves to.

No TrlParser and no checks, no callbacks of ours (RunRecorder, NoSignalWatchdog), no rewards.CheckedReward wrapper,
no metrics.jsonl / completions.jsonl / summary.json / plots, no final save_model (the trainer still writes its own
`checkpoint-<max_steps>/`, as in the script): just the config, the dataset, the reward and `trainer.train()`. The
reward is the same function (`rewards.accuracy_reward`), so both runs score the same completions with the same code;
run it with the repo root on PYTHONPATH (bench_overhead.py does).

    PYTHONPATH=. python benchmarks/bare_grpo.py --max_steps 30 --output_dir benchmarks/outputs/bare

The values below are grpo_trl_example.py's defaults for the bundled task (recipes/tiny/grpo.yaml and
device_defaults()). bench_overhead.py compares the resolved GRPOConfig of both runs and
prints any field that differs, so a drift between this file and the script shows up in the benchmark's output.
"""

import argparse
from pathlib import Path

import torch
from datasets import load_dataset
from trl import GRPOConfig, GRPOTrainer

from rewards import accuracy_reward

ASSETS = Path(__file__).resolve().parents[1] / "assets"

parser = argparse.ArgumentParser()
parser.add_argument("--model_name_or_path", default=str(ASSETS / "tiny-llama-addition"))
parser.add_argument("--dataset_name", default=str(ASSETS / "addition"))
parser.add_argument("--output_dir", default="benchmarks/outputs/bare")
parser.add_argument("--max_steps", type=int, default=300)
parser.add_argument("--logging_steps", type=int, default=1, help="the script's default is 10; the benchmark logs at 1")
parser.add_argument("--max_completion_length", type=int, default=4)
args = parser.parse_args()

config = GRPOConfig(
    output_dir=args.output_dir,
    max_steps=args.max_steps,
    logging_steps=args.logging_steps,
    max_completion_length=args.max_completion_length,
    learning_rate=3e-4,
    per_device_train_batch_size=16,
    num_generations=8,
    beta=0.04,
    gradient_checkpointing=False,
    eval_strategy="no",
    report_to="none",
    seed=42,
    use_cpu=not torch.cuda.is_available(),
    bf16=torch.cuda.is_available() and torch.cuda.is_bf16_supported(),
)
trainer = GRPOTrainer(
    model=args.model_name_or_path,
    reward_funcs=accuracy_reward,
    args=config,
    train_dataset=load_dataset(args.dataset_name)["train"],
)
trainer.train()
