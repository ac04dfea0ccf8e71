"""Reward functions for GRPO, and the registry that the training scripts pick them from by name.

Rewards here: `reward_names()` lists them, `reward_table()` describes each, with its options; pass names to
`--reward_funcs` and options to `--reward_options <name>.<option>=<value>`.

Every reward has the signature `(completions, **kwargs) -> list[float | None]`, one value per completion:
- `completions` is a list of strings (standard format) or of message lists (conversational format);
  `completion_text` returns the text of either.
- Dataset columns arrive as keyword arguments, one list entry per completion (a column `answer` gives
  `answer=[...]`). GRPOTrainer also passes `prompts`, `completion_ids`, `trainer_state`, `log_extra` and
  `log_metric`; take what you need and let `**kwargs` swallow the rest.
- `None` means "cannot score this sample"; TRL leaves it out of that reward.

A reward may also declare, with `@reward_spec(...)`, the dataset columns it reads (checked before any model
loads) and whether it is a correctness reward (1.0 exactly when the completion is right), which turns on
pass@k in the held-out evaluation. Undeclared rewards need the columns their signature requires.

To add your own reward, write it in your own module (next to your script or on PYTHONPATH), e.g. my_module.py:

    from rewards import completion_text

    def my_reward(completions, **kwargs) -> list[float | None]:
        return [float(len(completion_text(c)) < 1000) for c in completions]

and pass `--reward_funcs accuracy my_module.my_reward`; or name it in this file with `@register(...)` (see
`accuracy_reward`), the one place the scripts, docs/rewards.md's table and the tests read a named reward from.
"""

import functools
import importlib
import inspect
import logging
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from math_verify import parse, verify
from trl.rewards import get_repetition_penalty_reward, get_soft_overlong_punishment

TAGS = ("<think>", "</think>", "<answer>", "</answer>")
NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|-?\.\d+")  # -3, 1,234, 3.50, .4
# The last-number fallback reads only a number standing on its own in prose (or a fraction a/b): not one inside a
# word ("AZYUK2A"), a LaTeX expression ("\frac{1+\sqrt{5}}{2}", "x^2") or an interval ("[0,1)"). Sentence punctuation,
# `$`, `=`, `*` and whitespace may touch it.
STANDALONE_NUMBER = re.compile(
    rf"(?<![\w.,{{}}\[\]()^_\\/|+-])(?:{NUMBER.pattern})(?:/(?:{NUMBER.pattern}))?(?![\w{{}}\[\]()^_\\/|+-]|[.,]\d)"
)
# A plain number, as a gold answer or a final answer may carry it: `$`, `%`, an exponent, and up to three unit words
# after it ("18 dollars", "$1,000", "60 miles per hour", "50%", "1e3"). One number only: "18 or 19" is not a plain
# number, and a variable or constant is not a unit ("5 x", "2 pi" go to math-verify).
PLAIN_NUMBER = re.compile(
    rf"[$€£]?\s*((?:{NUMBER.pattern})(?:[eE][-+]?\d+)?)\s*%?(?:\s+(?!(?:pi|sqrt|[a-zA-Z])\b)[a-zA-Z]+\.?){{0,3}}"
)
# Words around one number inside an answer ("<answer>The answer is 18.</answer>"): letters, spaces and sentence
# punctuation only, and no lone letter but "a" or "I" (a lone letter is a variable: "5 x" is not 5).
PROSE = re.compile(r"[A-Za-z\s.,:;!?'\"*$%€£]*")
LONE_LETTER = re.compile(r"\b(?![aAI]\b)[A-Za-z]\b|\b(?:pi|sqrt)\b")
LATEX_TEXT = re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf|mbox)\{([^{}]*)\}")  # \text{ dollars} -> " dollars"
# LaTeX spacing and escapes around a number: "18\,000" (thin-space thousands), "1{,}000", "18\ \text{dollars}", "\$18"
LATEX_PLAIN = [("\\,", ""), ("\\!", ""), ("{,}", ","), ("\\ ", " "), ("\\;", " "), ("~", " "), ("\\$", "$"),
               ("\\%", "%")]
ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
# trl.rewards.think_format_reward only checks <think>, so we check both blocks ourselves.
THINK_ANSWER_FORMAT = re.compile(r"\s*<think>.*?</think>\s*<answer>(.*?)</answer>\s*", re.DOTALL)
# Anti-hacking: an answer that lists numbers ("7 8 9", "7, 8, 9", "7; 8", "7 or 8", "7 and 8") is a list of guesses,
# wherever the answer is read (<answer>, \boxed{}, `####`), and scores 0 unless the gold answer is a list too.
# math-verify would read "3 4 5" as 3 + 4 + 5. A thousands comma ("1,000") is not a list, nor is an expression
# ("7 / 8" is a fraction, "7-8" is -1): those are graded as what they are.
GUESS_SEPARATOR = re.compile(r"\s*[,;]\s*(?:(?:or|and)\s+)?|\s+(?:or|and)\s+|\s+")
GUESSES = re.compile(r"\d(?:\s*(?:,(?!\d{3}(?!\d))|;)\s*(?:(?:or|and)\s+)?|\s+(?:or|and)\s+|\s+)[-+]?\.?\d")
# A number that an operator and another number follow ("7 / 8", "7-8", "2^3") starts an expression, not an answer.
OPERATOR_THEN_NUMBER = re.compile(r"\s*[-+*/^×÷]\s*[-+]?\.?\d")
# A gold answer with several values, in any notation: a tuple, set or interval ("(1,\frac{9}{2})", "\{1,2\}",
# "[0,1)"), `\pm`, a union, or values joined by "and"/"or". A completion may list as many values as it has.
SEVERAL_VALUES = re.compile(r",(?!\d{3}(?!\d))|;|\\(?:pm|mp|cup)(?![a-zA-Z])|\b(?:and|or)\b")


