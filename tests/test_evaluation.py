"""The held-out evaluation's metrics, from fixed rewards: which metrics a reward gets follows its declaration."""

import pytest

from evaluation import metrics_of
from rewards import get_reward_funcs


def test_correctness_rewards_get_pass_at_k_whatever_their_name():
    """`code` declares itself a correctness reward, so it gets pass@k, but no maj@k: it has no final answer to vote on."""
    [code] = get_reward_funcs(["code"], max_completion_length=8)
    rewards = [[1.0, 0.5], [0.0, 0.0], [1.0, 1.0]]  # [prompt][sample]: a 0.5 passes half the asserts, not the task
    metrics = metrics_of(code, rewards, greedy_rewards=[1.0, 0.0, 0.5], texts=[["a", "b"]] * 3, num_samples=2)
    assert metrics == pytest.approx({"mean_reward": 3.5 / 6, "greedy_accuracy": 1 / 3,
                                     "pass@1": (0.5 + 0.0 + 1.0) / 3, "pass@2": 2 / 3})


def test_accuracy_gets_maj_at_k_from_its_final_answers():
    [accuracy] = get_reward_funcs(["accuracy"], max_completion_length=8)
    texts = [["so 7", "so 7", "so 8"], ["so 1", "so 2", "so 2"]]
    rewards = [[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]  # the majority answer is right on prompt 1, wrong on prompt 2
    metrics = metrics_of(accuracy, rewards, greedy_rewards=[1.0, 1.0], texts=texts, num_samples=3)
    assert metrics["maj@3"] == 0.5 and metrics["pass@1"] == pytest.approx((2 / 3 + 1 / 3) / 2)


def test_other_rewards_and_reward_models_get_their_means():
    def reward_model(completions, **kwargs): ...

    metrics = metrics_of(reward_model, [[0.5, -1.0], [2.0, None]], greedy_rewards=[1.0, 3.0], texts=[["a", "b"]] * 2,
                         num_samples=2)
    assert metrics == {"mean_reward": 0.5, "greedy_reward": 2.0}
