"""What a run writes and prints (docs/outputs.md): metrics.jsonl and completions.jsonl at each log, summary.json and
the plots at the end, a short line per log, the distributed mode, and the no-signal watchdog's warnings; and, while a
run lasts (`quiet`), no upstream notice that every run would print and that says nothing about it.
"""

import json
import logging
import math
import os
import platform
import re
import sys
import time
import warnings
import weakref
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import torch
from tqdm.auto import tqdm
from transformers import TrainerCallback
from transformers.trainer_callback import ProgressCallback

# Upstream notices that every run would print and that say nothing about it, silenced by their exact words
DEPRECATIONS = [  # deprecated names that trl 1.12, peft and DeepSpeed call
    *[f"`{name}` is deprecated" for name in ("is_gradient_checkpointing", "gradient_checkpointing_enable",
                                             "gradient_checkpointing_disable")],
    *[rf"`torch\.distributed\.{name}` is deprecated" for name in ("all_gather_into_tensor", "reduce_scatter_tensor")],
]
ONE_VALUE_VARIANCE = r"var\(\): degrees of freedom is <= 0"  # PPOTrainer's val/ratio_var with one minibatch
LOGGED = {  # logger: the message
    # accelerate imports DeepSpeed to recognise it, which says it runs on the CPU
    "DeepSpeed": r"Setting accelerator to CPU\.",
    # --eval_only's LoRA adapter, which the script loads on its base (quantized as trained), with those settings
    "trl.trainer.grpo_trainer": r"\[RANK \d+\] You passed `(model_init_kwargs|quantization_config)` to the "
                                r"(`GRPOConfig`|trainer), but your model is already instantiated\.",
    # PPOTrainer asks `generate` for its scores beside a generation config
    "transformers.generation.utils": r"Passing `generation_config` together with generation-related arguments=\(\{'("
                                     r"output_scores|return_dict_in_generate)', '(output_scores|return_dict_in_"
                                     r"generate)'\}\)",
}


@contextmanager
def quiet():
    """Inside it, the upstream notices above are not printed; outside it, warnings and logging are as they were."""
    filters = {name: (lambda record, pattern=pattern: not re.match(pattern, record.getMessage()))
               for name, pattern in LOGGED.items()}
    with warnings.catch_warnings():
        for message in DEPRECATIONS:
            warnings.filterwarnings("ignore", message=message, category=FutureWarning)
        warnings.filterwarnings("ignore", message=ONE_VALUE_VARIANCE, category=UserWarning)
        for name, keep in filters.items():
            logging.getLogger(name).addFilter(keep)
        try:
            yield
        finally:
            for name, keep in filters.items():
                logging.getLogger(name).removeFilter(keep)


@contextmanager
def held_load_reports():
    """Inside it, transformers' load reports are not printed but gathered in the list it yields, for a caller that
    loads a model with a new head, which the report lists as MISSING (as it is, by design), to say so in its own words
    and to print a report only where another weight is missing (`missing_weights`)."""
    reports = []
    logger = logging.getLogger("transformers.modeling_utils")

    def hold(record) -> bool:
        if "LOAD REPORT" in record.getMessage():
            reports.append(record.getMessage())
            return False
        return True

    logger.addFilter(hold)
    try:
        yield reports
    finally:
        logger.removeFilter(hold)


def missing_weights(report: str) -> list[str]:
    """The names a load report lists as MISSING: weights the checkpoint did not hold, which start at random."""
    return [line.split("|")[0].strip() for line in report.splitlines() if "| MISSING" in line]


