"""Held-out evaluation before and after training (--eval_num_samples K; during it: extras/during_training.py), as
docs/evaluation.md describes: K samples per prompt drawn as training draws them (its GenerationConfig, stop tokens
and prompt ids) plus one greedy, on each process's slice, scored by the training rewards and --eval_reward_funcs:
pass@1, pass@K, maj@K and greedy accuracy for a correctness reward (`rewards.reads`), means for the others; and,
where the trainer holds a reference, the sampled completions' KL to it. --eval_only evaluates a saved model or
adapter once, as a run evaluates its policy (extras/eval_only.py)."""

import copy
import json
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from accelerate import PartialState
from accelerate.utils import gather_object
from transformers import GenerationConfig, TrainerCallback
from trl.data_utils import apply_chat_template, is_conversational

from extras.stats import mean, metrics_of, paired_changes, standard_errors
from rewards import run_reward


def prompt_token_ids(tokenizer, prompt, chat_template_kwargs: dict | None = None) -> list[int]:
    """A prompt's ids as trl 1.12's GRPOTrainer makes them (PPO's script uses it too): the chat template, or the
    tokenizer with its special tokens."""
    if is_conversational({"prompt": prompt}):
        return tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True,
                                             **(chat_template_kwargs or {}))["input_ids"]
    return tokenizer(text=prompt)["input_ids"]


@dataclass
class Sampling:
    """How a trainer samples: its GenerationConfig, and `end`, which cuts generated ids to the completion it keeps."""

    config: GenerationConfig
    end: Callable[[list[int]], list[int]]

    def greedy(self) -> "Sampling":
        """The same, with sampling off (a repetition_penalty stays)."""
        config = copy.deepcopy(self.config)
        config.do_sample = False
        config.temperature = None
        config.top_p = None
        config.top_k = None
        config.min_p = None
        return Sampling(config, self.end)


def up_to_first(stop_ids) -> Callable[[list[int]], list[int]]:
    """`end` for a trainer that keeps a completion up to and including its first stop token (GRPOTrainer's mask)."""
    stops = set(stop_ids if isinstance(stop_ids, (list, tuple, set)) else [stop_ids]) - {None}
    return lambda ids: next((ids[:i + 1] for i, token in enumerate(ids) if token in stops), ids)


@torch.no_grad()
def generate(model, tokenizer, prompt_ids: list[list[int]], num_samples: int, sampling: Sampling, batch_size: int):
    """`num_samples` completions per prompt, at most `batch_size` per `generate` call (one prompt's at least): texts
    and ids, each [prompt][sample]."""
    config = copy.deepcopy(sampling.config)
    config.num_return_sequences = num_samples
    per_call = max(1, batch_size // num_samples)
    texts = []
    ids = []
    for start in range(0, len(prompt_ids), per_call):
        batch = tokenizer.pad({"input_ids": prompt_ids[start:start + per_call]}, padding_side="left",
                              return_tensors="pt").to(next(model.parameters()).device)
        for row in model.generate(**batch, generation_config=config)[:, batch["input_ids"].shape[1]:].tolist():
            ids.append(sampling.end(row))
            texts.append(tokenizer.decode(ids[-1], skip_special_tokens=True))
    return ([xs[i:i + num_samples] for i in range(0, len(xs), num_samples)] for xs in (texts, ids))


def score(reward_func, rows: dict[str, list], texts: list[list[str]], ids: list[list[list[int]]]) -> list[list]:
    """A reward's values for completions [prompt][sample], each with its row's columns as keyword arguments."""
    k = len(texts[0])
    flat = [t for sample in texts for t in sample]
    completions = [[{"role": "assistant", "content": t}] for t in flat] if is_conversational(
        {"prompt": rows["prompt"][0]}) else flat
    columns = {c: [v for v in values for _ in range(k)] for c, values in rows.items() if c != "input_ids"}
    rewards = run_reward(reward_func, completions=completions, completion_ids=[i for s in ids for i in s],
                         prompts=columns.pop("prompt"), **columns)
    return [list(rewards[i:i + k]) for i in range(0, len(rewards), k)]


@torch.no_grad()
def log_probs(model, prompt_ids: list[list[int]], completion_ids: list[list[list[int]]], temperature: float,
              batch_size: int = 16) -> list[list[float]]:
    """Each completion's log-probability under `model` after its prompt, at the sampling temperature (as the trainers
    compute their KL), summed over its tokens: [prompt][sample]. Left-padded, so that only the completions' logits
    are made."""
    device = next(model.parameters()).device
    rows = [(p, c) for p, cs in zip(prompt_ids, completion_ids, strict=True) for c in cs]
    values = []
    for start in range(0, len(rows), batch_size):
        batch = rows[start:start + batch_size]
        width = max(len(p) + len(c) for p, c in batch)
        tail = max(len(c) for _, c in batch)
        ids = torch.tensor([[0] * (width - len(p) - len(c)) + p + c for p, c in batch], device=device)
        mask = torch.tensor([[0] * (width - len(p) - len(c)) + [1] * (len(p) + len(c)) for p, c in batch],
                            device=device)
        logits = model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(1) - 1).clamp(min=0),
                       logits_to_keep=tail + 1).logits[:, :-1].float() / temperature
        logps = logits.log_softmax(-1).gather(-1, ids[:, -tail:, None])[..., 0]
        values += [logps[i, tail - len(c):].sum().item() for i, (_, c) in enumerate(batch)]
    k = len(completion_ids[0])
    return [values[i:i + k] for i in range(0, len(values), k)]