# Keyword arguments that the trainers pass to every reward; a reward that requires any other one needs that column.
TRAINER_KWARGS = ("completions", "prompts", "completion_ids", "trainer_state", "log_extra", "log_metric",
                  "environments")


def reward_spec(columns=(), correctness: bool = False, final_answer: Callable[[str], str | None] | None = None):
    """Declare what a reward reads and what its value means; the scripts act on both.

    Args:
        columns: the dataset columns the reward needs, each a name or a tuple of names of which one is enough.
            A missing one stops the run before any model loads.
        correctness: the reward is 1.0 exactly when the completion is right. The held-out evaluation then
            reports greedy accuracy, pass@1 and pass@k for it.
        final_answer: text -> the completion's final answer, for maj@k (a majority vote over answers).

    >>> @reward_spec(columns=["label"], correctness=True)
    ... def exact(completions, label, **kwargs):
    ...     return [float(c == l) for c, l in zip(completions, label)]
    >>> exact.columns, exact.correctness
    (('label',), True)
    """

    def declare(func):
        func.columns, func.correctness, func.final_answer = tuple(columns), correctness, final_answer
        return func

    return declare


def declaration(reward_func):
    """The function whose `@reward_spec` speaks for `reward_func`: itself, or the function a `functools.partial`
    wraps (a reward factory's usual product), so that binding options keeps what the reward declared."""
    while isinstance(reward_func, functools.partial) and not hasattr(reward_func, "columns"):
        reward_func = reward_func.func
    return reward_func


