"""The end of a run (docs/outputs.md): summary.json, the plots, and the closing summary printed: the reward's first and
last 20%, held-out before -> after with each change's paired error, the best checkpoint, a warning where the run made
the policy worse or left it collapsed, and where everything is.
"""

import json
import os
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

from extras.outputs import StartLines, describe, distributed_mode, held_parameters, plural, precision, write_atomic
from extras.plots import headline, plot, start_label
from extras.stats import standard_error
from extras.watchdogs import RUNAWAY_FIXES, OneAnswer


def first_last(history: list[dict], key: str = "reward", fraction: float = 0.2) -> tuple[float, float]:
    """The mean of `key` over the first and the last `fraction` of the logs that have it."""
    values = [h[key] for h in history if h.get(key) is not None]
    k = max(1, round(len(values) * fraction))
    return (sum(values[:k]) / k, sum(values[-k:]) / k) if values else (float("nan"), float("nan"))


def training_noise(history: list[dict], fraction: float = 0.2) -> str:
    """What the first/last comparison of the training reward can tell: the difference between the two means against
    its standard error (from the logs' spread in each part). A difference within twice it is noise: on a recipe that
    logs a handful of prompts a step the curve is flat noise while the held-out evaluation doubles."""
    values = [h["reward"] for h in history if h.get("reward") is not None]
    k = max(1, round(len(values) * fraction))
    errors = [standard_error(values[:k]), standard_error(values[-k:])]
    if None in errors:
        return ""
    difference = sum(values[-k:]) / k - sum(values[:k]) / k
    error = (errors[0] ** 2 + errors[1] ** 2) ** 0.5
    verdict = "within the noise: the held-out evaluation tells more" if abs(difference) < 2 * error else (
        "more than twice the noise")
    return f"  the difference, {difference:+.3f} ± {error:.3f} ({k} logs each), is {verdict}"


def change_of(change: dict | None, prompts: int) -> str:
    """A held-out metric's change over the same prompts, its paired standard error, and whether it beats twice that.

    >>> change_of({"change": -0.074, "standard_error": 0.030}, 20)
    ', -0.074 ± 0.030 over the same 20 prompts: worse, by more than twice its error'
    """
    if not change or change["standard_error"] is None:
        return ""
    beyond = abs(change["change"]) > 2 * change["standard_error"]
    verdict = ("better, by more than twice its error" if change["change"] > 0 else
               "worse, by more than twice its error") if beyond else "within twice its error: no change shown"
    return f", {change['change']:+.3f} ± {change['standard_error']:.3f} over the same {prompts} prompts: {verdict}"


def worse(changes: dict, title: str) -> list[str]:
    """A warning where a held-out reward fell by more than twice its paired error (`changes`: summary.json's
    held_out_change)."""
    fell = [f"{name} {metric} ({c['change']:+.3f} ± {c['standard_error']:.3f})"
            for name, metrics in changes.items() for metric, c in metrics.items()
            if c and c["standard_error"] is not None and c["change"] < -2 * c["standard_error"]]
    if not fell:
        return []
    return [f"  WARNING: the run made the policy worse on the held-out prompts: {', '.join(fell)}, each by more "
            f"than twice its error. Try {RUNAWAY_FIXES[title == 'PPO']}, and read the completions in eval.json "
            "(docs/evaluation.md)"]


