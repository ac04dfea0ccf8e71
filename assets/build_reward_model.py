"""Build a reward model the way RLHF builds one, offline: sample the policy's own completions on the train prompts,
label pairs of them by a true reward, and train a one-output sequence classifier on the pairs with TRL's
RewardTrainer. Then check it against the truth on completions it never saw.

    python assets/build_reward_model.py    # -> assets/sentiment-reward-model, ~9 min (BENCHMARKS.md, 23)
    python assets/build_reward_model.py --prompts 16 --test_prompts 8 --pairs 256 --layers 2 --out /tmp/rm  # 1-2 min

By default: SmolLM2-135M-Instruct (assets/convert_gguf.py) on the sentiment task (assets/build_sentiment_task.py),
labelled by the `sentiment` reward (VADER). The reward model is the policy's first --layers transformer layers under a
new `score` head: the policy's tokenizer, which PPOTrainer requires (it feeds the reward model the policy's ids), at
a fraction of the policy's cost per step. It is not committed; rebuild it like the SmolLM2 conversion.

What it learns from, and why (each lever measured in BENCHMARKS.md, section 23):
- Pairs across prompts. The true reward here reads the completion alone, so any two completions make a pair: --samples
  completions of --prompts prompts give many thousands of pairs, of which --pairs are drawn. (A reward that reads the
  prompt too, an answer's correctness, needs pairs within a prompt: --within_prompts.)
- A graded signal. Each pair carries its true-reward gap, scaled by --margin_scale, as RewardTrainer's margin (loss
  -log sigmoid(r_chosen - r_rejected - margin)); pairs closer than --min_gap, near-ties, are left out.
- Both readings. GRPOTrainer reads a completion as chat-template text in the reward model's tokenizer, PPOTrainer as
  the policy's prompt ids followed by the completion's ids, cut at --max_new_tokens mid-sentence; each training pair is
  written in one of the two, in turn, and the held-out agreement is reported for each.

Written to --out: the model and tokenizer (padding with a new `<|pad|>` token, no stop token, so that every reader finds
a completion's true last token); samples.jsonl, every sampled completion with its true reward; and build.json: the
settings, the pairs' counts, the training loss, the time of each stage, and the agreement with the true reward (the
fraction of pairs in which the model prefers the completion the true reward prefers) on held-out pairs, overall, by
reading, and for the pairs whose true rewards differ by 0.3 and 0.5 or more; and the same on --handwritten,
completions for the task's kinds of prompt written by a person, not sampled from the policy.
"""

import argparse
import json
import random
import sys
import tempfile
import time
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from itertools import combinations
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the scripts' rewards.py and extras/
if __name__ == "__main__":
    try:
        version("trl")
    except PackageNotFoundError:  # a Python without trl: the system's, or another project's
        sys.exit(f"error: this Python ({sys.executable}) has no trl: run it in the .venv that bash setup.sh makes "
                 "(source .venv/bin/activate)")

import torch  # noqa: E402
import transformers  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import (AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer,  # noqa: E402
                          GenerationConfig, set_seed)
from trl import RewardConfig, RewardTrainer  # noqa: E402

from extras.evaluation import (RewardModelReward, Sampling, generate, prompt_token_ids, score,  # noqa: E402
                               text_encoder, up_to_first)
from extras.outputs import held_load_reports, missing_weights, quiet, tidy  # noqa: E402
from rewards import get_reward_funcs  # noqa: E402



def read_prompts(folder: str, system_prompt: str | None) -> tuple[Dataset, Dataset]:
    """The task's train and test splits, as the scripts read a folder of them (--dataset_name), each prompt a
    conversation that opens with `system_prompt` where one is given (their --system_prompt)."""
    from datasets import load_dataset

    splits = [load_dataset(folder, split=split) for split in ("train", "test")]
    if not system_prompt:
        return tuple(splits)
    system = {"role": "system", "content": system_prompt}

    def with_system(prompt):
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        return {"prompt": [system] + [message for message in messages if message["role"] != "system"]}

    return tuple(split.map(with_system, input_columns="prompt") for split in splits)


