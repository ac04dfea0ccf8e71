"""reward_curve.png and training_curves.png: each panel draws the logged series it names, point for point.

The figures are caught at `savefig` and read back: axes titles, line labels and line data.
"""

import matplotlib.container
import matplotlib.figure
import pytest

from extras.plots import plot

# Logs as the scripts record them in metrics.jsonl. GRPO: `kl`, `completions/mean_length`; PPO: `objective/kl`.
# A reward that scored nothing at a step is logged as None there; eval logs carry only `eval_*` keys.
# GRPO's groups with no reward spread and its completions cut at the budget; PPO's value loss, clip fractions and
# entropy: what a user looks at after the reward.
GRPO_LOGS = [
    {"step": 1, "reward": 0.5, "rewards/accuracy/mean": 0.5, "rewards/format/mean": 0.0, "kl": 0.0,
     "completions/mean_length": 3.0, "groups_without_spread": 0.5, "completions/clipped_ratio": 0.25, "entropy": 0.9},
    {"step": 2, "reward": 0.75, "rewards/accuracy/mean": 0.75, "rewards/format/mean": None, "kl": 0.01,
     "completions/mean_length": 2.5, "groups_without_spread": 0.25, "completions/clipped_ratio": 0.0, "entropy": 0.8},
    {"step": 2, "eval_reward": 0.6},
    {"step": 3, "reward": 1.0, "rewards/accuracy/mean": 0.9, "rewards/format/mean": 0.1, "kl": 0.02,
     "completions/mean_length": 2.0, "groups_without_spread": 0.75, "completions/clipped_ratio": 0.0, "entropy": 0.7},
]
PPO_LOGS = [{"step": s, "reward": r, "rewards/accuracy/mean": r, "objective/kl": k, "loss/value_avg": v,
             "policy/clipfrac_avg": c, "val/clipfrac_avg": c / 2, "policy/entropy_avg": 1 - r}
            for s, r, k, v, c in [(1, 0.7, 0.0, 0.3, 0.2), (2, 0.8, 0.3, 0.2, 0.1), (3, 0.9, 0.5, 0.1, 0.05)]]


@pytest.fixture
def figures(monkeypatch):
    """Every figure the plotting functions save, instead of writing it."""
    saved = []
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda self, *args, **kwargs: saved.append(self))
    return saved


def series(history, key):
    return [(h["step"], h[key]) for h in history if h.get(key) is not None]


def drawn(ax) -> dict:
    return {line.get_label(): list(zip(line.get_xdata(), line.get_ydata())) for line in ax.get_lines()}


@pytest.mark.parametrize("history, reward_keys, panels", [
    (GRPO_LOGS, ["rewards/accuracy/mean", "rewards/format/mean"],
     {"accuracy": ["rewards/accuracy/mean"], "format": ["rewards/format/mean"], "KL to the reference": ["kl"],
      "completion length (tokens)": ["completions/mean_length"],
      "groups with no reward spread (GRPO)": ["groups_without_spread"],
      "completions cut at the length budget": ["completions/clipped_ratio"], "entropy (nats a token)": ["entropy"]}),
    (PPO_LOGS, ["rewards/accuracy/mean"],  # PPO logs no completion length: no such panel
     {"accuracy": ["rewards/accuracy/mean"], "KL to the reference": ["objective/kl"],
      "value loss (PPO)": ["loss/value_avg"], "clipped fraction": ["policy/clipfrac_avg", "val/clipfrac_avg"],
      "entropy (nats a token)": ["policy/entropy_avg"]}),
], ids=["grpo", "ppo"])
def test_training_curves_draw_each_logged_series(tmp_path, figures, history, reward_keys, panels):
    train_logs = [h for h in history if "reward" in h]
    plot(train_logs, reward_keys, tmp_path, "GRPO", None)
    fig = figures[1]  # training_curves.png
    axes = [ax for ax in fig.axes if ax.get_lines()]
    assert [ax.get_title() for ax in axes] == list(panels)
    for ax, keys in zip(axes, panels.values()):
        assert drawn(ax) == {key: series(train_logs, key) for key in keys}


def test_reward_curve_draws_the_total_each_reward_and_the_eval_reward(tmp_path, figures):
    """The training reward as logged and as a moving average; each reward function's average where there are
    several; TRL's eval reward; whole steps on the axis."""
    from extras.plots import smoothed

    keys = ["rewards/accuracy/mean", "rewards/format/mean"]
    plot(GRPO_LOGS, keys, tmp_path, "GRPO", None)
    fig = figures[0]  # reward_curve.png
    [ax] = fig.axes

    def average(key):
        steps, values = zip(*series(GRPO_LOGS, key))
        return list(zip(*smoothed(list(steps), list(values))))

    assert drawn(ax) == {
        "reward, each logged step": series(GRPO_LOGS, "reward"), "reward, moving average": average("reward"),
        "accuracy, moving average": average(keys[0]), "format, moving average": average(keys[1]),
        "eval_reward (TRL's eval)": series(GRPO_LOGS, "eval_reward")}
    assert series(GRPO_LOGS, "rewards/format/mean") == [(1, 0.0), (3, 0.1)]  # the step with None is left out
    assert all(tick == int(tick) for tick in ax.get_xticks())