def required_columns(reward_func) -> tuple:
    """The columns a reward needs: its `@reward_spec` columns, else the arguments its signature requires.

    >>> def mine(completions, answer, level=1, **kwargs): ...
    >>> required_columns(mine), required_columns(accuracy_reward)
    (('answer',), (('answer', 'solution'),))
    """
    if hasattr(declared := declaration(reward_func), "columns"):
        return declared.columns
    try:
        parameters = inspect.signature(reward_func).parameters.values()
    except (TypeError, ValueError):  # a builtin or an object without a signature: assume it needs nothing
        return ()
    return tuple(p.name for p in parameters if p.default is p.empty and p.name not in TRAINER_KWARGS
                 and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


@dataclass(frozen=True)
class NamedReward:
    """A reward as `--reward_funcs <name>` picks it: everything the scripts, the docs and the tests know about it.

    Declared once, with `@register(...)` on the reward (or on its factory). The reward table of docs/rewards.md, the
    `--help` list, `reward_names()`, `--reward_options` and the hacking-probe tests all read it from here.
    """

    name: str
    summary: str  # one line, for the reward table of docs/rewards.md and --help
    make: Callable  # the reward function, or with `factory` a function building it
    factory: bool  # `make(max_completion_length=..., **options)` builds the reward
    # A completion that games the reward, the dataset columns it is scored with, and the reward it must stay below.
    probe: tuple[str, dict, float]

    @property
    def options(self) -> dict:
        """The reward's options and their defaults: its factory's keyword arguments, `max_completion_length` aside."""
        if not self.factory:
            return {}
        parameters = inspect.signature(self.make).parameters.values()
        return {p.name: p.default for p in parameters if p.name != "max_completion_length" and p.default is not p.empty}

    def build(self, max_completion_length: int, **options) -> Callable:
        return self.make(max_completion_length=max_completion_length, **options) if self.factory else self.make


REWARDS: dict[str, NamedReward] = {}


def register(name: str, summary: str, probe: tuple[str, dict, float], factory: bool = False):
    """Register a reward (or, with `factory=True`, a function that builds one) under `name`.

    A factory takes the trainer's `max_completion_length` and keyword options with defaults, which become
    `--reward_options <name>.<option>=<value>`. Declare the columns the reward reads and whether it is a
    correctness reward with `@reward_spec` on the reward itself.
    """

    def add(make):
        if name in REWARDS:
            raise ValueError(f"a reward named {name!r} is already registered")
        REWARDS[name] = NamedReward(name, summary, make, factory, probe)
        return make

    return add


def completion_text(completion: str | list[dict[str, str]]) -> str:
    """Return the text of a completion in either format.

    Args:
        completion: A string, or a list of messages whose last message is the model's reply.

    Returns:
        The completion text.

    >>> completion_text("42")
    '42'
    >>> completion_text([{"role": "assistant", "content": "42"}])
    '42'
    """
    if isinstance(completion, str):
        return completion
    return completion[-1]["content"] or ""  # content is None for a tool-call-only message


def _last_boxed(text: str) -> str | None:
    r"""Return the content of the last `\boxed{...}` in `text`, nested braces included, or None.

    >>> _last_boxed(r"so \boxed{\frac{1}{2}}.")
    '\\frac{1}{2}'
    """
    start = text.rfind("\\boxed{")
    if start == -1:
        return None
    start += len("\\boxed{")
    depth = 1
    for end in range(start, len(text)):
        if text[end] == "{":
            depth += 1
        elif text[end] == "}":
            depth -= 1
            if depth == 0:
                return text[start:end]
    return None  # unclosed brace


def extract_answer(text: str) -> str | None:
    r"""Return the model's final answer: the last `<answer>`, else the last `\boxed{}`, else the
    number after the last `####`, else the last number that stands on its own; None if there is none.

    The fallback (no marker at all) reads a number only where a reader would see one: a token of digits (with
    thousands commas, a decimal part, a leading `.`, a sign, or as a fraction `a/b`) between spaces or sentence
    punctuation. Digits inside a word (`AZYUK2A`), inside a LaTeX expression (`\frac{1+\sqrt{5}}{2}`, `x^2`), in
    brackets (`(1)` and `[1]` are references more often than answers) or in an interval (`[0,1)`) are not an answer,
    and neither is a number that a variable follows (`5 x`, `2 pi`: a coefficient). A reward that credited them
    could be gamed by printing digits. The last number is the answer, with the numbers it closes a list of: "so 12
    or 13" answers "12 or 13", a list of guesses, as it would inside `<answer>`.
    After `####` the answer is the first number on its line ("#### 72 dollars" is 72), or the whole line where
    that number is one of a list of guesses (`GUESSES`) or starts an expression ("#### 7 / 8" is 7/8, not 7).
    Why not math-verify's own extraction (`parse` with its extraction configs): it reads a coefficient as the answer
    (`so 5 x` is 5) and the last of a list of guesses as the answer (`so 12 or 13` is 13), which a reward must not
    credit. math-verify still parses and compares what this returns.

    >>> extract_answer("<think>2 + 2</think> <answer> 4 </answer>")
    '4'
    >>> extract_answer("Total: 1,234 apples, so 12.")
    '12'
    >>> extract_answer("The probability is .4"), extract_answer("AZYUK2A"), extract_answer(r"$\frac{1+\sqrt{5}}{2}$")
    ('.4', None, None)
    >>> [extract_answer(text) for text in ["#### 72 dollars", "#### 7 8 9", "#### 7 / 8", "so 5 x", "(42)"]]
    ['72', '7 8 9', '7 / 8', None, None]
    """
    text = text.replace("\u2212", "-")  # the Unicode minus sign that models (and LaTeX renderers) write
    if answers := ANSWER_TAG.findall(text):
        return answers[-1].strip()
    if (boxed := _last_boxed(text)) is not None:
        return boxed.strip()
    if "####" in text:
        line = text.rsplit("####", 1)[1].strip().split("\n", 1)[0]
        number = NUMBER.search(line)
        if GUESSES.search(line) or (number and OPERATOR_THEN_NUMBER.match(line, number.end())):
            return line  # "#### 7 or 8" (graded as a list of guesses), "#### 7 / 8" (graded as 7/8)
        if number:
            return number.group()
    numbers = list(STANDALONE_NUMBER.finditer(text))
    if not numbers or LONE_LETTER.match(text[numbers[-1].end():].lstrip()):  # "5 x", "2 pi": a coefficient
        return None
    first = numbers[-1]  # the last number, with the numbers listed before it: "so 7 or 8" answers "7 or 8"
    for number in reversed(numbers[:-1]):
        if not GUESS_SEPARATOR.fullmatch(text[number.end():first.start()]):
            break
        first = number
    return text[first.start():numbers[-1].end()]


def _to_number(text: str) -> float | None:
    r"""Return `text` as a float if it is one plain number, with at most a currency sign, a `%` and a few unit
    words ("$1,000", "3.50.", "**7**", "18 dollars", "\$18", "18\text{ cookies}"), or one number in a sentence of
    words ("The answer is 18."); else None. A second number or a math symbol makes it not plain.

    >>> _to_number("$1,000"), _to_number("-3.50."), _to_number("**7**"), _to_number("x + 1")
    (1000.0, -3.5, 7.0, None)
    >>> _to_number("18 dollars"), _to_number(r"\$18"), _to_number(r"18\text{ cookies}"), _to_number("18 or 19")
    (18.0, 18.0, 18.0, None)
    >>> _to_number("The answer is 18."), _to_number("Answer: $1,800"), _to_number("5 x"), _to_number("x = 5")
    (18.0, 1800.0, None, None)
    """
    text = LATEX_TEXT.sub(r" \1", text)
    for latex, plain in LATEX_PLAIN:
        text = text.replace(latex, plain)
    text = text.strip().strip("*").strip()
    if match := PLAIN_NUMBER.fullmatch(text.rstrip(".")):
        return float(match.group(1).replace(",", ""))
    # one number in a sentence: "The answer is 18.", "Answer: $18"
    numbers = STANDALONE_NUMBER.findall(text)
    if len(numbers) == 1 and "/" not in numbers[0]:
        rest = text.replace(numbers[0], " ", 1)
        if PROSE.fullmatch(rest) and not LONE_LETTER.search(rest):
            return float(numbers[0].replace(",", ""))
    return None


def _same_number(pred: str, pred_number: float, gold: str, gold_number: float) -> bool:
    """Whether two plain numbers are equal; a percentage equals both its number and its fraction ("50%" is 50 and
    0.5), as math-verify has it.

    >>> _same_number("50%", 50.0, "0.5", 0.5), _same_number("50%", 50.0, "50", 50.0)
    (True, True)
    >>> _same_number("50", 50.0, "0.5", 0.5)
    False
    """
    preds = [pred_number, pred_number / 100] if "%" in pred else [pred_number]
    golds = [gold_number, gold_number / 100] if "%" in gold else [gold_number]
    return any(math.isclose(p, g, abs_tol=1e-6) for p in preds for g in golds)


def final_answer(text: str) -> str | None:
    """The final answer as a majority vote counts it (maj@k): `extract_answer`, with a plain number reduced to its
    value, so that "18 dollars", "$18" and "18.00" are one vote.

    >>> [final_answer(t) for t in ["<answer>18 dollars</answer>", r"\\boxed{$18.00}", "so 18", "no idea"]]
    ['18.0', '18.0', '18.0', None]
    """
    answer = extract_answer(text)
    number = _to_number(answer) if answer is not None else None
    return str(number) if number is not None else answer


# Seconds of math-verify one call of `accuracy` may spend before it scores its remaining symbolic answers 0, so that a
# batch of pathological answers never stalls a training step for long: no math-verify call starts after it, and the
# last one ends less than a second past it (math-verify times out in whole seconds). Plain numbers never touch
# math-verify.
MATH_VERIFY_BUDGET = 10.0
_PARSED: dict[str, tuple] = {}


def _parse(text: str, timeout: int | None) -> tuple:
    """math-verify's parse of `text` as one LaTeX expression, cached: a gold answer is parsed once per run, not once
    per completion, and a completion repeated in a group once. A parse cut off by its timeout caches as unparseable."""
    if (parsed := _PARSED.get(text)) is None:
        parsed = tuple(parse(f"${text}$", parsing_timeout=timeout))
        if len(_PARSED) >= 65536:  # bounded: start afresh rather than grow with every unique completion
            _PARSED.clear()
        _PARSED[text] = parsed
    return parsed


def _within(timeout: int | None, deadline: float) -> int | None:
    """A math-verify timeout (whole seconds, at least 1: it uses signal.alarm) that ends by `deadline`, or less than a
    second after it."""
    return None if timeout is None else max(1, min(timeout, math.ceil(deadline - time.monotonic())))


def _math_verify_timeouts() -> tuple[int | None, int | None]:
    """Return math-verify's (parse, verify) timeouts: off outside the main thread, as in TRL's accuracy_reward.

    math-verify times out with signal.alarm, which raises outside the main thread.
    """
    if threading.current_thread() is threading.main_thread():
        return 10, 5
    logging.getLogger("math_verify.parser").setLevel(logging.ERROR)
    logging.getLogger("math_verify.grader").setLevel(logging.ERROR)
    return None, None


@register("accuracy", "1 if the final answer (last `<answer>`, else last `\\boxed{}`, else `#### N`, else the last "
          "standalone number) equals the `answer` (or `solution`) column: numbers (with units, `$`, `%`) compare as "
          "numbers, other answers with math-verify; `None` (skipped) when there is no gold answer",
          probe=("<think>easy</think><answer></answer> the answer is 7", {"answer": ["7"]}, 1.0))  # empty answer tag
@reward_spec(columns=[("answer", "solution")], correctness=True, final_answer=final_answer)
def accuracy_reward(completions, answer=None, solution=None, **kwargs) -> list[float | None]:
    r"""1.0 if the completion's final answer (see `extract_answer`) equals the gold answer, else 0.0.

    The final answer is the last `<answer>`, else the last `\boxed{}`, else the first line after the last `####`,
    else (no marker at all) the last number standing on its own in prose: "So she has 18 cookies." is 18, but
    digits in a word, a LaTeX expression, brackets or an interval are not read ("AZYUK2A", `\frac{1+\sqrt{5}}{2}`,
    "(1)", "[0,1)"), nor is a number that a variable follows ("5 x", "2 pi"). An answer that lists numbers ("7 8 9",
    "7, 8, 9", "7 or 8") is a list of guesses and scores 0, wherever it was read, unless the gold is a list too.

    Numbers are compared numerically ("1,000" == "1000.0", "18 dollars" == "18", ".5" == "0.5", and "50%" is both 50
    and 0.5, as in math-verify); anything else goes through math-verify (`\frac{1}{2}` == "0.5"), whose parses are
    cached and which gets at most `MATH_VERIFY_BUDGET` seconds per call: no parse or check starts after that, and
    the last ends less than a second past it (answers left score 0, with a warning). Off the main thread math-verify
    cannot time out, and a single parse is not bounded there. A GSM8K gold ("... #### 72") counts from its last
    `####`, and a gold with `\boxed{}` counts from its last box.

    Args:
        completions: Completions, as strings or message lists.
        answer: Gold answers, from the dataset column `answer`.
        solution: Gold answers, used when there is no `answer` column.

    Returns:
        One reward per completion; None where the gold answer is missing or unparseable.

    >>> completions = ["<answer>72</answer>", "#### 71", r"\boxed{\frac{1}{2}}", "no idea"]
    >>> accuracy_reward(completions, answer=["She sold 72. #### 72", "72", "0.5", None])
    [1.0, 0.0, 1.0, None]
    """
    golds = answer if answer is not None else solution
    if golds is None:
        return [None] * len(completions)
    parse_timeout, verify_timeout = _math_verify_timeouts()
    deadline, late = time.monotonic() + MATH_VERIFY_BUDGET, 0

    def parsed(text: str) -> tuple | None:  # math-verify's parse (cached); None once this call's budget is spent
        if text in _PARSED or time.monotonic() < deadline:
            return _parse(text, _within(parse_timeout, deadline))
        return None

    rewards = []
    for completion, gold in zip(completions, golds, strict=True):
        gold = "" if gold is None else str(gold).replace("\u2212", "-").split("####")[-1].strip()
        gold = (_last_boxed(gold) or gold).strip()
        gold_number = _to_number(gold) if gold else None
        # A plain-number gold needs no math-verify unless the answer is symbolic; anything else is parsed (cached).
        gold_parsed = () if not gold or gold_number is not None else parsed(gold)
        pred = extract_answer(completion_text(completion))
        if gold_number is None and gold_parsed == ():
            rewards.append(None)  # no gold answer, or one math-verify cannot read
        elif not pred or (GUESSES.search(pred) and not (GUESSES.search(gold) or SEVERAL_VALUES.search(gold))):
            rewards.append(0.0)
        elif (pred_number := _to_number(pred)) is not None and gold_number is not None:
            rewards.append(float(_same_number(pred, pred_number, gold, gold_number)))
        else:
            gold_parsed = gold_parsed or parsed(gold)
            pred_parsed = parsed(pred) if gold_parsed is not None else None
            if gold_parsed is None or pred_parsed is None or time.monotonic() >= deadline:
                late += 1  # this call has had its math-verify time: the trainer waits no longer
                rewards.append(0.0)
            else:
                rewards.append(float(bool(gold_parsed) and bool(pred_parsed) and verify(
                    list(gold_parsed), list(pred_parsed), timeout_seconds=_within(verify_timeout, deadline))))
    if late:
        logging.getLogger(__name__).warning(
            "accuracy: %d of %d completions scored 0 unchecked: math-verify had used this call's %.0f s budget "
            "(rewards.MATH_VERIFY_BUDGET)", late, len(completions), MATH_VERIFY_BUDGET)
    return rewards


@register("format", "1 for exactly `<think>…</think><answer>…</answer>`, else 0",
          probe=("<think></think><answer> </answer>", {}, 1.0))  # the tags, with nothing in the answer
def format_reward(completions, **kwargs) -> list[float]:
    """1.0 if the completion is `<think>...</think>` then a non-empty `<answer>...</answer>` and
    nothing else (whitespace aside), with each tag exactly once; else 0.0.

    If your chat template already opens `<think>` in the prompt (DeepSeek-R1 and QwQ do), completions
    never start with it and this reward stays at 0.

    Args:
        completions: Completions, as strings or message lists.

    Returns:
        One reward per completion.

    >>> format_reward(["<think>2 + 2</think>\\n<answer>4</answer>", "<answer>4</answer>"])
    [1.0, 0.0]
    """
    rewards = []
    for completion in completions:
        text = completion_text(completion)
        match = THINK_ANSWER_FORMAT.fullmatch(text)
        ok = match and match.group(1).strip() and all(text.count(tag) == 1 for tag in TAGS)
        rewards.append(1.0 if ok else 0.0)
    return rewards


@register("tag_count", "0.25 per reasoning tag present exactly once: partial credit while the format is being learned",
          probe=("<think><think></think></think><answer>1</answer><answer>2</answer>", {}, 0.5))  # tag spam
def tag_count_reward(completions, **kwargs) -> list[float]:
    """0.25 for each of `<think>`, `</think>`, `<answer>`, `</answer>` that appears exactly once.

    A softer `format_reward`: it gives signal before the model gets the whole format right.

    Args:
        completions: Completions, as strings or message lists.

    Returns:
        One reward in {0, 0.25, 0.5, 0.75, 1.0} per completion.

    >>> tag_count_reward(["<think>hm</think><answer>4</answer>", "<think>hm</think> 4", "4"])
    [1.0, 0.5, 0.0]
    """
    # open-r1 tag_count_reward (src/open_r1/rewards.py), without its newline requirements.
    return [0.25 * sum(completion_text(c).count(tag) == 1 for tag in TAGS) for c in completions]


@register("overlong", "DAPO's soft overlong punishment (Eq. 13): 0, then down to -1 over the last `buffer` "
          "(default a quarter) of `max_completion_length`",
          probe=("x", {"completion_ids": [[7] * 64]}, 0.0), factory=True)  # runs to the length limit
def get_overlong_reward(max_completion_length: int, buffer: float = 0.25) -> Callable:
    """Return TRL's DAPO soft overlong punishment, with the last `buffer` of the length budget as its buffer.

    Args:
        max_completion_length: The trainer's max completion length in tokens (L_max).
        buffer: The fraction of L_max over which the punishment grows (DAPO's L_cache / L_max).

    Returns:
        A reward that reads `completion_ids`: 0.0 up to (1 - buffer) L_max, then linear down to -1.0 at L_max.

    >>> get_overlong_reward(max_completion_length=8)(completion_ids=[[1] * 6, [1] * 7, [1] * 9])
    [0.0, -0.5, -1.0]
    >>> get_overlong_reward(max_completion_length=8, buffer=0.5)(completion_ids=[[1] * 4, [1] * 6])
    [0.0, -0.5]
    """
    # DAPO (arXiv 2503.14476) Eq. 13: 0 up to L_max - L_cache, then (L_max - L_cache - |y|) / L_cache; -1 past L_max
    cache = max(1, int(max_completion_length * buffer))  # buffer 0.25: L // 4
    return get_soft_overlong_punishment(max_completion_len=max_completion_length, soft_punish_cache=cache)


@register("repetition", "the fraction of repeated token n-grams (of `ngram_size` tokens) times `max_penalty`: 0 for "
          "no repeat, down to `max_penalty` for one n-gram looped",
          probe=("7 7 7 7", {"completion_ids": [[7, 8, 9] * 20]}, 0.0), factory=True)  # a loop of the same tokens
def get_repetition_reward(max_completion_length: int, ngram_size: int = 3, max_penalty: float = -1.0) -> Callable:
    """Return TRL's n-gram repetition penalty over `completion_ids`.

    Args:
        max_completion_length: Unused; every factory takes the same settings.
        ngram_size: n, the length of the token n-grams compared.
        max_penalty: The reward of a completion that is one n-gram repeated.

    Returns:
        A reward that reads `completion_ids`: (1 - unique n-grams / all n-grams) * max_penalty.

    >>> get_repetition_reward(max_completion_length=8)(completion_ids=[[1, 2, 3, 4], [5] * 6])
    [0.0, -0.75]
    """
    # "Demystifying Long CoT" (arXiv 2502.03373) Appendix C.2: (1 - #unique n-grams / #n-grams) * max_penalty.
    return get_repetition_penalty_reward(ngram_size=ngram_size, max_penalty=max_penalty)


def length_reward(completion_ids, max_completion_length: int, **kwargs) -> list[float]:
    """1 - |n - L/2| / (L/2) for a completion of n tokens under a budget of L tokens, at least 0
    (see `get_length_reward`)."""
    target = max_completion_length / 2
    return [max(0.0, 1.0 - abs(len(ids) - target) / target) for ids in completion_ids]


@register("length", "1 at half of `max_completion_length` tokens, down to 0 at none and at the full budget: TRL's "
          "GRPO quickstart reward for TL;DR summaries, relative to the budget",
          probe=("", {"completion_ids": [[]]}, 0.1), factory=True)  # says nothing at all
def get_length_reward(max_completion_length: int) -> Callable:
    """Return a reward for completions of about half the completion budget, in tokens.

    TRL's GRPO quickstart trains a summariser on trl-lib/tldr with a length reward; this is that reward made
    relative to the budget, so it needs no setting of its own: 1.0 at L/2 tokens, linear down to 0 at 0 and at L.

    Args:
        max_completion_length: The trainer's completion budget in tokens (L).

    Returns:
        A reward that reads `completion_ids`: 1 - |n - L/2| / (L/2), at least 0.

    >>> get_length_reward(max_completion_length=8)(completion_ids=[[1] * 4, [1] * 2, [1] * 8, []])
    [1.0, 0.5, 0.0, 0.0]
    """
    return functools.partial(length_reward, max_completion_length=max_completion_length)  # a partial pickles


THINK_END = "</think>"
THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)
SOFT_FORMAT = re.compile(r"<think>.*?</think>\s*<answer>(.*?)</answer>", re.DOTALL)


