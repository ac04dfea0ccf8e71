"""Reward functions for GRPO and PPO, and the registry both scripts pick them from by name (`--reward_funcs`).

A reward is `(completions, **kwargs) -> list[float | None]`: one value per completion, None where it cannot score
(TRL leaves that sample out of the reward). A completion is a string or a list of messages (`completion_text`);
dataset columns arrive as keyword arguments (`answer=[...]`), with the trainer's `prompts` and `completion_ids`.
Your own: `--reward_funcs my_module.my_reward`, or an entry in REWARDS. Settings are fields of RewardArguments.
"""

import asyncio
import functools
import importlib
import inspect
import logging
import math
import numbers
import os
import re
import threading
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field, fields

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
from sympy import And, Eq, FiniteSet, Or, Set, Tuple  # the types math-verify's parse returns (sympy comes with it)
from sympy.core.relational import Relational
from trl.rewards import get_repetition_penalty_reward, get_soft_overlong_punishment

# name -> reward, built from the run's settings (RewardArguments) and its completion budget in tokens
REWARDS: dict[str, Callable] = {
    "accuracy": lambda args, max_len: accuracy_reward,
    "reasoning_accuracy": lambda args, max_len: reasoning_accuracy_reward,
    "exact_match": lambda args, max_len: exact_match_reward,
    "format": lambda args, max_len: format_reward,
    "soft_format": lambda args, max_len: soft_format_reward,
    "tag_count": lambda args, max_len: tag_count_reward,
    "length": lambda args, max_len: functools.partial(length_reward, max_completion_length=max_len),
    # DAPO's soft overlong punishment (arXiv 2503.14476, Eq. 13), over the last `overlong_buffer` of the budget
    "overlong": lambda args, max_len: get_soft_overlong_punishment(
        max_len, max(1, int(max_len * args.overlong_buffer))),
    # "Demystifying Long CoT" (arXiv 2502.03373), Appendix C.2: (1 - unique n-grams / n-grams) * max_penalty
    "repetition": lambda args, max_len: get_repetition_penalty_reward(args.repetition_ngram_size,
                                                                      args.repetition_max_penalty),
    "cosine": lambda args, max_len: functools.partial(
        cosine_reward, max_len=max_len, wrong=(args.cosine_max_value_wrong, args.cosine_min_value_wrong),
        correct=(args.cosine_min_value_correct, args.cosine_max_value_correct)),
    "code": lambda args, max_len: functools.partial(code_reward, limits=code_limits(args.code_timeout)),
    "sentiment": lambda args, max_len: sentiment_reward,
}


@dataclass
class RewardArguments:
    """The rewards of a run and their settings, in both scripts: each a flag and a recipe key (docs/rewards.md)."""

    reward_funcs: list[str] = field(default_factory=lambda: ["accuracy"], metadata={
        "help": f"Rewards: {', '.join(REWARDS)}, or a dotted path module.function to your own."})
    eval_reward_funcs: list[str] = field(default_factory=list, metadata={
        "help": "Rewards the held-out evaluation reports beside the training ones, never trained on: a true reward "
                "beside a learned reward model (docs/evaluation.md)."})
    overlong_buffer: float = field(default=0.25, metadata={"help": "overlong: the last part of the budget penalised."})
    repetition_ngram_size: int = field(default=3, metadata={"help": "repetition: the n-gram size in tokens."})
    repetition_max_penalty: float = field(default=-1.0, metadata={"help": "repetition: one n-gram repeated gets it."})
    cosine_min_value_wrong: float = -1.0
    cosine_max_value_wrong: float = -0.5
    cosine_min_value_correct: float = 0.5
    cosine_max_value_correct: float = 1.0
    code_timeout: float = field(default=10.0, metadata={"help": "code: seconds per completion (and CPU seconds)."})

    def __post_init__(self):  # a recipe may give one value where a list is taken (`reward_funcs: accuracy`)
        for f in fields(self):
            if str(f.type).startswith("list") and isinstance(getattr(self, f.name), str):
                setattr(self, f.name, [getattr(self, f.name)])


def get_reward_funcs(names: list[str], max_completion_length: int, args: RewardArguments | None = None) -> list:
    """Registry names or dotted paths `module.function` -> rewards, each named and checked (async ones as they are).

    >>> [f.__name__ for f in get_reward_funcs(["accuracy", "overlong"], max_completion_length=256)]
    ['accuracy', 'overlong']
    """
    funcs = []
    args = args or RewardArguments()
    for name in names:
        if name in REWARDS:
            funcs.append(CheckedReward(name, REWARDS[name](args, max_completion_length)))
        elif "." in name:
            func = import_dotted(name, "reward")
            if not callable(func):
                raise ValueError(f"reward '{name}' is a {type(func).__name__}, not a function")
            # GRPOTrainer runs async rewards concurrently, as they are; the rest call them through run_reward
            funcs.append(func if inspect.iscoroutinefunction(func) else CheckedReward(func.__name__, func))
        else:
            raise ValueError(f"unknown reward '{name}'; choose one of: {', '.join(REWARDS)}, or give a dotted path "
                             "like my_rewards.my_fn")
    return funcs