def reference_of(ref_model, lora: bool):
    """`reference` for BeforeAfterEval: `reference(policy)` yields the trainer's frozen reference model, or, where it
    holds none because the policy is a LoRA adapter, the policy with its adapter disabled. None where there is
    neither (GRPO with beta 0 and no LoRA)."""
    if ref_model is None and not lora:
        return None

    @contextmanager
    def reference(policy):
        if ref_model is not None:
            yield ref_model
        else:
            with policy.disable_adapter():
                yield policy

    return reference


class RewardModelReward:
    """A reward model as a reward, scoring `encode(prompt, completion, completion_ids)` as in training: text in its
    own tokenizer for GRPO, the policy's ids for PPO."""

    correctness = False

    def __init__(self, model, name: str, encode, pad_token_id: int, batch_size: int):
        self.model = model
        self.__name__ = name
        self.encode = encode
        self.pad = pad_token_id
        self.batch_size = batch_size

    @torch.inference_mode()
    def __call__(self, prompts, completions, completion_ids, **kwargs) -> list[float]:
        rows = [self.encode(*args) for args in zip(prompts, completions, completion_ids, strict=True)]
        scores = []
        device = next(self.model.parameters()).device
        for start in range(0, len(rows), self.batch_size):
            batch = rows[start:start + self.batch_size]
            width = max(map(len, batch))
            ids = torch.tensor([r + [self.pad] * (width - len(r)) for r in batch], device=device)
            mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in batch], device=device)
            scores += self.model(input_ids=ids, attention_mask=mask).logits[:, 0].float().tolist()  # the last token's
        return scores


def text_encoder(tokenizer, chat_template_kwargs: dict | None = None):
    """`encode` for a reward model that reads text, as GRPOTrainer builds it."""

    def encode(prompt, completion, completion_ids) -> list[int]:
        text = (apply_chat_template({"messages": prompt + completion}, tokenizer, **(chat_template_kwargs or {}))[
            "text"] if is_conversational({"prompt": prompt}) else prompt + completion)
        return tokenizer(text=text, add_special_tokens=False)["input_ids"]

    return encode