def after_reasoning(text: str) -> str:
    """What follows the last `</think>`: the conclusion; "" when the reasoning never ends.

    >>> after_reasoning("<think>7?</think> It is 7."), after_reasoning("<think>It is 7")
    (' It is 7.', '')
    """
    return text.rsplit(THINK_END, 1)[1] if THINK_END in text else ""


def final_answer_after_reasoning(text: str) -> str | None:
    """`final_answer` of the conclusion alone: what `reasoning_accuracy` grades, so maj@k votes on that."""
    return final_answer(after_reasoning(text))


@register("reasoning_accuracy", "`accuracy` on what follows the last `</think>` only: an answer inside the reasoning, "
          "or reasoning that never ends, scores 0",
          probe=("<think>it is 7</think> I am not sure.", {"answer": ["7"]}, 1.0))  # the answer only in the reasoning
@reward_spec(columns=[("answer", "solution")], correctness=True, final_answer=final_answer_after_reasoning)
def reasoning_accuracy_reward(completions, answer=None, solution=None, **kwargs) -> list[float | None]:
    """`accuracy_reward` graded on the text after the last `</think>`, as TRL's `reasoning_accuracy_reward` (which
    grades only LaTeX answers) does: a model that states the answer while thinking and never concludes gets 0.

    >>> reasoning_accuracy_reward(["<think>7?</think> It is 7.", "<think>It is 7", "7"], answer=["7"] * 3)
    [1.0, 0.0, 0.0]
    """
    finals = [after_reasoning(completion_text(c)) for c in completions]  # no conclusion: nothing to grade
    return accuracy_reward(finals, answer=answer, solution=solution)


