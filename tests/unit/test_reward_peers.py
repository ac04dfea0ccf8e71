"""A peer-style table for `accuracy` and `format`: the classes of case that public reward suites test, in cases of
our own.

Sources studied (for the classes, not copied): open-r1's `tests/unit/test_rewards.py` (accuracy on boxed LaTeX, format
variants), TRL's `tests/unit/test_rewards.py` (accuracy_reward, think_format_reward, unparseable golds), and
Math-Verify's test cases (fractions, decimals, percentages, sets and intervals, equations, units in `\\text{}`,
roots and pi, thousands separators). Where our intended answer differs from the common convention, the case says
why, on its line.
"""

import pytest

from rewards import accuracy_reward, format_reward

ACCURACY = [
    # --- boxed LaTeX, as open-r1 and TRL test it
    (r"\boxed{\frac{63}{400}}", r"\frac{63}{400}", 1.0),
    (r"\boxed{\frac{64}{400}}", r"\frac{63}{400}", 0.0),
    (r"The final answer is $\boxed{\dfrac{3}{4}}$.", r"\frac{3}{4}", 1.0),
    (r"\boxed{\tfrac{1}{3}}", r"\frac{1}{3}", 1.0),
    # --- equivalent forms of one number
    (r"\boxed{0.75}", r"\frac{3}{4}", 1.0),
    (r"\boxed{\frac{6}{8}}", "0.75", 1.0),
    ("<answer>2.50</answer>", "2.5", 1.0),
    ("<answer>1e3</answer>", "1000", 1.0),  # math-verify alone reads LaTeX 1e3 as 1*e*3; a model means 1000
    ("<answer>-0</answer>", "0", 1.0),
    (r"\boxed{1{,}000}", "1000", 1.0),  # LaTeX's thousands separator
    ("<answer>1,000,000</answer>", "1000000", 1.0),
    ("<answer>1,5</answer>", "15", 0.0),  # not a thousands separator: a list of two numbers
    # --- percentages: a percentage is both its number and its fraction, as in Math-Verify
    (r"\boxed{50\%}", "50", 1.0),
    ("<answer>50%</answer>", "50", 1.0),
    (r"\boxed{50\%}", "0.5", 1.0),
    ("<answer>25%</answer>", r"\frac{1}{4}", 1.0),
    ("<answer>0.25</answer>", "25%", 1.0),
    ("<answer>50</answer>", "0.5", 0.0),  # without its % sign, 50 is only 50
    # --- degrees, mixed numbers, scientific notation
    (r"\boxed{90^\circ}", "90", 1.0),
    (r"\boxed{45^{\circ}}", r"90^\circ", 0.0),
    (r"\boxed{2\frac{1}{2}}", "2.5", 1.0),
    (r"\boxed{3 \times 10^{4}}", "30000", 1.0),
    # --- negative fractions, complex numbers, infinity
    (r"\boxed{\frac{-1}{2}}", r"-\frac{1}{2}", 1.0),
    (r"\boxed{3+4i}", "3+4i", 1.0),
    (r"\boxed{3-4i}", "3+4i", 0.0),
    (r"\boxed{(2, \infty)}", r"(2, \infty)", 1.0),
    # --- matrices and vectors
    (r"\boxed{\begin{pmatrix} 1 \\ 2 \end{pmatrix}}", r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", 1.0),
    (r"\boxed{\begin{pmatrix} 1 \\ 3 \end{pmatrix}}", r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", 0.0),
    # --- multiple choice: the letter, bare or in text
    (r"\boxed{B}", "B", 1.0),
    (r"\boxed{C}", "B", 0.0),
    (r"\boxed{\text{(B)}}", "B", 1.0),
    # --- roots, pi, powers
    (r"\boxed{2\sqrt{2}}", r"\sqrt{8}", 1.0),
    (r"\boxed{\pi/2}", r"\frac{\pi}{2}", 1.0),
    (r"\boxed{2^{10}}", "1024", 1.0),
    (r"\boxed{\sqrt{2}}", "1.414", 0.0),  # an approximation is not the exact value
    # --- sets, tuples, intervals
    (r"\boxed{\{1, 2\}}", r"\{2, 1\}", 1.0),
    (r"\boxed{(1, 2)}", "(1, 2)", 1.0),
    (r"\boxed{[0, 1)}", "[0, 1)", 1.0),
    (r"\boxed{[0, 1]}", "[0, 1)", 0.0),
    # --- equations and variables
    (r"\boxed{x = 5}", "5", 1.0),
    (r"\boxed{x^2 + 2x + 1}", "(x+1)^2", 1.0),
    (r"\boxed{5x}", "5", 0.0),
    # --- units and words around a number (GSM8K answers)
    (r"\boxed{12\text{ cm}}", "12", 1.0),
    ("<answer>12 cm</answer>", "12", 1.0),
    ("<answer>$4.50</answer>", "4.5", 1.0),
    ("The answer is: 30 minutes.", "30", 1.0),
    # --- where the answer is taken from: the last marker wins, then the last standalone number
    (r"\boxed{3} ... on reflection \boxed{4}", "4", 1.0),
    ("<answer>4</answer> \\boxed{3}", "4", 1.0),  # an <answer> tag outranks a box
    ("First 12, then 17 is the total.", "17", 1.0),  # the fallback reads the last standalone number
    ("I think it is 17. Final: 12", "12", 1.0),
    # --- no answer, or an ungradeable gold
    ("I don't know.", "12", 0.0),
    ("<answer></answer>", "12", 0.0),
    ("<answer>12</answer>", r"\boxed{}", None),  # TRL also skips a gold it cannot parse
    ("<answer>12</answer>", "", None),
    # --- gaming attempts
    ("<answer>11 12 13</answer>", "12", 0.0),
    ("<answer>11, 12, 13</answer>", "12", 0.0),
    (r"\boxed{12 \text{ or } 13}", "12", 0.0),
    ("The answer is 12 or 13.", "12", 0.0),  # a list of guesses
    ("The answer is 5 x", "5", 0.0),  # a variable after the number: a coefficient, not the answer
    ("Reading (12) again, 12 it is", "12", 1.0),
]


@pytest.mark.parametrize("text, gold, expected", ACCURACY)
def test_accuracy_table(text, gold, expected):
    assert accuracy_reward([text], answer=[gold]) == [expected]


FORMAT = [
    ("<think>reason</think><answer>42</answer>", 1.0),
    ("<think>reason</think>\n<answer>42</answer>\n", 1.0),  # whitespace between and after the blocks
    ("<think>\nline 1\nline 2\n</think>\n<answer>\n42\n</answer>", 1.0),  # multi-line blocks
    ("<answer>42</answer>", 0.0),  # no reasoning block
    ("<think>reason</think>", 0.0),  # no answer block
    ("<think>reason</think> The answer is 42.", 0.0),  # TRL's think_format_reward gives 1: it checks <think> only
    ("<answer>42</answer><think>reason</think>", 0.0),  # wrong order
    ("Sure! <think>reason</think><answer>42</answer>", 0.0),  # text outside the blocks
    ("<think>reason</think><answer>42</answer> Hope this helps.", 0.0),
    ("<think>a</think><think>b</think><answer>42</answer>", 0.0),  # a tag twice
    ("<think>reason</think><answer> </answer>", 0.0),  # an empty answer
    ("<think>reason<answer>42</answer></think>", 0.0),  # nested
]


@pytest.mark.parametrize("text, expected", FORMAT)
def test_format_table(text, expected):
    assert format_reward([text]) == [expected]