def evaluate(model, tokenizer, dataset, reward_funcs, num_samples: int, sampling: Sampling, seed: int, accelerator,
             batch_size: int, per_prompt: list | None = None, reference=None) -> dict:
    """{reward: {metric: value}} over `dataset`'s `input_ids`, on every process, and {"kl": {"to_reference": nats}}
    where `reference(model)` yields a model; `per_prompt` gets each prompt's completions, rewards and greedy
    completion. Call it on every process."""
    indices = list(range(len(dataset)))
    k = num_samples
    per_prompt = [] if per_prompt is None else per_prompt
    with accelerator.split_between_processes(indices, apply_padding=True) as mine:  # equal slices: ranks in step
        rows = dataset.select(mine).to_dict()
    was_training = model.training
    device = next(model.parameters()).device
    model.eval()
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed + accelerator.process_index)  # the same sampling noise before and after training
        sampled, sampled_ids = generate(model, tokenizer, rows["input_ids"], k, sampling, batch_size)
    greedy, greedy_ids = generate(model, tokenizer, rows["input_ids"], 1, sampling.greedy(), batch_size)
    kl = [None] * len(mine)
    if reference is not None:  # log pi(y) - log pi_ref(y) of each sampled completion: a sample of KL(pi || pi_ref)
        temperature = sampling.config.temperature or 1.0
        ours = log_probs(model, rows["input_ids"], sampled_ids, temperature)
        with reference(model) as ref:  # under LoRA, the policy with its adapter disabled: after `ours`
            theirs = log_probs(ref, rows["input_ids"], sampled_ids, temperature)
        kl = [[a - b for a, b in zip(x, y)] for x, y in zip(ours, theirs)]
    model.train(was_training)
    entries = [{"index": i, "prompt": p, "process": accelerator.process_index, "completions": ts, "rewards": {},
                "greedy_completion": g[0], "greedy": {}, "kl_to_reference": d}
               for i, p, ts, g, d in zip(mine, rows["prompt"], sampled, greedy, kl)]
    for func in reward_funcs:
        for entry, rs, g in zip(entries, score(func, rows, sampled, sampled_ids),
                                score(func, rows, greedy, greedy_ids)):
            entry["rewards"][func.__name__] = rs
            entry["greedy"][func.__name__] = g[0]
    gathered = {e["index"]: e for e in reversed(gather_object(entries))}  # drop the padding's repeats
    entries = [gathered[i] for i in indices]
    per_prompt += [{key: value for key, value in e.items() if key != "index"} for e in entries]
    metrics = {f.__name__: metrics_of(f, [e["rewards"][f.__name__] for e in entries], [e["greedy"][f.__name__] for e
                                      in entries], [e["completions"] for e in entries], k) for f in reward_funcs}
    kls = [d for e in entries for d in e["kl_to_reference"] or []]
    return metrics | ({"kl": {"to_reference": mean(kls)}} if kls else {})


def held_out(train, test, script_args, seed: int):
    """(train, held-out prompts, where they come from): the test split, or else a seeded 10% of train, held out; with
    --eval_only, which trains on nothing, all of train (a file of 2 rows was evaluated on 1)."""
    if test is not None:
        return train, test, f"split '{script_args.dataset_test_split}'"
    if script_args.eval_only:
        source = f"split '{script_args.dataset_train_split}', all of it (--eval_only trains on none)"
        if PartialState().is_main_process:
            print(f"no '{script_args.dataset_test_split}' split: evaluating on {source}")
        return train, train, source
    split = train.train_test_split(test_size=0.1, seed=seed)
    source = f"{len(split['test'])} prompts held out of '{script_args.dataset_train_split}' (seed {seed})"
    if PartialState().is_main_process:
        print(f"no '{script_args.dataset_test_split}' split: evaluating on {source}")
    return split["train"], split["test"], source


def for_grpo(trainer, dataset, source: str, reward_funcs: list, script_args) -> "BeforeAfterEval":
    """The evaluation of a GRPOTrainer's policy: its prompt ids, its sampling (the GenerationConfig it generates with,
    or with vLLM, for which trl 1.16 builds none, one built as trl builds it; a completion ends at its first stop token,
    any of the eos ids training stops at) and its reward models."""
    args = trainer.args
    tokenizer = trainer.processing_class
    config = getattr(trainer, "generation_config", None) or GenerationConfig(
        max_new_tokens=args.max_completion_length, do_sample=True, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=trainer.eos_token_ids, temperature=args.temperature,
        top_p=args.top_p, top_k=args.top_k, min_p=args.min_p, repetition_penalty=args.repetition_penalty,
        **(args.generation_kwargs or {}))
    reward_models = [RewardModelReward(model, name, text_encoder(rm_tokenizer, args.chat_template_kwargs),
                                       rm_tokenizer.pad_token_id, args.per_device_eval_batch_size)
                     for model, name, rm_tokenizer in zip(
                         trainer.reward_funcs, trainer.reward_func_names, trainer.reward_processing_classes)
                     if rm_tokenizer is not None]
    with PartialState().main_process_first():
        dataset = dataset.map(lambda p: {"input_ids": prompt_token_ids(tokenizer, p, args.chat_template_kwargs)},
                              input_columns="prompt")
    from accelerate.utils import is_peft_model
    from trl.models import unwrap_model_for_generation

    evaluation = BeforeAfterEval(dataset, source, tokenizer, reward_models + reward_funcs, script_args.eval_num_samples,
                                 script_args.eval_max_prompts, Sampling(config, up_to_first(config.eos_token_id)),
                                 args.seed,
                                 lambda: unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator),
                                 trainer.accelerator, args.output_dir, args.per_device_eval_batch_size,
                                 reference_of(trainer.ref_model, is_peft_model(trainer.model)),
                                 trained=tuple(trainer.reward_func_names))
    during_training(trainer, evaluation)  # before the script adds `evaluation`
    return evaluation