def best_checkpoint(evaluation: dict | None) -> list[str]:
    """The closing lines on the step --metric_for_best_model ranks best against the last one evaluated, the paired
    change between them over the prompts, and which of the two the saved model is."""
    best = (evaluation or {}).get("best")
    if not best:
        return []
    figure = lambda value, error: f"{value:.3f}" + ("" if error is None else f" ± {error:.3f}")  # noqa: E731
    line = (f"  held-out {best['metric']}, best at step {best['step']}: {figure(best['value'], best['error'])}; at the "
            f"last evaluated, step {best['last_step']}: {figure(best['last_value'], best['last_error'])}")
    change = best.get("change") or {}
    if best["step"] != best["last_step"] and change.get("standard_error"):
        beyond = abs(change["change"]) > 2 * change["standard_error"]
        line += (f", {change['change']:+.3f} ± {change['standard_error']:.3f} over the same prompts: "
                 + ("more than twice its error" if beyond else "within twice its error: no difference shown"))
    saved = ("the model saved is the best step's (--load_best_model_at_end)" if best["saved"] else
             "the model saved is the last step's" + ("" if best["step"] == best["last_step"] else
                                                     "; --load_best_model_at_end saves the best step's"))
    return [line, f"    {saved}"]


def one_answer(trainer) -> list[str]:
    """A warning where the policy ended collapsed onto one answer (OneAnswer)."""
    watch = next((c for c in trainer.callback_handler.callbacks if isinstance(c, OneAnswer)), None)
    if watch is None or watch.collapsed is None:
        return []
    answer, prompts, step = watch.collapsed
    return [f"  WARNING: the policy ended giving one answer, {answer[:80]!r}, to all {prompts} prompts of its last "
            f"{watch.streak} logs, up to step {step}: it collapsed onto it (completions.jsonl)"]


def error_of(errors: list, prompts: int) -> str:
    """A before -> after pair's standard errors, over how many prompts."""
    if all(e is None for e in errors):
        return ""
    return f" (± {' and '.join('-' if e is None else f'{e:.3f}' for e in errors)}, {prompts} prompts)"


