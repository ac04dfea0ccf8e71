"""Build a reward model the way RLHF builds one, offline: sample the policy's own completions on the train prompts,
label pairs of them by a true reward, and train a one-output sequence classifier on the pairs with TRL's
RewardTrainer. Then check it against the truth on pairs from the held-out prompts.

    python assets/build_reward_model.py     # -> assets/sentiment-reward-model (~9 min on 2 cores at 122 GFLOP/s)

By default: SmolLM2-135M-Instruct (assets/convert_gguf.py) on the sentiment task (assets/build_sentiment_task.py),
labelled by the `sentiment` reward (VADER). The reward model is the policy's first --layers transformer layers under a
new `score` head: the policy's tokenizer, which PPOTrainer requires (it feeds the reward model the policy's ids), at
a fraction of the policy's cost per step. It is not committed; rebuild it like the SmolLM2 conversion.

The two scripts read a completion differently: GRPOTrainer as chat-template text in the reward model's tokenizer,
PPOTrainer as the policy's prompt ids followed by the completion's ids up to its stop token. Each pair is written
both ways (extras/evaluation.py's encoders, which the held-out evaluation uses), so one model serves both; the
held-out agreement is reported for each reading. The saved tokenizer pads with the token PPO pads with, one that is
no stop token, so every reader finds a completion's true last token.

Written to --out: the model and tokenizer; samples.jsonl, every sampled completion with its true reward; and
build.json: the settings, the pairs' counts, the training loss, and the held-out agreement (the fraction of pairs in
which the model prefers the completion the true reward prefers), overall, by reading, and for the pairs whose true
rewards differ by 0.3 and 0.5 or more. What it reached, and what did not help: BENCHMARKS.md, section 18.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from importlib.metadata import PackageNotFoundError, version
from itertools import combinations
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the scripts, rewards.py and extras/

# It reads PPO's pad and stop tokens from ppo_trl_example.py, which imports trl 1.12's PPOTrainer: started from
# another environment (setup.sh's .venv, the newest trl), it goes on in .venv-ppo, as the PPO script does.
PPO_VENV = (HERE.parent / ".venv-ppo").resolve()
if __name__ == "__main__":
    try:
        trl = tuple(map(int, version("trl").split(".")[:2]))
    except PackageNotFoundError:  # a Python without trl: the system's, or another project's
        trl = None
    if (trl is None or trl >= (1, 13)) and (PPO_VENV / "bin" / "python").exists() and Path(sys.prefix).resolve() != (
            PPO_VENV):
        os.execv(PPO_VENV / "bin" / "python", [PPO_VENV / "bin" / "python", *sys.argv])
    if trl is None:
        sys.exit(f"error: this Python ({sys.executable}) has no trl: run it with .venv-ppo/bin/python, which bash "
                 "setup.sh makes")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import (AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer,  # noqa: E402
                          GenerationConfig, set_seed)
from trl import RewardConfig, RewardTrainer  # noqa: E402

from extras.evaluation import (RewardModelReward, Sampling, generate, prompt_token_ids, score,  # noqa: E402
                               text_encoder, up_to_first)
from grpo_trl_example import load_prompts  # noqa: E402
from ppo_trl_example import set_ppo_pad_token, stop_token_ids  # noqa: E402
from rewards import get_reward_funcs  # noqa: E402


def sample(policy, tokenizer, dataset, args, stops) -> dict:
    """The policy's --samples completions for each prompt, sampled as the recipes sample, and their true rewards:
    {"prompt", "texts", "ids", "rewards"}, each [prompt][...]."""
    dataset = dataset.map(lambda p: {"input_ids": prompt_token_ids(tokenizer, p)}, input_columns="prompt")
    config = GenerationConfig(max_new_tokens=args.max_new_tokens, do_sample=True, temperature=args.temperature,
                              top_k=0, top_p=1.0, eos_token_id=sorted(stops), pad_token_id=tokenizer.pad_token_id)
    texts, ids = generate(policy, tokenizer, dataset["input_ids"], args.samples, Sampling(config, up_to_first(stops)),
                          args.batch_size)
    rows = dataset.remove_columns("input_ids").to_dict()
    true_reward = get_reward_funcs([args.reward], args.max_new_tokens)[0]
    return {"prompt": rows["prompt"], "texts": texts, "ids": ids, "rewards": score(true_reward, rows, texts, ids)}


def pairs(samples: dict, margin: float, encoders: dict) -> list[dict]:
    """Every two completions of one prompt whose true rewards differ by at least `margin`, the better one chosen,
    written once by each of `encoders`: {"chosen_ids", "rejected_ids", "form", "gap"}."""
    out = []
    for prompt, texts, ids, rewards in zip(*samples.values(), strict=True):
        for i, j in combinations(range(len(texts)), 2):
            if None in (rewards[i], rewards[j]) or abs(rewards[i] - rewards[j]) < margin or rewards[i] == rewards[j]:
                continue
            better, worse = (i, j) if rewards[i] > rewards[j] else (j, i)
            for form, encode in encoders.items():
                out.append({"chosen_ids": encode(prompt, texts[better], ids[better]),
                            "rejected_ids": encode(prompt, texts[worse], ids[worse]),
                            "form": form, "gap": abs(rewards[i] - rewards[j])})
    return out


def agreement(model, test_pairs: list[dict], pad_token_id: int, batch_size: int) -> dict:
    """The fraction of pairs in which the model scores the chosen completion higher, over all and by form."""
    rows = [p[key] for p in test_pairs for key in ("chosen_ids", "rejected_ids")]
    # the evaluation's scorer, on ids already encoded in each reading
    scorer = RewardModelReward(model.eval(), "reward_model", lambda prompt, completion, ids: ids, pad_token_id,
                               batch_size)
    scores = scorer(prompts=rows, completions=rows, completion_ids=rows)
    right = [c > r for c, r in zip(scores[::2], scores[1::2], strict=True)]
    forms = sorted({p["form"] for p in test_pairs})
    result = {"all": round(sum(right) / len(right), 3), "pairs": len(right) // len(forms)}  # each pair, each reading
    groups = {form: lambda p, form=form: p["form"] == form for form in forms}
    groups |= {f"gap>={gap}": lambda p, gap=gap: p["gap"] >= gap for gap in (0.3, 0.5)}  # the clearer preferences
    for name, member in groups.items():
        mine = [ok for ok, p in zip(right, test_pairs, strict=True) if member(p)]
        result[name] = round(sum(mine) / len(mine), 3) if mine else None
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", default=str(HERE / "SmolLM2-135M-Instruct"), help="whose completions are paired")
    parser.add_argument("--dataset_name", default=str(HERE / "sentiment"), help="prompts, train and test splits")
    parser.add_argument("--system_prompt", default="Be brief.", help="as the recipes set it")
    parser.add_argument("--reward", default="sentiment", help="the true reward: a name in rewards.py's registry")
    parser.add_argument("--prompts", type=int, default=128, help="train prompts sampled")
    parser.add_argument("--test_prompts", type=int, default=64, help="held-out prompts sampled for the agreement")
    parser.add_argument("--samples", type=int, default=4, help="completions per prompt: up to 6 pairs from 4")
    parser.add_argument("--max_new_tokens", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--margin", type=float, default=0.1, help="the least true-reward gap that makes a pair")
    parser.add_argument("--layers", type=int, default=4, help="the policy's first layers, kept in the reward model")
    parser.add_argument("--epochs", type=float, default=1, help="over the pairs, each in both readings")
    parser.add_argument("--learning_rate", type=float, default=3e-4, help="5e-5 left it at 57%% agreement")
    parser.add_argument("--batch_size", type=int, default=128, help="completions per generate call")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "sentiment-reward-model")
    args = parser.parse_args()
    started = time.perf_counter()
    set_seed(args.seed)

    # The prompts as the recipes build them, and the policy's tokenizer with PPO's pad (no stop token)
    task = SimpleNamespace(dataset_name=args.dataset_name, dataset_config=None, dataset_train_split="train",
                           dataset_test_split="test", dataset_prompt_column="prompt", dataset_answer_column=None,
                           system_prompt=args.system_prompt)
    train, test = load_prompts(task)
    tokenizer = AutoTokenizer.from_pretrained(args.policy)
    stops = stop_token_ids(tokenizer, args.policy)
    set_ppo_pad_token(tokenizer, stops)
    policy = AutoModelForCausalLM.from_pretrained(args.policy, dtype=torch.float32)
    policy.resize_token_embeddings(max(len(tokenizer), policy.get_input_embeddings().num_embeddings))

    # The policy's completions and their true rewards
    print(f"sampling {args.samples} completions for {args.prompts} train and {args.test_prompts} test prompts")
    train_samples = sample(policy, tokenizer, train.select(range(min(args.prompts, len(train)))), args, stops)
    test_samples = sample(policy, tokenizer, test.select(range(min(args.test_prompts, len(test)))), args, stops)
    sampled = time.perf_counter() - started
    del policy

    # Pairs, each written both as GRPO reads it (chat-template text) and as PPO does (the policy's ids)
    encoders = {"grpo": lambda prompt, text, ids: text_encoder(tokenizer)(
                    prompt, [{"role": "assistant", "content": text}], ids),
                "ppo": lambda prompt, text, ids: prompt_token_ids(tokenizer, prompt) + ids}
    train_pairs = pairs(train_samples, args.margin, encoders)
    test_pairs = pairs(test_samples, args.margin, encoders)
    print(f"{len(train_pairs) // len(encoders)} training and {len(test_pairs) // len(encoders)} held-out pairs with a "
          f"true-reward gap >= {args.margin}, each written as GRPO and as PPO read it")
    if not train_pairs or not test_pairs:
        sys.exit(f"error: no pairs: the policy's completions all score alike on --reward {args.reward}; sample more "
                 "(--samples, --prompts) or lower --margin")

    # The reward model: the policy's first layers under a new one-output head, trained on the pairs
    gpu = torch.cuda.is_available()
    model = AutoModelForSequenceClassification.from_pretrained(args.policy, num_labels=1, dtype=torch.float32,
                                                               num_hidden_layers=args.layers)
    model.resize_token_embeddings(max(len(tokenizer), model.get_input_embeddings().num_embeddings))
    config = RewardConfig(output_dir=tempfile.mkdtemp(prefix="reward-trainer-"), num_train_epochs=args.epochs,
                          per_device_train_batch_size=16, learning_rate=args.learning_rate, lr_scheduler_type="linear",
                          logging_steps=5, logging_first_step=True, save_strategy="no", report_to="none",
                          max_length=None, center_rewards_coefficient=0.01, seed=args.seed,
                          # as the scripts: on a CPU in fp32 without activation checkpointing (TRL's defaults are bf16
                          # and checkpointing, which made a step 20x slower on this CPU)
                          use_cpu=not gpu, bf16=gpu and torch.cuda.is_bf16_supported(), gradient_checkpointing=gpu)
    columns = ("chosen_ids", "rejected_ids")
    trainer = RewardTrainer(model=model, args=config, processing_class=tokenizer,
                            train_dataset=Dataset.from_list([{k: p[k] for k in columns} for p in train_pairs]))
    trainer.train()
    agree = agreement(model, test_pairs, tokenizer.pad_token_id, batch_size=32)
    held_out_mean = sum(r for rs in test_samples["rewards"] for r in rs if r is not None) / sum(
        r is not None for rs in test_samples["rewards"] for r in rs)

    model.config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    with open(args.out / "samples.jsonl", "w") as f:  # what it learned from, and was checked on
        for split, samples in (("train", train_samples), ("test", test_samples)):
            for prompt, texts, rewards in zip(samples["prompt"], samples["texts"], samples["rewards"], strict=True):
                row = {"split": split, "prompt": prompt, "completions": texts, args.reward: rewards}
                f.write(json.dumps(row) + "\n")
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    report = {"settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
              "train_pairs": len(train_pairs) // len(encoders), "test_pairs": len(test_pairs) // len(encoders),
              "held_out_agreement": agree, "held_out_true_reward_mean": round(held_out_mean, 3),
              "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None,
              "seconds_sampling": round(sampled, 1), "seconds": round(time.perf_counter() - started, 1)}
    (args.out / "build.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"reward model: {args.out} ({args.layers} layers, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M "
          f"parameters), trained on {len(train_pairs) // len(encoders)} pairs in {report['seconds']:.0f} s "
          f"({report['seconds_sampling']:.0f} s sampling)")
    print(f"held-out agreement with --reward {args.reward}: {agree['all']:.3f} of {agree['pairs']} pairs; by reading, "
          f"GRPO's {agree.get('grpo')}, PPO's {agree.get('ppo')}; where the true rewards differ by 0.3 or more "
          f"{agree['gap>=0.3']}, by 0.5 or more {agree['gap>=0.5']}")


if __name__ == "__main__":
    main()