def during_training(trainer, evaluation: "BeforeAfterEval", load_best=None) -> None:
    """Where a run evaluates during training or ranks checkpoints (--eval_strategy, --metric_for_best_model),
    extras/during_training.py's points and best, added to `trainer` before `evaluation`; `load_best`: PPO's."""
    if trainer.args.eval_strategy == "no" and not trainer.args.metric_for_best_model:
        return
    from extras.during_training import DuringTraining

    trainer.add_callback(DuringTraining(evaluation, trainer.callback_handler, load_best))


class BeforeAfterEval(TrainerCallback):
    """Evaluate the policy as the trainer prepared it when training starts and ends (--eval_only: once, by
    extras/eval_only.py), then write eval.json and the table. `generation_model()` yields the policy (TRL's
    unwrap_model_for_generation)."""

    def __init__(self, dataset, source: str, tokenizer, reward_funcs, k: int, max_prompts: int, sampling: Sampling,
                 seed: int, generation_model, accelerator, output_dir: str, batch_size: int, reference=None,
                 trained: tuple[str, ...] = ()):
        self.dataset = dataset.select(range(min(len(dataset), max_prompts)))
        self.trained = trained  # the names of the rewards that train, of `reward_funcs`
        self.sampling = sampling
        keys = ("do_sample", "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "max_new_tokens",
                "eos_token_id")
        self.settings = dict(source=source, num_prompts=len(self.dataset), num_samples=k,
                             temperature=sampling.config.temperature, max_new_tokens=sampling.config.max_new_tokens,
                             seed=seed, sampling={key: getattr(sampling.config, key, None) for key in keys},
                             batch_size=batch_size)
        self.tokenizer = tokenizer
        self.reward_funcs = reward_funcs
        self.generation_model = generation_model
        self.reference = reference  # reference_of(...), or None: no KL
        self.accelerator = accelerator
        self.output_dir = Path(output_dir)
        self.results = {"num_prompts": len(self.dataset)}  # and each evaluation's, by when: before, after, model

    def run(self, when: str, step: int) -> None:
        """Evaluate the policy, and keep what it measured under `when`'s keys of eval.json."""
        measured = self.measure(when, step)
        self.results |= {when: measured["metrics"], f"{when}_per_prompt": measured["per_prompt"], f"{when}_step": step,
                         f"{when}_standard_error": measured["standard_error"],
                         f"{when}_seconds": measured["seconds"], f"{when}_computed_in": measured["computed_in"]}

    def measure(self, when: str, step: int, quiet: bool = False) -> dict:
        s = self.settings
        start = time.perf_counter()
        per_prompt = []
        if self.accelerator.is_main_process and not quiet:
            print(f"evaluating ({when}, step {step}): {s['num_prompts']} prompts x {s['num_samples']} samples "
                  f"+ greedy, on {self.accelerator.num_processes} process(es)")
        with self.generation_model() as model:
            computed = computed_in(model, self.accelerator)
            metrics = evaluate(model, self.tokenizer, self.dataset, self.reward_funcs, s["num_samples"], self.sampling,
                               s["seed"], self.accelerator, s["batch_size"], per_prompt, self.reference)
        seconds = round(time.perf_counter() - start, 1)
        if self.accelerator.is_main_process and not quiet:
            print(f"evaluated ({when}) in {seconds:.0f} s")
        return {"metrics": metrics, "per_prompt": per_prompt, "computed_in": computed, "seconds": seconds,
                "standard_error": standard_errors(self.reward_funcs, per_prompt, s["num_samples"])}

    def on_train_begin(self, args, state, control, **kwargs):
        """Before training: at the run's start, or, resumed, the start's as eval.json kept it (written as soon as it
        was measured); a resumed run without it measures its checkpoint, and its table says so."""
        kept = self.run_start() if state.global_step > 0 else None
        if kept:
            self.results |= kept
            self.results["during"] = [p for p in kept.get("during", []) if p["step"] <= state.global_step]
            if self.accelerator.is_main_process:
                print(f"held-out evaluation before training: the run's start, from {self.output_dir / 'eval.json'}")
        else:
            self.run("before", state.global_step)
            if self.accelerator.is_main_process and (warning := rarely_rewarded(
                    self.results["before_per_prompt"], self.trained)):
                print(warning)
        self.write(quiet=True)  # at once: a run resumed from a checkpoint reads its start from it

    def on_train_end(self, args, state, control, **kwargs):
        self.run("after", state.global_step)
        self.results["change"] = paired_changes(self.reward_funcs, self.results["before_per_prompt"],
                                                self.results["after_per_prompt"], self.settings["num_samples"])
        self.write()

    def run_start(self) -> dict | None:
        """The run's own "before" from its eval.json, measured at step 0 with these settings, or None."""
        path = self.output_dir / "eval.json"
        try:
            kept = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        same = all(kept.get(key) == value for key, value in json.loads(json.dumps(self.settings)).items())
        if not same or kept.get("before_step") != 0 or "before" not in kept:
            return None
        return {key: kept[key] for key in ("before", "before_per_prompt", "before_step", "before_standard_error",
                                           "before_seconds", "before_computed_in", "during") if key in kept}

    def write(self, name: str = "eval.json", note: str = "", quiet: bool = False) -> None:
        if not self.accelerator.is_main_process:
            return
        path = self.output_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**self.settings, **self.results}, indent=2) + "\n")
        if quiet:
            return
        shown = [when for when in ("before", "after", "model") if when in self.results]
        table = format_table({self.label(when): self.results[when] for when in shown},
                             {self.label(when): self.results[f"{when}_standard_error"] for when in shown})
        computed = " then ".join(c for c in dict.fromkeys(self.results.get(f"{when}_computed_in") for when in shown)
                                 if c) or "?"
        last = self.results[f"{shown[-1]}_per_prompt"]
        alone = [one_answer_alone(func, last, self.dataset, self.tokenizer) for func in self.reward_funcs
                 if getattr(func, "correctness", False) and getattr(func, "final_answer", None)]
        print(f"\nheld-out evaluation, {self.settings['source']}, {self.settings['num_prompts']} prompts, computed in "
              f"{computed} (each value ± its standard error over them):\n{table}\n" + "".join(
                  f"  {line}\n" for line in alone if line) + f"  written to {path}" + (f" ({note})" if note else ""))


    def label(self, when: str) -> str:
        """A column's name: `before` for the run's start, else the step it measured (a resumed run's checkpoint)."""
        return f"step {self.results['before_step']}" if when == "before" and self.results["before_step"] else when


