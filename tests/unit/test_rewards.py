import pickle
import subprocess
import sys
import threading
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
import torch
from conftest import REPO

from rewards import (
    REWARDS,
    CheckedReward,
    RewardArguments,
    RewardError,
    accuracy_reward,
    completion_text,
    extract_answer,
    format_reward,
    get_reward_funcs,
    tag_count_reward,
)

# Each named reward's hacking probe: a completion that games it, the columns it is scored with, and the reward it
# must stay below
PROBES = {
    "accuracy": ("<think>easy</think><answer></answer> the answer is 7", {"answer": ["7"]}, 1.0),  # empty answer tag
    "reasoning_accuracy": ("<think>it is 7</think> I am not sure.", {"answer": ["7"]}, 1.0),  # only while thinking
    "exact_match": ("<answer></answer> The answer is Paris, London or Rome", {"answer": ["Paris"]}, 1.0),  # guesses
    "format": ("<think></think><answer> </answer>", {}, 1.0),  # the tags, with nothing in the answer
    "soft_format": ("<think></think><answer> </answer>", {}, 1.0),
    "tag_count": ("<think><think></think></think><answer>1</answer><answer>2</answer>", {}, 0.5),  # tag spam
    "length": ("", {"completion_ids": [[]]}, 0.1),  # says nothing at all
    "overlong": ("x", {"completion_ids": [[7] * 64]}, 0.0),  # runs to the length limit
    "repetition": ("7 7 7 7", {"completion_ids": [[7, 8, 9] * 20]}, 0.0),  # a loop of the same tokens
    # wrong, and padded to the probe's whole budget (64 tokens) to soften its penalty: still below 0
    "cosine": ("<answer>8</answer>" + " ok" * 60, {"answer": ["7"], "completion_ids": [[1] * 64]}, 0.0),
    "code": ("import sys\nsys.exit(0)", {"tests": ["assert add(1, 2) == 3"]}, 1.0),  # exits before the asserts
    "sentiment": ("It was not good, not great and not fun at all.", {}, 0.0),  # praise words, each negated
}


def reward_names():
    return list(REWARDS)


def as_plain(texts):
    return list(texts)


def as_conversational(texts):
    return [[{"role": "assistant", "content": text}] for text in texts]


@pytest.fixture(params=[as_plain, as_conversational], ids=["plain", "conversational"])
def fmt(request):
    """Wraps a list of strings into completions of either format."""
    return request.param


def test_completion_text_takes_last_message():
    messages = [{"role": "assistant", "content": "call tool"}, {"role": "tool", "content": "ok"},
                {"role": "assistant", "content": "final"}]
    assert completion_text(messages) == "final"
    assert completion_text("plain") == "plain"
    assert completion_text([{"role": "assistant", "content": None, "tool_calls": []}]) == ""


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<answer>1</answer> then <answer> 7 </answer>", "7"),
        (r"x \boxed{1} then \boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"<answer>\boxed{3}</answer> \boxed{4}", r"\boxed{3}"),
        ("#### 1 then #### 42", "42"),
        ("so it is 12.", "12"),
        ("it costs -3 or 1,234 or 3.50.", "-3 or 1,234 or 3.50"),  # a list of guesses
        ("it costs 1,234, or 3.50.", "1,234, or 3.50"),
        ("step 2: so 7.", "7"),
        ("total 1,234", "1,234"),
        ("no numbers here", None),
        (r"\boxed{unclosed", None),
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    "text, gold, expected",
    [
        ("<think>3 + 4</think><answer>7</answer>", "7", 1.0),
        (r"The answer is \boxed{\frac{1}{2}}", "0.5", 1.0),  # math-verify path
        (r"\boxed{0.5}", r"\frac{1}{2}", 1.0),  # math-verify path, other way round
        (r"\boxed{\sqrt{2}}", r"\sqrt{2}", 1.0),
        (r"\boxed{\sqrt{3}}", r"\sqrt{2}", 0.0),
        ("Step by step... #### 42", "42", 1.0),
        ("so it is 12.", "12", 1.0),
        ("it drops to -3.", "-3", 1.0),
        ("It is 1234", "blah blah\n#### 1,234", 1.0),  # GSM8K gold
        ("<answer>1000</answer>", "1,000", 1.0),
        ("<answer>3.0</answer>", "3", 1.0),
        ("<answer>$3.50</answer>", "3.5", 1.0),
        ("<answer>**7**</answer>", "7", 1.0),  # markdown bold
        ("I have no idea.", "7", 0.0),  # no extractable answer
        ("<answer>8</answer>", "7", 0.0),  # wrong answer
        ("<think>hmm</think>\n<answer>6</answer>", "7", 0.0),  # well formatted but wrong
        ("<answer></answer> \\boxed{7} 7", "7", 0.0),  # hacking: empty answer tag
        ("<answer>3 4 5 6 7</answer>", "5", 0.0),  # hacking: several guesses
        ("<answer>3 4</answer>", "7", 0.0),  # hacking: math-verify would read this as 3 + 4
        ("<answer>3, 4, 5, 6, 7</answer>", "7", 0.0),  # hacking: a set is not a number
    ],
)
def test_accuracy(fmt, text, gold, expected):
    assert accuracy_reward(fmt([text]), answer=[gold]) == [expected]


