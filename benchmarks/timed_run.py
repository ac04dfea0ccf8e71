"""Run a training script exactly as `python SCRIPT ARGS...` would, and record when each training step happens.

    BENCH_RECORD=/tmp/run.json python benchmarks/timed_run.py grpo_trl_example.py --max_steps 30 ...

The benchmarks need timings that neither `grpo_trl_example.py` nor a bare GRPOTrainer script writes, so this
runner adds them from the outside, the same way for every script it runs, without editing the script:

  - a TrainerCallback, added to every Trainer when `Trainer.train()` is called, that records the wall-clock time
    (`time.time()`) at each `on_step_begin` / `on_step_end`, every log dict (TRL's `step_time` among them), the
    resolved training arguments and the parameter counts (PPOTrainer overrides `train()`, so it gets none of these);
  - a hook on `trl.extras.profiling.ProfilingContext._log_metrics`, which receives every duration TRL times with
    `profiling_context` / `profiling_decorator` (`GRPOTrainer.transformers.generate`, `GRPOTrainer._prepare_inputs`,
    ...). TRL only forwards those durations to wandb / mlflow / trackio, so with `--report_to none` they are
    otherwise lost. The hook records them and then calls TRL's own method, so nothing else changes;
  - a timer around each callback's event methods (`CallbackHandler.call_event`, re-implemented with the same loop),
    so the time a script's own callbacks take is measured inside the run that pays it, and the time and the process's
    peak RSS so far (`ru_maxrss`) when training begins and ends.

  - a count of the matrix-multiply FLOPs of every `torch.nn.Linear` call (LoRA's base layers and adapters included):
    2 x rows x in x out for the forward, and when gradients are on, as much again for the input's gradient and, for
    a weight that trains, once more for the weight's. It is kept as a running total, read at each step's log
    (`flops_at_log`: [time.time(), forward, backward, generate, step]; not at the run's closing summary log), so a
    step's FLOPs against its time, next to the machine's matmul rate, say how close the step comes to what the CPU
    can do. Attention's own products (QK^T, AV) are not counted: at the lengths the benchmarks use they are under 3%
    of a Llama's FLOPs. The FLOPs run inside `generate` are counted apart (`generate`), so generation's rate can be
    set against the training passes';
  - a clock around every `generate` call (`generate_calls`: [time.time() at its end, seconds]), for GRPO and PPO
    alike (PPOTrainer has no profiling timers of its own), and on a GPU the CUDA allocator's peak at exit;
  - on trl 1.12, a clock around each part of a PPO update (`ppo_parts`: {part: seconds over the run}), by the
    functions PPOTrainer.train calls: the rollout's generation, reference forward, value model and reward model;
    the update's forward passes, backward and optimizer steps.

The record is written as JSON to $BENCH_RECORD when training ends, and again at exit (with `t_exit`).
The script runs as `__main__` with its own folder first on sys.path, as `python SCRIPT` would put it.
"""

import atexit
import json
import os
import resource
import runpy
import sys
import time
import warnings

T_RUNNER_START = time.time()

import torch  # noqa: E402
from transformers import GenerationMixin, Trainer, TrainerCallback  # noqa: E402
from transformers.trainer_callback import CallbackHandler  # noqa: E402
from trl.extras import profiling  # noqa: E402

RECORD = {
    "t_runner_start": T_RUNNER_START,
    "step_begin": [],  # [step, time.time()] for each optimizer step, step counted from 1
    "step_end": [],
    "logs": [],  # every on_log dict, with "step"
    "profiling": [],  # [name, step, seconds] for each profiled block; step = the optimizer step it ran in
    "callbacks": {},  # {step: {callback class: seconds spent in its event methods during that step}}
    "args": None,
    "model": None,
    "flops_at_log": [],  # [time.time(), forward, backward, generate's FLOPs so far, step] at each step's on_log
    "generate_calls": [],  # [time.time() at the end, seconds] for each generate call
}
FLOPS = {"forward": 0, "backward": 0, "generate": 0}
_current_step = [0]