def computed_in(model, accelerator) -> str:
    """The precision a policy's forward computes in: accelerate's autocast where its prepare put one on the forward
    (GRPO's policy under --bf16), else the dtype most of its floating-point weights hold (PPO samples its policy
    unwrapped, in fp32 under --bf16). The same base model scored differently in the two scripts' "before", with no
    word of precision in the table (issue 83)."""
    mixed = getattr(accelerator, "mixed_precision", "no")
    # not a PeftModel's: its generate calls the base model's forward, around which accelerate put no autocast
    if getattr(model, "_original_forward", None) is not None and mixed != "no" and not hasattr(
            model, "get_base_model"):
        return f"{mixed} autocast"
    sizes = Counter()
    for parameter in model.parameters():
        if parameter.is_floating_point():
            sizes[str(parameter.dtype).removeprefix("torch.")] += parameter.numel()
    return sizes.most_common(1)[0][0] if sizes else "?"


def rarely_rewarded(per_prompt: list[dict], trained: tuple[str, ...], share: float = 0.02) -> str | None:
    """A warning where under `share` of the held-out samples before training earned anything from the training
    rewards (a score above 0, or above the lowest any sample got: a penalty pays by being less negative): the policy
    almost never samples what the rewards pay for, and has almost nothing to learn from (a newcomer's base model used
    the answer tags in 1 of 200 samples, trained for 20 minutes on nothing, and found the fix alone). None where they
    do, or where no training reward was scored."""
    names = [name for name in trained if per_prompt and name in per_prompt[0]["rewards"]]
    scores = {name: [r for p in per_prompt for r in p["rewards"][name]] for name in names}
    floor = {name: min([0.0] + [r for r in values if r is not None]) for name, values in scores.items()}
    paid = {name: [r is not None and r > floor[name] for r in values] for name, values in scores.items()}
    samples = [any(sample) for sample in zip(*paid.values())]
    if not samples or sum(samples) >= share * len(samples):
        return None
    each = ", ".join(f"{name} {sum(paid[name])}" for name in names)
    return (f"WARNING: before training, {sum(samples)} of {len(samples)} held-out samples earned anything from the "
            f"training rewards ({each}): the policy almost never samples what they pay for, so training has almost "
            "nothing to learn from. What helps: a worked example in each prompt (a question and its answer in the "
            "rewarded form), a prefill of the answer's opening, or a short SFT on answers in that form; "
            "docs/your-own-run.md says how.")


