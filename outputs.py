"""What a run writes and prints, shared by `grpo_trl_example.py` and `ppo_trl_example.py` (docs/outputs.md).

    RunRecorder            a TrainerCallback that writes metrics.jsonl and completions.jsonl (resume-safe)
    tidy()                 a short line per log under the progress bar, and no hub model card unless pushing
    NoSignalWatchdog       a TrainerCallback that warns (or stops) when the reward gives no signal
    print_distributed_mode()  the distributed mode accelerate set up, printed before training
    write_summary()        summary.json, reward_curve.png, training_curves.png and the printed summary

Importing it silences, each by its exact message, the upstream warnings every run would print for nothing.
"""

import json
import logging
import os
import platform
import re
import sys
import time
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import torch
from transformers import TrainerCallback
from transformers.trainer_callback import ProgressCallback


# Upstream warnings that every run would print and that mean nothing for it, each silenced by its exact message,
# never wholesale (docs/outputs.md, "What a run prints"):
# - trl 1.12 (trl/models/utils.py, PPOTrainer) and peft 0.21 call transformers 5.23's deprecated names for the
#   activation checkpointing methods, which forward to the new ones;
for _name in ("is_gradient_checkpointing", "gradient_checkpointing_enable", "gradient_checkpointing_disable"):
    warnings.filterwarnings("ignore", message=f"`{_name}` is deprecated", category=FutureWarning)
# - trl 1.12's PPOTrainer logs the variance of the policy ratio over its minibatches (val/ratio_var); with one
#   minibatch and one PPO epoch there is one value, torch warns and the metric is nan;
warnings.filterwarnings("ignore", message=r"var\(\): degrees of freedom is <= 0", category=UserWarning)
# - DeepSpeed 0.19's ZeRO calls torch 2.13's deprecated names for two collectives at every step, which forward to the
#   new ones;
for _name in ("all_gather_into_tensor", "reduce_scatter_tensor"):
    warnings.filterwarnings("ignore", message=rf"`torch\.distributed\.{_name}` is deprecated", category=FutureWarning)


class _DropLogRecord(logging.Filter):
    """Drops the log records whose message matches `pattern`."""

    def __init__(self, pattern: str):
        super().__init__()
        self.pattern = re.compile(pattern)

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.match(record.getMessage())


# - trl 1.12's PPOTrainer asks `generate` for its scores (output_scores, return_dict_in_generate) beside a
#   generation config, which transformers 5.23 logs once as deprecated.
logging.getLogger("transformers.generation.utils").addFilter(_DropLogRecord(
    r"Passing `generation_config` together with generation-related arguments="
    r"\(\{'(output_scores|return_dict_in_generate)', '(output_scores|return_dict_in_generate)'\}\)"))
# - DeepSpeed 0.19, imported by accelerate to recognise a DeepSpeed engine whether or not the run uses one, warns on
#   a machine without a GPU that it found none; a run names the device it runs on itself.
logging.getLogger("DeepSpeed").addFilter(_DropLogRecord(r"Setting accelerator to CPU\."))


def tracking_lines(training_args) -> list[str]:
    """How to open each tracker's dashboard, for the end-of-run summary."""
    lines = []
    if "tensorboard" in training_args.report_to:
        where = os.environ.get("TENSORBOARD_LOGGING_DIR") or Path(training_args.output_dir) / "runs"  # transformers'
        lines.append(f"  tensorboard: tensorboard --logdir {where}")
    if "trackio" in training_args.report_to:
        where = os.environ.get("TRACKIO_DIR")
        lines.append(f"  trackio:     trackio show --project {training_args.project}"
                     + (f"   (with TRACKIO_DIR={where})" if where else ""))
    return lines