class RunRecorder(TrainerCallback):
    """metrics.jsonl (each log) and completions.jsonl (`samples()` at each training log), append-only JSON lines
    from the main process; a resumed run keeps each step once. (TRL's log_history is in memory, and on disk only in
    checkpoints; log_completions' parquet is overwritten by eval logs.)"""

    def __init__(self, output_dir: str, samples: Callable[[], list[dict]]):
        self.output_dir = Path(output_dir)
        self.samples = samples

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:  # afresh, or up to the checkpoint resumed from
            self.output_dir.mkdir(parents=True, exist_ok=True)
            for name in ("metrics.jsonl", "completions.jsonl"):
                kept = [r for r in read_jsonl_lenient(self.output_dir / name) if r["step"] <= state.global_step]
                write_atomic(self.output_dir / name, "".join(json.dumps(r) + "\n" for r in kept))

    def on_step_end(self, args, state, control, **kwargs):
        control.should_log |= state.global_step >= state.max_steps  # the last step, whatever --logging_steps says

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or "train_runtime" in logs:
            return
        record = {"step": state.global_step, "wall_time": round(time.time(), 3), **logs}
        with open(self.output_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")
        if "reward" in logs:  # a training log
            with open(self.output_dir / "completions.jsonl", "a") as f:
                f.writelines(json.dumps({"step": state.global_step, **row}) + "\n" for row in self.samples())


class ShortLogs(ProgressCallback):
    """transformers' progress bar, with a short line per log in place of the dict of every metric."""

    KEYS = {"reward": "reward", "kl": "kl", "objective/kl": "kl", "loss": "loss", "eval_reward": "eval_reward"}

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or self.training_bar is None or not logs or "train_runtime" in logs:
            return
        shown = {name: logs[k] for k, name in self.KEYS.items() if logs.get(k) is not None}
        rewards = {k[8:-5]: v for k, v in logs.items() if k.startswith("rewards/") and k.endswith("/mean")}
        shown |= {k: v for k, v in rewards.items() if v is not None} if len(rewards) > 1 else {}
        if shown:
            self.training_bar.write(f"step {state.global_step}/{state.max_steps}: "
                                    + "  ".join(f"{k} {v:.4g}" for k, v in shown.items()))


def tidy(trainer) -> None:
    """Short log lines (--disable_tqdm keeps transformers' printer), and no hub model card in --output_dir unless the
    run pushes to the hub: TRL writes one at every checkpoint, where a local model's links to huggingface.co/None, and
    peft one with every adapter it saves (a README.md of a user's there, it rewrites). On
    resume, no warning that the checkpoint lacks an output layer tied to the input embeddings: it is saved once, as
    the embeddings, and tied again on load (transformers warns as it compares with another list, of keys not saved)."""
    if trainer.pop_callback(ProgressCallback) is not None:
        trainer.add_callback(ShortLogs)
    if not trainer.args.push_to_hub:
        trainer.create_model_card = lambda *args, **kwargs: None
        for module in trainer.model.modules():  # a PeftModel, PPO's policy inside its wrapper
            if hasattr(module, "create_or_update_model_card"):
                module.create_or_update_model_card = lambda *args, **kwargs: None

    run = weakref.ref(trainer)  # the logger outlives the run, and must not keep its models alive

    def tied_and_missing(record) -> bool:
        model = getattr(run(), "model", None)  # the model loading (PPO's resume loads each of its two in turn)
        tied = getattr(getattr(getattr(model, "module", model), "config", None), "tie_word_embeddings", False)
        return not (tied and record.getMessage().startswith("There were missing keys in the checkpoint model loaded: "
                                                             "['lm_head.weight']"))

    logging.getLogger("transformers.trainer").addFilter(tied_and_missing)


def groups_without_spread(rewards: dict[str, list[float]], weights: list[float], group: int) -> float:
    """The share of groups (each `group` completions in a row) whose completions all got the same total reward (the
    weighted sum of `rewards`' columns, NaN where a reward could not score), within a millionth of the rewards' scale.

    >>> groups_without_spread({"a": [0.2] * 8 + [0.2, 0.7] * 4}, [1.0], 8)
    0.5
    >>> groups_without_spread({"format": [0.2] * 4, "count": [0.0, 0.0, 1.0, float("nan")]}, [1.0, 1.0], 2)
    0.5
    """
    columns = list(rewards.values())
    totals = [sum(w * r for w, r in zip(weights, row) if not math.isnan(r)) if not all(math.isnan(r) for r in row)
              else math.nan for row in zip(*columns)]
    scale = max((abs(t) for t in totals if not math.isnan(t)), default=0.0)
    groups = [[t for t in totals[i:i + group] if not math.isnan(t)] for i in range(0, len(totals), group)]
    flat = [len(g) < 2 or max(g) - min(g) <= 1e-6 * scale for g in groups]
    return sum(flat) / len(flat) if flat else 0.0


class GroupSpread(TrainerCallback):
    """GRPO: `groups_without_spread` in each training log, from the last generation batch, for the watchdog and the
    plot. TRL's frac_reward_zero_std tests each group's float32 std with isclose's default tolerance, 1e-8: eight
    rewards of 0.2 have a std of 1.6e-8, so partial credit (0.2, 0.7) counted as spread where it teaches nothing."""

    def __init__(self, trainer):
        self.trainer = weakref.ref(trainer)  # a callback outlives nothing of the run's

    def on_log(self, args, state, control, logs=None, **kwargs):
        trainer = self.trainer()
        if logs and "reward" in logs and trainer is not None and trainer._logs["rewards"]:
            logs["groups_without_spread"] = groups_without_spread(trainer._logs["rewards"],
                                                                  trainer.reward_weights.tolist(), args.num_generations)


# The KL to the reference each trainer logs, and the value past which the policy has moved far from it: PPO's is per
# completion (1 nat), GRPO's per token (0.1); keyed by ppo. And what holds a policy nearer to its reference
KL = {True: ("objective/kl", 1.0), False: ("kl", 0.1)}
RUNAWAY_FIXES = {True: "a lower --learning_rate, a higher --kl_coef or fewer --num_ppo_epochs",
                 False: "a lower --learning_rate or a higher --beta"}


class NoSignalWatchdog(TrainerCallback):
    """Warn (or with `stop`, stop cleanly) when `patience` logs in a row carry no learning signal: GRPO's groups all
    alike (groups_without_spread) or a flat reward. A flat reward at its known `maximum` is a solved task, said as
    such, and one held while the policy is far from its reference (KL) a collapse: a PPO policy at KL 3 to 9 with
    its reward 0 from its second update was said to have no learning signal. Also a reward that scored nothing, and
    GRPO's zero loss at beta 0. `groups`: the trainer samples groups (GRPO's --num_generations); PPO samples one
    completion per prompt."""

    def __init__(self, patience: int = 5, stop: bool = False, beta: float | None = None, groups: bool = True,
                 maximum: float | None = None):
        self.patience = patience
        self.kl_key, self.kl_floor = KL[not groups]
        self.runaway_fixes = RUNAWAY_FIXES[not groups]
        self.stop = stop
        self.beta = beta
        self.maximum = maximum
        self.fixes = ("Usual fixes: " + ("more completions per prompt (--num_generations), " if groups else "")
                      + "a higher --temperature, a reward with partial credit (e.g. add tag_count next to format), or "
                      "check that the reward can read your completions at all (look at completions.jsonl: is the "
                      "answer where the parser looks?).")
        self.consequence = ("so the advantages are zero and the policy does not change" if groups else
                            "so the reward teaches nothing and only the KL penalty moves the policy")
        self.recent = []
        self.warned = False
        self.told = set()

    def say(self, state, message: str) -> None:
        if state.is_world_process_zero:
            print(f"\n{message}")

    def on_log(self, args, state, control, logs=None, **kwargs):
        for key, value in (logs or {}).items():
            name = key[8:-5]
            if key.startswith("rewards/") and key.endswith("/mean") and value is None and name not in self.told:
                self.told.add(name)
                self.say(state, f"WARNING: reward '{name}' returned None for every completion at step "
                         f"{state.global_step}: it could not score any of them, so it adds nothing to the reward. "
                         "Check that the dataset has the columns it reads, and that its answers are where it looks "
                         "(completions.jsonl).")
        if not logs or logs.get("reward") is None:
            return
        self.recent = (self.recent + [logs])[-self.patience:]
        rewards = [log["reward"] for log in self.recent]
        reason = None
        if len(self.recent) == self.patience:
            if self.maximum is not None and min(rewards) >= self.maximum - 1e-6:
                reason = (f"NOTE: every completion has scored the reward's maximum, {self.maximum:g}, for "
                          f"{self.patience} logging steps (step {state.global_step}): the policy solves these prompts, "
                          "and there is nothing left to learn from them; harder prompts would teach it more.")
            elif all(log.get("groups_without_spread", 0.0) >= 0.95 for log in self.recent):
                reason = "groups_without_spread >= 0.95: the completions of each prompt all got the same reward"
            elif max(rewards) - min(rewards) < 1e-6:
                reason = f"the mean reward has stayed at {rewards[-1]:.4g}"
        kl = [log.get(self.kl_key) for log in self.recent]
        collapsed = None not in kl and sum(kl) / len(kl) > self.kl_floor  # far from its reference, not stuck near it
        if reason and not self.warned:
            self.say(state, reason if reason.startswith("NOTE") else (
                f"WARNING: the policy has collapsed (step {state.global_step}): {reason} for {self.patience} logging "
                f"steps while it has moved far from its reference ({self.kl_key} {sum(kl) / len(kl):.3g}, past "
                f"{self.kl_floor:g}), so its reward no longer teaches it anything. Try {self.runaway_fixes}; the "
                "held-out table at the end says what it lost." if collapsed else
                f"WARNING: no learning signal for {self.patience} logging steps (step {state.global_step}): {reason}, "
                f"{self.consequence}. {self.fixes}"))
            if self.stop:
                control.should_training_stop = True
                self.say(state, "Stopping training (--stop_on_no_signal).")
        self.warned = reason is not None  # warn again once signal is back and lost again
        if self.beta == 0 and abs(logs.get("loss", 1.0)) < 1e-8 and "zero loss" not in self.told:
            self.told.add("zero loss")
            self.say(state, "NOTE: loss is 0 with beta=0. This is expected: GRPO's advantages have zero mean within "
                     "each group, so the loss is about 0 at every step even while the policy learns. Watch the reward.")


class OneAnswer(TrainerCallback):
    """Warn once when the policy gives one and the same answer to every prompt for `patience` logs in a row, at least
    PROMPTS distinct prompts in all: it has collapsed onto it, its reward that answer's (a newcomer's GRPO run answered
    `<answer>1</answer>` to every prompt for its last 43 steps, and nothing said so). `collapsed`: the answer, the
    prompts it was given to and the last step, while it lasts, for the closing summary. `samples()`: the last batch's
    completions (completions.jsonl's rows)."""

    PROMPTS = 10  # a task of few answers, rightly answered, gives one answer to a batch of 2 prompts now and then

    def __init__(self, samples: Callable[[], list[dict]], patience: int, ppo: bool):
        self.samples = samples
        self.patience = patience
        self.fixes = ("a lower --learning_rate, a higher --kl_coef or fewer --num_ppo_epochs" if ppo else
                      "a lower --learning_rate, a higher --beta, or a higher --temperature")
        self.answer = None  # the one answer of the logs in a row that gave one
        self.prompts = set()  # the prompts it was given to
        self.streak = 0  # those logs
        self.collapsed = None
        self.warned = False

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or "reward" not in logs:
            return
        rows = self.samples()
        answers = {str(row["completion"]).strip() for row in rows}
        answer = answers.pop() if len(answers) == 1 else None
        if answer is None or answer != self.answer:
            self.prompts = set()
            self.streak = 0
        self.answer = answer
        self.prompts |= {str(row["prompt"]) for row in rows} if answer is not None else set()
        self.streak += answer is not None
        lasts = self.streak >= self.patience and len(self.prompts) >= self.PROMPTS
        self.collapsed = (answer, len(self.prompts), state.global_step) if lasts else None
        if lasts and not self.warned:
            self.warned = True
            tqdm.write(f"WARNING: the policy has given one answer to all {len(self.prompts)} prompts of the last "
                       f"{self.streak} logs (step {state.global_step}): {answer[:80]!r}. It has collapsed onto it, "
                       f"and earns that answer's reward whatever the prompt. Try {self.fixes}; the held-out table at "
                       "the end says what it scores.")


class DriftWatch(TrainerCallback):
    """Warn once when the policy runs away from its reference without gaining: between two windows of `window` logs
    the KL to the reference has at least doubled, past `floor`, while the training reward fell by more than twice the
    error of the difference (its spread in the windows). PPO's `objective/kl` is per completion (`floor` 1 nat),
    GRPO's `kl` per token (0.1): a PPO run whose held-out pass@1 fell from 0.087 to 0.013 ended at 3.7 (issue 75). A
    rising KL alone is no alarm: every run that learns has one, and the default GRPO run's doubles, at a flat
    reward, on its way to learning."""

    def __init__(self, ppo: bool, window: int = 4):
        self.key, self.floor = KL[ppo]
        self.window = window
        self.fixes = RUNAWAY_FIXES[ppo]
        self.history = []  # (kl, reward) at each training log
        self.warned = False

    def on_log(self, args, state, control, logs=None, **kwargs):
        from extras.evaluation import standard_error

        if self.warned or not logs or logs.get(self.key) is None or logs.get("reward") is None:
            return
        self.history.append((logs[self.key], logs["reward"]))
        if len(self.history) <= self.window:
            return
        now = self.history[-self.window:]
        # Against the window before, and against the run's start, its first log (with its first window's noise): a
        # policy that fell within that window (PPO's reward 0.575 at update 1, 0 from update 2, its KL 3 to 9) has
        # every later window alike
        then = [("since the run's first log", self.history[0], self.history[:self.window])]
        if len(self.history) >= 2 * self.window:
            before = self.history[-2 * self.window:-self.window]
            then.insert(0, (f"over the last {2 * self.window} logs", mean_of(before), before))
        kl_now, reward_now = mean_of(now)
        for span, (kl_then, reward_then), window in then:
            error = math.hypot(*(standard_error([reward for _, reward in part]) or 0.0 for part in (window, now)))
            if kl_now > max(2 * kl_then, self.floor) and reward_now < reward_then - 2 * error:
                self.warned = True
                if state.is_world_process_zero:
                    tqdm.write(f"WARNING: the policy is running away from its reference without gaining (step "
                               f"{state.global_step}): the KL to it ({self.key}) rose from {kl_then:.3g} to "
                               f"{kl_now:.3g} {span}, while the training reward fell from {reward_then:.3g} to "
                               f"{reward_now:.3g}. Try {self.fixes}; the held-out table at the end says whether it "
                               "got worse.")
                return


def mean_of(logs: list[tuple[float, float]]) -> tuple[float, float]:
    """(KL, reward) pairs' means."""
    return tuple(sum(values) / len(logs) for values in zip(*logs))


def reward_maximum(reward_funcs: list, weights: list[float]) -> float | None:
    """The total reward's maximum where it is known: every reward a correctness reward (1.0 exactly when right,
    rewards.reads), none weighted below 0; else None (a reward model's, or another reward's, is not known).

    >>> from rewards import get_reward_funcs
    >>> reward_maximum(get_reward_funcs(["accuracy"], 8), [2.0]), reward_maximum(get_reward_funcs(["length"], 8), [1.0])
    (2.0, None)
    """
    if reward_funcs and all(getattr(f, "correctness", False) for f in reward_funcs) and min(weights) >= 0:
        return float(sum(weights))
    return None


def record(trainer, script_args, beta: float | None = None, samples: Callable[[], list[dict]] | None = None):
    """Add the run's records to `trainer`: metrics.jsonl and completions.jsonl (a GRPOTrainer's last generation batch,
    unless `samples` gives a PPO run's completions), short logs, and the no-signal watchdog (`beta`: GRPO's KL
    coefficient). Says how the run is spread over processes, and starts the clock (StartLines')."""
    tidy(trainer)
    ppo = samples is not None
    if ppo:  # trl 1.12's train() prints "===training policy===" through it, which says nothing about the run
        trainer.accelerator.print = lambda *args, **kwargs: None
    else:  # GRPO's groups: before the records and the watchdog, which read it
        trainer.add_callback(GroupSpread(trainer))
    samples = samples or (lambda: grpo_completions(trainer))
    trainer.add_callback(RunRecorder(trainer.args.output_dir, samples))
    trainer.add_callback(OneAnswer(samples, max(script_args.no_signal_patience, 1), ppo=ppo))
    if script_args.no_signal_patience > 0:
        adapter = trainer.reward_model if ppo else None  # PPO's: the script's RewardAdapter
        funcs, weights = (adapter.reward_funcs, adapter.weights) if adapter else (trainer.reward_funcs,
                                                                                   trainer.reward_weights)
        trainer.add_callback(NoSignalWatchdog(script_args.no_signal_patience, script_args.stop_on_no_signal, beta,
                                              groups=adapter is None, maximum=reward_maximum(funcs, weights.tolist())))
    trainer.add_callback(DriftWatch(ppo=ppo))
    print_distributed_mode(trainer)
    trainer.callback_handler.callbacks.insert(0, StartLines(trainer))  # before the held-out evaluation's table


class StartLines(TrainerCallback):
    """What a run says as training starts, when DeepSpeed has put the model in its training dtypes: the precision it
    trains in (`precision`: summary.json's `weights` is the same record) and its length in steps and completions;
    and, when its second step ends, about how long the rest will take at that step's pace (the first holds
    warm-up). It keeps the run's clock, from when the records were added, for summary.json's runtime."""

    def __init__(self, trainer):
        self.trainer = weakref.ref(trainer)  # a callback outlives nothing of the run's
        self.started = time.perf_counter()
        self.ends = []  # when the first two steps ended
        self.first_step = 0  # where training began: a resumed run's checkpoint

    def on_train_begin(self, args, state, control, **kwargs):
        self.first_step = state.global_step
        if state.is_world_process_zero:
            print(f"weights: {describe_precision(precision(self.trainer()))}", flush=True)
            print(f"length: {run_length(self.trainer(), state)}", flush=True)

    def on_step_end(self, args, state, control, **kwargs):
        if not state.is_world_process_zero or len(self.ends) == 2:
            return
        self.ends.append(time.perf_counter())
        left = state.max_steps - state.global_step
        if len(self.ends) == 2 and left > 0:
            seconds = self.ends[1] - self.ends[0]
            unit = "step" if hasattr(args, "num_generations") else "update"
            tqdm.write(f"{unit} {state.global_step} took {seconds:.1f} s: the {plural(left, unit)} left take about "
                       f"{duration(seconds * left)} at that pace (held-out evaluations and checkpoints aside)")


def run_length(trainer, state) -> str:
    """A run's length in steps (PPO's: updates) and completions, from where it starts.

    GRPO trains each step on per_device_train_batch_size x gradient_accumulation_steps x processes completions, and
    samples each of them for num_iterations steps; PPO samples a rollout of batch_size completions an update."""
    args = trainer.args
    done = f", from step {state.global_step}" if state.global_step else ""
    if hasattr(args, "num_generations"):
        processes = trainer.accelerator.num_processes
        per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps * processes
        sampled = state.max_steps * per_step // args.num_iterations
        return (f"{plural(state.max_steps, 'step')} of {per_step} completions, {sampled:,} completions sampled in "
                f"groups of {args.num_generations}{done}")
    sampled = state.max_steps * args.batch_size  # an update's rollout
    return f"{plural(state.max_steps, 'update')} of {args.batch_size} completions, {sampled:,} sampled{done}"


def plural(count: int, noun: str) -> str:
    """
    >>> plural(1, "step"), plural(300, "step")
    ('1 step', '300 steps')
    """
    return f"{count} {noun}" + ("s" if count != 1 else "")


def duration(seconds: float) -> str:
    """
    >>> duration(42), duration(600), duration(7380)
    ('42 s', '10 min', '2.0 h')
    """
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def precision(trainer) -> dict:
    """The dtypes of the weights that train and of those that do not (`weight_dtypes`), and what else decides the
    arithmetic: the fp32 copies DeepSpeed's optimizer steps where it holds the weights in half precision, or mixed
    precision's autocast."""
    record = weight_dtypes(trainer.model)
    reference = getattr(trainer, "ref_model", None)  # a frozen copy of the starting policy (none under LoRA)
    if isinstance(reference, torch.nn.Module):  # it was `frozen in -` while the copy was held (issue 83)
        record["frozen"] = sorted({*record["frozen"], *(name for names in weight_dtypes(reference).values()
                                                         for name in names)})
    if getattr(trainer, "is_deepspeed_enabled", False):
        if {"bfloat16", "float16"} & set(record["trained"]):
            record["optimizer_steps"] = "float32 copies (DeepSpeed)"
    elif trainer.accelerator.mixed_precision != "no":
        record["compute"] = f"{trainer.accelerator.mixed_precision} autocast"
        if hasattr(trainer.args, "num_ppo_epochs"):  # trl 1.12's PPOTrainer samples rollouts from the model unwrapped
            record["not_under_autocast"] = "rollouts and held-out evaluation"
    return record


def describe_precision(record: dict) -> str:
    """
    >>> describe_precision({"trained": ["bfloat16"], "frozen": [], "optimizer_steps": "float32 copies (DeepSpeed)"})
    'trained in bfloat16, its optimizer stepping float32 copies (DeepSpeed); frozen in -'
    >>> describe_precision({"trained": ["float32"], "frozen": ["bfloat16", "nf4"], "compute": "bf16 autocast"})
    'trained in float32, computed under bf16 autocast; frozen in bfloat16, nf4'
    >>> describe_precision({"trained": ["float32"], "frozen": [], "compute": "bf16 autocast",
    ...                     "not_under_autocast": "rollouts and held-out evaluation"})
    'trained in float32, computed under bf16 autocast but for its rollouts and held-out evaluation; frozen in -'
    """
    steps = f", its optimizer stepping {record['optimizer_steps']}" if "optimizer_steps" in record else ""
    compute = f", computed under {record['compute']}" if "compute" in record else ""
    compute += f" but for its {record['not_under_autocast']}" if "not_under_autocast" in record else ""
    return f"trained in {', '.join(record['trained'])}{steps}{compute}; frozen in {', '.join(record['frozen']) or '-'}"


def grpo_completions(trainer) -> list[dict]:
    """A GRPOTrainer's last generation batch, gathered from every process, one dict per completion: trl 1.12 keeps it
    in the private `_logs` (tests/unit/test_trl_private_api.py watches it). From trl 1.13 a chat's prompt and
    completion are messages, rendered here through the chat template as trl 1.12 logs them."""
    logs = trainer._logs
    kwargs = trainer.args.chat_template_kwargs
    return [{**logged_text(trainer.processing_class, prompt, completion, trainer.tools, kwargs),
             **{name: r[i] for name, r in logs["rewards"].items()},
             **{column: values[i] for column, values in logs["extra"].items() if i < len(values)}}
            for i, (prompt, completion) in enumerate(zip(logs["prompt"], logs["completion"]))]


def logged_text(tokenizer, prompt, completion, tools: list, chat_template_kwargs: dict | None) -> dict:
    """A logged prompt and completion as text: as given (trl 1.12), or a chat's messages (trl 1.13 on) rendered
    through the template with the run's tools, the ids decoded without special tokens, as trl 1.12 logs them."""
    if isinstance(prompt, str):
        return {"prompt": prompt, "completion": completion}
    render = lambda messages, **kw: tokenizer.apply_chat_template(  # noqa: E731
        messages, tools=tools or None, tokenize=True, return_dict=True, **kw, **(chat_template_kwargs or {})
    )["input_ids"]
    prompt_ids = render(prompt, add_generation_prompt=True)
    plain = isinstance(completion, str) or len(completion) == 1 and not completion[0].get("tool_calls")
    text = (completion if isinstance(completion, str) else completion[0]["content"]) if plain else tokenizer.decode(
        render(prompt + completion)[len(prompt_ids):], skip_special_tokens=True)
    return {"prompt": tokenizer.decode(prompt_ids, skip_special_tokens=True), "completion": text}


def distributed_mode(trainer) -> dict:
    """The distributed mode accelerate set up (not the one asked): single process, DDP, FSDP<v>, DeepSpeed ZeRO-<n>."""
    from accelerate.utils import DistributedType

    accelerator = trainer.accelerator
    state = trainer.accelerator.state
    mode = {DistributedType.FSDP: lambda: f"FSDP{state.fsdp_plugin.fsdp_version}",
            DistributedType.DEEPSPEED: lambda: f"DeepSpeed ZeRO-{state.deepspeed_plugin.zero_stage}"}.get(
        state.distributed_type, lambda: "DDP" if accelerator.num_processes > 1 else "single process")()
    return {"mode": mode, "processes": accelerator.num_processes, "device": accelerator.device.type,
            "backend": state.backend}


def describe(mode: dict) -> str:
    """
    >>> describe({"mode": "DDP", "processes": 2, "device": "cpu", "backend": "gloo"})
    'DDP, 2 processes on cpu (gloo)'
    """
    processes = f"{mode['processes']} process{'es' if mode['processes'] > 1 else ''}"
    return f"{mode['mode']}, {processes} on {mode['device']}" + (f" ({mode['backend']})" if mode["backend"] else "")


def print_distributed_mode(trainer) -> None:
    """The mode, before training; and a warning where `accelerate launch` was asked for more processes than run."""
    if not trainer.accelerator.is_main_process:
        return
    print(f"distributed: {describe(distributed_mode(trainer))}", flush=True)
    asked = launch_asked()
    if asked and asked > trainer.accelerator.num_processes:
        started = trainer.accelerator.num_processes
        print(f"WARNING: accelerate launch was asked for {asked} processes and started {started} "
              f"process{'es' if started > 1 else ''}: without a config that sets how to spread the "
              "run (accelerate_configs/ddp.yaml, for one), or --multi_gpu, or on a CPU --multi_cpu, it starts one. "
              "Add one of them (docs/scaling.md).", flush=True)


def launch_asked() -> int | None:
    """The --num_processes given to the `accelerate launch` that started this process, or None: not started so, or
    not readable. A launch asked for 2 processes on a CPU without a config ran one, and nothing said so (issue 83)."""
    import psutil  # accelerate's own dependency

    try:
        words = psutil.Process().parent().cmdline()
    except (psutil.Error, AttributeError):  # no parent, or not ours to read
        return None
    if "launch" not in words or not any(Path(word).name == "accelerate" for word in words[:words.index("launch")]):
        return None
    for word, value in zip(words, words[1:] + [""]):
        if word.startswith(("--num_processes", "--num-processes")):
            number = word.partition("=")[2] if "=" in word else value
            return int(number) if number.isdigit() else None
    return None


def weight_dtypes(model) -> dict[str, list[str]]:
    """The dtypes of the weights that train and of those that do not, a quantized weight named by its format
    (bitsandbytes' nf4, fp4, int8).

    >>> weight_dtypes(torch.nn.Linear(2, 2).requires_grad_(False))
    {'trained': [], 'frozen': ['float32']}
    """
    def name(p):
        kind = type(p).__name__  # bitsandbytes' Params4bit (packed in uint8) and Int8Params
        return getattr(p, "quant_type", "4-bit") if kind == "Params4bit" else "int8" if kind == "Int8Params" else str(
            p.dtype).removeprefix("torch.")

    dtypes = {"trained": set(), "frozen": set()}
    for p in model.parameters():
        dtypes["trained" if p.requires_grad else "frozen"].add(name(p))
    return {kind: sorted(names) for kind, names in dtypes.items()}


def held_parameters(trainer) -> list[int]:
    """The parameters each process holds (call on every process): all under DDP, about 1/N under FSDP or ZeRO-3."""
    def local(p):
        return p.ds_tensor.numel() if hasattr(p, "ds_tensor") else p.to_local().numel() if hasattr(
            p, "to_local") else p.numel()

    model = getattr(trainer, "model_wrapped", trainer.model)
    held = torch.tensor([sum(local(p) for p in model.parameters())], device=trainer.accelerator.device)
    return trainer.accelerator.gather(held).tolist()


def write_atomic(path: Path, text: str) -> None:
    """Write beside `path` and rename: a kill never leaves a half-written file."""
    path.with_suffix(path.suffix + ".tmp").write_text(text)
    os.replace(path.with_suffix(path.suffix + ".tmp"), path)


def read_jsonl_lenient(path: Path) -> list[dict]:
    """A JSON-lines file's records, without a last line a kill cut short; [] without the file."""
    records = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return records


def first_last(history: list[dict], key: str = "reward", fraction: float = 0.2) -> tuple[float, float]:
    """The mean of `key` over the first and the last `fraction` of the logs that have it."""
    values = [h[key] for h in history if h.get(key) is not None]
    k = max(1, round(len(values) * fraction))
    return (sum(values[:k]) / k, sum(values[-k:]) / k) if values else (float("nan"), float("nan"))


def training_noise(history: list[dict], fraction: float = 0.2) -> str:
    """What the first/last comparison of the training reward can tell: the difference between the two means against
    its standard error (from the logs' spread in each part). A difference within twice it is noise: on a recipe that
    logs a handful of prompts a step the curve is flat noise while the held-out evaluation doubles."""
    from extras.evaluation import standard_error

    values = [h["reward"] for h in history if h.get("reward") is not None]
    k = max(1, round(len(values) * fraction))
    errors = [standard_error(values[:k]), standard_error(values[-k:])]
    if None in errors:
        return ""
    difference = sum(values[-k:]) / k - sum(values[:k]) / k
    error = (errors[0] ** 2 + errors[1] ** 2) ** 0.5
    verdict = "within the noise: the held-out evaluation tells more" if abs(difference) < 2 * error else (
        "more than twice the noise")
    return f"  the difference, {difference:+.3f} ± {error:.3f} ({k} logs each), is {verdict}"


def change_of(change: dict | None, prompts: int) -> str:
    """A held-out metric's change over the same prompts, its paired standard error, and whether it beats twice that.

    >>> change_of({"change": -0.074, "standard_error": 0.030}, 20)
    ', -0.074 ± 0.030 over the same 20 prompts: worse, by more than twice its error'
    """
    if not change or change["standard_error"] is None:
        return ""
    beyond = abs(change["change"]) > 2 * change["standard_error"]
    verdict = ("better, by more than twice its error" if change["change"] > 0 else
               "worse, by more than twice its error") if beyond else "within twice its error: no change shown"
    return f", {change['change']:+.3f} ± {change['standard_error']:.3f} over the same {prompts} prompts: {verdict}"


def worse(changes: dict, title: str) -> list[str]:
    """A warning where a held-out reward fell by more than twice its paired error (`changes`: summary.json's
    held_out_change)."""
    fell = [f"{name} {metric} ({c['change']:+.3f} ± {c['standard_error']:.3f})"
            for name, metrics in changes.items() for metric, c in metrics.items()
            if c and c["standard_error"] is not None and c["change"] < -2 * c["standard_error"]]
    if not fell:
        return []
    change = ("a lower --learning_rate, a higher --kl_coef, fewer --num_ppo_epochs" if title == "PPO" else
              "a lower --learning_rate, a higher --beta")
    return [f"  WARNING: the run made the policy worse on the held-out prompts: {', '.join(fell)}, each by more "
            f"than twice its error. Try {change}, and read the completions in eval.json (docs/evaluation.md)"]


def best_checkpoint(evaluation: dict | None) -> list[str]:
    """The closing lines on the step --metric_for_best_model ranks best against the last one evaluated, the paired
    change between them over the prompts, and which of the two the saved model is."""
    best = (evaluation or {}).get("best")
    if not best:
        return []
    figure = lambda value, error: f"{value:.3f}" + ("" if error is None else f" ± {error:.3f}")  # noqa: E731
    line = (f"  held-out {best['metric']}, best at step {best['step']}: {figure(best['value'], best['error'])}; at the "
            f"last evaluated, step {best['last_step']}: {figure(best['last_value'], best['last_error'])}")
    change = best.get("change") or {}
    if best["step"] != best["last_step"] and change.get("standard_error"):
        beyond = abs(change["change"]) > 2 * change["standard_error"]
        line += (f", {change['change']:+.3f} ± {change['standard_error']:.3f} over the same prompts: "
                 + ("more than twice its error" if beyond else "within twice its error: no difference shown"))
    saved = ("the model saved is the best step's (--load_best_model_at_end)" if best["saved"] else
             "the model saved is the last step's" + ("" if best["step"] == best["last_step"] else
                                                     "; --load_best_model_at_end saves the best step's"))
    return [line, f"    {saved}"]


def one_answer(trainer) -> list[str]:
    """A warning where the policy ended collapsed onto one answer (OneAnswer)."""
    watch = next((c for c in trainer.callback_handler.callbacks if isinstance(c, OneAnswer)), None)
    if watch is None or watch.collapsed is None:
        return []
    answer, prompts, step = watch.collapsed
    return [f"  WARNING: the policy ended giving one answer, {answer[:80]!r}, to all {prompts} prompts of its last "
            f"{watch.streak} logs, up to step {step}: it collapsed onto it (completions.jsonl)"]


def error_of(errors: list, prompts: int) -> str:
    """A before -> after pair's standard errors, over how many prompts."""
    if all(e is None for e in errors):
        return ""
    return f" (± {' and '.join('-' if e is None else f'{e:.3f}' for e in errors)}, {prompts} prompts)"


def start_label(evaluation: dict) -> str:
    """The held-out evaluation's first measurement: `before`, the run's start, or a resumed run's checkpoint."""
    step = evaluation.get("before_step")
    return f"step {step}" if step else "before"


def smoothed(steps: list, values: list[float]) -> tuple[list, list[float]]:
    """A centred moving average over about a fifth of the points (at least 3), where its window is whole: a window
    cut at an end of the curve is a one-sided average, which ended at 0.44 on a PPO run whose last rewards fell to
    0.225. So the line stops short of the ends, and the points show them.

    >>> smoothed([1, 2, 3, 4], [0.0, 1.0, 0.0, 1.0])
    ([2, 3], [0.3333333333333333, 0.6666666666666666])
    """
    half = max(1, len(values) // 10)
    kept = range(half, len(values) - half)
    return [steps[i] for i in kept], [sum(values[i - half:i + half + 1]) / (2 * half + 1) for i in kept]


def headline(metrics: dict) -> dict:
    """A reward's before/after metrics: pass@1 and greedy accuracy where it is a correctness reward, means for the
    others; the KL's, as it is."""
    keys = ("pass@1", "greedy_accuracy") if "pass@1" in metrics else ("mean_reward", "greedy_reward") if (
        "mean_reward" in metrics) else tuple(metrics)
    return {key: metrics[key] for key in keys if metrics.get(key) is not None}


def held_out_curve(evaluation: dict | None) -> tuple[str, str, list[tuple]] | None:
    """(reward, metric, [(step, value, error)]): the held-out headline over the run, before, during (--eval_strategy
    steps) and after: pass@1 of the first correctness reward, else the first reward's mean. None without points
    during training, where the before/after bars say it all."""
    if not evaluation or not evaluation.get("during") or not evaluation.get("before"):
        return None
    names = [name for name in evaluation["before"] if name != "kl"]
    name = next((n for n in names if "pass@1" in evaluation["before"][n]), names[0] if names else None)
    if name is None:
        return None
    metric = "pass@1" if "pass@1" in evaluation["before"][name] else "mean_reward"
    measured = [(evaluation.get("before_step", 0), evaluation["before"], evaluation.get("before_standard_error", {}))]
    measured += [(p["step"], p["metrics"], p["standard_error"]) for p in evaluation["during"]]
    if "after" in evaluation and evaluation["after_step"] not in [p["step"] for p in evaluation["during"]]:
        # not where a point measured the last step: "after" is then the best checkpoint's (--load_best_model_at_end)
        measured.append((evaluation["after_step"], evaluation["after"], evaluation.get("after_standard_error", {})))
    points = [(step, metrics.get(name, {}).get(metric), errors.get(name, {}).get(metric) or 0.0)
              for step, metrics, errors in measured]
    return name, metric, [point for point in points if point[1] is not None]


def plot(history: list[dict], reward_keys: list[str], out: Path, title: str, evaluation: dict | None) -> list[Path]:
    """reward_curve.png (the training reward, each log and its moving average, each reward's where there are
    several, TRL's eval reward; beside it the held-out before/after) and training_curves.png (a panel per reward,
    KL, completion length, tool use). PNGs need no server or optional package, unlike --report_to's dashboards."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    held_out = {name: headline(m) for name, m in (evaluation or {}).get("after", {}).items()
                if name != "kl"}  # rewards on one axis; the KL, in nats, is in the table and summary.json
    fig, axes = plt.subplots(1, 1 + bool(held_out), figsize=(11 if held_out else 7, 4), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 2]} if held_out else None)
    series = lambda key: [(h["step"], h[key]) for h in history if h.get(key) is not None]  # noqa: E731
    for i, key in enumerate(["reward"] + (reward_keys if len(reward_keys) > 1 else [])):
        if points := series(key):
            name = "reward" if key == "reward" else key[8:-5]
            steps, values = zip(*points)
            if key == "reward":
                axes[0, 0].plot(steps, values, ".", color="C0", alpha=0.35, label="reward, each logged step")
            axes[0, 0].plot(*smoothed(list(steps), list(values)), color=f"C{i}", linewidth=2 if i == 0 else 1,
                            label=f"{name}, moving average")
    if points := series("eval_reward"):
        axes[0, 0].plot(*zip(*points), linestyle="--", marker="o", color="C7", label="eval_reward (TRL's eval)")
    axes[0, 0].xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0, 0].set(xlabel="step", ylabel="mean reward", title=f"{title}: training reward")
    if curve := held_out_curve(evaluation):  # on its own axis: a metric's scale need not be the reward's
        name, metric, points = curve
        right = axes[0, 0].twinx()
        right.errorbar(*zip(*points), marker="s", color="C3", capsize=3, label=f"held-out {name} {metric} (± 1 s.e.)")
        right.set_ylabel(f"held-out {metric}", color="C3")
        right.legend(fontsize=8, loc="lower right")
        axes[0, 0].set_title(f"{title}: training reward, and held-out {metric}")
    if held_out:
        labels = [f"{name}\n{metric}" for name, metrics in held_out.items() for metric in metrics]
        for offset, when in ((-0.2, "before"), (0.2, "after")):
            heights = [evaluation.get(when, {}).get(n, {}).get(m) or 0.0 for n, ms in held_out.items() for m in ms]
            errors = [evaluation.get(f"{when}_standard_error", {}).get(n, {}).get(m) or 0.0
                      for n, ms in held_out.items() for m in ms]
            places = [i + offset for i in range(len(labels))]
            axes[0, 1].bar(places, heights, width=0.4, yerr=errors, capsize=3,
                           label=start_label(evaluation) if when == "before" else when)
            for place, height, error in zip(places, heights, errors):  # above its error bar, clear of the other's
                axes[0, 1].annotate(f"{height:.2f}", (place, height + error), xytext=(0, 2), textcoords="offset points",
                                    ha="center", va="bottom", fontsize=7)
        axes[0, 1].margins(y=0.15)  # room for the labels above the highest error bar
        axes[0, 1].set_xticks(range(len(labels)), labels, fontsize=8)
        axes[0, 1].set_title(f"{evaluation.get('num_prompts')} held-out prompts, before and after training (± 1 s.e.)",
                             fontsize=10)
    for ax in axes[0]:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    paths = [out / "reward_curve.png", out / "training_curves.png"]
    fig.tight_layout()
    fig.savefig(paths[0], dpi=100)
    plt.close(fig)

    panels = [(key[8:-5], [key]) for key in reward_keys] + [
        ("KL to the reference", ["kl", "objective/kl"]), ("completion length (tokens)", ["completions/mean_length"]),
        # GRPO learns nothing from a group whose completions all score alike, nor from a completion cut off
        ("groups with no reward spread (GRPO)", ["groups_without_spread"]),
        ("completions cut at the length budget", ["completions/clipped_ratio"]),
        # PPO: the value model's fit, and how often the clip held the policy's and the value's steps
        ("value loss (PPO)", ["loss/value_avg"]), ("clipped fraction", ["policy/clipfrac_avg", "val/clipfrac_avg",
                                                                       "clip_ratio/region_mean"]),
        ("entropy (nats a token)", ["policy/entropy_avg", "entropy"]),
        ("tool use (per completion)", ["tools/call_frequency", "tools/failure_frequency"])]
    # A clipped fraction at 0 throughout says nothing: GRPO's, with one update a generation, whose ratio is 1
    flat = {key for key in ("policy/clipfrac_avg", "val/clipfrac_avg", "clip_ratio/region_mean")
            if not any(value for _, value in series(key))}
    panels = [(name, drawn) for name, keys in panels if (drawn := [k for k in keys if series(k) and k not in flat])]
    if panels:
        fig, axes = plt.subplots(len(panels), 1, figsize=(7, 2.2 * len(panels)), sharex=True, squeeze=False)
        for ax, (name, keys) in zip(axes[:, 0], panels):
            for key in keys:
                ax.plot(*zip(*series(key)), label=key)
            if len(keys) > 1:
                ax.legend(fontsize=7)
            ax.set_title(name, fontsize=10)
            ax.grid(alpha=0.3)
        axes[-1, 0].set_xlabel("step")
        axes[-1, 0].xaxis.set_major_locator(MaxNLocator(integer=True))  # whole steps (the axis is shared)
        fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(paths[1], dpi=100)
        plt.close(fig)
    return [p for p in paths if p.exists()]


def summarize(trainer, args: list, title: str, evaluation: dict | None):
    """summary.json, the plots, and the closing summary printed, from the trainer's log_history: the reward's first and
    last 20%, held-out before -> after where it ran, where everything is. Call it on every process (each one's
    parameters are gathered)."""
    held = held_parameters(trainer)
    clock = next(c for c in trainer.callback_handler.callbacks if isinstance(c, StartLines))
    runtime = time.perf_counter() - clock.started
    if not trainer.accelerator.is_main_process:
        return
    import accelerate
    import datasets
    import peft
    import transformers
    import trl

    out = Path(trainer.args.output_dir)
    logs = [h for h in trainer.state.log_history if "train_runtime" not in h]  # each log, with its step
    history = [h for h in logs if "reward" in h]  # the training logs
    first, last = first_last(history)
    reward_keys = sorted({k for h in history for k in h if k.startswith("rewards/") and k.endswith("/mean")})
    tool_keys = sorted({k for h in history for k in h if k.startswith("tools/")})
    held_out = {name: {metric: [evaluation.get("before", {}).get(name, {}).get(metric), value]
                       for metric, value in headline(metrics).items()}
                for name, metrics in (evaluation or {}).get("after", {}).items()}
    summary = {
        "command": " ".join(sys.argv), **{name: asdict(a) if name != "training_args" else a.to_dict()
                                          for name, a in zip(("script_args", "training_args", "model_args"), args)},
        "versions": {"python": platform.python_version(), **{m.__name__: m.__version__ for m in (
            torch, transformers, trl, peft, accelerate, datasets)}},
        "world_size": trainer.accelerator.num_processes,
        "distributed": {**distributed_mode(trainer), "held_parameters": held},
        "weights": precision(trainer),
        "global_step": trainer.state.global_step, "train_runtime": runtime,  # this process's: from a resume, its part
        "resumed_from": trainer.args.resume_from_checkpoint,
        "reward_first_20pct": first, "reward_last_20pct": last,
        "reward_per_func_last": {k: history[-1][k] for k in reward_keys} if history else {},
        # tool-calling GRPO: "more calls, more right answers" reads off one file
        **({"first_last_20pct": {k: first_last(history, k) for k in reward_keys + tool_keys}} if tool_keys else {}),
        **({"held_out_before_after": held_out, "held_out_change": {
            name: {metric: (evaluation.get("change") or {}).get(name, {}).get(metric) for metric in metrics}
            for name, metrics in held_out.items() if name != "kl"}, "held_out_standard_error": {
            name: {metric: [evaluation.get(f"{when}_standard_error", {}).get(name, {}).get(metric) for when in
                            ("before", "after")] for metric in metrics} for name, metrics in held_out.items()},
            "held_out_prompts": evaluation["num_prompts"], "held_out_first_step": evaluation.get("before_step")}
           if held_out else {}),
        **({"held_out_best": evaluation["best"]} if (evaluation or {}).get("best") else {}),
    }
    write_atomic(out / "summary.json", json.dumps(summary, indent=2, default=str) + "\n")
    plots = plot(logs, reward_keys, out, title, evaluation)
    fmt = lambda value: "-" if value is None else f"{value:.3f}"  # noqa: E731
    steps = plural(trainer.state.global_step, "step")
    began = clock.first_step
    part = (f", the {plural(trainer.state.global_step - began, 'step')} after step {began} in {runtime:.1f}s (it "
            "resumed there)" if began else f" in {runtime:.1f}s")
    if evaluation:  # what this run's held-out evaluations took of it: a resumed run's kept "before" took none
        spent = sum([evaluation.get("before_seconds", 0) if evaluation.get("before_step", 0) == began else 0,
                     *(point["seconds"] for point in evaluation.get("during", []) if point["step"] > began),
                     evaluation.get("after_seconds", 0)])
        part += f", {spent:.1f}s of it held-out evaluation" if spent else ""
    lines = [f"\n{title}: {steps}{part} ({describe(summary['distributed'])})",
             f"  mean reward, first 20% of logged steps: {first:.3f}",
             f"  mean reward, last 20% of logged steps:  {last:.3f}",
             *filter(None, [training_noise(history)]),
             *(f"  {k}, first -> last 20%: {a:.3f} -> {b:.3f}"
               for k, (a, b) in summary.get("first_last_20pct", {}).items()),
             *(f"  held-out {name} {metric}, {start_label(evaluation)} -> after: {fmt(a)} -> {fmt(b)}"
               + (change_of(summary["held_out_change"][name][metric], evaluation["num_prompts"]) if name != "kl" else
                  error_of(summary["held_out_standard_error"][name][metric], evaluation["num_prompts"])
                  + ("; below 0 by chance: each completion's log-ratio is a sample, and their mean estimates the KL"
                     if b is not None and b < 0 else ""))
               for name, metrics in held_out.items() for metric, (a, b) in metrics.items()),
             *best_checkpoint(evaluation),
             *worse(summary.get("held_out_change", {}), title),
             *one_answer(trainer),
             f"  model:       {out}", f"  metrics:     {out / 'metrics.jsonl'}",
             f"  completions: {out / 'completions.jsonl'}", f"  summary:     {out / 'summary.json'}",
             f"  plots:       {', '.join(map(str, plots))}",
             f"  next:        python -m extras.export {out} --chat   (merged, GGUF: docs/after-training.md)"]
    if "tensorboard" in trainer.args.report_to:
        lines.append(f"  tensorboard: tensorboard --logdir {os.environ.get('TENSORBOARD_LOGGING_DIR') or out / 'runs'}")
    if "trackio" in trainer.args.report_to:
        where = os.environ.get("TRACKIO_DIR")
        lines.append(f"  trackio:     trackio show --project {trainer.args.project}"
                     + (f"   (with TRACKIO_DIR={where})" if where else ""))
    print("\n".join(lines))