def one_answer_alone(func, per_prompt: list[dict], dataset, tokenizer) -> str | None:
    """What the most common of the sampled answers scores given to every prompt alone: the baseline a policy that
    collapsed onto one answer is at (a GRPO run answered `<answer>1</answer>` to every prompt, and its four "after"
    figures were the share of test rows whose answer is 1). Answers are read by the reward's `final_answer` where it
    has one, else as the whole completion; a correctness reward scores the one completion against each row."""
    name = func.__name__
    read = getattr(func, "final_answer", None) or (lambda text: text.strip() or None)
    texts = {}  # answer -> a completion giving it
    counts = Counter()
    for p in per_prompt:
        for text in p["completions"]:
            if (answer := read(text)) is not None:
                counts[answer] += 1
                texts.setdefault(answer, text)
    if not counts:
        return None
    answer, count = counts.most_common(1)[0]
    rows = dataset.to_dict()
    ids = tokenizer(texts[answer], add_special_tokens=False)["input_ids"]
    rewards = score(func, rows, [[texts[answer]]] * len(dataset), [[ids]] * len(dataset))
    right = mean(float(r[0] == 1.0) for r in rewards if r[0] is not None)
    total = sum(len(p["completions"]) for p in per_prompt)
    return (f"{name}: the most common answer, {texts[answer].strip()[:60]!r} ({count} of {total} samples), given to "
            "every prompt alone would score pass@1 " + ("-" if right is None else f"{right:.3f}"))


def format_table(columns: dict[str, dict], errors: dict[str, dict] | None = None) -> str:
    """{column: {reward: {metric: value}}} as a table, a line per reward and metric, each value with its standard
    error where `errors` ({column: {reward: {metric: error}}}) has one.

    >>> print(format_table({"before": {"accuracy": {"pass@1": 0.25}}, "after": {"accuracy": {"pass@1": 0.5}}},
    ...                    {"before": {"accuracy": {"pass@1": 0.1}}, "after": {}}))
    reward        metric                     before          after
    accuracy      pass@1                0.250±0.100          0.500
    """
    errors = errors or {}
    width = max([14] + [len(name) + 2 for name in list(columns.values())[-1]])  # a reward model's name can be long
    lines = [f"{'reward':<{width}}{'metric':<18}" + "".join(f"{label:>15}" for label in columns)]
    for name, metrics in list(columns.values())[-1].items():
        for metric in metrics:
            cells = []
            for label, column in columns.items():
                value = column.get(name, {}).get(metric)
                error = errors.get(label, {}).get(name, {}).get(metric)
                cells.append("-" if value is None else f"{value:.3f}" + ("" if error is None else f"±{error:.3f}"))
            lines.append(f"{name:<{width}}{metric:<18}" + "".join(f"{cell:>15}" for cell in cells))
    return "\n".join(lines)