def peak_rss_mib() -> float:
    """This process's peak resident set size so far (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def dump():
    path = os.environ.get("BENCH_RECORD")
    if path:
        with open(path, "w") as f:
            json.dump(RECORD, f, default=str)


class StepClock(TrainerCallback):
    def __init__(self, trainer):
        self.trainer = trainer

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        RECORD["args"] = args.to_dict()
        params = list(model.parameters()) if model is not None else []
        ref = getattr(self.trainer, "ref_model", None)
        RECORD["model"] = {
            "params": sum(p.numel() for p in params),
            "trainable_params": sum(p.numel() for p in params if p.requires_grad),
            "ref_model_params": sum(p.numel() for p in ref.parameters()) if ref is not None else 0,
        }

    def on_step_begin(self, args, state, control, **kwargs):
        _current_step[0] = state.global_step + 1
        RECORD["step_begin"].append([state.global_step + 1, time.time()])

    def on_step_end(self, args, state, control, **kwargs):
        RECORD["step_end"].append([state.global_step, time.time()])

    def on_log(self, args, state, control, logs=None, **kwargs):
        RECORD["logs"].append({"step": state.global_step, **(logs or {})})


_linear_forward = torch.nn.Linear.forward


def counted_linear_forward(self, input):
    flops = 2 * (input.numel() // self.in_features) * self.in_features * self.out_features
    FLOPS["forward"] += flops
    if torch.is_grad_enabled():  # the backward: the input's gradient, and the weight's when it trains
        FLOPS["backward"] += flops * (2 if self.weight.requires_grad else 1)
    return _linear_forward(self, input)


torch.nn.Linear.forward = counted_linear_forward

_generate = GenerationMixin.generate


def counted_generate(self, *args, **kwargs):
    before, start = FLOPS["forward"], time.perf_counter()
    try:
        return _generate(self, *args, **kwargs)
    finally:
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # the call ends when its kernels do, not when Python returns
        FLOPS["generate"] += FLOPS["forward"] - before
        RECORD["generate_calls"].append([time.time(), time.perf_counter() - start])


GenerationMixin.generate = counted_generate

try:  # PPOTrainer, which has no timers of its own and is gone from trl 1.13 on
    from accelerate import Accelerator
    from accelerate.optimizer import AcceleratedOptimizer

    with warnings.catch_warnings():  # as the PPO script imports it: trl.experimental's notice says nothing
        warnings.filterwarnings("ignore", message="You are importing from 'trl.experimental'")
        from trl.experimental.ppo import ppo_trainer
except ImportError:
    ppo_trainer = None


def clocked(part, function):
    """`function`, its time added to RECORD["ppo_parts"][part(*args)]."""

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            name = part(*args)
            RECORD["ppo_parts"][name] = RECORD["ppo_parts"].get(name, 0.0) + time.perf_counter() - start

    return timed


if ppo_trainer is not None:  # the parts of a PPO update, by the functions PPOTrainer.train calls for each
    RECORD["ppo_parts"] = {}
    reward_models = []
    _ppo_init = ppo_trainer.PPOTrainer.__init__

    def ppo_init(self, *args, **kwargs):
        _ppo_init(self, *args, **kwargs)
        reward_models.append(self.reward_model)

    ppo_trainer.PPOTrainer.__init__ = ppo_init
    ppo_trainer.batch_generation = clocked(lambda *args: "rollout: generation", ppo_trainer.batch_generation)
    ppo_trainer.forward = clocked(lambda *args: "update: policy and value forward" if torch.is_grad_enabled() else
                                  "rollout: reference forward", ppo_trainer.forward)
    ppo_trainer.get_reward = clocked(lambda model, *args: "rollout: reward model" if any(
        model is r for r in reward_models) else "rollout: value model", ppo_trainer.get_reward)
    Accelerator.backward = clocked(lambda *args: "update: backward", Accelerator.backward)
    AcceleratedOptimizer.step = clocked(lambda *args: "update: optimizer step", AcceleratedOptimizer.step)

_original_train = Trainer.train


def train_with_clock(self, *args, **kwargs):
    self.add_callback(StepClock(self))
    return _original_train(self, *args, **kwargs)


Trainer.train = train_with_clock

_original_log_metrics = profiling.ProfilingContext._log_metrics


def log_metrics_and_record(self, duration):
    RECORD["profiling"].append([self.name, _current_step[0], duration])
    return _original_log_metrics(self, duration)


profiling.ProfilingContext._log_metrics = log_metrics_and_record


def call_event_timed(self, event, args, state, control, **kwargs):
    # transformers' CallbackHandler.call_event, with a clock around each callback. The start and end of training
    # are recorded here rather than in StepClock, since trainers that override train() (PPOTrainer) still send them.
    if event == "on_log" and "train_runtime" not in kwargs["logs"]:  # a step's log, not the run's closing summary
        RECORD["flops_at_log"].append([time.time(), FLOPS["forward"], FLOPS["backward"], FLOPS["generate"],
                                       state.global_step])
    if event in ("on_train_begin", "on_train_end"):
        phase = event.removeprefix("on_train_")
        RECORD[f"t_train_{phase}"] = time.time()
        RECORD[f"peak_rss_mib_train_{phase}"] = peak_rss_mib()
    spent = RECORD["callbacks"].setdefault(_current_step[0], {})
    for callback in self.callbacks:
        start = time.perf_counter()
        result = getattr(callback, event)(
            args, state, control, model=self.model, processing_class=self.processing_class, optimizer=self.optimizer,
            lr_scheduler=self.lr_scheduler, train_dataloader=self.train_dataloader,
            eval_dataloader=self.eval_dataloader, **kwargs,
        )
        name = type(callback).__name__
        spent[name] = spent.get(name, 0.0) + time.perf_counter() - start
        if result is not None:
            control = result
    if event == "on_train_end":
        dump()
    return control


CallbackHandler.call_event = call_event_timed


def at_exit():
    RECORD["t_exit"] = time.time()
    RECORD["peak_rss_mib_exit"] = peak_rss_mib()
    if torch.cuda.is_available():
        RECORD["cuda_max_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
        RECORD["cuda_max_reserved_gib"] = torch.cuda.max_memory_reserved() / 2**30
    dump()


atexit.register(at_exit)

if __name__ == "__main__":
    script = os.path.abspath(sys.argv[1])
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(script)
    runpy.run_path(script, run_name="__main__")