def test_one_reward_is_drawn_once_and_the_held_out_evaluation_beside_it(tmp_path, figures):
    """With one reward function the total is that reward: no second line of the same values. With the before/after
    evaluation, a second panel holds its headline metrics, before and after."""
    evaluation = {"num_prompts": 20,
                  "before": {"accuracy": {"mean_reward": 0.4, "greedy_accuracy": 0.5, "pass@1": 0.4}},
                  "after": {"accuracy": {"mean_reward": 0.6, "greedy_accuracy": 0.75, "pass@1": 0.6}},
                  "before_standard_error": {"accuracy": {"pass@1": 0.05, "greedy_accuracy": 0.1}},
                  "after_standard_error": {"accuracy": {"pass@1": 0.04, "greedy_accuracy": 0.08}}}
    plot(PPO_LOGS, ["rewards/accuracy/mean"], tmp_path, "PPO", evaluation)
    fig = figures[0]
    curve, held_out = fig.axes
    assert list(drawn(curve)) == ["reward, each logged step", "reward, moving average"]
    assert [t.get_text() for t in held_out.get_xticklabels()] == ["accuracy\npass@1", "accuracy\ngreedy_accuracy"]
    before, after = (c for c in held_out.containers if isinstance(c, matplotlib.container.BarContainer))
    assert [b.get_height() for b in before] == [0.4, 0.5] and [b.get_height() for b in after] == [0.6, 0.75]
    assert (before.get_label(), after.get_label()) == ("before", "after")
    # each bar with its standard error, over the prompts the title names
    for bars, errors in [(before, [0.05, 0.1]), (after, [0.04, 0.08])]:
        low_high = [segment[:, 1] for segment in bars.errorbar.lines[2][0].get_segments()]
        assert [round((high - low) / 2, 6) for low, high in low_high] == errors
    assert held_out.get_title().startswith("20 held-out prompts")
    evaluation["before_step"] = 40  # a resumed run that measured its checkpoint: the bars say so
    plot(PPO_LOGS, ["rewards/accuracy/mean"], tmp_path, "PPO", evaluation)
    assert "step 40" in [container.get_label() for container in figures[2].axes[1].containers]


def test_the_plots_say_what_happened_at_their_edges(tmp_path, figures):
    """Issue 75: the moving average ended at its highest point (0.44) where the last rewards fell to 0.225, as a
    window cut at the curve's end averages one side; bar labels sat on the error bars and on each other (`0.00`
    twice over a zero bar); training_curves.png ticked at steps 2.5 and 7.5; GRPO's clipped fraction was a flat 0
    with one update a generation."""
    rewards = [0.2, 0.25, 0.3, 0.3, 0.35, 0.4, 0.42, 0.44, 0.45, 0.44, 0.43, 0.44, 0.3, 0.25, 0.225]
    logs = [{"step": i + 1, "reward": r, "kl": 0.01 * i, "clip_ratio/region_mean": 0.0} for i, r in enumerate(rewards)]
    evaluation = {"num_prompts": 20, "before": {"accuracy": {"pass@1": 0.0, "greedy_accuracy": 0.0}},
                  "after": {"accuracy": {"pass@1": 0.0, "greedy_accuracy": 0.05}},
                  "before_standard_error": {"accuracy": {"pass@1": 0.0, "greedy_accuracy": 0.0}},
                  "after_standard_error": {"accuracy": {"pass@1": 0.0, "greedy_accuracy": 0.05}}}
    plot(logs, ["rewards/accuracy/mean"], tmp_path, "GRPO", evaluation)
    curve, held_out = figures[0].axes
    average = drawn(curve)["reward, moving average"]
    assert average[-1] == (14, pytest.approx(sum(rewards[-3:]) / 3))  # a whole window's, short of the last point
    assert drawn(curve)["reward, each logged step"][-1] == (15, 0.225)  # which the points show
    labels = [(text.xy, text.get_text()) for text in held_out.texts]
    heights = {round(x, 1): (y, label) for (x, y), label in labels}
    assert len(labels) == 4 and len(heights) == 4  # one a bar, at a place of its own
    assert heights[1.2] == (0.1, "0.05")  # greedy accuracy after: above its error bar (0.05 ± 0.05)
    training = figures[1]
    assert [ax.get_title() for ax in training.axes] == ["KL to the reference"]  # no flat clipped fraction
    training.canvas.draw()
    assert all(tick == int(tick) for tick in training.axes[-1].get_xticks())


def test_nothing_logged_draws_no_training_curves(tmp_path, figures):
    plot([], ["rewards/accuracy/mean"], tmp_path, "GRPO", None)  # stopped before its first log
    assert len(figures) == 1 and not (tmp_path / "training_curves.png").exists()
