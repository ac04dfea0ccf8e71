"""The held-out evaluation during training (--eval_strategy steps --eval_steps N): a point of the held-out curve every N
steps, in eval.json's `during`, the trackers and the log; and the checkpoint --metric_for_best_model ranks best among
them, which the trainer keeps from rotation and, under --load_best_model_at_end, loads (docs/evaluation.md). A run
that sets neither evaluates before and after training alone, with extras/evaluation.py's BeforeAfterEval, which this
one measures with and writes to.
"""

from tqdm.auto import tqdm

from transformers import TrainerCallback

from extras.stats import metrics_of, paired_change, per_prompt_metrics


class DuringTraining(TrainerCallback):
    """The points during training of `evaluation` (a BeforeAfterEval), in its results and eval.json, and the best of
    them; added to the trainer before it, so that the best is loaded before its "after". `callbacks`: the trainer's
    CallbackHandler, whose on_log takes the points; `load_best(checkpoint)`: PPO's, which loads a checkpoint's policy
    (trl 1.12 loads no best model; GRPO's Trainer loads it itself)."""

    def __init__(self, evaluation, callbacks, load_best=None):
        self.evaluation = evaluation
        self.callbacks = callbacks
        self.load_best = load_best

    def ranks_checkpoints(self, args) -> bool:
        """Whether --metric_for_best_model names one of this evaluation's metrics (reward/metric, as eval.json)."""
        reward, slash, _ = (args.metric_for_best_model or "").removeprefix("eval_").partition("/")
        names = [func.__name__ for func in self.evaluation.reward_funcs]
        return bool(slash) and reward in names + ["kl"]  # "kl" alone: TRL's

    @staticmethod
    def value_at(point: dict, metric: str) -> float:
        reward, _, name = metric.removeprefix("eval_").partition("/")
        return point["metrics"][reward][name]

    def on_step_end(self, args, state, control, **kwargs):
        """With --eval_strategy steps, a point of the held-out curve every --eval_steps steps (the trainer's
        state.eval_steps: a fraction of the run's steps where below 1), and at the last where --metric_for_best_model
        ranks the points (elsewhere "after" measures it): in eval.json's `during`, and logged as
        `heldout/<reward>/<metric>` to metrics.jsonl, the trackers and the checkpoints' log history. trl 1.16's
        GRPOTrainer evaluates the mean reward alone; trl 1.12's PPOTrainer nothing."""
        if control.should_evaluate and (self.ranks_checkpoints(args) or not args.metric_for_best_model):
            # GRPO: no TRL evaluation beside this one unless --metric_for_best_model names one of its metrics: it
            # samples --num_generations completions of every test prompt, 5x this evaluation's time on SmolLM2
            # (BENCHMARKS.md, section 28), for the mean training reward this one reports too
            control.should_evaluate = False
        every = getattr(state, "eval_steps", None)
        last = state.global_step >= state.max_steps  # measured where a held-out metric picks the best: the
        # trainer evaluates at the last step, and the model kept may be another
        if args.eval_strategy != "steps" or not every or (state.global_step % every and not last) or (
                last and not self.ranks_checkpoints(args)) or state.global_step < getattr(args, "eval_delay", 0):
            return
        measured = self.evaluation.measure("during training", state.global_step, quiet=True)
        point = {"step": state.global_step, **{key: measured[key] for key in ("metrics", "standard_error", "seconds")},
                 # each prompt's own figures, for the paired change from the best point to the last
                 "per_prompt": {func.__name__: per_prompt_metrics(func, measured["per_prompt"],
                                                                  self.evaluation.settings["num_samples"])
                                for func in self.evaluation.reward_funcs}}
        earlier = [p for p in self.evaluation.results.get("during", []) if p["step"] < point["step"]]
        self.evaluation.results["during"] = earlier + [point]
        self.evaluation.write(quiet=True)
        # The best kept as Trainer keeps its own metrics' best: its checkpoint saved under --save_strategy best, named
        # by Trainer's _save_checkpoint, kept from rotation, and loaded at the end by Trainer (GRPO) or `load_best`
        # (PPO); under --load_best_model_at_end ranked among the steps saved, so that the best has a checkpoint
        if self.ranks_checkpoints(args) and (control.should_save or args.save_strategy == "best" or not (
                args.load_best_model_at_end)):
            value = self.value_at(point, args.metric_for_best_model)
            if state.best_metric is None or (value > state.best_metric if args.greater_is_better else
                                             value < state.best_metric):
                state.best_metric = value
                state.best_global_step = state.global_step
                control.should_save |= args.save_strategy == "best"
        logs = {f"heldout/{name}/{metric}": value for name, metrics in measured["metrics"].items()
                for metric, value in metrics.items() if value is not None}
        state.log_history.append({**logs, "step": state.global_step})
        should_log = control.should_log  # which the trainer's on_log clears, and the step's own training log needs
        self.callbacks.on_log(args, state, control, logs=logs)
        control.should_log = should_log
        if self.evaluation.accelerator.is_main_process:
            shown = []
            for name, metrics in measured["metrics"].items():
                metric = "pass@1" if "pass@1" in metrics else "mean_reward" if "mean_reward" in metrics else None
                if metric and metrics[metric] is not None:
                    error = measured["standard_error"].get(name, {}).get(metric)
                    shown.append(f"{name} {metric} {metrics[metric]:.3f}" + (f"±{error:.3f}" if error else ""))
            tqdm.write(f"held-out at step {state.global_step} ({measured['seconds']:.0f} s): " + ", ".join(shown))

    def on_train_end(self, args, state, control, **kwargs):
        if self.ranks_checkpoints(args):
            self.evaluation.results["best"] = self.best(args, state)
            if self.load_best is not None and args.load_best_model_at_end and state.best_model_checkpoint:
                self.load_best(state.best_model_checkpoint)  # PPO: Trainer has loaded GRPO's before this

    def best(self, args, state) -> dict | None:
        """The point --metric_for_best_model ranks best (the trainer's best step, where it kept one) against the last,
        with the paired change between them over the prompts, and whether the run's result is the best's model."""
        points = self.evaluation.results.get("during") or []
        metric = args.metric_for_best_model.removeprefix("eval_")
        if not points:
            return None
        best = next((p for p in points if p["step"] == state.best_global_step), None) or (
            max if args.greater_is_better else min)(points, key=lambda p: self.value_at(p, metric))
        last = points[-1]
        reward, _, name = metric.partition("/")
        error = lambda p: p["standard_error"].get(reward, {}).get(name)  # noqa: E731
        change = paired_change(best["per_prompt"].get(reward, []), last["per_prompt"].get(reward, []), name)
        return {"metric": metric, "step": best["step"], "value": self.value_at(best, metric), "error": error(best),
                "last_step": last["step"], "last_value": self.value_at(last, metric), "last_error": error(last),
                "change": change if change["change"] is not None else None,
                "saved": bool(args.load_best_model_at_end and state.best_model_checkpoint) and
                (state.best_model_checkpoint or "").endswith(f"checkpoint-{best['step']}")}


def held_out_metrics(reward_funcs, num_samples: int, reward_models: tuple[str, ...] = (),
                     reference: bool = True) -> list[str]:
    """The held-out evaluation's metrics, as eval.json names them (reward/metric): --metric_for_best_model's names;
    the KL where the trainer holds a `reference`."""
    names = []
    for func in reward_funcs:
        k = max(num_samples, 1)
        names += [f"{func.__name__}/{metric}" for metric in metrics_of(func, [[0.0] * k], [0.0], [[""] * k], k)]
    return names + [f"{model}/{metric}" for model in reward_models for metric in ("mean_reward", "greedy_reward")] + (
        ["kl/to_reference"] if reference else [])
