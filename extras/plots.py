"""The run's plots (docs/outputs.md): reward_curve.png, the training reward with the held-out curve and the before/after
bars, and training_curves.png, a panel for each quantity the trainer logs.
"""

from pathlib import Path


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