def run_reward(reward_func, **kwargs) -> list[float | None]:
    """A reward's values: an async reward (GRPOTrainer awaits those itself, concurrently) run to its end here, for
    PPO's reward adapter and the held-out evaluation, which call rewards one at a time.

    >>> async def halves(completions, **kwargs):
    ...     return [0.5] * len(completions)
    >>> run_reward(halves, completions=["a", "b"])
    [0.5, 0.5]
    """
    values = reward_func(**kwargs)
    return asyncio.run(values) if inspect.isawaitable(values) else values


def check_columns(reward_funcs: list, splits: list, dataset_name: str) -> None:
    """ValueError for a column a reward needs (its `columns`, see `reads`) and the data lacks: `accuracy` without
    `answer` would be None for every sample, and the run would train on nothing. Checked before any model loads, as
    are golds that `accuracy` reads as math and that are text (words, names, letters), said in a note."""
    flags = {"answer": "--dataset_answer_column", "solution": "--dataset_answer_column"}
    for split in (s for s in splits if s is not None):
        for func in reward_funcs:
            for need in getattr(func, "columns", ()):
                names = (need,) if isinstance(need, str) else tuple(need)
                if not any(n in split.column_names for n in names):
                    others = [c for c in split.column_names if c not in ("prompt", "input_ids")]
                    how = (f"map yours onto it with {flags[names[0]]} <column>" if names[0] in flags else
                           f"rename yours to '{names[0]}' in the data") if others else (
                        f"add one to the data, or, if the reward can score without it, give its argument a default "
                        f"({names[0]}=None)")  # no column to map: a prompt-only dataset
                    if reads_math(func) and others:
                        how += " (a gold it reads as a number or math; for text, --reward_funcs exact_match)"
                    raise ValueError(f"reward '{func.__name__}' needs a column {' or '.join(map(repr, names))}, and "
                                     f"{dataset_name} has: {', '.join(split.column_names)}; {how}")
    split = splits[0]
    column = next((c for c in ("answer", "solution") if split is not None and c in split.column_names), None)
    math_rewards = sorted({func.__name__ for func in reward_funcs if reads_math(func)})
    if column and math_rewards and os.environ.get("RANK", "0") == "0":
        golds = split[column][:200]
        text = [gold for gold in golds if not reads_as_math(gold)]
        if text:
            named = ", ".join(f"'{_gold_answer(gold)}'" for gold in text[:3])
            verb = "reads" if len(math_rewards) == 1 else "read"
            print(f"note: {' and '.join(math_rewards)} {verb} golds as numbers and math, and {len(text)} of the first "
                  f"{len(golds)} in {dataset_name}'s '{column}' are text ({named}): a completion that states one "
                  "scores 0 unless it is in <answer></answer> or \\boxed{}, where it is read as symbols ('enemy' "
                  "equals 'meney'); --reward_funcs exact_match compares text")


def reads_math(func) -> bool:
    """Whether a reward grades with `accuracy`, which reads golds as numbers and math."""
    return getattr(func, "declared", func) in (accuracy_reward, reasoning_accuracy_reward, cosine_reward)


def reads_as_math(gold) -> bool:
    """Whether `accuracy` reads a gold as a number or math wherever a completion states it: a number, a gold with
    digits, LaTeX or operators, or one it finds in "The answer is <gold>."; text (`enemy`, `Paris`, `B`) it does not.

    >>> [reads_as_math(gold) for gold in ["72", r"\\frac{1}{2}", "x > 1", "#### 18", "enemy", "New York", "B", None]]
    [True, True, True, True, False, False, False, True]
    """
    gold = _gold_answer(gold)
    return not gold or bool(MATH_SIGN.search(gold)) or extract_answer(f"The answer is {gold}.") is not None


