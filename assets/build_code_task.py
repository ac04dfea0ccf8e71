"""Build the bundled code task: short Python functions, scored by the `code` reward against assert tests.

    python assets/build_code_task.py

It writes, next to this file:
    code/train.jsonl, code/test.jsonl   40 tasks, 8 of them in test, each
        {"prompt": "Write a Python function `add(a, b)` that ...", "tests": "assert add(1, 2) == 3\\n..."}

`tests` holds one assert per line; the `code` reward runs the completion's code and then each assert in a
sandbox, and scores the fraction that pass. Every task's reference solution is checked against its own tests
before anything is written. No randomness: every 5th task goes to test, so a rebuild gives the same files.

The bundled tiny model cannot write code. Use this task with a real model, e.g.:

    python grpo_trl_example.py --model_name_or_path Qwen/Qwen2.5-0.5B-Instruct --dataset_name assets/code \\
        --reward_funcs code --system_prompt "You are a helpful coding assistant." \\
        --max_completion_length 256 --learning_rate 1e-6 --max_steps 100
"""

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROMPT = "Write a Python function `{signature}` that {description}. Reply with the code in a ```python block."

# (signature, what it does, reference solution, asserts)
TASKS = [
    ("add(a, b)", "returns the sum of a and b",
     "def add(a, b):\n    return a + b",
     ["add(1, 2) == 3", "add(-4, 4) == 0", "add(10, 32) == 42"]),
    ("subtract(a, b)", "returns a minus b",
     "def subtract(a, b):\n    return a - b",
     ["subtract(5, 3) == 2", "subtract(0, 7) == -7", "subtract(-2, -2) == 0"]),
    ("multiply(a, b)", "returns the product of a and b",
     "def multiply(a, b):\n    return a * b",
     ["multiply(3, 4) == 12", "multiply(-2, 5) == -10", "multiply(0, 99) == 0"]),
    ("is_even(n)", "returns True if the integer n is even, else False",
     "def is_even(n):\n    return n % 2 == 0",
     ["is_even(4) is True", "is_even(7) is False", "is_even(0) is True"]),
    ("square(n)", "returns n squared",
     "def square(n):\n    return n * n",
     ["square(3) == 9", "square(-4) == 16", "square(0) == 0"]),
    ("absolute(n)", "returns the absolute value of n without using abs()",
     "def absolute(n):\n    return -n if n < 0 else n",
     ["absolute(-5) == 5", "absolute(3) == 3", "absolute(0) == 0"]),
    ("maximum(a, b, c)", "returns the largest of three numbers",
     "def maximum(a, b, c):\n    return max(a, b, c)",
     ["maximum(1, 2, 3) == 3", "maximum(9, -1, 4) == 9", "maximum(5, 5, 2) == 5"]),
    ("factorial(n)", "returns n! for a non-negative integer n",
     "def factorial(n):\n    result = 1\n    for i in range(2, n + 1):\n        result *= i\n    return result",
     ["factorial(0) == 1", "factorial(5) == 120", "factorial(10) == 3628800"]),
    ("fibonacci(n)", "returns the n-th Fibonacci number, with fibonacci(0) == 0 and fibonacci(1) == 1",
     "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
     ["fibonacci(0) == 0", "fibonacci(1) == 1", "fibonacci(10) == 55"]),
    ("reverse_string(s)", "returns the string s reversed",
     "def reverse_string(s):\n    return s[::-1]",
     ["reverse_string('abc') == 'cba'", "reverse_string('') == ''", "reverse_string('racecar') == 'racecar'"]),
    ("is_palindrome(s)", "returns True if the string s reads the same forwards and backwards",
     "def is_palindrome(s):\n    return s == s[::-1]",
     ["is_palindrome('level') is True", "is_palindrome('hello') is False", "is_palindrome('') is True"]),
    ("count_vowels(s)", "returns the number of vowels (a, e, i, o, u, either case) in the string s",
     "def count_vowels(s):\n    return sum(c in 'aeiouAEIOU' for c in s)",
     ["count_vowels('hello') == 2", "count_vowels('xyz') == 0", "count_vowels('AEIOU') == 5"]),
    ("sum_list(xs)", "returns the sum of a list of numbers",
     "def sum_list(xs):\n    return sum(xs)",
     ["sum_list([1, 2, 3]) == 6", "sum_list([]) == 0", "sum_list([-1, 1]) == 0"]),
    ("max_list(xs)", "returns the largest element of a non-empty list",
     "def max_list(xs):\n    return max(xs)",
     ["max_list([3, 9, 2]) == 9", "max_list([-5]) == -5", "max_list([-3, -1, -2]) == -1"]),
    ("mean(xs)", "returns the arithmetic mean of a non-empty list of numbers",
     "def mean(xs):\n    return sum(xs) / len(xs)",
     ["mean([1, 2, 3]) == 2", "mean([4]) == 4", "mean([1, 2]) == 1.5"]),
    ("count_words(s)", "returns the number of whitespace-separated words in the string s",
     "def count_words(s):\n    return len(s.split())",
     ["count_words('hello world') == 2", "count_words('') == 0", "count_words('  a  b c ') == 3"]),
    ("is_prime(n)", "returns True if the integer n is a prime number",
     "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))",
     ["is_prime(2) is True", "is_prime(15) is False", "is_prime(97) is True", "is_prime(1) is False"]),
    ("gcd(a, b)", "returns the greatest common divisor of two positive integers",
     "def gcd(a, b):\n    while b:\n        a, b = b, a % b\n    return a",
     ["gcd(12, 18) == 6", "gcd(7, 13) == 1", "gcd(100, 10) == 10"]),
    ("celsius_to_fahrenheit(c)", "converts a temperature from Celsius to Fahrenheit",
     "def celsius_to_fahrenheit(c):\n    return c * 9 / 5 + 32",
     ["celsius_to_fahrenheit(0) == 32", "celsius_to_fahrenheit(100) == 212", "celsius_to_fahrenheit(-40) == -40"]),
    ("digit_sum(n)", "returns the sum of the decimal digits of a non-negative integer n",
     "def digit_sum(n):\n    return sum(int(d) for d in str(n))",
     ["digit_sum(123) == 6", "digit_sum(0) == 0", "digit_sum(9999) == 36"]),
    ("remove_duplicates(xs)", "returns the list xs without repeated elements, keeping the first occurrence of each",
     "def remove_duplicates(xs):\n    return list(dict.fromkeys(xs))",
     ["remove_duplicates([1, 2, 1, 3, 2]) == [1, 2, 3]", "remove_duplicates([]) == []",
      "remove_duplicates(['a', 'a']) == ['a']"]),
    ("flatten(xss)", "flattens a list of lists into one list",
     "def flatten(xss):\n    return [x for xs in xss for x in xs]",
     ["flatten([[1, 2], [3]]) == [1, 2, 3]", "flatten([]) == []", "flatten([[], [4], []]) == [4]"]),
    ("capitalize_words(s)", "returns s with the first letter of every space-separated word in upper case",
     "def capitalize_words(s):\n    return ' '.join(w[:1].upper() + w[1:] for w in s.split(' '))",
     ["capitalize_words('hello world') == 'Hello World'", "capitalize_words('a') == 'A'",
      "capitalize_words('') == ''"]),
    ("count_char(s, c)", "returns how many times the character c occurs in the string s",
     "def count_char(s, c):\n    return s.count(c)",
     ["count_char('banana', 'a') == 3", "count_char('abc', 'z') == 0", "count_char('', 'a') == 0"]),
    ("fizzbuzz(n)", "returns 'Fizz' if n is divisible by 3, 'Buzz' if by 5, 'FizzBuzz' if by both, else str(n)",
     "def fizzbuzz(n):\n    return 'Fizz' * (n % 3 == 0) + 'Buzz' * (n % 5 == 0) or str(n)",
     ["fizzbuzz(3) == 'Fizz'", "fizzbuzz(10) == 'Buzz'", "fizzbuzz(15) == 'FizzBuzz'", "fizzbuzz(7) == '7'"]),
    ("second_largest(xs)", "returns the second largest distinct value in a list with at least two distinct values",
     "def second_largest(xs):\n    return sorted(set(xs))[-2]",
     ["second_largest([1, 2, 3]) == 2", "second_largest([5, 5, 4]) == 4", "second_largest([-1, -2]) == -2"]),
    ("is_anagram(a, b)", "returns True if the strings a and b are anagrams of each other",
     "def is_anagram(a, b):\n    return sorted(a) == sorted(b)",
     ["is_anagram('listen', 'silent') is True", "is_anagram('abc', 'abd') is False", "is_anagram('', '') is True"]),
    ("power(base, exp)", "returns base raised to the non-negative integer exp without using ** or pow()",
     "def power(base, exp):\n    result = 1\n    for _ in range(exp):\n        result *= base\n    return result",
     ["power(2, 10) == 1024", "power(5, 0) == 1", "power(-3, 3) == -27"]),
    ("clamp(x, lo, hi)", "returns x limited to the range [lo, hi]",
     "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))",
     ["clamp(5, 0, 10) == 5", "clamp(-3, 0, 10) == 0", "clamp(42, 0, 10) == 10"]),
    ("count_positives(xs)", "returns how many numbers in the list xs are greater than zero",
     "def count_positives(xs):\n    return sum(x > 0 for x in xs)",
     ["count_positives([1, -2, 3, 0]) == 2", "count_positives([]) == 0", "count_positives([-1, -5]) == 0"]),
    ("list_product(xs)", "returns the product of a list of numbers (1 for an empty list)",
     "def list_product(xs):\n    result = 1\n    for x in xs:\n        result *= x\n    return result",
     ["list_product([2, 3, 4]) == 24", "list_product([]) == 1", "list_product([5, 0]) == 0"]),
    ("running_sum(xs)", "returns the list of running totals of xs",
     "def running_sum(xs):\n    total, out = 0, []\n    for x in xs:\n        total += x\n        out.append(total)\n"
     "    return out",
     ["running_sum([1, 2, 3]) == [1, 3, 6]", "running_sum([]) == []", "running_sum([5, -5]) == [5, 0]"]),
    ("word_lengths(s)", "returns a list of the lengths of the whitespace-separated words in s",
     "def word_lengths(s):\n    return [len(w) for w in s.split()]",
     ["word_lengths('a bb ccc') == [1, 2, 3]", "word_lengths('') == []", "word_lengths('hello') == [5]"]),
    ("to_binary(n)", "returns the binary representation of a non-negative integer n as a string without a prefix",
     "def to_binary(n):\n    return bin(n)[2:]",
     ["to_binary(5) == '101'", "to_binary(0) == '0'", "to_binary(255) == '11111111'"]),
    ("char_frequency(s)", "returns a dict mapping each character of s to the number of times it occurs",
     "def char_frequency(s):\n    counts = {}\n    for c in s:\n        counts[c] = counts.get(c, 0) + 1\n"
     "    return counts",
     ["char_frequency('aab') == {'a': 2, 'b': 1}", "char_frequency('') == {}", "char_frequency('x') == {'x': 1}"]),
    ("merge_sorted(xs, ys)", "merges two sorted lists into one sorted list",
     "def merge_sorted(xs, ys):\n    return sorted(xs + ys)",
     ["merge_sorted([1, 3], [2, 4]) == [1, 2, 3, 4]", "merge_sorted([], [1]) == [1]", "merge_sorted([], []) == []"]),
    ("is_leap_year(year)", "returns True if year is a leap year in the Gregorian calendar",
     "def is_leap_year(year):\n    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)",
     ["is_leap_year(2024) is True", "is_leap_year(1900) is False", "is_leap_year(2000) is True",
      "is_leap_year(2023) is False"]),
    ("chunk(xs, n)", "splits the list xs into consecutive chunks of length n (the last one may be shorter)",
     "def chunk(xs, n):\n    return [xs[i:i + n] for i in range(0, len(xs), n)]",
     ["chunk([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]", "chunk([], 3) == []", "chunk([1, 2], 5) == [[1, 2]]"]),
    ("title_case_count(s)", "returns how many whitespace-separated words of s start with an upper-case letter",
     "def title_case_count(s):\n    return sum(w[0].isupper() for w in s.split())",
     ["title_case_count('Hello big World') == 2", "title_case_count('') == 0", "title_case_count('abc') == 0"]),
    ("rotate_left(xs, k)", "returns the list xs rotated left by k positions (k may exceed the length)",
     "def rotate_left(xs, k):\n    if not xs:\n        return []\n    k %= len(xs)\n    return xs[k:] + xs[:k]",
     ["rotate_left([1, 2, 3], 1) == [2, 3, 1]", "rotate_left([1, 2, 3], 4) == [2, 3, 1]", "rotate_left([], 2) == []"]),
]


def build_rows() -> tuple[list[dict], list[dict]]:
    """Return (train, test) rows; each task's reference solution must pass its own asserts."""
    train, test = [], []
    for i, (signature, description, solution, asserts) in enumerate(TASKS):
        tests = [f"assert {a}" for a in asserts]
        namespace = {}
        exec(solution, namespace)  # our own code, not a completion: no sandbox needed
        for test_line in tests:
            exec(test_line, namespace)
        row = {"prompt": PROMPT.format(signature=signature, description=description), "tests": "\n".join(tests)}
        (test if i % 5 == 4 else train).append(row)
    return train, test


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out_dir", type=Path, default=HERE / "code", help="where train.jsonl and test.jsonl go")
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name, rows in zip(("train", "test"), build_rows()):
        path = args.out_dir / f"{name}.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        print(f"{path}: {len(rows)} tasks")


if __name__ == "__main__":
    main()
