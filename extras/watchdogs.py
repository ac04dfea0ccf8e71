"""The warnings a run gives while it trains, each in one paragraph with what to try (docs/outputs.md): no learning
signal (GRPO's groups all alike, a flat reward, a reward that scores nothing), a solved task, a collapse onto one
answer, and a policy running away from its reference without gaining. outputs.record adds them to the trainer.
"""

import math
import weakref
from typing import Callable

from tqdm.auto import tqdm
from transformers import TrainerCallback

from extras.stats import standard_error


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
        self.fixes = RUNAWAY_FIXES[ppo] + ("" if ppo else "; a higher --temperature samples more answers")
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