@register("cosine", "`accuracy` scaled by length on a cosine schedule (Yeo et al. 2025, as open-r1 and TRL): right and "
          "short earns most (up to `max_value_correct`), wrong and short loses most (down to `min_value_wrong`)",
          # wrong, and padded to the probe's whole budget (64 tokens) to soften its penalty: still below 0
          probe=("<answer>8</answer>" + " ok" * 60, {"answer": ["7"], "completion_ids": [[1] * 64]}, 0.0),
          factory=True)
def get_cosine_reward(max_completion_length: int, min_value_wrong: float = -1.0, max_value_wrong: float = -0.5,
                      min_value_correct: float = 0.5, max_value_correct: float = 1.0) -> Callable:
    """Return the cosine length-scaled accuracy of "Demystifying Long Chain-of-Thought Reasoning" (Yeo et al. 2025,
    arXiv 2502.03373, Appendix C.1), with our `accuracy` deciding right from wrong (TRL's `get_cosine_scaled_reward`
    uses its LaTeX-only accuracy) and the length in tokens against `max_completion_length`.

    >>> cosine = get_cosine_reward(max_completion_length=100)
    >>> cosine(["<answer>7</answer>", "<answer>8</answer>"], answer=["7", "7"], completion_ids=[[1] * 50] * 2)
    [0.75, -0.75]
    """
    return functools.partial(cosine_reward, max_len=max_completion_length, wrong=(max_value_wrong, min_value_wrong),
                             correct=(min_value_correct, max_value_correct))


