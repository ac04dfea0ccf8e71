"""PPO's peak memory on the Qwen2.5-0.5B recipe (recipes/Qwen2.5-0.5B-Instruct/ppo/config_gsm8k.yaml): measured on
a CPU with a twin of Qwen's 151,936-row vocabulary at reduced sizes, a formula checked against them, and the formula
at the recipe's own settings, for a GPU.

    python benchmarks/ppo_memory.py            # 7 runs, ~6 min on 2 cores (BENCHMARKS.md, section 25)

trl 1.12's PPOTrainer generates with `output_scores`: the logits of every generated token, fp32 over the whole
vocabulary, for every completion of the rollout (B = per_device_train_batch_size x gradient_accumulation_steps a
process), not only for the chunk of local_rollout_forward_batch_size it is generating. It stacks each chunk's and pads
them into one tensor at the rollout's end, both alive then, and that tensor lives on through the update, where a
micro-batch of m = per_device_train_batch_size completions holds its logits over prompt and completion, their
gradient and the entropy's softmax. With V the vocabulary, L response_length and P the prompts' padded width:

    peak - base = max(2 B L V 4, B L V 4 + k m (P + L) V 4) bytes

with k measured here. The weights, gradients and Adam's moments are the base, measured at the smallest size (on a
GPU: ~10 GB for the recipe, a fp32 policy under LoRA and a fully trained fp32 value model of 0.5B parameters).
Completions run to their full length: the twin's random weights almost never sample one of its 3 stop tokens.
"""

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from harness import OUTPUTS, REPO, machine, matmul_gflops, run_logged

sys.path.insert(0, str(REPO / "tests"))
import model_zoo  # noqa: E402

RECIPE = REPO / "recipes" / "Qwen2.5-0.5B-Instruct" / "ppo" / "config_gsm8k.yaml"
ROW_MIB = model_zoo.QWEN25_VOCAB * 4 / 2**20  # one token's fp32 logits over Qwen's vocabulary
# (per_device_train_batch_size, gradient_accumulation_steps, response_length): the rollout B = the first two's product
POINTS = [(1, 1, 8), (4, 4, 64), (4, 8, 64), (4, 4, 128), (8, 2, 64), (2, 8, 96), (8, 4, 32)]
GPU_PROMPT_WIDTH = 256  # GSM8K's longest prompts with the recipe's system prompt in Qwen's tokenizer, padded: ~200-256


def predicted_mib(rollout: int, length: int, micro_batch: int, width: int, k: float) -> float:
    """peak - base, in MiB, by the formula above."""
    kept = rollout * length * ROW_MIB
    return max(2 * kept, kept + k * micro_batch * (width + length) * ROW_MIB)


def peak_mib(python: str, twin: Path, data: Path, out: Path, per_device: int, accumulation: int, length: int,
             log: Path, threads: int = 2) -> float:
    """One PPO update of the recipe on the twin, at these sizes: the process's peak RSS (ru_maxrss)."""
    return run_logged([python, "ppo_trl_example.py", "--config", str(RECIPE), "--model_name_or_path", str(twin),
                       "--dataset_name", str(data), "--output_dir", str(out), "--save_strategy", "no",
                       "--num_sample_generations", "0", "--num_ppo_epochs", "1",
                       "--per_device_train_batch_size", str(per_device),
                       "--gradient_accumulation_steps", str(accumulation),
                       "--local_rollout_forward_batch_size", str(2 * per_device),  # as the recipe's 32 for 16
                       "--response_length", str(length), "--total_episodes", str(per_device * accumulation)],
                      log, threads=threads)