def write(trainer, args: list, title: str, evaluation: dict | None):
    """summary.json, the plots, and the closing summary printed, from the trainer's log_history: the reward's first and
    last 20%, held-out before -> after where it ran, where everything is. Call it on every process (each one's
    parameters are gathered)."""
    held = held_parameters(trainer)
    clock = next(c for c in trainer.callback_handler.callbacks if isinstance(c, StartLines))
    runtime = time.perf_counter() - clock.started
    if not trainer.accelerator.is_main_process:
        return
    import accelerate
    import datasets
    import peft
    import transformers
    import trl

    out = Path(trainer.args.output_dir)
    logs = [h for h in trainer.state.log_history if "train_runtime" not in h]  # each log, with its step
    history = [h for h in logs if "reward" in h]  # the training logs
    first, last = first_last(history)
    reward_keys = sorted({k for h in history for k in h if k.startswith("rewards/") and k.endswith("/mean")})
    tool_keys = sorted({k for h in history for k in h if k.startswith("tools/")})
    held_out = {name: {metric: [evaluation.get("before", {}).get(name, {}).get(metric), value]
                       for metric, value in headline(metrics).items()}
                for name, metrics in (evaluation or {}).get("after", {}).items()}
    summary = {
        "command": " ".join(sys.argv), **{name: asdict(a) if name != "training_args" else a.to_dict()
                                          for name, a in zip(("script_args", "training_args", "model_args"), args)},
        "versions": {"python": platform.python_version(), **{m.__name__: m.__version__ for m in (
            torch, transformers, trl, peft, accelerate, datasets)}},
        "world_size": trainer.accelerator.num_processes,
        "distributed": {**distributed_mode(trainer), "held_parameters": held},
        "weights": precision(trainer),
        "global_step": trainer.state.global_step, "train_runtime": runtime,  # this process's: from a resume, its part
        "resumed_from": trainer.args.resume_from_checkpoint,
        "reward_first_20pct": first, "reward_last_20pct": last,
        "reward_per_func_last": {k: history[-1][k] for k in reward_keys} if history else {},
        # tool-calling GRPO: "more calls, more right answers" reads off one file
        **({"first_last_20pct": {k: first_last(history, k) for k in reward_keys + tool_keys}} if tool_keys else {}),
        **({"held_out_before_after": held_out, "held_out_change": {
            name: {metric: (evaluation.get("change") or {}).get(name, {}).get(metric) for metric in metrics}
            for name, metrics in held_out.items() if name != "kl"}, "held_out_standard_error": {
            name: {metric: [evaluation.get(f"{when}_standard_error", {}).get(name, {}).get(metric) for when in
                            ("before", "after")] for metric in metrics} for name, metrics in held_out.items()},
            "held_out_prompts": evaluation["num_prompts"], "held_out_first_step": evaluation.get("before_step")}
           if held_out else {}),
        **({"held_out_best": evaluation["best"]} if (evaluation or {}).get("best") else {}),
    }
    write_atomic(out / "summary.json", json.dumps(summary, indent=2, default=str) + "\n")
    plots = plot(logs, reward_keys, out, title, evaluation)
    fmt = lambda value: "-" if value is None else f"{value:.3f}"  # noqa: E731
    steps = plural(trainer.state.global_step, "step")
    began = clock.first_step
    part = (f", the {plural(trainer.state.global_step - began, 'step')} after step {began} in {runtime:.1f}s (it "
            "resumed there)" if began else f" in {runtime:.1f}s")
    if evaluation:  # what this run's held-out evaluations took of it: a resumed run's kept "before" took none
        spent = sum([evaluation.get("before_seconds", 0) if evaluation.get("before_step", 0) == began else 0,
                     *(point["seconds"] for point in evaluation.get("during", []) if point["step"] > began),
                     evaluation.get("after_seconds", 0)])
        part += f", {spent:.1f}s of it held-out evaluation" if spent else ""
    lines = [f"\n{title}: {steps}{part} ({describe(summary['distributed'])})",
             f"  mean reward, first 20% of logged steps: {first:.3f}",
             f"  mean reward, last 20% of logged steps:  {last:.3f}",
             *filter(None, [training_noise(history)]),
             *(f"  {k}, first -> last 20%: {a:.3f} -> {b:.3f}"
               for k, (a, b) in summary.get("first_last_20pct", {}).items()),
             *(f"  held-out {name} {metric}, {start_label(evaluation)} -> after: {fmt(a)} -> {fmt(b)}"
               + (change_of(summary["held_out_change"][name][metric], evaluation["num_prompts"]) if name != "kl" else
                  error_of(summary["held_out_standard_error"][name][metric], evaluation["num_prompts"])
                  + ("; below 0 by chance: each completion's log-ratio is a sample, and their mean estimates the KL"
                     if b is not None and b < 0 else ""))
               for name, metrics in held_out.items() for metric, (a, b) in metrics.items()),
             *best_checkpoint(evaluation),
             *worse(summary.get("held_out_change", {}), title),
             *one_answer(trainer),
             f"  model:       {out}", f"  metrics:     {out / 'metrics.jsonl'}",
             f"  completions: {out / 'completions.jsonl'}", f"  summary:     {out / 'summary.json'}",
             f"  plots:       {', '.join(map(str, plots))}",
             f"  next:        python -m extras.export {out} --chat   (merged, GGUF: docs/after-training.md)"]
    if "tensorboard" in trainer.args.report_to:
        lines.append(f"  tensorboard: tensorboard --logdir {os.environ.get('TENSORBOARD_LOGGING_DIR') or out / 'runs'}")
    if "trackio" in trainer.args.report_to:
        where = os.environ.get("TRACKIO_DIR")
        lines.append(f"  trackio:     trackio show --project {trainer.args.project}"
                     + (f"   (with TRACKIO_DIR={where})" if where else ""))
    print("\n".join(lines))


def run_settings(summary: Path) -> dict:
    """A run's options, model's, trainer's and script's in one dict, from its summary.json; {} where it has none."""
    try:
        run = json.loads(summary.read_text())
        return {**run["model_args"], **run["training_args"], **run["script_args"]}
    except (OSError, ValueError, KeyError):
        return {}