@reward_spec(columns=[("answer", "solution")])
def cosine_reward(completions, completion_ids, max_len: int, wrong: tuple, correct: tuple, answer=None, solution=None,
                  **kwargs) -> list[float | None]:
    """See `get_cosine_reward`: v_min + (v_max - v_min) (1 + cos(pi min(n / L, 1))) / 2, the bounds by correctness."""
    rewards = []
    for right, ids in zip(accuracy_reward(completions, answer=answer, solution=solution), completion_ids, strict=True):
        if right is None:
            rewards.append(None)
            continue
        low, high = correct if right == 1.0 else wrong
        rewards.append(low + 0.5 * (high - low) * (1.0 + math.cos(math.pi * min(len(ids) / max_len, 1.0))))
    return rewards


@register("soft_format", "0.5 for a `<think>…</think>` block, 1 when a non-empty `<answer>…</answer>` follows it; "
          "text around them is allowed: the partial-credit `format`",
          probe=("<think></think><answer> </answer>", {}, 1.0))  # the tags, with nothing in the answer
def soft_format_reward(completions, **kwargs) -> list[float]:
    """A lenient `format`: 0.5 for a reasoning block, 1.0 when a non-empty answer block follows it, whatever text
    surrounds them (a greeting, a closing line), so a model gets credit on its way to the strict format.

    >>> soft_format_reward(["Sure! <think>a</think> <answer>4</answer> Done.", "<think>a</think> 4", "4"])
    [1.0, 0.5, 0.0]
    """
    rewards = []
    for completion in completions:
        text = completion_text(completion)
        if (match := SOFT_FORMAT.search(text)) and match.group(1).strip():
            rewards.append(1.0)
        else:
            rewards.append(0.5 if THINK_BLOCK.search(text) else 0.0)
    return rewards