def repo_relative(path: Path) -> str:
    """`path` from the repository's root where it lies inside it: build.json holds no machine's paths."""
    path = Path(path).resolve()
    return str(path.relative_to(HERE.parent)) if path.is_relative_to(HERE.parent) else str(path)

def sample(policy, tokenizer, dataset, args, stops: list[int], what: str) -> list[dict]:
    """The policy's --samples completions for each prompt, sampled as the recipes sample, with their true rewards:
    one {"prompt", "text", "ids", "reward", "prompt_index"} per completion."""
    dataset = dataset.map(lambda p: {"input_ids": prompt_token_ids(tokenizer, p)}, input_columns="prompt")
    config = GenerationConfig(max_new_tokens=args.max_new_tokens, do_sample=True, temperature=args.temperature,
                              top_k=0, top_p=1.0, eos_token_id=stops, pad_token_id=tokenizer.pad_token_id)
    true_reward = get_reward_funcs([args.reward], args.max_new_tokens)[0]
    per_call = max(1, args.generate_batch // args.samples)  # prompts per generate call
    start = time.perf_counter()
    out = []
    for first in range(0, len(dataset), per_call):
        rows = dataset.select(range(first, min(first + per_call, len(dataset))))
        texts, ids = generate(policy, tokenizer, rows["input_ids"], args.samples, Sampling(config, up_to_first(stops)),
                              args.generate_batch)
        columns = rows.remove_columns("input_ids").to_dict()
        rewards = score(true_reward, columns, texts, ids)
        for i, prompt in enumerate(columns["prompt"]):
            out += [{"prompt": prompt, "text": t, "ids": c, "reward": r, "prompt_index": first + i}
                    for t, c, r in zip(texts[i], ids[i], rewards[i], strict=True)]
        print(f"  {what}: {len(out)} of {len(dataset) * args.samples} completions in "
              f"{time.perf_counter() - start:.0f} s", flush=True)
    return out


def pairs(samples: list[dict], args, limit: int, rng: random.Random) -> list[tuple[dict, dict]]:
    """Up to `limit` (better, worse) pairs whose true rewards differ by --min_gap or more, drawn at random: across
    prompts, or within one prompt with --within_prompts."""
    scored = [s for s in samples if s["reward"] is not None]
    candidates = [(a, b) for a, b in combinations(scored, 2) if abs(a["reward"] - b["reward"]) >= args.min_gap
                  and (not args.within_prompts or a["prompt_index"] == b["prompt_index"])]
    chosen = rng.sample(candidates, min(limit, len(candidates)))
    return [(a, b) if a["reward"] > b["reward"] else (b, a) for a, b in chosen]


def agreement(model, rows: list[tuple[list[int], list[int], str, float]], pad: int, batch_size: int) -> dict:
    """The fraction of pairs (chosen ids, rejected ids, reading, gap) in which the model scores the chosen one higher:
    over all, by reading, and for the pairs whose true rewards differ by 0.3 and 0.5 or more."""
    unique = list({tuple(ids): None for chosen, rejected, _, _ in rows for ids in (chosen, rejected)})  # each once
    scorer = RewardModelReward(model.eval(), "reward_model", lambda prompt, completion, ids: list(ids), pad, batch_size)
    scores = dict(zip(unique, scorer(prompts=unique, completions=unique, completion_ids=unique), strict=True))
    right = [scores[tuple(chosen)] > scores[tuple(rejected)] for chosen, rejected, _, _ in rows]
    groups = {"all": lambda row: True, "grpo": lambda row: row[2] == "grpo", "ppo": lambda row: row[2] == "ppo",
              "gap>=0.3": lambda row: row[3] >= 0.3, "gap>=0.5": lambda row: row[3] >= 0.5}
    result = {"pairs": len(rows) // 2}  # each pair is there once in each reading
    for name, member in groups.items():
        mine = [ok for ok, row in zip(right, rows, strict=True) if member(row)]
        result[name] = round(sum(mine) / len(mine), 3) if mine else None
    return result


def turn_end(tokenizer, stops: list[int]) -> int:
    """The stop token a policy ends its answer with: the first of `stops` that the chat template writes after an
    assistant's message (Qwen's `<|im_end|>`, not its `<|endoftext|>`, though both stop it), else the tokenizer's
    eos."""
    if tokenizer.chat_template:
        chat = [{"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Hello."}]
        asked = prompt_token_ids(tokenizer, chat[:1])  # up to the assistant's turn, as a completion starts
        answered = tokenizer.apply_chat_template(chat, tokenize=True, return_dict=True)["input_ids"]
        after = answered[len(asked):] if answered[:len(asked)] == asked else answered
        written = [i for i in after if i in stops]
        if written:
            return written[0]
    return tokenizer.eos_token_id if tokenizer.eos_token_id in stops else stops[0]


@contextmanager
def load_report_said(layers: int, of: int):
    """Load the reward model with what it keeps of the policy in one line, where transformers' load report lists the
    layers left out as unexpected and the new head as missing (as they are, by design)."""
    with held_load_reports() as reports:
        yield
    if any(not key.startswith("score.") for report in reports for key in missing_weights(report)):  # should have loaded
        transformers.utils.logging.get_logger("transformers.modeling_utils").warning("\n".join(reports))
    print(f"reward model: the policy's first {layers} of {of} transformer layers under a new one-output `score` head, "
          "which starts at random", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=type(
        "Formatter", (argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter), {}))
    parser.add_argument("--policy", default=str(HERE / "SmolLM2-135M-Instruct"), help="whose completions are paired")
    parser.add_argument("--dataset_name", default=str(HERE / "sentiment"), help="prompts, train and test splits")
    parser.add_argument("--system_prompt", default="Be brief.", help="as the recipes set it")
    parser.add_argument("--reward", default="sentiment", help="the true reward: a name in rewards.py's registry")
    parser.add_argument("--prompts", type=int, default=256, help="train prompts sampled")
    parser.add_argument("--test_prompts", type=int, default=64, help="held-out prompts sampled for the agreement")
    parser.add_argument("--samples", type=int, default=2, help="completions per prompt")
    parser.add_argument("--max_new_tokens", type=int, default=32, help="as the recipes cut a completion")
    parser.add_argument("--temperature", type=float, default=0.7, help="as the recipes sample")
    parser.add_argument("--pairs", type=int, default=4000, help="training pairs drawn from all those there are")
    parser.add_argument("--within_prompts", action="store_true", help="pair only completions of one prompt")
    parser.add_argument("--min_gap", type=float, default=0.1, help="the least true-reward gap that makes a pair")
    parser.add_argument("--margin_scale", type=float, default=1.0, help="RewardTrainer's margin: this x the gap")
    parser.add_argument("--layers", type=int, default=4, help="the policy's first layers, kept in the reward model")
    parser.add_argument("--freeze_embeddings", action="store_true",
                        help="train the layers and head only, not the token embeddings (28M of 42.5M at 4 layers)")
    parser.add_argument("--epochs", type=float, default=1, help="over the training pairs")
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--batch_size", type=int, default=32, help="pairs per optimizer step")
    parser.add_argument("--generate_batch", type=int, default=128, help="completions per generate call")
    parser.add_argument("--handwritten", type=Path, default=HERE / "sentiment" / "handwritten.jsonl",
                        help="completions a person wrote for the task's prompts, {prompt, completion} a line: a "
                             "check on text the policy never wrote (skipped where the file is not there)")
    parser.add_argument("--reuse_samples", type=Path, metavar="SAMPLES_JSONL",
                        help="pair the completions an earlier build sampled (its samples.jsonl) in place of sampling "
                             "anew: --prompts, --test_prompts, --samples and the sampling settings are then its own")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "sentiment-reward-model")
    args = parser.parse_args()
    if args.reuse_samples:
        if not args.reuse_samples.is_file():
            sys.exit(f"error: --reuse_samples {args.reuse_samples}: no such file (a build writes it as samples.jsonl)")
        lines = [json.loads(line) for line in args.reuse_samples.read_text().splitlines()]
        if any(args.reward not in line for line in lines):
            sys.exit(f"error: {args.reuse_samples} has no `{args.reward}` scores: it was sampled with another --reward")
    started = time.perf_counter()
    set_seed(args.seed)
    rng = random.Random(args.seed)
    seconds = {}

    # The prompts as the recipes build them; the policy's tokenizer with a pad of its own, which no text holds, and
    # the tokens that end a completion: the tokenizer's eos and those the model's generation config lists
    train, test = read_prompts(args.dataset_name, args.system_prompt)
    tokenizer = AutoTokenizer.from_pretrained(args.policy)
    generation = GenerationConfig.from_pretrained(args.policy)
    stops = sorted({tokenizer.eos_token_id, *(generation.eos_token_id if isinstance(generation.eos_token_id, list)
                                              else [generation.eos_token_id])} - {None})
    tokenizer.add_special_tokens({"pad_token": "<|pad|>"})
    of = transformers.AutoConfig.from_pretrained(args.policy).num_hidden_layers

    # The policy's completions and their true rewards
    if args.reuse_samples:
        train_samples, test_samples = ([{"prompt": line["prompt"], "text": line["completion"], "ids": line["ids"],
                                         "reward": line[args.reward], "prompt_index": line["prompt_index"]}
                                        for line in lines if line["split"] == split] for split in ("train", "test"))
        print(f"{len(train_samples)} train and {len(test_samples)} test completions from {args.reuse_samples}",
              flush=True)
    else:
        policy = AutoModelForCausalLM.from_pretrained(args.policy, dtype=torch.float32)
        policy.resize_token_embeddings(len(tokenizer), mean_resizing=False)  # the pad's row: only ever masked
        print(f"sampling {args.samples} completions for each of {args.prompts} train and {args.test_prompts} test "
              "prompts", flush=True)
        train_samples = sample(policy, tokenizer, train.select(range(min(args.prompts, len(train)))), args, stops,
                               "train")
        test_samples = sample(policy, tokenizer, test.select(range(min(args.test_prompts, len(test)))), args, stops,
                              "test")
        del policy
    seconds["sampling"] = round(time.perf_counter() - started, 1)

    # Pairs, each written as GRPO reads it (chat-template text in this tokenizer) or as PPO does (the policy's ids)
    grpo_text = text_encoder(tokenizer)
    readings = {"grpo": lambda s: grpo_text(s["prompt"], [{"role": "assistant", "content": s["text"]}], s["ids"]),
                "ppo": lambda s: prompt_token_ids(tokenizer, s["prompt"]) + s["ids"]}
    train_pairs = pairs(train_samples, args, args.pairs, rng)
    if not train_pairs:
        sys.exit(f"error: no pairs: the policy's completions all score alike on --reward {args.reward}; sample more "
                 "(--samples, --prompts) or lower --min_gap")
    forms = list(readings)
    train_rows = [{"chosen_ids": readings[forms[i % 2]](better), "rejected_ids": readings[forms[i % 2]](worse),
                   "margin": args.margin_scale * (better["reward"] - worse["reward"])}
                  for i, (better, worse) in enumerate(train_pairs)]
    held_out = [(readings[form](better), readings[form](worse), form, better["reward"] - worse["reward"])
                for better, worse in pairs(test_samples, args, 4000, rng) for form in forms]
    written = []
    if args.handwritten.is_file():
        lines = [json.loads(line) for line in args.handwritten.read_text().splitlines() if line.strip()]
        true_reward = get_reward_funcs([args.reward], args.max_new_tokens)[0]
        rewards = true_reward(completions=[[{"role": "assistant", "content": line["completion"]}] for line in lines],
                              prompts=[line["prompt"] for line in lines])
        # the ids PPO would read: the completion, the stop token it ends with, cut at --max_new_tokens as PPOTrainer
        # cuts it
        end = turn_end(tokenizer, stops)
        samples = [{"prompt": line["prompt"], "text": line["completion"], "reward": r, "prompt_index": i,
                    "ids": (tokenizer(text=line["completion"], add_special_tokens=False)["input_ids"] + [end])[
                        :args.max_new_tokens]} for i, (line, r) in enumerate(zip(lines, rewards, strict=True))]
        written = [(readings[form](better), readings[form](worse), form, better["reward"] - worse["reward"])
                   for better, worse in pairs(samples, argparse.Namespace(**{**vars(args), "within_prompts": False}),
                                              4000, rng) for form in forms]
    print(f"{len(train_rows)} training pairs ({'within' if args.within_prompts else 'across'} prompts, true-reward gap "
          f">= {args.min_gap}, half in each reading), {len(held_out) // 2} held-out pairs, {len(written) // 2} "
          "hand-written pairs", flush=True)

    # The reward model: the policy's first layers under a new one-output head, trained on the pairs
    gpu = torch.cuda.is_available()
    with load_report_said(args.layers, of):
        model = AutoModelForSequenceClassification.from_pretrained(args.policy, num_labels=1, dtype=torch.float32,
                                                                   num_hidden_layers=args.layers)
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    model.config.pad_token_id = tokenizer.pad_token_id
    model.get_input_embeddings().requires_grad_(not args.freeze_embeddings)
    config = RewardConfig(output_dir=tempfile.mkdtemp(prefix="reward-trainer-"), num_train_epochs=args.epochs,
                          per_device_train_batch_size=args.batch_size, learning_rate=args.learning_rate,
                          lr_scheduler_type="linear", warmup_steps=0.05, logging_steps=max(1, len(train_rows) //
                                                                                             args.batch_size // 20),
                          save_strategy="no", report_to="none", max_length=None, center_rewards_coefficient=0.01,
                          seed=args.seed, disable_tqdm=False,
                          # as the scripts: on a CPU in fp32 without activation checkpointing (RewardConfig's defaults
                          # are bf16 and checkpointing: a wasted forward pass at this size, and bf16 a CPU emulates)
                          use_cpu=not gpu, bf16=gpu and torch.cuda.is_bf16_supported(), activation_checkpointing=False)
    trainer = RewardTrainer(model=model, args=config, processing_class=tokenizer,
                            train_dataset=Dataset.from_list(train_rows))
    tidy(trainer)  # a short line per log, in place of the dict of every metric
    trained = time.perf_counter()
    trainer.train()
    seconds["training"] = round(time.perf_counter() - trained, 1)
    agree = agreement(model, held_out, tokenizer.pad_token_id, batch_size=64)
    agree_written = agreement(model, written, tokenizer.pad_token_id, batch_size=64) if written else None

    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    with open(args.out / "samples.jsonl", "w") as f:  # what it learned from, and was checked on (--reuse_samples)
        for split, samples in (("train", train_samples), ("test", test_samples)):
            for s in samples:
                f.write(json.dumps({"split": split, "prompt": s["prompt"], "completion": s["text"],
                                    args.reward: s["reward"], "ids": s["ids"], "prompt_index": s["prompt_index"]})
                        + "\n")
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    rewards = [s["reward"] for s in test_samples if s["reward"] is not None]
    seconds["all"] = round(time.perf_counter() - started, 1)
    report = {"settings": {k: repo_relative(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
              "train_pairs": len(train_rows), "test_pairs": len(held_out) // 2,
              "held_out_agreement": agree, "handwritten_agreement": agree_written,
              "held_out_true_reward_mean": round(sum(rewards) / len(rewards), 3),
              "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None,
              "seconds": seconds}
    (args.out / "build.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"reward model: {args.out} ({args.layers} layers, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M "
          f"parameters), trained on {len(train_rows)} pairs in {seconds['all']:.0f} s ({seconds['sampling']:.0f} s "
          f"sampling, {seconds['training']:.0f} s training)")
    for name, result in (("held-out", agree), ("hand-written", agree_written)):
        if result:
            print(f"{name} agreement with --reward {args.reward}: {result['all']:.3f} of {result['pairs']} pairs; "
                  f"GRPO's reading {result['grpo']}, PPO's {result['ppo']}; where the true rewards differ by 0.3 or "
                  f"more {result['gap>=0.3']}, by 0.5 or more {result['gap>=0.5']}")


if __name__ == "__main__":
    with quiet():  # the upstream notices every run would print, as the scripts silence them
        main()