def check_reward_model(path: str, trust_remote_code: bool = False) -> None:
    """ValueError unless `path` is a reward model, a sequence classifier with one output: a causal LM would load as
    one with a new, random head, and the policy would train on noise. Reads its config only."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    except OSError as err:  # no such folder here, and none on the hub or no hub
        raise ValueError(f"reward model {path}: no such folder here, and the hub has none or is not reachable") from err
    architectures = config.architectures or []
    if not any(a.endswith("ForSequenceClassification") for a in architectures) or config.num_labels != 1:
        raise ValueError(f"reward model {path} is {', '.join(architectures or ['an unknown architecture'])} with "
                         f"{config.num_labels} labels; a reward model is a sequence-classification model with one "
                         "output (num_labels=1) that scores a whole prompt + completion")


def completion_text(completion: str | list[dict]) -> str:
    """The text of a completion in either format: a string, or the last message's content.

    >>> completion_text("42"), completion_text([{"role": "assistant", "content": "42"}])
    ('42', '42')
    """
    return completion if isinstance(completion, str) else completion[-1]["content"] or ""  # None: a tool call only


def reads(columns=(), correctness: bool = False, final_answer: Callable | None = None):
    """Declare a reward's dataset columns (each a name, or a tuple of names one of which is enough; checked before
    any model loads), whether it is 1.0 exactly when right (the evaluation's pass@k), and how to read its final
    answer (maj@k)."""

    def declare(func):
        func.columns = tuple(columns)
        func.correctness = correctness
        func.final_answer = final_answer
        return func

    return declare


# ---- the rewards -------------------------------------------------------------------------------------------------


@reads(columns=[("answer", "solution")], correctness=True, final_answer=lambda text: final_answer(text))
def accuracy_reward(completions, answer=None, solution=None, **kwargs) -> list[float | None]:
    r"""1.0 if the final answer (`extract_answer`) equals the gold `answer` (or `solution`) column, else 0.0; None
    without a gold. Numbers compare as numbers (units, `$`, `%`, thousands commas), the rest with math-verify, within
    MATH_VERIFY_BUDGET seconds a call. A list of numbers is a list of guesses, 0, unless the gold has several values
    (a list, a set, an interval, an inequality: `x > 1` and `(1, \infty)` are equal either way round).

    >>> accuracy_reward(["<answer>72</answer>", "#### 71", r"\boxed{\frac{1}{2}}", "no idea"],
    ...                 answer=["She sold 72. #### 72", "72", "0.5", None])
    [1.0, 0.0, 1.0, None]
    """
    golds = answer if answer is not None else solution
    if golds is None:
        return [None] * len(completions)
    parse_timeout, verify_timeout = _math_verify_timeouts()
    deadline = time.monotonic() + MATH_VERIFY_BUDGET
    late = 0

    def parsed(text: str) -> tuple | None:  # math-verify's parse (cached); None once this call's budget is spent
        in_time = text in _PARSED or time.monotonic() < deadline
        return _parse(text, _within(parse_timeout, deadline)) if in_time else None

    rewards = []
    for completion, gold in zip(completions, golds, strict=True):
        gold = _gold_answer(gold)
        gold_number = _to_number(gold) if gold else None
        gold_parsed = () if not gold or gold_number is not None else parsed(gold)
        pred = extract_answer(completion_text(completion))
        if gold_number is None and gold_parsed == ():
            rewards.append(None)  # no gold answer, or one math-verify cannot read
        elif not pred or (GUESSES.search(pred) and not _several_values(gold_parsed)):
            rewards.append(0.0)  # no answer, or a list of guesses at one value
        elif (pred_number := _to_number(pred)) is not None and gold_number is not None:
            rewards.append(float(_same_number(pred, pred_number, gold, gold_number)))
        else:
            gold_parsed = gold_parsed or parsed(gold)
            pred_parsed = parsed(pred) if gold_parsed is not None else None
            if gold_parsed is None or pred_parsed is None or time.monotonic() >= deadline:
                late += 1  # this call has had its math-verify time: the trainer waits no longer
                rewards.append(0.0)
            else:
                # a relation and a set compare both ways round: `x > 1` is `(1, \infty)` (math-verify's own option)
                rewards.append(float(bool(gold_parsed) and bool(pred_parsed) and verify(
                    list(gold_parsed), list(pred_parsed), timeout_seconds=_within(verify_timeout, deadline),
                    allow_set_relation_comp=True)))
    if late:
        logging.getLogger(__name__).warning(
            "accuracy: %d of %d completions scored 0 unchecked: math-verify had used this call's %.0f s budget "
            "(rewards.MATH_VERIFY_BUDGET)", late, len(completions), MATH_VERIFY_BUDGET)
    return rewards


@reads(columns=[("answer", "solution")], correctness=True, final_answer=lambda text: final_answer(after_thinking(text)))
def reasoning_accuracy_reward(completions, answer=None, solution=None, **kwargs) -> list[float | None]:
    """`accuracy` of what follows the last `</think>` (as TRL's reasoning_accuracy_reward): no conclusion scores 0.

    >>> reasoning_accuracy_reward(["<think>7?</think> It is 7.", "<think>It is 7", "7"], answer=["7"] * 3)
    [1.0, 0.0, 0.0]
    """
    return accuracy_reward([after_thinking(completion_text(c)) for c in completions], answer=answer, solution=solution)


@reads(columns=[("answer", "solution")], correctness=True, final_answer=lambda text: exact_answer(text))
def exact_match_reward(completions, answer=None, solution=None, **kwargs) -> list[float | None]:
    r"""1.0 if the final answer equals the gold `answer` (or `solution`) column as text, or one of a list of golds,
    else 0.0; None without a gold. Both are compared normalised (`normalize_text`: case, punctuation, symbols and
    spacing aside). The final answer (`exact_answer`) is the last `<answer>`, else the last `\boxed{}`, else the line
    after the last `####`, else the sentence after the last "the answer is", else the whole completion: for golds
    that are words, names or letters, which `accuracy` reads as math. A list of guesses is not the gold.

    >>> exact_match_reward(['enemy"', "The answer is Paris.", "Paris, London or Rome", "**Yes**", r"\boxed{\text{B}}"],
    ...                    answer=["enemy", "paris", "Paris", ["yes", "y"], "(B)"])
    [1.0, 1.0, 0.0, 1.0, 1.0]
    """
    golds = answer if answer is not None else solution
    if golds is None:
        return [None] * len(completions)
    rewards = []
    for completion, gold in zip(completions, golds, strict=True):
        accepted = {normalize_text(_gold_answer(g)) for g in (gold if isinstance(gold, (list, tuple)) else [gold])}
        accepted.discard("")
        rewards.append(float(exact_answer(completion_text(completion)) in accepted) if accepted else None)
    return rewards


def format_reward(completions, **kwargs) -> list[float]:
    """1.0 for exactly `<think>...</think><answer>...</answer>` (each tag once, a non-empty answer), else 0.0.

    >>> format_reward(["<think>2 + 2</think>\\n<answer>4</answer>", "<answer>4</answer>"])
    [1.0, 0.0]
    """
    rewards = []
    for text in map(completion_text, completions):
        match = THINK_ANSWER_FORMAT.fullmatch(text)
        rewards.append(float(bool(match and match.group(1).strip() and all(text.count(t) == 1 for t in TAGS))))
    return rewards


def soft_format_reward(completions, **kwargs) -> list[float]:
    """0.5 for a `<think>` block, 1.0 when a non-empty `<answer>` follows it, whatever text surrounds them.

    >>> soft_format_reward(["Sure! <think>a</think> <answer>4</answer> Done.", "<think>a</think> 4", "4"])
    [1.0, 0.5, 0.0]
    """
    texts = [completion_text(c) for c in completions]
    return [1.0 if (m := SOFT_FORMAT.search(t)) and m.group(1).strip() else 0.5 * bool(THINK_BLOCK.search(t))
            for t in texts]


def tag_count_reward(completions, **kwargs) -> list[float]:
    """0.25 per reasoning tag present exactly once (open-r1's tag_count_reward, without its newlines).

    >>> tag_count_reward(["<think>hm</think><answer>4</answer>", "<think>hm</think> 4", "4"])
    [1.0, 0.5, 0.0]
    """
    return [0.25 * sum(completion_text(c).count(tag) == 1 for tag in TAGS) for c in completions]


def length_reward(completion_ids, max_completion_length: int, **kwargs) -> list[float]:
    """1 at half the budget L, down to 0 at 0 and L tokens: TRL's GRPO quickstart reward, relative to the budget.

    >>> length_reward(completion_ids=[[1] * 4, [1] * 2, [1] * 8, []], max_completion_length=8)
    [1.0, 0.5, 0.0, 0.0]
    """
    half = max_completion_length / 2
    return [max(0.0, 1.0 - abs(len(ids) - half) / half) for ids in completion_ids]


@reads(columns=[("answer", "solution")])
def cosine_reward(completions, completion_ids, max_len: int, wrong: tuple, correct: tuple, answer=None, solution=None,
                  **kwargs) -> list[float | None]:
    """`accuracy` scaled by length (Yeo et al. 2025, arXiv 2502.03373, Appendix C.1): v_min + (v_max - v_min)(1 +
    cos(pi n / L)) / 2, the bounds by correctness; right and short earns most, wrong and short loses most.

    >>> cosine_reward(["<answer>7</answer>", "<answer>8</answer>"], [[1] * 50] * 2, 100, (-0.5, -1.0), (0.5, 1.0),
    ...               answer=["7", "7"])
    [0.75, -0.75]
    """
    rewards = []
    for right, ids in zip(accuracy_reward(completions, answer=answer, solution=solution), completion_ids, strict=True):
        low, high = correct if right == 1.0 else wrong
        rewards.append(None if right is None else
                       low + 0.5 * (high - low) * (1.0 + math.cos(math.pi * min(len(ids) / max_len, 1.0))))
    return rewards


@reads(columns=["tests"], correctness=True)
def code_reward(completions, tests=None, limits=None, **kwargs) -> list[float | None]:
    """The fraction of the row's `tests` asserts that pass after the completion's code (its last ```python block),
    run in a sandbox (extras/code_sandbox.py, within its `limits`); None where the row has no tests.

    >>> code = "```python\\ndef add(a, b):\\n    return a + b\\n```"
    >>> code_reward([code, "def add(a, b): return 3", code], tests=["assert add(1, 2) == 3\\nassert add(2, 2) == 4"]
    ...             * 2 + [None])
    [1.0, 0.5, None]
    """
    from extras.code_sandbox import extract_code, run_many, split_tests  # Linux only: imported when used

    rows = [(i, split_tests(row)) for i, row in enumerate(tests or [None] * len(completions))]
    rows = [(i, asserts) for i, asserts in rows if asserts]
    scores = run_many([(extract_code(completion_text(completions[i])), asserts) for i, asserts in rows], limits=limits)
    rewards = [None] * len(completions)
    for (i, _), score in zip(rows, scores, strict=True):
        rewards[i] = score
    return rewards


def sentiment_reward(completions, **kwargs) -> list[float]:
    """VADER's compound sentiment of each completion, from -1 (most negative) to 1 (most positive): a lexicon of
    7,500 scored words and rules for negation, intensifiers and "but" (Hutto & Gilbert 2014, PyPI vadersentiment),
    so it needs no model and no network.

    >>> sentiment_reward(["What a wonderful, happy day!", "It was awful.", "It is a chair."])
    [0.8268, -0.4588, 0.0]
    """
    return [_vader().polarity_scores(completion_text(completion))["compound"] for completion in completions]


@functools.cache
def _vader():
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer  # imported when used, like the sandbox

    return SentimentIntensityAnalyzer()  # reads its lexicon once


def code_limits(timeout: float):
    """The sandbox's limits with a wall-clock `timeout` in seconds (and as much CPU time, rounded up)."""
    from dataclasses import replace

    from extras.code_sandbox import LIMITS

    return replace(LIMITS, timeout=timeout, cpu=math.ceil(timeout))


class RewardError(Exception):
    """A reward failed, or returned what the trainers cannot use."""


class CheckedReward:
    """A reward under its registry name (TRL logs `rewards/<__name__>/mean`), whose every output is checked: one
    real number (handed on as a float) or None per completion, finite; an exception names the sample that raises.
    A class, so it pickles."""

    def __init__(self, name: str, reward_func: Callable):
        self.__name__ = name
        self.reward_func = reward_func
        # the function itself, under its settings (a partial): what it declares with @reads, and which reward it is
        self.declared = reward_func.func if isinstance(reward_func, functools.partial) else reward_func
        self.columns = getattr(self.declared, "columns", None)
        if self.columns is None:  # undeclared: the arguments its signature requires that trainers do not pass
            self.columns = tuple(p.name for p in inspect.signature(reward_func).parameters.values()
                                 if p.default is p.empty and p.name not in TRAINER_KWARGS
                                 and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        self.correctness = getattr(self.declared, "correctness", False)

    @property
    def final_answer(self) -> Callable | None:  # read, not kept: a lambda does not pickle
        return getattr(self.declared, "final_answer", None)

    def __call__(self, completions, **kwargs) -> list[float | None]:
        try:
            rewards = self.reward_func(completions=completions, **kwargs)
        except Exception as err:
            raise RewardError(f"reward '{self.__name__}' raised {type(err).__name__}"
                              f"{self._failing_sample(completions, kwargs)}: {err}") from err
        if not isinstance(rewards, (list, tuple)) or len(rewards) != len(completions):
            got = f"{len(rewards)} values" if isinstance(rewards, (list, tuple)) else f"a {type(rewards).__name__}"
            raise RewardError(f"reward '{self.__name__}' returned {got} for {len(completions)} completions; "
                              "it must return a list with one float (or None) per completion")
        for i, reward in enumerate(rewards):
            sample = f"sample {i} ({completion_text(completions[i])[:60]!r})"
            # any real number but a bool, as TRL takes them: numpy's scalars (its bool is no numbers.Real), fractions
            if reward is not None and (isinstance(reward, bool) or not isinstance(reward, numbers.Real)):
                raise RewardError(f"reward '{self.__name__}' returned {reward!r} ({type(reward).__name__}) for "
                                  f"{sample}; rewards must be real numbers, or None to skip a sample")
            if reward is not None and not math.isfinite(reward):
                raise RewardError(f"reward '{self.__name__}' returned {reward} for {sample}; "
                                  "return None to skip a sample it cannot score")
        return [None if reward is None else float(reward) for reward in rewards]  # plain floats: a tensor, JSON

    def _failing_sample(self, completions, kwargs) -> str:
        for i in range(len(completions)):  # one sample at a time: the first that raises alone
            one = {k: v[i:i + 1] if isinstance(v, list) and len(v) == len(completions) else v
                   for k, v in kwargs.items()}
            try:
                self.reward_func(completions=completions[i:i + 1], **one)
            except Exception:
                return f" on sample {i} ({completion_text(completions[i])[:60]!r})"
        return ""


# The keyword arguments the trainers pass every reward; a reward that requires any other one needs that column.
TRAINER_KWARGS = ("completions", "prompts", "completion_ids", "trainer_state", "log_extra", "log_metric",
                  "environments")


def import_dotted(path: str, kind: str):
    """The object at `package.module.name`, or a ValueError saying how to make its module importable, or, where it
    imported, what it holds."""
    module, _, name = path.rpartition(".")
    try:
        imported = importlib.import_module(module)
    except ImportError as err:
        raise ValueError(f"cannot import {kind} '{path}' ({err}); its module must be importable, e.g. on PYTHONPATH "
                         "or next to your script") from err
    if not hasattr(imported, name):
        functions = sorted(n for n, v in vars(imported).items() if callable(v) and not n.startswith("_")
                           and getattr(v, "__module__", module) == module)  # its own, not what it imports
        raise ValueError(f"{kind} '{path}': module {module} ({imported.__file__}) has no '{name}'; it defines: "
                         f"{', '.join(functions) or 'nothing callable'}")
    return getattr(imported, name)


# ---- reading a final answer ----------------------------------------------------------------------------------------
# extract_answer takes the answer from the first of its steps that finds one: the markers a model is told to use,
# then prose. accuracy_reward grades it: as a plain number where gold and answer are both one, else with math-verify.
# Ours, on top of math-verify: a list of guesses scores 0; units, currency and thousands commas; the time budget.

TAGS = ("<think>", "</think>", "<answer>", "</answer>")
THINK_ANSWER_FORMAT = re.compile(r"\s*<think>.*?</think>\s*<answer>(.*?)</answer>\s*", re.DOTALL)
THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)
SOFT_FORMAT = re.compile(r"<think>.*?</think>\s*<answer>(.*?)</answer>", re.DOTALL)
ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|-?\.\d+")  # -3, 1,234, 3.50, .4
OPERATOR_THEN_NUMBER = re.compile(r"\s*[-+*/^×÷]\s*[-+]?\.?\d")  # after `####`, "7 / 8" is an expression
# A percent sign or word right after a number, the ones math-verify reads ("50%", "50\%", "50 percent", "28 pct")
PERCENT = re.compile(r"(?<=\d)(?:\s*\\?%|\s+(?:percent(?:age)?|pct)\b)")
# A number standing on its own in prose (or a fraction a/b), with its percent sign: not inside a word ("AZYUK2A"), a
# LaTeX expression ("\frac{1+\sqrt{5}}{2}", "x^2"), brackets or an interval ("[0,1)")
STANDALONE_NUMBER = re.compile(rf"(?<![\w.,{{}}\[\]()^_\\/|+-])(?:{NUMBER.pattern})(?:/(?:{NUMBER.pattern}))?"
                               rf"(?:{PERCENT.pattern})?(?![\w{{}}\[\]()^_\\/|+-]|[.,]\d)")
# LaTeX in prose, within math-verify's delimiters: $$...$$, \[...\], \(...\), $...$ (a `$` after a digit or a
# backslash opens none: "\$18", "5$"); a span holds no opener of its own kind, so an unclosed one costs one pass
LATEX_SPAN = re.compile(r"\$\$(.+?)\$\$|\\\[((?:(?!\\\[).)+?)\\\]|\\\(((?:(?!\\\().)+?)\\\)"
                        r"|(?<![\\\d])\$((?:\\\$|[^\n$])+?)(?<!\\)\$", re.DOTALL)
# The math in prose: a LaTeX span, or a number standing on its own (the numbers inside a span are the span's)
MATH = re.compile(rf"{LATEX_SPAN.pattern}|{STANDALONE_NUMBER.pattern}", re.DOTALL)
# An aside, which prose is read without: brackets ("7 (since 3 + 4 = 7)", "11 left [18 - 7 = 11]"), or an explanation
# after a number to the end of its sentence ("7 — because ...", "7, i.e. 3 + 4", "7 since ..."); a LaTeX span stays
# whole, brackets and all ("$(1, \infty)$")
LATEX_OR_ASIDE = re.compile(rf"(?P<latex>{LATEX_SPAN.pattern})|\([^()\n]*\)|\[[^\[\]\n]*\]"
                            r"|(?<=[\d%])(?:\s*—|\s+--|,?\s+(?:because|since|i\.e\.|e\.g\.))[^\n]*?(?=\.\s|\.?$)",
                            re.DOTALL | re.MULTILINE)
# "The answer is", "Answer:": math-verify reads the answer after these first; so does prose, in their sentence
ANSWER_PHRASE = re.compile(r"\banswer\s*(?:is|was|would be|will be|:|=)", re.IGNORECASE)
SENTENCE_END = re.compile(r"\.(?:\s|$)|\n")
MATH_SIGN = re.compile(r"[\d\\^_=<>+*/{}]")  # a gold with any of these is math (or a number) to `accuracy`
LONE_LETTER = re.compile(r"\b(?![aAI]\b)[A-Za-z]\b|\b(?:pi|sqrt)\b")  # a variable: "5 x" is not 5
# Anti-hacking: numbers joined by spaces, commas, semicolons, "or" or "and" are a list of guesses (math-verify would
# read "3 4 5" as 3 + 4 + 5); a thousands comma is not, and an expression ("7 / 8", "7-8") is graded as what it is
GUESSES = re.compile(r"\d(?:\s*(?:,(?!\d{3}(?!\d))|;)\s*(?:(?:or|and)\s+)?|\s+(?:or|and)\s+|\s+)[-+]?\.?\d")
GUESS_SEPARATOR = re.compile(r"\s*[,;]\s*(?:(?:or|and)\s+)?|\s+(?:or|and)\s+|\s+")  # between two guesses in prose
# Units and currency: one plain number with `$`, `%`, an exponent, up to three unit words ("18 dollars", "60 miles per
# hour"); a variable or a constant is no unit ("5 x", "2 pi")
PLAIN_NUMBER = re.compile(
    rf"[$€£]?\s*((?:{NUMBER.pattern})(?:[eE][-+]?\d+)?)\s*%?(?:\s+(?!(?:pi|sqrt|[a-zA-Z])\b)[a-zA-Z]+\.?){{0,3}}")
PROSE = re.compile(r"[A-Za-z\s.,:;!?'\"*$%€£]*")  # the words around one number ("The answer is 18.")
# normalize_text: what changes an answer, besides the math symbols (Unicode's Sm: + < = > ~ ...); a thousands
# separator; a list's or heading's mark at a line's start; a full stop or comma before no digit; the spaces around a
# sign
ANSWER_SIGNS = "-#%/^"
THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
LINE_MARK = re.compile(r"^[ \t]*(?:[-*+\u2022]|#+)[ \t]+", re.MULTILINE)
BEFORE_NO_DIGIT = re.compile(r"[.,](?!\d)")
SPACED_SIGN = re.compile(r" ?([-+=<>/^%\u00d7\u00f7\u2260\u2264\u2265]) ?")
LATEX_TEXT = re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf|mbox)\{([^{}]*)\}")  # \text{ dollars} -> " dollars"
LATEX_PLAIN = [("\\,", ""), ("\\!", ""), ("{,}", ","), ("\\ ", " "), ("\\;", " "), ("~", " "), ("\\$", "$"),
               ("\\%", "%")]


def extract_answer(text: str) -> str | None:
    r"""The final answer: the last `<answer>`, else the last `\boxed{}`, else the line after the last `####`, else the
    last math in prose (a LaTeX span, or a number standing on its own; in the sentence after "the answer is" if
    there is one) with the values it closes a list of ("so 12 or 13" answers "12 or 13"); None if there is none.
    math-verify grades it; its own extraction would read `so 5 x` as 5 and `so 12 or 13` as 12.

    >>> [extract_answer(t) for t in ["<answer> 4 </answer>", "#### 72 dollars", "so 5 x", "(42)", "it is .4"]]
    ['4', '72', None, None, '.4']
    >>> [extract_answer(t) for t in ["It is 7 (since 3 + 4 = 7).", "It is 50 percent.", r"So \(x > 1\)."]]
    ['7', '50 percent', 'x > 1']
    """
    text = text.replace("\u2212", "-")  # the Unicode minus sign
    for step in (_answer_tag, _last_boxed, _after_hashes, _in_prose):
        if (answer := step(text)) is not None:
            return answer.strip()
    return None


def final_answer(text: str) -> str | None:
    """The final answer as maj@k counts votes: a plain number reduced to its value ("18 dollars" and "$18.00" agree).

    >>> [final_answer(t) for t in ["<answer>18 dollars</answer>", r"\\boxed{$18.00}", "so 18", "no idea"]]
    ['18.0', '18.0', '18.0', None]
    """
    answer = extract_answer(text)
    number = _to_number(answer) if answer is not None else None
    return str(number) if number is not None else answer


def exact_answer(text: str) -> str:
    """The final answer as exact_match compares it, normalised: the last `<answer>`, `\\boxed{}` or `####` line, else
    the sentence after the last "the answer is", else the whole text.

    >>> [exact_answer(t) for t in ["<answer> Paris </answer>", "#### New York", "The answer is: B.", 'enemy"']]
    ['paris', 'new york', 'b', 'enemy']
    """
    answer = _answer_tag(text)
    answer = _last_boxed(text) if answer is None else answer
    if answer is None and "####" in text:
        answer = text.rsplit("####", 1)[1].strip().split("\n", 1)[0]
    if answer is None and (phrases := list(ANSWER_PHRASE.finditer(text))):
        answer = SENTENCE_END.split(text[phrases[-1].end():].lstrip(), maxsplit=1)[0]
    return normalize_text(text if answer is None else answer)


def normalize_text(text: str) -> str:
    r"""Text as exact_match compares it: LaTeX's `\text{}` unwrapped, Unicode's compatibility forms, case folded, a
    line's list or heading mark dropped, and punctuation and symbols removed (SQuAD's normalisation, articles kept:
    `A` is an answer), except what changes an answer: a sign (`-3`), a decimal point or comma before a digit (`3.5`,
    `.5`, `3,5`; a thousands separator goes: `1,000` is `1000`), and the signs of math, comparison, percent and code
    (`3/4`, `x > 1`, `50%`, `C++`, `C#`), written without the spaces around them.

    >>> normalize_text("  **Café**, s'il vous  plaît! "), normalize_text(r"\text{New York}"), normalize_text("(B)")
    ('café sil vous plaît', 'new york', 'b')
    >>> [normalize_text(t) for t in ["-3.", "3.5", "3 / 4", "x > 1", "C++", "C#", "1,000", "- Paris", "−3"]]
    ['-3', '3.5', '3/4', 'x>1', 'c++', 'c#', '1000', 'paris', '-3']
    """
    text = unicodedata.normalize("NFKC", LATEX_TEXT.sub(r"\1", text)).casefold().replace("\u2212", "-")
    text = LINE_MARK.sub("", THOUSANDS.sub("", text))
    kept = "".join(c if c in ANSWER_SIGNS or unicodedata.category(c) == "Sm" or c in ".," else
                   " " if c.isspace() else "" if unicodedata.category(c).startswith(("P", "S")) else c for c in text)
    kept = BEFORE_NO_DIGIT.sub("", kept)  # a sentence's full stop or comma, not a decimal's
    return SPACED_SIGN.sub(r"\1", " ".join(kept.split()))


def after_thinking(text: str) -> str:
    """What follows the last `</think>`; "" when the thinking never ends."""
    return text.rsplit("</think>", 1)[1] if "</think>" in text else ""


def _answer_tag(text: str) -> str | None:
    """The content of the last `<answer>...</answer>`."""
    answers = ANSWER_TAG.findall(text)
    return answers[-1] if answers else None


def _last_boxed(text: str) -> str | None:
    r"""The content of the last `\boxed{...}`, nested braces included; None if there is none or it is unclosed."""
    start = text.rfind("\\boxed{")
    if start == -1:
        return None
    depth = 1
    start = start + len("\\boxed{")
    for end in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            return text[start:end]
    return None


def _after_hashes(text: str) -> str | None:
    """GSM8K's `#### 72`: the first number on the line after the last `####`, or that whole line where the number
    starts a list or an expression ("#### 7 8", "#### 7 / 8")."""
    if "####" not in text:
        return None
    line = text.rsplit("####", 1)[1].strip().split("\n", 1)[0]
    number = NUMBER.search(line)
    if GUESSES.search(line) or (number and OPERATOR_THEN_NUMBER.match(line, number.end())):
        return line
    return number.group() if number else None


def _in_prose(text: str) -> str | None:
    """The answer in prose, read without its asides: the last math of the sentence after the last "the answer is"
    (where math-verify looks first), else the last math of the whole text."""
    text = LATEX_OR_ASIDE.sub(lambda match: match.group("latex") or "", text)
    if phrases := list(ANSWER_PHRASE.finditer(text)):
        sentence = SENTENCE_END.split(text[phrases[-1].end():], maxsplit=1)[0]
        if (answer := _last_math(sentence)) is not None:
            return answer
    return _last_math(text)


def _last_math(text: str) -> str | None:
    """The last math in `text` (a LaTeX span, or a number standing on its own) with the values it closes a list of
    ("so 12 or 13" answers "12 or 13"); None if there is none, or if a variable follows it ("5 x": a coefficient)."""
    found = list(MATH.finditer(text))
    if not found or LONE_LETTER.match(text[found[-1].end():].lstrip()):
        return None
    first = len(found) - 1
    while first > 0 and GUESS_SEPARATOR.fullmatch(text[found[first - 1].end():found[first].start()]):
        first -= 1
    return LATEX_SPAN.sub(lambda span: span.group(span.lastindex), text[found[first].start():found[-1].end()])


def _gold_answer(gold) -> str:
    r"""The gold's final answer: what follows GSM8K's `####`, the content of its last `\boxed{}`; "" for none."""
    gold = "" if gold is None else str(gold).replace("\u2212", "-").split("####")[-1].strip()
    return (_last_boxed(gold) or gold).strip()


def _several_values(parsed: tuple | None) -> bool:
    r"""Whether math-verify reads a gold as several values: a set, an interval, a tuple, an inequality, `x \in` one."""
    value = parsed[0] if parsed else None
    if isinstance(value, Eq):  # x = 1, 2 or x \in [0, 1]
        value = value.rhs
    return (isinstance(value, (Set, Tuple, Relational, And, Or))
            and not (isinstance(value, FiniteSet) and len(value) == 1))


def _to_number(text: str) -> float | None:
    r"""`text` as a float if it is one plain number ("$1,000", "**7**", "18 dollars", "\$18", "18\text{ cookies}"), or
    one number in a sentence of words ("The answer is 18."); else None."""
    text = LATEX_TEXT.sub(r" \1", text)
    for latex, plain in LATEX_PLAIN:
        text = text.replace(latex, plain)
    text = text.strip().strip("*").strip()
    if match := PLAIN_NUMBER.fullmatch(text.rstrip(".")):
        return float(match.group(1).replace(",", ""))
    numbers = STANDALONE_NUMBER.findall(text)
    if len(numbers) == 1 and "/" not in numbers[0]:
        rest = text.replace(numbers[0], " ", 1)
        if PROSE.fullmatch(rest) and not LONE_LETTER.search(rest):
            return float(NUMBER.match(numbers[0]).group().replace(",", ""))
    return None


def _same_number(pred: str, pred_number: float, gold: str, gold_number: float) -> bool:
    """Equal numbers; a percentage is both its number and its fraction ("50%" is 50 and 0.5), as math-verify has it."""
    preds = [pred_number, pred_number / 100] if PERCENT.search(pred) else [pred_number]
    golds = [gold_number, gold_number / 100] if PERCENT.search(gold) else [gold_number]
    return any(math.isclose(p, g, abs_tol=1e-6) for p in preds for g in golds)


# Seconds of math-verify one call of `accuracy` may spend; after that its symbolic answers score 0 (plain numbers
# never touch it), so that pathological answers never stall a step for long
MATH_VERIFY_BUDGET = 10.0
# How math-verify reads an answer (its default order): as LaTeX, the whole answer within `$...$`, else as a plain
# expression ("1/2", "50 percent")
MATH_VERIFY_READERS = (LatexExtractionConfig(), ExprExtractionConfig())
_PARSED: dict[str, tuple] = {}


def _parse(text: str, timeout: int | None) -> tuple:
    """math-verify's parse of `text`, cached (a gold once per run); a parse cut off by its timeout caches as empty."""
    if (parsed := _PARSED.get(text)) is None:
        parsed = tuple(parse(f"${text}$", MATH_VERIFY_READERS, parsing_timeout=timeout))
        if len(_PARSED) >= 65536:  # bounded
            _PARSED.clear()
        _PARSED[text] = parsed
    return parsed


def _within(timeout: int | None, deadline: float) -> int | None:
    """A math-verify timeout (whole seconds, at least 1: signal.alarm) ending by `deadline`, or within a second."""
    return None if timeout is None else max(1, min(timeout, math.ceil(deadline - time.monotonic())))


def _math_verify_timeouts() -> tuple[int | None, int | None]:
    """(parse, verify) timeouts: none off the main thread, where signal.alarm raises (as in TRL's accuracy_reward)."""
    if threading.current_thread() is threading.main_thread():
        return 10, 5
    logging.getLogger("math_verify.parser").setLevel(logging.ERROR)
    logging.getLogger("math_verify.grader").setLevel(logging.ERROR)
    return None, None