class RewardError(Exception):
    """A reward function failed or returned something the trainers cannot use."""


class CheckedReward:
    """A reward function under its registry name, whose output is checked on every call.

    TRL logs a reward as `rewards/<__name__>/mean`, so registered rewards take their registry name. Every
    call checks that the reward returned one float (or None) per completion, none NaN or infinite; if the
    function raises, it is called again sample by sample to name the one that fails. Either way the error
    names the reward and the sample, instead of surfacing deep inside TRL. A class, so it pickles.

    >>> CheckedReward("half", lambda completions, **kw: [0.5] * len(completions))(["a", "b"])
    [0.5, 0.5]
    >>> CheckedReward("bad", lambda completions, **kw: [float("nan")])(["a"])
    Traceback (most recent call last):
    ...
    rewards.RewardError: reward 'bad' returned nan for sample 0 ('a'); return None to skip a sample it cannot score
    """

    def __init__(self, name: str, reward_func: Callable):
        self.__name__ = name
        self.reward_func = reward_func
        # what the reward declares (reward_spec), so the scripts can check columns and pick eval metrics
        self.columns = required_columns(reward_func)
        self.correctness = getattr(declaration(reward_func), "correctness", False)
        self.final_answer = getattr(declaration(reward_func), "final_answer", None)

    def __call__(self, completions, **kwargs) -> list[float | None]:
        try:
            rewards = self.reward_func(completions=completions, **kwargs)
        except Exception as err:
            where = self._failing_sample(completions, kwargs)
            raise RewardError(f"reward '{self.__name__}' raised {type(err).__name__}{where}: {err}") from err
        if not isinstance(rewards, (list, tuple)) or len(rewards) != len(completions):
            got = f"{len(rewards)} values" if isinstance(rewards, (list, tuple)) else f"a {type(rewards).__name__}"
            raise RewardError(f"reward '{self.__name__}' returned {got} for {len(completions)} completions; "
                              "it must return a list with one float (or None) per completion")
        for i, reward in enumerate(rewards):
            if reward is None:
                continue
            sample = lambda i=i: f"sample {i} ({completion_text(completions[i])[:60]!r})"  # noqa: E731, only on error
            if isinstance(reward, bool) or not isinstance(reward, (int, float)):
                raise RewardError(f"reward '{self.__name__}' returned {reward!r} ({type(reward).__name__}) for "
                                  f"{sample()}; rewards must be floats, or None to skip a sample")
            if not math.isfinite(reward):
                raise RewardError(f"reward '{self.__name__}' returned {reward} for {sample()}; "
                                  "return None to skip a sample it cannot score")
        return list(rewards)

    def _failing_sample(self, completions, kwargs) -> str:
        """Call the reward on one sample at a time; describe the first that raises, or '' if none does alone."""
        n = len(completions)
        for i in range(n):
            one = {k: v[i : i + 1] if isinstance(v, list) and len(v) == n else v for k, v in kwargs.items()}
            try:
                self.reward_func(completions=completions[i : i + 1], **one)
            except Exception:
                return f" on sample {i} ({completion_text(completions[i])[:60]!r})"
        return ""


def reward_names() -> list[str]:
    """Return the sorted names of all registered rewards (`REWARDS`).

    >>> reward_names() == sorted(REWARDS) and "accuracy" in reward_names()
    True
    """
    return sorted(REWARDS)


def reward_table() -> str:
    """docs/rewards.md's table of named rewards, one row per registered reward, with its options and defaults."""
    rows = ["| name | reward | options (`--reward_options name.option=value`) |", "|---|---|---|"]
    for name in reward_names():
        options = ", ".join(f"`{k}={v}`" for k, v in REWARDS[name].options.items())
        rows.append(f"| `{name}` | {REWARDS[name].summary} | {options} |")
    return "\n".join(rows)


def parse_reward_options(options: list[str] | None, names: list[str]) -> dict[str, dict]:
    """`--reward_options overlong.buffer=0.5 repetition.ngram_size=4` as {reward: {option: value}}, each value
    cast to its default's type; an unknown reward or option, or a reward not in `names`, is a ValueError.

    >>> parse_reward_options(["overlong.buffer=0.5", "repetition.ngram_size=4"], ["overlong", "repetition"])
    {'overlong': {'buffer': 0.5}, 'repetition': {'ngram_size': 4}}
    """
    parsed: dict[str, dict] = {}
    for option in options or []:
        key, sep, value = option.partition("=")
        name, _, attr = key.strip().partition(".")
        if not sep or not attr:
            raise ValueError(f"reward option {option!r}: write it as <reward>.<option>=<value>, "
                             "e.g. overlong.buffer=0.5")
        if name not in names:
            raise ValueError(f"reward option {option!r}: {name!r} is not one of the rewards in use "
                             f"({', '.join(names)})")
        known = REWARDS[name].options if name in REWARDS else {}
        if attr not in known:
            choices = ", ".join(f"{k} (default {v})" for k, v in known.items()) or "none"
            raise ValueError(f"reward option {option!r}: '{name}' has no option {attr!r}; its options: {choices}")
        try:
            parsed.setdefault(name, {})[attr] = type(known[attr])(value.strip())
        except ValueError:
            raise ValueError(f"reward option {option!r}: {value!r} is not a {type(known[attr]).__name__}") from None
    return parsed