def test_accuracy_gold_from_solution_column(fmt):
    completions = fmt(["<answer>7</answer>", "<answer>7</answer>"])
    assert accuracy_reward(completions, solution=["7", r"so $\boxed{8}$"]) == [1.0, 0.0]


def test_accuracy_prefers_answer_over_solution(fmt):
    assert accuracy_reward(fmt(["<answer>7</answer>"]), answer=["7"], solution=["8"]) == [1.0]


def test_accuracy_without_gold_is_none(fmt):
    completions = fmt(["<answer>7</answer>"] * 3)
    assert accuracy_reward(completions) == [None] * 3
    assert accuracy_reward(completions, answer=[None, "", "   "]) == [None] * 3


def test_accuracy_ignores_trainer_kwargs(fmt):
    rewards = accuracy_reward(
        fmt(["<answer>7</answer>"]), answer=["7"], prompts=["q"], completion_ids=[[1, 2]],
        trainer_state=None, log_extra=lambda *a: None, log_metric=lambda *a: None,
    )
    assert rewards == [1.0]


def test_accuracy_off_main_thread(fmt):
    # math-verify's signal.alarm timeouts raise outside the main thread unless we turn them off.
    results = []
    thread = threading.Thread(
        target=lambda: results.append(accuracy_reward(fmt([r"\boxed{\frac{1}{2}}"]), answer=["0.5"]))
    )
    thread.start()
    thread.join()
    assert results == [[1.0]]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<think>2 + 2</think>\n<answer>4</answer>", 1.0),
        ("\n<think>\n2 + 2\n</think>\n\n<answer>\n4\n</answer>\n", 1.0),
        ("<answer>4</answer>", 0.0),  # missing think
        ("<think>2 + 2</think><answer>4</answer> trailing junk", 0.0),
        ("<think>2 + 2</think><answer>4</answer><answer>5</answer>", 0.0),  # two answer tags
        ("<think>2 + 2</think><answer> </answer>", 0.0),  # empty answer
        ("<think>a</think><think>b</think><answer>4</answer>", 0.0),  # two think blocks
        ("junk <think>2 + 2</think><answer>4</answer>", 0.0),
    ],
)
def test_format(fmt, text, expected):
    assert format_reward(fmt([text])) == [expected]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<think>a</think>\n<answer>4</answer>", 1.0),
        ("<think>a</think> so 4", 0.5),
        ("<think>a</think><answer>4</answer><answer>5</answer>", 0.5),  # answer tags twice: no credit for them
        ("<think>a", 0.25),
        ("just 4", 0.0),
    ],
)
def test_tag_count(fmt, text, expected):
    assert tag_count_reward(fmt([text])) == [expected]


def test_overlong(fmt):
    (overlong,) = get_reward_funcs(["overlong"], max_completion_length=8)  # penalty starts after 8 - 8 // 4 = 6
    ids = [[1] * 3, [1] * 6, [1] * 7, [1] * 8, [1] * 20]
    assert overlong.__name__ == "overlong"
    rewards = overlong(completions=fmt(["x"] * 5), completion_ids=ids, answer=["1"] * 5)
    assert rewards == [0.0, 0.0, -0.5, -1.0, -1.0]


def test_overlong_tiny_length_still_works(fmt):
    (overlong,) = get_reward_funcs(["overlong"], max_completion_length=2)  # cache is at least 1
    assert overlong(completions=fmt(["x"] * 3), completion_ids=[[1], [1, 1], [1, 1, 1]]) == [0.0, -1.0, -1.0]


def test_repetition(fmt):
    (repetition,) = get_reward_funcs(["repetition"], max_completion_length=8)
    ids = [[1, 2, 3, 4, 5], [5] * 6, [1, 2], [1, 2, 3, 1, 2, 3]]  # 3-grams: 3/3 unique, 1/4, none, 3/4
    assert repetition.__name__ == "repetition"
    assert repetition(completions=fmt(["x"] * 4), completion_ids=ids) == pytest.approx([0.0, -0.75, 0.0, -0.25])


def test_registry_names_and_pickling():
    funcs = get_reward_funcs(reward_names(), max_completion_length=16)
    assert [f.__name__ for f in funcs] == reward_names()
    completions, ids = ["<think>a</think><answer>4</answer>"], [[1, 2, 3]]
    for func in funcs:
        restored = pickle.loads(pickle.dumps(func))  # the trainers may send rewards to other processes
        assert restored.__name__ == func.__name__
        # every reward scores a well-formed right answer, given every column a reward here reads
        [reward] = restored(completions=completions, completion_ids=ids, answer=["4"])
        assert reward is None or isinstance(reward, float), func.__name__
    scored = {f.__name__: f(completions=completions, completion_ids=ids, answer=["4"])[0] for f in funcs}
    assert scored["accuracy"] == scored["reasoning_accuracy"] == scored["format"] == scored["soft_format"] == 1.0
    assert scored["code"] is None  # no `tests` column


def test_reward_settings_reach_the_reward():
    settings = RewardArguments(overlong_buffer=0.5, repetition_ngram_size=2)
    [overlong, repetition] = get_reward_funcs(["overlong", "repetition"], max_completion_length=8, args=settings)
    assert overlong(completions=["x"] * 2, completion_ids=[[1] * 4, [1] * 6]) == [0.0, -0.5]  # buffer: the last 4
    assert repetition(completions=["x"], completion_ids=[[1, 2, 1, 2]]) == [pytest.approx(-1 / 3)]  # 2-grams