class RunRecorder(TrainerCallback):
    """Append each log to `metrics.jsonl`, and sampled completions to `completions.jsonl`.

    Both files are append-only JSON lines, written by the main process only, so a crash never leaves a
    half-written file behind: at worst the last line is missing.
    Why not `trainer.state.log_history`: it holds the same logs, but in memory, and on disk only inside each
    checkpoint; metrics.jsonl is on disk at every logging step, and a resumed run keeps each step in it once.

    Args:
        output_dir: where the files go (created if needed).
        samples: called at each logging step; returns the latest completions as a list of dicts
            (prompt, completion, one key per reward). The trainer-specific part lives in each script.
    """

    def __init__(self, output_dir: str, samples: Callable[[], list[dict]]):
        self.output_dir = Path(output_dir)
        self.samples = samples
        self.history: list[dict] = []  # every training log, also used by write_summary()

    def on_train_begin(self, args, state, control, **kwargs):
        """Start the files afresh, or, when resuming, keep only what was logged up to the checkpoint.

        Steps logged after the checkpoint by the run that died are run again now, so they are dropped,
        and every step appears exactly once.
        """
        if not state.is_world_process_zero:
            return
        self.output_dir.mkdir(parents=True, exist_ok=True)
        for name in ("metrics.jsonl", "completions.jsonl"):
            kept = [r for r in read_jsonl_lenient(self.output_dir / name) if r["step"] <= state.global_step]
            write_text_atomic(self.output_dir / name, "".join(json.dumps(r) + "\n" for r in kept))
            if name == "metrics.jsonl":
                self.history = kept

    def on_step_end(self, args, state, control, **kwargs):
        """Log the last step, whatever --logging_steps says: a run shorter than one logging interval, or one that
        ends between two, still records its final reward and completions (transformers logs only every
        `logging_steps`, so a 6-step run with logging_steps 10 would log nothing)."""
        if state.global_step >= state.max_steps:
            control.should_log = True
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or "train_runtime" in logs:
            return  # the final log (train_runtime, train_loss) goes to summary.json instead
        self.output_dir.mkdir(parents=True, exist_ok=True)
        record = {"step": state.global_step, "wall_time": round(time.time(), 3), **logs}  # for curves against time
        self.history.append(record)
        with open(self.output_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")
        if "reward" in logs:  # a training log, not an eval one
            with open(self.output_dir / "completions.jsonl", "a") as f:
                f.writelines(json.dumps({"step": state.global_step, **row}) + "\n" for row in self.samples())


class ShortLogs(ProgressCallback):
    """transformers' progress bar, with a short line at each log (the step, the reward and each reward's mean, the
    KL, the loss) in place of the dict of every metric, which metrics.jsonl keeps."""

    KEYS = {"reward": "reward", "kl": "kl", "objective/kl": "kl", "loss": "loss", "eval_reward": "eval_reward"}

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or self.training_bar is None or not logs or "train_runtime" in logs:
            return
        shown = {name: logs[k] for k, name in self.KEYS.items() if logs.get(k) is not None}
        rewards = {k.removeprefix("rewards/").removesuffix("/mean"): v for k, v in logs.items()
                   if k.startswith("rewards/") and k.endswith("/mean") and v is not None}
        if len(rewards) > 1:  # with one reward the total is that reward
            shown |= rewards
        if shown:
            self.training_bar.write(f"step {state.global_step}/{state.max_steps}: "
                                    + "  ".join(f"{k} {v:.4g}" for k, v in shown.items()))


def tidy(trainer) -> None:
    """What the trainer prints and leaves in --output_dir, as a user reads them: a short line per log under the
    progress bar (`ShortLogs`; --disable_tqdm keeps transformers' printer), and no hub model card (README.md) unless
    the run pushes to the hub: TRL writes one at every checkpoint, where a local model's card links to
    huggingface.co/None."""
    if trainer.pop_callback(ProgressCallback) is not None:
        trainer.add_callback(ShortLogs)
    if not trainer.args.push_to_hub:
        trainer.create_model_card = lambda *args, **kwargs: None


class NoSignalWatchdog(TrainerCallback):
    """Say so when training has stopped getting a learning signal, and why that usually happens.

    Policy-gradient methods learn from differences in reward. Two patterns in the logs mean there
    are none: GRPO's `frac_reward_zero_std` near 1 (every completion of a prompt got the same reward,
    so every advantage is 0), or a total reward that has not moved for `patience` logging steps.
    Either prints one warning with the usual fixes; with `stop=True` training then stops cleanly
    (the model and outputs are still written). With `beta=0` a zero loss is expected, and is
    explained once so it is not mistaken for a bug.

    Args:
        patience: how many consecutive logging steps without signal before warning.
        stop: stop training at the warning (`--stop_on_no_signal`).
        beta: the KL coefficient, for the zero-loss explanation; None where it does not apply (PPO).
    """

    FIXES = (
        "Usual fixes: more completions per prompt (--num_generations), a higher --temperature, a reward "
        "with partial credit (e.g. add tag_count next to format), or check that the reward can read your "
        "completions at all (look at completions.jsonl: is the answer where the parser looks?)."
    )

    def __init__(self, patience: int = 5, stop: bool = False, beta: float | None = None):
        self.patience, self.stop, self.beta = patience, stop, beta
        self.recent: list[dict] = []
        self.warned = self.explained_zero_loss = False
        self.unscored: set[str] = set()  # rewards already reported as scoring nothing

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs:
            return
        # A reward that returned None for every completion of the logging step: both trainers log its mean as None.
        for key, value in logs.items():
            name = key.removeprefix("rewards/").removesuffix("/mean")
            if key.startswith("rewards/") and key.endswith("/mean") and value is None and name not in self.unscored:
                self.unscored.add(name)
                if state.is_world_process_zero:
                    print(f"\nWARNING: reward '{name}' returned None for every completion at step {state.global_step}: "
                          "it could not score any of them, so it adds nothing to the reward. Check that the dataset "
                          "has the columns it reads, and that its answers are where it looks (completions.jsonl).")
        if logs.get("reward") is None:
            return
        self.recent = (self.recent + [logs])[-self.patience :]
        rewards = [log["reward"] for log in self.recent]
        reason = None
        if len(self.recent) == self.patience:
            if all(log.get("frac_reward_zero_std", 0.0) >= 0.95 for log in self.recent):
                reason = "frac_reward_zero_std >= 0.95: the completions of each prompt all got the same reward"
            elif max(rewards) - min(rewards) < 1e-6:
                reason = f"the mean reward has stayed at {rewards[-1]:.4g}"
        if reason is None:
            self.warned = False  # signal is back: warn again if it is lost again
        elif not self.warned:
            self.warned = True
            if state.is_world_process_zero:
                print(f"\nWARNING: no learning signal for {self.patience} logging steps (step {state.global_step}): "
                      f"{reason}, so the advantages are zero and the policy does not change. {self.FIXES}")
            if self.stop:
                control.should_training_stop = True
                if state.is_world_process_zero:
                    print("Stopping training (--stop_on_no_signal).")
        if self.beta == 0 and abs(logs.get("loss", 1.0)) < 1e-8 and not self.explained_zero_loss:
            self.explained_zero_loss = True
            if state.is_world_process_zero:
                print("\nNOTE: loss is 0 with beta=0. This is expected: GRPO's advantages have zero mean within each "
                      "group, so the loss is about 0 at every step even while the policy learns. Watch the reward.")


def mean_reward_first_last(history: list[dict], key: str = "reward", fraction: float = 0.2) -> tuple[float, float]:
    """Mean of `key` over the first and the last `fraction` of the logged steps that have it."""
    values = [h[key] for h in history if h.get(key) is not None]
    if not values:
        return float("nan"), float("nan")
    k = max(1, round(len(values) * fraction))
    return sum(values[:k]) / k, sum(values[-k:]) / k


def distributed_mode(trainer) -> dict:
    """How the run is spread over processes, as accelerate set it up rather than as the launch config asked: the mode
    (single process, DDP, FSDP1/FSDP2, DeepSpeed ZeRO-<stage>), the number of processes, the device and the backend.
    """
    from accelerate.utils import DistributedType

    accelerator, state = trainer.accelerator, trainer.accelerator.state
    if state.distributed_type == DistributedType.FSDP:
        mode = f"FSDP{state.fsdp_plugin.fsdp_version}"
    elif state.distributed_type == DistributedType.DEEPSPEED:
        mode = f"DeepSpeed ZeRO-{state.deepspeed_plugin.zero_stage}"
    else:
        mode = "DDP" if accelerator.num_processes > 1 else "single process"
    return {"mode": mode, "processes": accelerator.num_processes, "device": accelerator.device.type,
            "backend": state.backend}


def describe(mode: dict) -> str:
    """The distributed mode in words, as a run prints it.

    >>> describe({"mode": "DDP", "processes": 2, "device": "cpu", "backend": "gloo"})
    'DDP, 2 processes on cpu (gloo)'
    >>> describe({"mode": "single process", "processes": 1, "device": "cpu", "backend": None})
    'single process, 1 process on cpu'
    """
    processes = f"{mode['processes']} process{'es' if mode['processes'] > 1 else ''}"
    return f"{mode['mode']}, {processes} on {mode['device']}" + (f" ({mode['backend']})" if mode["backend"] else "")


def print_distributed_mode(trainer) -> None:
    """Say, before training, how the run is spread over processes (main process only), and what to set when other
    work shares the cores: beside it torch's threads wait on each other (BENCHMARKS.md, section 13)."""
    if not trainer.accelerator.is_main_process:
        return
    print(f"distributed: {describe(distributed_mode(trainer))}", flush=True)
    threads, cores = torch.get_num_threads(), os.cpu_count() or 1
    load = getattr(os, "getloadavg", lambda: (0.0,))()[0]  # over the last minute; not on Windows
    if trainer.accelerator.device.type == "cpu" and threads > 1 and load > cores / 2:
        print(f"NOTE: this machine is busy (load average {load:.1f} on {cores} cores), and torch's {threads} threads "
              "then wait on each other: beside other work, OMP_NUM_THREADS=1 ran the default runs 3.5x faster "
              "(BENCHMARKS.md, section 13)", flush=True)


def held_parameters(trainer) -> list[int]:
    """The number of parameters (elements, frozen ones included) of the model the trainer prepared (PPO: policy and
    value model) stored on each process, gathered from all of them (call it on every process): the whole model under
    DDP or one process, about 1/N of it each where FSDP or ZeRO-3 shards it."""
    def local(p):
        if hasattr(p, "ds_tensor"):  # DeepSpeed ZeRO-3: this process's partition
            return p.ds_tensor.numel()
        return p.to_local().numel() if hasattr(p, "to_local") else p.numel()  # FSDP2: a DTensor's local shard

    model = getattr(trainer, "model_wrapped", trainer.model)  # PPOTrainer keeps the prepared model (policy and value)
    held = torch.tensor([sum(local(p) for p in model.parameters())], device=trainer.accelerator.device)
    return trainer.accelerator.gather(held).tolist()


def library_versions() -> dict:
    import accelerate
    import datasets
    import peft
    import transformers
    import trl

    return {
        "python": platform.python_version(),
        **{m.__name__: m.__version__ for m in (torch, transformers, trl, peft, accelerate, datasets)},
    }


def write_text_atomic(path: Path, text: str) -> None:
    """Write to a temporary file and rename it over `path`, so a kill never leaves a half-written file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_json_atomic(path: Path, obj) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, default=str) + "\n")


def read_jsonl_lenient(path: Path) -> list[dict]:
    """The records of a JSON-lines file, without a last line cut short by a kill; [] if there is no file."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return records


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def smoothed(values: list[float]) -> list[float]:
    """A centred moving average over about a fifth of the points (at least 3): a curve that does not lag at its end.

    >>> smoothed([0.0, 1.0, 0.0, 1.0])
    [0.5, 0.3333333333333333, 0.6666666666666666, 0.5]
    """
    half = max(1, len(values) // 10)
    return [sum(values[max(0, i - half):i + half + 1]) / len(values[max(0, i - half):i + half + 1])
            for i in range(len(values))]


def headline(metrics: dict) -> dict:
    """The metrics of one reward that a before/after comparison shows: pass@1 and greedy accuracy for a correctness
    reward, else the mean reward of the samples and of the greedy completions."""
    keys = ("pass@1", "greedy_accuracy") if "pass@1" in metrics else ("mean_reward", "greedy_reward")
    return {key: metrics[key] for key in keys if metrics.get(key) is not None}


def plot_rewards(history: list[dict], reward_keys: list[str], path: Path, title: str,
                 evaluation: dict | None = None) -> None:
    """The training reward against the step, each logged point and their moving average (and each reward function's
    average where there are several, and TRL's eval reward where it ran); beside it, with `evaluation` (eval.json's
    results), each reward's held-out headline metrics before and after training.

    TensorBoard and trackio draw the same curves live (`--report_to`); this PNG needs neither a server nor an
    optional package, so every run leaves one."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    held_out = {name: headline(m) for name, m in (evaluation or {}).get("after", {}).items()}
    fig, axes = plt.subplots(1, 2 if held_out else 1, figsize=(11 if held_out else 7, 4), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 2]} if held_out else None)
    ax = axes[0, 0]
    points = [(h["step"], h["reward"]) for h in history if h.get("reward") is not None]
    if points:
        steps, values = zip(*points)
        ax.plot(steps, values, ".", color="C0", alpha=0.35, label="reward, each logged step")
        ax.plot(steps, smoothed(list(values)), color="C0", linewidth=2, label="reward, moving average")
    for i, key in enumerate(reward_keys if len(reward_keys) > 1 else []):  # one reward: the total is that reward
        points = [(h["step"], h[key]) for h in history if h.get(key) is not None]
        if points:
            ax.plot([s for s, _ in points], smoothed([v for _, v in points]), color=f"C{i + 1}",
                    label=f"{key.removeprefix('rewards/').removesuffix('/mean')}, moving average")
    points = [(h["step"], h["eval_reward"]) for h in history if h.get("eval_reward") is not None]
    if points:
        ax.plot(*zip(*points), linestyle="--", marker="o", color="C7", label="eval_reward (TRL's eval)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step")
    ax.set_ylabel("mean reward")
    ax.set_title(f"{title}: training reward")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if held_out:
        ax = axes[0, 1]
        labels = [f"{name}\n{metric}" for name, metrics in held_out.items() for metric in metrics]
        for offset, when in ((-0.2, "before"), (0.2, "after")):
            results = evaluation.get(when, {})
            heights = [results.get(name, {}).get(metric) or 0.0 for name, ms in held_out.items() for metric in ms]
            ax.bar_label(ax.bar([i + offset for i in range(len(labels))], heights, width=0.4, label=when),
                         fmt="%.2f", fontsize=8)
        ax.set_xticks(range(len(labels)), labels, fontsize=8)
        ax.set_title("held-out prompts, before and after training")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# Panels of training_curves.png: a title and the metric keys to draw, GRPO's and PPO's names alike.
TRAINING_PANELS = [
    ("KL to the reference", ["kl", "objective/kl"]),
    ("completion length (tokens)", ["completions/mean_length", "completion_length"]),
    ("tool use (per completion)", ["tools/call_frequency", "tools/failure_frequency"]),
]


def plot_training(history: list[dict], reward_keys: list[str], path: Path, title: str) -> None:
    """One PNG with a panel per reward function's mean, then KL, completion length and tool use (where logged),
    against the step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(key.removeprefix("rewards/").removesuffix("/mean"), [key]) for key in reward_keys] + TRAINING_PANELS
    panels = [(name, [k for k in keys if any(h.get(k) is not None for h in history)]) for name, keys in panels]
    panels = [(name, keys) for name, keys in panels if keys]
    if not panels:  # nothing logged yet (stopped before its first step)
        return
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 2.2 * len(panels)), sharex=True, squeeze=False)
    for ax, (name, keys) in zip(axes[:, 0], panels):
        for key in keys:
            ax.plot(*zip(*[(h["step"], h[key]) for h in history if h.get(key) is not None]), label=key)
        ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("step")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_summary(trainer, recorder: RunRecorder, train_output, script_args, training_args, model_args, title: str,
                  evaluation: dict | None = None):
    """Write summary.json and the plots, and print what the run did and where everything went: with `evaluation`
    (the before/after evaluation's results), its headline metrics first. Call it on every process: the parameters
    each one holds are gathered first; the rest is the main process's."""
    held = held_parameters(trainer)
    if not trainer.accelerator.is_main_process:
        return
    out = Path(training_args.output_dir)
    history = [h for h in recorder.history if "reward" in h]
    first, last = mean_reward_first_last(history)
    reward_keys = sorted({k for h in history for k in h if k.startswith("rewards/") and k.endswith("/mean")})
    summary = {
        "command": " ".join(sys.argv),
        "script_args": asdict(script_args),
        "training_args": training_args.to_dict(),
        "model_args": asdict(model_args),
        "versions": library_versions(),
        "world_size": trainer.accelerator.num_processes,
        "distributed": {**distributed_mode(trainer), "held_parameters": held},
        "global_step": trainer.state.global_step,
        "train_runtime": train_output.metrics.get("train_runtime"),
        "reward_first_20pct": first,
        "reward_last_20pct": last,
        "reward_per_func_last": {k: history[-1][k] for k in reward_keys} if history else {},
    }
    # Tool-calling GRPO (--tools): how often the model called a tool, per completion, and how often a call failed,
    # as TRL logs them; next to each reward function's mean, so "more calls, more right answers" reads off one file.
    tool_keys = sorted({k for h in history for k in h if k.startswith("tools/")})
    if tool_keys:
        summary["first_last_20pct"] = {k: mean_reward_first_last(history, k) for k in reward_keys + tool_keys}
    held_out = {name: {metric: (evaluation.get("before", {}).get(name, {}).get(metric), value)
                       for metric, value in headline(metrics).items()}
                for name, metrics in (evaluation or {}).get("after", {}).items()}
    if held_out:
        summary["held_out_before_after"] = held_out
    write_json_atomic(out / "summary.json", summary)
    plots = [out / "reward_curve.png", out / "training_curves.png"]
    plot_rewards(recorder.history, reward_keys, plots[0], title, evaluation)
    plot_training(history, reward_keys, plots[1], title)

    print(
        f"\n{title}: {trainer.state.global_step} steps in {summary['train_runtime']:.1f}s "
        f"({describe(summary['distributed'])})\n"
        f"  mean reward, first 20% of logged steps: {first:.3f}\n"
        f"  mean reward, last 20% of logged steps:  {last:.3f}\n"
        + "".join(f"  {key}, first -> last 20%: {a:.3f} -> {b:.3f}\n"
                  for key, (a, b) in summary.get("first_last_20pct", {}).items())
        + "".join(f"  held-out {name} {metric}, before -> after: {fmt(a)} -> {fmt(b)}\n"
                  for name, metrics in held_out.items() for metric, (a, b) in metrics.items())
        + f"  model:       {out}\n"
        f"  metrics:     {out / 'metrics.jsonl'}\n"
        f"  completions: {out / 'completions.jsonl'}\n"
        f"  summary:     {out / 'summary.json'}\n"
        f"  plots:       {', '.join(str(p) for p in plots if p.exists())}"
        + "".join("\n" + line for line in tracking_lines(training_args))
    )