def import_dotted(path: str, kind: str):
    """The object at `package.module.name`; a ValueError that says how to fix it if it does not import.

    >>> import_dotted("math.pi", "reward")
    3.141592653589793
    """
    module_name, _, attr = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"cannot import {kind} '{path}' ({err}); its module must be importable, "
                         "e.g. on PYTHONPATH or next to your script") from err


def get_reward_funcs(names: list[str], max_completion_length: int, options: list[str] | None = None) -> list[Callable]:
    """Resolve reward names to reward functions.

    Args:
        names: Registry names (see `reward_names()`) or dotted paths `package.module.function`
            to your own rewards; the module must be importable (on PYTHONPATH or next to your script).
        max_completion_length: Passed to the rewards registered with a factory.
        options: `--reward_options`, `<reward>.<option>=<value>` for the rewards registered with options.

    Returns:
        The reward functions, in order, each a `CheckedReward` (async ones excepted). Registered ones
        are named after their registry name, yours after the function.

    >>> [f.__name__ for f in get_reward_funcs(["accuracy", "overlong"], max_completion_length=256)]
    ['accuracy', 'overlong']
    """
    parsed_options = parse_reward_options(options, names)
    funcs = []
    for name in names:
        if name in REWARDS:
            reward_func = REWARDS[name].build(max_completion_length, **parsed_options.get(name, {}))
            funcs.append(CheckedReward(name, reward_func))
        elif "." in name:
            func = import_dotted(name, "reward")
            attr = name.rpartition(".")[2]
            if not callable(func):
                raise ValueError(f"reward '{name}' is a {type(func).__name__}, not a function")
            # async rewards go to GRPOTrainer as they are: it runs them concurrently, unchecked
            func_name = getattr(func, "__name__", attr)
            funcs.append(func if inspect.iscoroutinefunction(func) else CheckedReward(func_name, func))
        else:
            raise ValueError(
                f"unknown reward '{name}'; choose one of: {', '.join(reward_names())}, "
                "or give a dotted path like my_rewards.my_fn"
            )
    return funcs


# ---- code: run the completion's code against the row's asserts, in a sandbox (code_sandbox.py) --------------------


@reward_spec(columns=["tests"], correctness=True)
def code_reward(completions, tests=None, limits=None, **kwargs) -> list[float | None]:
    """The fraction of the row's asserts that pass when run after the completion's code, in a sandbox.

    The code is the last ```python block of the completion, else its last fenced block, else the whole text.
    Each assert runs on its own after the code, so one failing assert does not hide the others. Code that
    raises or exits scores 0; an assert that raises, or that the time (10 s) or memory limit cuts off, fails.
    `code_sandbox.py` says what the sandbox protects against in each mode; with bubblewrap installed the code
    has no network, sees no secrets, and writes only to a throwaway tmpfs. Completions run in parallel, one
    per CPU core.

    Args:
        completions: Completions, as strings or message lists.
        tests: Asserts, from the dataset column `tests`: per row a string with one assert per line, or a list.
        limits: The sandbox's `code_sandbox.Limits`; default `code_sandbox.LIMITS`.

    Returns:
        One reward in [0, 1] per completion; None where the row has no tests.

    >>> code = "```python\\ndef add(a, b):\\n    return a + b\\n```"
    >>> tests = ["assert add(1, 2) == 3\\nassert add(2, 2) == 4"] * 2 + [None]
    >>> code_reward([code, "def add(a, b): return 3", code], tests=tests)
    [1.0, 0.5, None]
    """
    from code_sandbox import extract_code, run_many, split_tests  # Linux only; imported when used

    if tests is None:
        return [None] * len(completions)
    rows = [(i, split_tests(row_tests)) for i, (_, row_tests) in enumerate(zip(completions, tests, strict=True))]
    rows = [(i, asserts) for i, asserts in rows if asserts]
    scores = run_many([(extract_code(completion_text(completions[i])), asserts) for i, asserts in rows], limits=limits)
    rewards: list[float | None] = [None] * len(completions)
    for (i, _), score in zip(rows, scores, strict=True):
        rewards[i] = score
    return rewards


@register("code", "the fraction of the row's `tests` asserts that pass when run after the completion's code, in a "
          "sandbox ([docs/code-sandbox.md](code-sandbox.md)); `None` (skipped) when the row has no tests",
          probe=("import sys\nsys.exit(0)", {"tests": ["assert add(1, 2) == 3"]}, 1.0),  # exits before the asserts
          factory=True)
def get_code_reward(max_completion_length: int, timeout: float = 10.0) -> Callable:
    """Return `code_reward` with a wall-clock `timeout` in seconds per completion (CPU time: the same, rounded up)."""
    from dataclasses import replace

    import code_sandbox

    limits = replace(code_sandbox.LIMITS, timeout=timeout, cpu=math.ceil(timeout))
    return functools.partial(code_reward, limits=limits)  # a partial pickles