def test_docs_list_every_named_reward_and_setting():
    """docs/rewards.md's table names every reward of the registry, and every setting of RewardArguments."""
    from dataclasses import fields

    from conftest import REPO

    text = (REPO / "docs" / "rewards.md").read_text()
    assert [name for name in REWARDS if f"| `{name}` |" not in text] == []
    assert [f.name for f in fields(RewardArguments) if f"`--{f.name}`" not in text] == []


def test_unknown_name_lists_registry():
    with pytest.raises(ValueError) as err:
        get_reward_funcs(["acuracy"], max_completion_length=8)
    expected = f"unknown reward 'acuracy'; choose one of: {', '.join(reward_names())}, or give a dotted path"
    assert expected in str(err.value)


def test_dotted_path_to_user_module(tmp_path, monkeypatch):
    (tmp_path / "my_rewards_for_test.py").write_text(
        "def short(completions, **kwargs):\n    return [float(len(c) < 5) for c in completions]\n"
        "NOT_A_FUNCTION = 3\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    accuracy, short = get_reward_funcs(["accuracy", "my_rewards_for_test.short"], max_completion_length=8)
    assert short.__name__ == "short"
    assert short(completions=["abc", "abcdef"]) == [1.0, 0.0]
    assert accuracy(completions=["7"], answer=["7"]) == [1.0]

    with pytest.raises(ValueError, match=r"'my_rewards_for_test.NOT_A_FUNCTION' is a int, not a function"):
        get_reward_funcs(["my_rewards_for_test.NOT_A_FUNCTION"], max_completion_length=8)
    # the module imported: no advice to make it importable, but what it defines
    with pytest.raises(ValueError) as err:
        get_reward_funcs(["my_rewards_for_test.missing"], max_completion_length=8)
    assert str(err.value) == (f"reward 'my_rewards_for_test.missing': module my_rewards_for_test ({tmp_path}/"
                              "my_rewards_for_test.py) has no 'missing'; it defines: short")
    with pytest.raises(ValueError, match=r"^reward 'rewards.nosuch': module rewards \(.*\) has no 'nosuch'; it "
                                         r"defines: .*accuracy_reward"):
        get_reward_funcs(["rewards.nosuch"], max_completion_length=8)


def test_a_missing_column_is_said_with_the_advice_that_can_help():
    """Data with another column: map it with the flag; prompt-only data has none to map, so the advice is to add one
    or to let the reward do without it."""
    from datasets import Dataset

    from rewards import check_columns

    needs_answer = get_reward_funcs(["accuracy"], 8)
    with pytest.raises(ValueError, match=r"has: prompt, gold; map yours onto it with --dataset_answer_column"):
        check_columns(needs_answer, [Dataset.from_dict({"prompt": ["1+1="], "gold": ["2"]})], "mine.jsonl")
    with pytest.raises(ValueError) as err:
        check_columns(needs_answer, [Dataset.from_dict({"prompt": ["Say hi."]})], "mine.jsonl")
    assert str(err.value) == ("reward 'accuracy' needs a column 'answer' or 'solution', and mine.jsonl has: prompt; "
                              "add one to the data, or, if the reward can score without it, give its argument a "
                              "default (answer=None)")


# Golds that are text (issue 68: `target` golds like `enemy` scored 0 under accuracy, completions `enemy"` included)
@pytest.mark.parametrize("text, gold, expected", [
    ('enemy"', "enemy", 1.0),  # the whole completion, its punctuation aside
    ("The answer is Paris.", "paris", 1.0),  # the sentence after "the answer is", case aside
    ("Answer: New  York", "New York", 1.0),
    ("<answer>**Yes**</answer>", "yes", 1.0),
    (r"\boxed{\text{B}}", "(B)", 1.0),  # a multiple-choice letter, however either side writes it
    ("#### Café", "cafe\u0301", 1.0),  # Unicode's two spellings of é
    ("Lyons", ["Lyon", "Lyons"], 1.0),  # one of several golds
    ("I think it is Paris.", "Paris", 0.0),  # more than the answer, with no answer marked
    ("Paris London", "Paris", 0.0),  # guesses
    ("<answer>London</answer> The answer is Paris.", "Paris", 0.0),  # the marked answer counts
    ("A", "the", 0.0),  # articles are kept: `A` is an answer
    ("Paris", "", None), ("Paris", None, None),  # no gold
    # what changes an answer is kept (issue 73: the wrong sign was paid), however it is spaced or written
    ("-3", "3", 0.0), ("3", "-3", 0.0), ("The answer is \u22123.", "-3", 1.0), ("+5", "5", 0.0),
    ("3.5", "35", 0.0), ("Answer: 3.5.", "3.5", 1.0), ("1,000", "1000", 1.0), ("3,5", "35", 0.0),
    ("3/4", "34", 0.0), ("3 / 4", "3/4", 1.0), ("x > 1", "x < 1", 0.0), ("x >= 1", "x > 1", 0.0),
    ("a \u2260 b", "a = b", 0.0), ("50%", "50", 0.0),
    ("C++", "C", 0.0), ("C#", "C", 0.0), ("<answer>F#</answer>", "F#", 1.0),
    ("- Paris", "Paris", 1.0),  # a list's mark is none of the answer
])
def test_exact_match_compares_text(text, gold, expected, fmt):
    [reward] = get_reward_funcs(["exact_match"], 64)
    assert reward(fmt([text]), answer=[gold]) == [expected]


def test_text_golds_under_accuracy_are_noted_before_training(capsys):
    """accuracy, reasoning_accuracy and cosine read golds as math: golds that are text are counted, named and pointed
    to exact_match before any model loads; numbers, math and exact_match's own golds are not."""
    from datasets import Dataset

    from rewards import check_columns

    def note(names, golds, column="answer"):
        check_columns(get_reward_funcs(names, 8), [Dataset.from_dict({"prompt": ["q"] * len(golds), column: golds}),
                                                   None], "mine.jsonl")
        return capsys.readouterr().out

    said = note(["accuracy", "format"], ["enemy", "42", "Paris", r"\frac{1}{2}", "#### 7", "B", "x > 1"])
    assert said.startswith("note: accuracy reads golds as numbers and math, and 3 of the first 7 in mine.jsonl's "
                           "'answer' are text ('enemy', 'Paris', 'B'): ") and "--reward_funcs exact_match" in said
    assert note(["cosine", "reasoning_accuracy"], ["yes"], "solution").startswith(
        "note: cosine and reasoning_accuracy read golds as numbers and math, and 1 of the first 1 in mine.jsonl's "
        "'solution' are text ('yes')")
    assert note(["accuracy"], ["42", "3.5 dollars", r"\boxed{\sqrt{2}}", "(1, 2)"]) == ""
    assert note(["exact_match", "format"], ["enemy"]) == ""
    with pytest.raises(ValueError, match=r"--dataset_answer_column <column> \(a gold it reads as a number or math; "
                                         r"for text, --reward_funcs exact_match\)$"):
        note(["accuracy"], ["enemy"], "target")


def test_dotted_path_import_failure():
    with pytest.raises(ValueError) as err:
        get_reward_funcs(["no_such_module_xyz.fn"], max_completion_length=8)
    message = str(err.value)
    assert "cannot import reward 'no_such_module_xyz.fn'" in message
    assert "No module named 'no_such_module_xyz'" in message
    assert "PYTHONPATH" in message
    assert isinstance(err.value.__cause__, ImportError)


# ---- CheckedReward: a misbehaving reward names itself and the sample -------------------------------------------


def _checked(body: str):
    namespace = {}
    exec(f"def my_reward(completions, answer=None, **kwargs):\n    {body}\n", namespace)
    return CheckedReward("my_reward", namespace["my_reward"])


def test_checked_reward_that_raises_names_the_sample_and_keeps_the_error():
    reward = _checked("return [1.0 / int(a) for a in answer]")
    with pytest.raises(RewardError, match=r"reward 'my_reward' raised ZeroDivisionError on sample 1 \('y'\)") as info:
        reward(["x", "y", "z"], answer=["1", "0", "2"])
    assert isinstance(info.value.__cause__, ZeroDivisionError)


@pytest.mark.parametrize("body, message", [
    ("return [1.0]", r"returned 1 values for 2 completions"),
    ("return 1.0", r"returned a float for 2 completions"),
    ("return [1.0, '1']", r"returned '1' \(str\) for sample 1 \('b'\); rewards must be real numbers"),
    ("return [1.0, float('nan')]", r"returned nan for sample 1 \('b'\); return None to skip"),
    ("return [float('inf'), 1.0]", r"returned inf for sample 0 \('a'\)"),
])
def test_checked_reward_rejects_bad_output(body, message):
    with pytest.raises(RewardError, match=message):
        _checked(body)(["a", "b"])


def test_checked_reward_passes_none_and_numbers_through():
    assert _checked("return [None, 1, 0.5]")(["a", "b", "c"]) == [None, 1, 0.5]


@pytest.mark.parametrize("value", [np.float16(0.5), np.float32(0.5), np.float64(0.5), np.int8(1), np.int64(1),
                                   Fraction(1, 2), 1], ids=lambda value: type(value).__name__)
def test_checked_reward_takes_any_real_number_and_hands_on_floats(value):
    """A reward may return numpy scalars or fractions, as TRL takes them; the trainers get plain floats (PPO's adapter
    builds a tensor of them, the records are JSON)."""
    [reward] = CheckedReward("my_reward", lambda completions, **kwargs: [value])(["a"])
    assert type(reward) is float and reward == float(value)


@pytest.mark.parametrize("value", [True, np.bool_(True), Decimal("0.5"), torch.tensor(0.5), "0.5"],
                         ids=["bool", "np.bool_", "Decimal", "0-d tensor", "str"])
def test_checked_reward_refuses_what_is_not_a_real_number(value):
    """A bool (Python's or numpy's), a Decimal, a 0-d tensor: none is a `numbers.Real` that is not a bool."""
    with pytest.raises(RewardError, match=r"sample 0 \('a'\); rewards must be real numbers, or None to skip"):
        CheckedReward("my_reward", lambda completions, **kwargs: [value])(["a"])


@pytest.mark.parametrize("value", [np.float32("nan"), np.float64("inf"), np.float16("-inf")])
def test_checked_reward_refuses_numpy_values_that_are_not_finite(value):
    with pytest.raises(RewardError, match=r"for sample 0 \('a'\); return None to skip"):
        CheckedReward("my_reward", lambda completions, **kwargs: [value])(["a"])


def test_dotted_rewards_are_checked_and_keep_their_name(tmp_path, monkeypatch):
    (tmp_path / "user_rewards_checked.py").write_text(
        "def shout(completions, **kw):\n    return ['loud'] * len(completions)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    [reward] = get_reward_funcs(["user_rewards_checked.shout"], max_completion_length=8)
    assert reward.__name__ == "shout"
    with pytest.raises(RewardError, match="reward 'shout' returned 'loud'"):
        reward(["a"])


# ---- reward-hacking probes: one completion per built-in reward that games it and must not get full credit ------

def test_every_named_reward_has_a_hacking_probe():
    assert sorted(PROBES) == sorted(REWARDS)


@pytest.mark.parametrize("name", reward_names())
def test_reward_hacking_probe(name):
    completion, columns, ceiling = PROBES[name]
    [reward] = get_reward_funcs([name], max_completion_length=64)
    assert reward([completion], **columns)[0] < ceiling


def test_reward_declarations():
    """Declared columns and correctness survive the registry's wrapping; undeclared rewards need what they require."""
    accuracy, code, fmt_reward = get_reward_funcs(["accuracy", "code", "format"], max_completion_length=8)
    assert accuracy.columns == (("answer", "solution"),) and accuracy.correctness and accuracy.final_answer
    assert code.columns == ("tests",) and code.correctness and code.final_answer is None
    assert fmt_reward.columns == () and not fmt_reward.correctness

    def mine(completions, prompts, label, answer=None, *, level, trainer_state=None, **kwargs): ...

    assert CheckedReward("mine", mine).columns == ("label", "level")


# Classes of real answers that accuracy once got wrong (issue 10); each case is ours, one per line, with the reason.
@pytest.mark.parametrize("text, gold, expected", [
    # a unit word (or a few) after the number: math-verify alone reads "18 dollars" as 18 * d * o * ...
    ("<answer>18 dollars</answer>", "18", 1.0),
    (r"\boxed{18 dollars}", "18", 1.0),
    ("<answer>1,200 eggs</answer>", "1200", 1.0),
    ("<answer>$15 per hour</answer>", "15", 1.0),
    (r"\boxed{7\text{ cookies}}", "7", 1.0),
    (r"\boxed{\$18.00}", "18", 1.0),
    ("So there are 42 people.", "42", 1.0),
    ("<answer>19 dollars</answer>", "18", 0.0),
    ("<answer>5 x</answer>", "5", 0.0),  # a variable is not a unit: 5x is not 5
    ("<answer>18 or 19 dollars</answer>", "18", 0.0),  # two numbers are two guesses
    ("<answer>The answer is 18 dollars.</answer>", "18", 1.0),  # a sentence around one number
    (r"\boxed{\text{18 dollars}}", "18", 1.0),
    ("<answer>I think 5 x</answer>", "5", 0.0),  # still a variable, in a sentence
    ("<answer>Either 18 or 19.</answer>", "18", 0.0),
    (r"\boxed{18\ \text{dollars}}", "18", 1.0),  # LaTeX spacing and thousands separators
    (r"\boxed{18\,000}", "18000", 1.0),
    (r"\boxed{1{,}200\text{ eggs}}", "1200", 1.0),
    (r"\boxed{\mathbf{18}}", "18", 1.0),
    ("It dropped to \u22125.", "-5", 1.0),  # the Unicode minus sign
    ("It dropped to \u22125.", "5", 0.0),
    ("**Answer: 18**", "18", 1.0),  # GSM8K-style endings of real models
    ("So, Janet makes \\$18 per day.", "18", 1.0),
    ("The answer is `18`.", "18", 1.0),
    ("He paid $1,234.56 in total.", "1234.56", 1.0),
    ("#### 18 dollars", "18", 1.0),
    # a gold answer with whitespace around it, or inside its box
    (r"\boxed{(1,2)}", "\\boxed{\n(1,2)\n}", 1.0),
    ("<answer>42</answer>", "  42 \n", 1.0),
    ("<answer>72</answer>", "He sold 72.\n####   72\n", 1.0),
    # decimals written with a leading dot
    ("The probability is .4", "0.4", 1.0),
    ("The answer is .5", "5", 0.0),  # .5 is a half, not 5
    ("<answer>-.25</answer>", "-0.25", 1.0),
    ("so it is .75.", r"\frac{3}{4}", 1.0),
    # the last-number fallback must not read digits that are not an answer
    ("AZYUK2A", "2", 0.0),
    (r"$\frac{1+\sqrt{5}}{2}$", "2", 0.0),
    ("$-[0,1)$", "1", 0.0),
    ("so the term is x^2", "2", 0.0),
    ("I used model v3", "3", 0.0),
    ("as shown in [1]", "1", 0.0),
    ("it equals f(3)", "3", 0.0),
    ("a 5-year-old", "5", 0.0),
    ("The answer is 3/4", "0.75", 1.0),  # a fraction standing on its own is an answer
    ("x = 3", "3", 1.0),
    ("The answer is 5 x", "5", 0.0),  # a variable follows: a coefficient, as in <answer>5 x</answer>
    ("The answer is 2 pi.", "2", 0.0),
    ("The answer is 5 apples.", "5", 1.0),  # a unit word is not a variable
    ("The answer is (42).", "42", 0.0),  # brackets: "(1)" is an equation reference more often than an answer
    ("The answer is 18 or 19.", "19", 0.0),  # a list of guesses, as in <answer>18 or 19</answer>
    # after ####: the first number on its line, unless its line holds several spaced apart
    ("#### 7 8 9", "7", 0.0),  # a list of guesses, as in <answer>7 8 9</answer>
    ("#### 72\nHope this helps! 73", "72", 1.0),
    ("#### 72 (rounded)", "72", 1.0),
])
def test_accuracy_on_the_answers_models_write(fmt, text, gold, expected):
    assert accuracy_reward(fmt([text]), answer=[gold]) == [expected]


def test_majority_vote_counts_a_number_once_whatever_its_unit():
    from extras.stats import metrics_of
    from rewards import final_answer

    texts = ["<answer>18 dollars</answer>", "#### 17", r"\boxed{\$18.00}", "so 17", "It is 18."]
    assert final_answer(texts[0]) == final_answer(texts[2]) == final_answer(texts[4]) == "18.0"
    [accuracy] = get_reward_funcs(["accuracy"], max_completion_length=8)
    rewards = accuracy(texts, answer=["18"] * 5)
    assert metrics_of(accuracy, [rewards], [1.0], [texts], 5)["maj@5"] == 1.0  # 18 has 3 votes, 17 has 2


def test_accuracy_stops_calling_math_verify_when_its_budget_is_spent(monkeypatch, caplog):
    """Symbolic answers past the per-call budget score 0 unchecked, with one warning; plain numbers still count."""
    import rewards

    monkeypatch.setattr(rewards, "MATH_VERIFY_BUDGET", 0.0)  # spent before the first symbolic answer
    completions = [r"\boxed{\frac{1}{2}}", "<answer>7</answer>", r"\boxed{\frac{2}{4}}"]
    with caplog.at_level("WARNING", logger="rewards"):
        assert accuracy_reward(completions, answer=["0.5", "7", "0.5"]) == [0.0, 1.0, 0.0]
    assert "2 of 3 completions scored 0 unchecked" in caplog.text
    monkeypatch.setattr(rewards, "MATH_VERIFY_BUDGET", 10.0)
    assert accuracy_reward(completions, answer=["0.5", "7", "0.5"]) == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("seconds", [None, 0.7], ids=["every-second-allowed", "0.7s-a-call"])
def test_accuracy_returns_within_its_math_verify_budget(monkeypatch, seconds):
    """However slow math-verify is, a call returns less than a second past its budget, having scored what it
    could in time. The clock is faked: each parse and check advances it by `seconds`, or by its whole timeout."""
    import rewards

    clock = [0.0]

    def slow_parse(text, readers, parsing_timeout):
        clock[0] += seconds or parsing_timeout
        return [text]

    def slow_verify(gold, pred, timeout_seconds, **settings):
        clock[0] += seconds or timeout_seconds
        return gold == pred

    monkeypatch.setattr(rewards, "time", type("Clock", (), {"monotonic": staticmethod(lambda: clock[0])}))
    monkeypatch.setattr(rewards, "parse", slow_parse)
    monkeypatch.setattr(rewards, "verify", slow_verify)
    monkeypatch.setattr(rewards, "_PARSED", {})
    monkeypatch.setattr(rewards, "MATH_VERIFY_BUDGET", 10.0)
    completions = [rf"\boxed{{\frac{{{i}}}{{2}}}}" for i in range(20)]  # 20 symbolic answers, 20 symbolic golds
    scores = accuracy_reward(completions, answer=[rf"\frac{{{i}}}{{2}}" for i in range(20)])
    assert clock[0] < 10.0 + 1.0
    # 1.4 s an answer (a gold parse and a check; the answer's parse is the gold's, cached): 7 answers are checked by
    # 9.8 s, and the 8th's gold parse ends past the budget, so the rest score 0 unchecked
    assert scores == [1.0] * (7 if seconds else 0) + [0.0] * (13 if seconds else 20)


def test_reasoning_accuracy_grades_only_the_conclusion(fmt):
    texts = ["<think>maybe 7</think>\nSo the answer is 7.", "<think>7</think> I give up.", "<think>so 7",
             "The answer is 7.", "<think>8? no</think> It is \\boxed{7}"]
    [reward] = get_reward_funcs(["reasoning_accuracy"], max_completion_length=8)
    assert reward(fmt(texts), answer=["7"] * 5) == [1.0, 0.0, 0.0, 0.0, 1.0]
    assert reward.correctness and reward.columns == (("answer", "solution"),)


def test_cosine_matches_trl_where_the_accuracies_agree():
    """On boxed LaTeX answers, which TRL's accuracy also reads, our cosine reward is TRL's get_cosine_scaled_reward."""
    from trl.rewards import get_cosine_scaled_reward

    texts = [r"\boxed{\frac{1}{3}}", r"\boxed{\frac{1}{2}}"] * 3
    ids = [[1] * n for n in (0, 0, 30, 30, 100, 100)]
    [ours] = get_reward_funcs(["cosine"], max_completion_length=60,
                              args=RewardArguments(cosine_min_value_wrong=-2, cosine_max_value_correct=3))
    theirs = get_cosine_scaled_reward(max_len=60, min_value_wrong=-2.0, max_value_correct=3.0)
    expected = theirs([[{"content": t}] for t in texts], [r"\frac{1}{3}"] * 6, ids)
    assert ours(texts, answer=[r"\frac{1}{3}"] * 6, completion_ids=ids) == pytest.approx(expected)
    assert expected[:2] == pytest.approx([3.0, -2.0])  # short: the extremes; past max_len: the long-length bounds


def test_soft_format_gives_partial_credit(fmt):
    texts = ["<think>a</think><answer>4</answer>", "Hi! <think>a</think>\n<answer>4</answer> Bye.",
             "<think>a</think> 4", "<answer>4</answer>", "<think>a</think><answer> </answer>"]
    [reward] = get_reward_funcs(["soft_format"], max_completion_length=8)
    assert reward(fmt(texts)) == [1.0, 1.0, 0.5, 0.0, 0.5]


LISTS = ["7, 8, 9", "7 or 8", "7 8 9", "7; 8", "7 and 8", "7,8"]
MARKERS = ["<answer>{}</answer>", "\\boxed{{{}}}", "#### {}", "So: {}"]


@pytest.mark.parametrize("marker", MARKERS, ids=["answer", "boxed", "####", "prose"])
def test_one_rule_for_a_list_of_guesses_wherever_the_answer_is_read(fmt, marker):
    """However the answer is marked, a list of numbers that holds the gold is a list of guesses (0), an expression is
    what it computes ("7 / 8" is 7/8, not 7), a thousands comma is no list, and a gold that is a list may be matched."""
    assert accuracy_reward(fmt([marker.format(x) for x in LISTS]), answer=["7"] * len(LISTS)) == [0.0] * len(LISTS)
    if marker != "So: {}":  # prose is read for a number, not an expression
        assert accuracy_reward(fmt([marker.format("7 / 8")] * 2), answer=["7", "7/8"]) == [0.0, 1.0]
        assert accuracy_reward(fmt([marker.format("7-8")] * 2), answer=["7", "-1"]) == [0.0, 1.0]
    assert accuracy_reward(fmt([marker.format("1,000"), marker.format("7")]), answer=["1000", "7"]) == [1.0, 1.0]


# A gold with several values, in the notations math answers use, and a completion that gives those values
SEVERAL_VALUES = [
    (r"\boxed{(1,4.5)}", r"$(1,\frac{9}{2})$"),  # a tuple
    (r"\boxed{1,2,3}", "$1$ and $2$ and $3$"),  # values joined by "and"
    (r"\boxed{\{1,2\}}", r"\{1,2\}"),  # a set
    (r"\boxed{[0,1)}", "[0,1)"),  # an interval
    (r"\boxed{3, -3}", r"\pm 3"),
    (r"\boxed{3, -3}", r"\pm3"),
    ("<answer>2 or 3</answer>", "2 or 3"),
]


@pytest.mark.parametrize("completion, gold", SEVERAL_VALUES)
def test_a_gold_with_several_values_is_matched_by_those_values(fmt, completion, gold):
    """The list-of-guesses rule guards a gold that is one value: where the gold itself has several, a completion
    that gives the same values is right, and one that gives other values is still wrong."""
    assert accuracy_reward(fmt([completion, r"\boxed{(1,5)}"]), answer=[gold] * 2) == [1.0, 0.0]


# Samples whose order must not change maj@k: they share a final answer as a careless reader would see it (the whole
# text), and differ in what the reward grades
VOTES = [["<think>7</think> 7", "<think>7", "<think>7"], ["#### 7 or 8", "<answer>7</answer>", "#### 7, 9"],
         ["7", "<think>8</think> 8", "<think>8</think> 8"], ["#### 7 / 8", "#### 7 / 8", "7"]]


@pytest.mark.parametrize("name", [n for n in reward_names()
                                  if get_reward_funcs([n], max_completion_length=8)[0].final_answer])
def test_maj_at_k_votes_on_what_the_reward_grades(name):
    """For every reward that declares a final answer, two samples with one final answer get one reward, so the
    majority's grade, and maj@k, do not depend on which sample carries it, nor on the order of the samples."""
    import itertools

    from extras.stats import metrics_of

    [reward] = get_reward_funcs([name], max_completion_length=8)
    for samples in VOTES:
        rewards = reward(samples, answer=["7"] * len(samples))
        for (a, ra), (b, rb) in itertools.combinations(zip(samples, rewards), 2):
            if reward.final_answer(a) == reward.final_answer(b):
                assert ra == rb, (a, b)
        orders = {metrics_of(reward, [[rewards[i] for i in order]], [0.0], [[samples[i] for i in order]],
                             len(samples))["maj@3"] for order in itertools.permutations(range(len(samples)))}
        assert len(orders) == 1, f"maj@3 of {samples} depends on their order: {orders}"


# Phrasings that math-verify reads right and accuracy once misread (issue 45); each case is ours unless it says whose.
@pytest.mark.parametrize("text, gold, expected", [
    # an explanation after the answer, in brackets or in a clause, is not the answer
    ("The answer is 7 (since 3 + 4 = 7).", "7", 1.0),
    ("The answer is 7 (since 3 + 4 = 7).", "4", 0.0),
    ("So the total is $60 (12 × 5 = 60).", "60", 1.0),
    ("So the total is $60 (12 × 5 = 60).", "5", 0.0),
    ("The answer is 7 [since 3 + 4 = 7].", "7", 1.0),
    ("The answer is 7 — because 3 + 4 makes 7.", "7", 1.0),
    ("The answer is 7, because 3 and 4 make it.", "7", 1.0),
    ("The answer is 7, i.e. 3 + 4.", "7", 1.0),
    ("The answer is 7 (since 3 + 4 = 7). Hope this helps!", "7", 1.0),
    ("The answer is 3 (or 4).", "4", 0.0),  # an aside is never read as the answer
    ("She has 11 apples left (18 - 7 = 11).", "11", 1.0),
    # the sentence after "the answer is" holds the answer, as math-verify reads it first
    ("The answer is 12. We multiplied 3 by 4.", "12", 1.0),
    ("The answer is 12. We multiplied 3 by 4.", "4", 0.0),
    ("The answer is 18 - 7 = 11 apples. The question had 18.", "11", 1.0),
    ("The answer is 18 or 19. I am sure.", "18", 0.0),  # still a list of guesses
    ("The answer is:\n\n42", "42", 1.0),  # nothing after it in its sentence: the last number
    # a percentage in prose keeps its sign, or its word
    ("The answer is 50%.", "0.5", 1.0),
    ("The answer is 50 percent.", "0.5", 1.0),
    ("So 28 pct of them passed.", r"28\%", 1.0),
    ("The answer is 50%.", "50", 1.0),
    ("The answer is 50.", "0.5", 0.0),
    (r"\boxed{50 percent}", "0.5", 1.0),
    (r"The answer is 50\%.", "0.5", 1.0),
    ("<answer>The percentage is 50</answer>", "0.5", 0.0),  # the sign or word goes right after the number
    # LaTeX in prose is read as math-verify reads it, and numbers listed in it are still guesses
    ("The answer is $x = 3$.", "3", 1.0),
    ("The answer is $3$ or $4$.", "4", 0.0),
    ("He paid $5 for the pen and $3 for the book, so $8 in total.", "8", 1.0),  # currency, not LaTeX
])
def test_accuracy_reads_what_math_verify_reads(fmt, text, gold, expected):
    assert accuracy_reward(fmt([text]), answer=[gold]) == [expected]


# A gold written as a relation and an answer written as an interval, or the reverse. First math-verify's own three
# cases, verbatim (its repository's tests/test_all.py: test_set_rel_assymetry, with allow_set_relation_comp, and
# "Issue: LaTeX vs expr precedence"), then pairs of ours that math-verify says are equal
RELATION_AND_INTERVAL = [
    (r"$x \in [-2,7]$", r"$-2 \\le x \\le 7$"),
    (r"$-2 \\le x \\le 7$", r"$x \in [-2,7]$"),
    ("$x \\in [-2,7]$", "$less than or equal to zero between its roots. Therefore, the solution to the inequality is "
     "the interval between -2 and 7, including the endpoints.\n\nThus, the solution in interval notation is:\n\n"
     "\\[ \\boxed{[-2, 7]} \\]$"),
    (r"$(1, \infty)$", "x > 1"),
    (r"$x > 1$", r"(1, \infty)"),
    (r"$(-\infty, 2]$", r"x \le 2"),
    (r"$x \le 2$", r"(-\infty, 2]"),
    (r"$(1, 3)$", "1 < x < 3"),
    (r"$1 < x < 3$", "(1, 3)"),
]


@pytest.mark.parametrize("answer, gold", RELATION_AND_INTERVAL)
@pytest.mark.parametrize("written", ["{}", "The solution is {}.", "\\boxed{{{}}}", "<answer>{}</answer>"],
                         ids=["as-written", "prose", "boxed", "answer"])
def test_a_relation_equals_its_interval_both_ways(fmt, answer, gold, written):
    marked = written.startswith(("\\boxed", "<answer>"))  # the answer inside a marker, without its `$...$`
    text = written.format(answer.strip("$") if marked else answer)
    assert accuracy_reward(fmt([text]), answer=[gold]) == [1.0]


@pytest.mark.parametrize("text, gold", [
    (r"\boxed{[1, \infty)}", "x > 1"),  # the end point
    (r"\boxed{x \ge 1}", r"(1, \infty)"),
    (r"\boxed{(1, 3)}", r"1 \le x \le 3"),
    (r"\boxed{x < 1}", r"(1, \infty)"),  # the other side
    (r"\boxed{2}", "1 < x < 3"),  # one value in the range is not the range
    (r"\boxed{1, 2, 3}", "1 < x < 3"),  # nor are values listed ("1, 3" is: math-verify reads it as the pair (1, 3))
    ("The solution is $x > 2$.", r"(1, \infty)"),
])
def test_a_relation_and_a_different_interval_are_not_equal(fmt, text, gold):
    assert accuracy_reward(fmt([text]), answer=[gold]) == [0.0]


SENTENCES = ["What a wonderful, happy day!", "It was awful.", "It is a chair.", "The plot was slow, but the ending was "
             "lovely.", "NOT BAD AT ALL!!! :)", "I hated it, and the staff were rude.", ""]


def test_sentiment_is_vaders_compound_score(fmt):
    """`sentiment` gives what VADER itself gives each text, in either completion format."""
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    [sentiment] = get_reward_funcs(["sentiment"], max_completion_length=8)
    analyzer = SentimentIntensityAnalyzer()
    assert sentiment(fmt(SENTENCES)) == [analyzer.polarity_scores(text)["compound"] for text in SENTENCES]
    assert sentiment(SENTENCES)[:2] == [0.8268, -0.4588]  # and VADER is what we think it is


def test_sentiment_imports_vader_only_when_it_scores():
    code = ("import sys, rewards; [f] = rewards.get_reward_funcs(['sentiment'], 8); before = 'vaderSentiment' in "
            "sys.modules; f(['good']); print(before, 'vaderSentiment' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]