def prompt_width(twin: Path, data: Path) -> int:
    """The longest training prompt in the twin's tokens, the chat template and the recipe's system prompt included:
    a batch's padded width is at most this."""
    import yaml
    from datasets import load_dataset
    from transformers import AutoTokenizer

    recipe = yaml.safe_load(RECIPE.read_text())
    tokenizer = AutoTokenizer.from_pretrained(twin)
    questions = load_dataset(str(data), "main", split="train")["question"]
    system = {"role": "system", "content": recipe["system_prompt"]}
    chats = [[system, {"role": "user", "content": question}] for question in questions]
    return max(len(tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True,
                                                 return_dict=True)["input_ids"]) for chat in chats)


def recipe_figures(k: float, width: int = GPU_PROMPT_WIDTH) -> dict:
    """The formula at the recipe's settings on one GPU, in GB (10^9 bytes), as its comment gives them."""
    import yaml

    recipe = yaml.safe_load(RECIPE.read_text())
    m, length = recipe["per_device_train_batch_size"], recipe["response_length"]
    rollout = m * recipe["gradient_accumulation_steps"]
    gb = 2**20 / 1e9
    kept = rollout * length * ROW_MIB * gb
    update = k * m * (width + length) * ROW_MIB * gb
    return {"rollout": rollout, "kept_scores_gb": round(kept, 1), "rollout_end_gb": round(2 * kept, 1),
            "update_gb": round(kept + update, 1), "peak_gb": round(max(2 * kept, kept + update), 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "ppo_memory.json")
    parser.add_argument("--python", default=str(REPO / ".venv-ppo" / "bin" / "python"), help="trl 1.12's")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ppo-memory-", dir=REPO / OUTPUTS if (REPO / OUTPUTS).is_dir() else None))
    twin, data = model_zoo.build_qwen2_twin(work / "twin"), model_zoo.write_gsm8k(work / "gsm8k")
    width = prompt_width(twin, data)
    rate = matmul_gflops(2)
    print(f"{machine()}; fp32 matmul {rate:.0f} GFLOP/s on 2 threads; the twin's prompts at most {width} tokens")
    rows = []
    for per_device, accumulation, length in POINTS:
        peak = peak_mib(args.python, twin, data, work / "out", per_device, accumulation, length,
                        work / f"{per_device}-{accumulation}-{length}.log")
        rows.append({"per_device_train_batch_size": per_device, "gradient_accumulation_steps": accumulation,
                     "rollout": per_device * accumulation, "response_length": length, "peak_mib": peak})
        print(rows[-1], flush=True)
    base = rows[0]["peak_mib"]
    for row in rows[1:]:  # k from each point where the update's term is the larger
        kept = row["rollout"] * row["response_length"] * ROW_MIB
        row["k"] = (row["peak_mib"] - base - kept) / (row["per_device_train_batch_size"]
                                                     * (width + row["response_length"]) * ROW_MIB)
    k = statistics.median(row["k"] for row in rows[1:])
    for row in rows[1:]:
        row["predicted_mib"] = round(predicted_mib(row["rollout"], row["response_length"],
                                                   row["per_device_train_batch_size"], width, k), 1)
        row["measured_mib"] = round(row["peak_mib"] - base, 1)
        row["error"] = round(row["predicted_mib"] / row["measured_mib"] - 1, 3)
    figures = recipe_figures(k)
    report = {"machine": machine(), "matmul_gflops_2_threads": round(rate, 1), "vocabulary": model_zoo.QWEN25_VOCAB,
              "prompt_width": width, "base_mib": base, "k": round(k, 2), "points": rows[1:], "recipe": figures,
              "command": "python benchmarks/ppo_memory.py"}
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nk = {k:.2f}; peak - base, measured against the formula:")
    for row in rows[1:]:
        print(f"  B {row['rollout']:3d}  L {row['response_length']:3d}  m {row['per_device_train_batch_size']}:  "
              f"{row['measured_mib']:6.0f} MiB measured, {row['predicted_mib']:6.0f} predicted ({row['error']:+.0%})")
    print(f"the recipe on one GPU (P = {GPU_PROMPT_WIDTH}): {figures}\nwritten to {args.out}")


if __name__ == "__main__":
    main()
