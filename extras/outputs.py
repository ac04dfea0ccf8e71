"""What a run writes and prints as it trains (docs/outputs.md): metrics.jsonl and completions.jsonl at each log, a
short line per log, the precision, length and distributed mode as it starts, and the watchdogs (extras/watchdogs.py);
and, while a run lasts (`quiet`), no upstream notice that every run would print and that says nothing about it. The
end of a run, summary.json, the plots and the closing summary, is extras/summary.py's.
"""

import json
import logging
import os
import re
import time
import warnings
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import torch
from tqdm.auto import tqdm
from transformers import TrainerCallback
from transformers.trainer_callback import ProgressCallback

from extras.watchdogs import DriftWatch, GroupSpread, NoSignalWatchdog, OneAnswer, reward_maximum

# Upstream notices that every run would print and that say nothing about it, silenced by their exact words
DEPRECATIONS = [  # deprecated names that trl 1.12, peft and DeepSpeed call
    *[f"`{name}` is deprecated" for name in ("is_gradient_checkpointing", "gradient_checkpointing_enable",
                                             "gradient_checkpointing_disable")],
    *[rf"`torch\.distributed\.{name}` is deprecated" for name in ("all_gather_into_tensor", "reduce_scatter_tensor")],
]
ONE_VALUE_VARIANCE = r"var\(\): degrees of freedom is <= 0"  # PPOTrainer's val/ratio_var with one minibatch
LOGGED = {  # logger: the message
    # accelerate imports DeepSpeed to recognise it, which says it runs on the CPU
    "DeepSpeed": r"Setting accelerator to CPU\.",
    # --eval_only's LoRA adapter, which the script loads on its base (quantized as trained), with those settings
    "trl.trainer.grpo_trainer": r"\[RANK \d+\] You passed `(model_init_kwargs|quantization_config)` to the "
                                r"(`GRPOConfig`|trainer), but your model is already instantiated\.",
    # PPOTrainer asks `generate` for its scores beside a generation config
    "transformers.generation.utils": r"Passing `generation_config` together with generation-related arguments=\(\{'("
                                     r"output_scores|return_dict_in_generate)', '(output_scores|return_dict_in_"
                                     r"generate)'\}\)",
}


@contextmanager
def quiet():
    """Inside it, the upstream notices above are not printed; outside it, warnings and logging are as they were."""
    filters = {name: (lambda record, pattern=pattern: not re.match(pattern, record.getMessage()))
               for name, pattern in LOGGED.items()}
    with warnings.catch_warnings():
        for message in DEPRECATIONS:
            warnings.filterwarnings("ignore", message=message, category=FutureWarning)
        warnings.filterwarnings("ignore", message=ONE_VALUE_VARIANCE, category=UserWarning)
        for name, keep in filters.items():
            logging.getLogger(name).addFilter(keep)
        try:
            yield
        finally:
            for name, keep in filters.items():
                logging.getLogger(name).removeFilter(keep)


@contextmanager
def held_load_reports():
    """Inside it, transformers' load reports are not printed but gathered in the list it yields, for a caller that
    loads a model with a new head, which the report lists as MISSING (as it is, by design), to say so in its own words
    and to print a report only where another weight is missing (`missing_weights`)."""
    reports = []
    logger = logging.getLogger("transformers.modeling_utils")

    def hold(record) -> bool:
        if "LOAD REPORT" in record.getMessage():
            reports.append(record.getMessage())
            return False
        return True

    logger.addFilter(hold)
    try:
        yield reports
    finally:
        logger.removeFilter(hold)


def missing_weights(report: str) -> list[str]:
    """The names a load report lists as MISSING: weights the checkpoint did not hold, which start at random."""
    return [line.split("|")[0].strip() for line in report.splitlines() if "| MISSING" in line]


class RunRecorder(TrainerCallback):
    """metrics.jsonl (each log) and completions.jsonl (`samples()` at each training log), append-only JSON lines
    from the main process; a resumed run keeps each step once. (TRL's log_history is in memory, and on disk only in
    checkpoints; log_completions' parquet is overwritten by eval logs.)"""

    def __init__(self, output_dir: str, samples: Callable[[], list[dict]]):
        self.output_dir = Path(output_dir)
        self.samples = samples

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:  # afresh, or up to the checkpoint resumed from
            self.output_dir.mkdir(parents=True, exist_ok=True)
            for name in ("metrics.jsonl", "completions.jsonl"):
                kept = [r for r in read_jsonl_lenient(self.output_dir / name) if r["step"] <= state.global_step]
                write_atomic(self.output_dir / name, "".join(json.dumps(r) + "\n" for r in kept))

    def on_step_end(self, args, state, control, **kwargs):
        control.should_log |= state.global_step >= state.max_steps  # the last step, whatever --logging_steps says

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or "train_runtime" in logs:
            return
        record = {"step": state.global_step, "wall_time": round(time.time(), 3), **logs}
        with open(self.output_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")
        if "reward" in logs:  # a training log
            with open(self.output_dir / "completions.jsonl", "a") as f:
                f.writelines(json.dumps({"step": state.global_step, **row}) + "\n" for row in self.samples())


class ShortLogs(ProgressCallback):
    """transformers' progress bar, with a short line per log in place of the dict of every metric."""

    KEYS = {"reward": "reward", "kl": "kl", "objective/kl": "kl", "loss": "loss", "eval_reward": "eval_reward"}

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or self.training_bar is None or not logs or "train_runtime" in logs:
            return
        shown = {name: logs[k] for k, name in self.KEYS.items() if logs.get(k) is not None}
        rewards = {k[8:-5]: v for k, v in logs.items() if k.startswith("rewards/") and k.endswith("/mean")}
        shown |= {k: v for k, v in rewards.items() if v is not None} if len(rewards) > 1 else {}
        if shown:
            self.training_bar.write(f"step {state.global_step}/{state.max_steps}: "
                                    + "  ".join(f"{k} {v:.4g}" for k, v in shown.items()))


def tidy(trainer) -> None:
    """Short log lines (--disable_tqdm keeps transformers' printer), and no hub model card in --output_dir unless the
    run pushes to the hub: TRL writes one at every checkpoint, where a local model's links to huggingface.co/None, and
    peft one with every adapter it saves (a README.md of a user's there, it rewrites). On
    resume, no warning that the checkpoint lacks an output layer tied to the input embeddings: it is saved once, as
    the embeddings, and tied again on load (transformers warns as it compares with another list, of keys not saved)."""
    if trainer.pop_callback(ProgressCallback) is not None:
        trainer.add_callback(ShortLogs)
    if not trainer.args.push_to_hub:
        trainer.create_model_card = lambda *args, **kwargs: None
        for module in trainer.model.modules():  # a PeftModel, PPO's policy inside its wrapper
            if hasattr(module, "create_or_update_model_card"):
                module.create_or_update_model_card = lambda *args, **kwargs: None

    run = weakref.ref(trainer)  # the logger outlives the run, and must not keep its models alive

    def tied_and_missing(record) -> bool:
        model = getattr(run(), "model", None)  # the model loading (PPO's resume loads each of its two in turn)
        tied = getattr(getattr(getattr(model, "module", model), "config", None), "tie_word_embeddings", False)
        return not (tied and record.getMessage().startswith("There were missing keys in the checkpoint model loaded: "
                                                             "['lm_head.weight']"))

    logging.getLogger("transformers.trainer").addFilter(tied_and_missing)


def record(trainer, script_args, beta: float | None = None, samples: Callable[[], list[dict]] | None = None):
    """Add the run's records to `trainer`: metrics.jsonl and completions.jsonl (a GRPOTrainer's last generation batch,
    unless `samples` gives a PPO run's completions), short logs, and the no-signal watchdog (`beta`: GRPO's KL
    coefficient). Says how the run is spread over processes, and starts the clock (StartLines')."""
    tidy(trainer)
    ppo = samples is not None
    if ppo:  # trl 1.12's train() prints "===training policy===" through it, which says nothing about the run
        trainer.accelerator.print = lambda *args, **kwargs: None
    else:  # GRPO's groups: before the records and the watchdog, which read it
        trainer.add_callback(GroupSpread(trainer))
    samples = samples or (lambda: grpo_completions(trainer))
    trainer.add_callback(RunRecorder(trainer.args.output_dir, samples))
    trainer.add_callback(OneAnswer(samples, max(script_args.no_signal_patience, 1), ppo=ppo))
    if script_args.no_signal_patience > 0:
        adapter = trainer.reward_model if ppo else None  # PPO's: the script's RewardAdapter
        funcs, weights = (adapter.reward_funcs, adapter.weights) if adapter else (trainer.reward_funcs,
                                                                                   trainer.reward_weights)
        trainer.add_callback(NoSignalWatchdog(script_args.no_signal_patience, script_args.stop_on_no_signal, beta,
                                              groups=adapter is None, maximum=reward_maximum(funcs, weights.tolist())))
    trainer.add_callback(DriftWatch(ppo=ppo))
    print_distributed_mode(trainer)
    trainer.callback_handler.callbacks.insert(0, StartLines(trainer))  # before the held-out evaluation's table


class StartLines(TrainerCallback):
    """What a run says as training starts, when DeepSpeed has put the model in its training dtypes: the precision it
    trains in (`precision`: summary.json's `weights` is the same record) and its length in steps and completions;
    and, when its second step ends, about how long the rest will take at that step's pace (the first holds
    warm-up). It keeps the run's clock, from when the records were added, for summary.json's runtime."""

    def __init__(self, trainer):
        self.trainer = weakref.ref(trainer)  # a callback outlives nothing of the run's
        self.started = time.perf_counter()
        self.ends = []  # when the first two steps ended
        self.first_step = 0  # where training began: a resumed run's checkpoint

    def on_train_begin(self, args, state, control, **kwargs):
        self.first_step = state.global_step
        if state.is_world_process_zero:
            print(f"weights: {describe_precision(precision(self.trainer()))}", flush=True)
            print(f"length: {run_length(self.trainer(), state)}", flush=True)

    def on_step_end(self, args, state, control, **kwargs):
        if not state.is_world_process_zero or len(self.ends) == 2:
            return
        self.ends.append(time.perf_counter())
        left = state.max_steps - state.global_step
        if len(self.ends) == 2 and left > 0:
            seconds = self.ends[1] - self.ends[0]
            unit = "step" if hasattr(args, "num_generations") else "update"
            tqdm.write(f"{unit} {state.global_step} took {seconds:.1f} s: the {plural(left, unit)} left take about "
                       f"{duration(seconds * left)} at that pace (held-out evaluations and checkpoints aside)")


def run_length(trainer, state) -> str:
    """A run's length in steps (PPO's: updates) and completions, from where it starts.

    GRPO trains each step on per_device_train_batch_size x gradient_accumulation_steps x processes completions, and
    samples each of them for num_iterations steps; PPO samples a rollout of batch_size completions an update."""
    args = trainer.args
    done = f", from step {state.global_step}" if state.global_step else ""
    if hasattr(args, "num_generations"):
        processes = trainer.accelerator.num_processes
        per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps * processes
        sampled = state.max_steps * per_step // args.num_iterations
        return (f"{plural(state.max_steps, 'step')} of {per_step} completions, {sampled:,} completions sampled in "
                f"groups of {args.num_generations}{done}")
    sampled = state.max_steps * args.batch_size  # an update's rollout
    return f"{plural(state.max_steps, 'update')} of {args.batch_size} completions, {sampled:,} sampled{done}"


def plural(count: int, noun: str) -> str:
    """
    >>> plural(1, "step"), plural(300, "step")
    ('1 step', '300 steps')
    """
    return f"{count} {noun}" + ("s" if count != 1 else "")


def duration(seconds: float) -> str:
    """
    >>> duration(42), duration(600), duration(7380)
    ('42 s', '10 min', '2.0 h')
    """
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def precision(trainer) -> dict:
    """The dtypes of the weights that train and of those that do not (`weight_dtypes`), and what else decides the
    arithmetic: the fp32 copies DeepSpeed's optimizer steps where it holds the weights in half precision, or mixed
    precision's autocast."""
    record = weight_dtypes(trainer.model)
    reference = getattr(trainer, "ref_model", None)  # a frozen copy of the starting policy (none under LoRA)
    if isinstance(reference, torch.nn.Module):  # it was `frozen in -` while the copy was held (issue 83)
        record["frozen"] = sorted({*record["frozen"], *(name for names in weight_dtypes(reference).values()
                                                         for name in names)})
    if getattr(trainer, "is_deepspeed_enabled", False):
        if {"bfloat16", "float16"} & set(record["trained"]):
            record["optimizer_steps"] = "float32 copies (DeepSpeed)"
    elif trainer.accelerator.mixed_precision != "no":
        record["compute"] = f"{trainer.accelerator.mixed_precision} autocast"
        if hasattr(trainer.args, "num_ppo_epochs"):  # trl 1.12's PPOTrainer samples rollouts from the model unwrapped
            record["not_under_autocast"] = "rollouts and held-out evaluation"
    return record


def describe_precision(record: dict) -> str:
    """
    >>> describe_precision({"trained": ["bfloat16"], "frozen": [], "optimizer_steps": "float32 copies (DeepSpeed)"})
    'trained in bfloat16, its optimizer stepping float32 copies (DeepSpeed); frozen in -'
    >>> describe_precision({"trained": ["float32"], "frozen": ["bfloat16", "nf4"], "compute": "bf16 autocast"})
    'trained in float32, computed under bf16 autocast; frozen in bfloat16, nf4'
    >>> describe_precision({"trained": ["float32"], "frozen": [], "compute": "bf16 autocast",
    ...                     "not_under_autocast": "rollouts and held-out evaluation"})
    'trained in float32, computed under bf16 autocast but for its rollouts and held-out evaluation; frozen in -'
    """
    steps = f", its optimizer stepping {record['optimizer_steps']}" if "optimizer_steps" in record else ""
    compute = f", computed under {record['compute']}" if "compute" in record else ""
    compute += f" but for its {record['not_under_autocast']}" if "not_under_autocast" in record else ""
    return f"trained in {', '.join(record['trained'])}{steps}{compute}; frozen in {', '.join(record['frozen']) or '-'}"


def grpo_completions(trainer) -> list[dict]:
    """A GRPOTrainer's last generation batch, gathered from every process, one dict per completion: trl 1.12 keeps it
    in the private `_logs` (tests/unit/test_trl_private_api.py watches it). From trl 1.13 a chat's prompt and
    completion are messages, rendered here through the chat template as trl 1.12 logs them."""
    logs = trainer._logs
    kwargs = trainer.args.chat_template_kwargs
    return [{**logged_text(trainer.processing_class, prompt, completion, trainer.tools, kwargs),
             **{name: r[i] for name, r in logs["rewards"].items()},
             **{column: values[i] for column, values in logs["extra"].items() if i < len(values)}}
            for i, (prompt, completion) in enumerate(zip(logs["prompt"], logs["completion"]))]


def logged_text(tokenizer, prompt, completion, tools: list, chat_template_kwargs: dict | None) -> dict:
    """A logged prompt and completion as text: as given (trl 1.12), or a chat's messages (trl 1.13 on) rendered
    through the template with the run's tools, the ids decoded without special tokens, as trl 1.12 logs them."""
    if isinstance(prompt, str):
        return {"prompt": prompt, "completion": completion}
    render = lambda messages, **kw: tokenizer.apply_chat_template(  # noqa: E731
        messages, tools=tools or None, tokenize=True, return_dict=True, **kw, **(chat_template_kwargs or {})
    )["input_ids"]
    prompt_ids = render(prompt, add_generation_prompt=True)
    plain = isinstance(completion, str) or len(completion) == 1 and not completion[0].get("tool_calls")
    text = (completion if isinstance(completion, str) else completion[0]["content"]) if plain else tokenizer.decode(
        render(prompt + completion)[len(prompt_ids):], skip_special_tokens=True)
    return {"prompt": tokenizer.decode(prompt_ids, skip_special_tokens=True), "completion": text}


def distributed_mode(trainer) -> dict:
    """The distributed mode accelerate set up (not the one asked): single process, DDP, FSDP<v>, DeepSpeed ZeRO-<n>."""
    from accelerate.utils import DistributedType

    accelerator = trainer.accelerator
    state = trainer.accelerator.state
    mode = {DistributedType.FSDP: lambda: f"FSDP{state.fsdp_plugin.fsdp_version}",
            DistributedType.DEEPSPEED: lambda: f"DeepSpeed ZeRO-{state.deepspeed_plugin.zero_stage}"}.get(
        state.distributed_type, lambda: "DDP" if accelerator.num_processes > 1 else "single process")()
    return {"mode": mode, "processes": accelerator.num_processes, "device": accelerator.device.type,
            "backend": state.backend}


def describe(mode: dict) -> str:
    """
    >>> describe({"mode": "DDP", "processes": 2, "device": "cpu", "backend": "gloo"})
    'DDP, 2 processes on cpu (gloo)'
    """
    processes = f"{mode['processes']} process{'es' if mode['processes'] > 1 else ''}"
    return f"{mode['mode']}, {processes} on {mode['device']}" + (f" ({mode['backend']})" if mode["backend"] else "")


def print_distributed_mode(trainer) -> None:
    """The mode, before training; and a warning where `accelerate launch` was asked for more processes than run."""
    if not trainer.accelerator.is_main_process:
        return
    print(f"distributed: {describe(distributed_mode(trainer))}", flush=True)
    asked = launch_asked()
    if asked and asked > trainer.accelerator.num_processes:
        started = trainer.accelerator.num_processes
        print(f"WARNING: accelerate launch was asked for {asked} processes and started {started} "
              f"process{'es' if started > 1 else ''}: without a config that sets how to spread the "
              "run (accelerate_configs/ddp.yaml, for one), or --multi_gpu, or on a CPU --multi_cpu, it starts one. "
              "Add one of them (docs/scaling.md).", flush=True)


def launch_asked() -> int | None:
    """The --num_processes given to the `accelerate launch` that started this process, or None: not started so, or
    not readable. A launch asked for 2 processes on a CPU without a config ran one, and nothing said so (issue 83)."""
    import psutil  # accelerate's own dependency

    try:
        words = psutil.Process().parent().cmdline()
    except (psutil.Error, AttributeError):  # no parent, or not ours to read
        return None
    if "launch" not in words or not any(Path(word).name == "accelerate" for word in words[:words.index("launch")]):
        return None
    for word, value in zip(words, words[1:] + [""]):
        if word.startswith(("--num_processes", "--num-processes")):
            number = word.partition("=")[2] if "=" in word else value
            return int(number) if number.isdigit() else None
    return None


def weight_dtypes(model) -> dict[str, list[str]]:
    """The dtypes of the weights that train and of those that do not, a quantized weight named by its format
    (bitsandbytes' nf4, fp4, int8).

    >>> weight_dtypes(torch.nn.Linear(2, 2).requires_grad_(False))
    {'trained': [], 'frozen': ['float32']}
    """
    def name(p):
        kind = type(p).__name__  # bitsandbytes' Params4bit (packed in uint8) and Int8Params
        return getattr(p, "quant_type", "4-bit") if kind == "Params4bit" else "int8" if kind == "Int8Params" else str(
            p.dtype).removeprefix("torch.")

    dtypes = {"trained": set(), "frozen": set()}
    for p in model.parameters():
        dtypes["trained" if p.requires_grad else "frozen"].add(name(p))
    return {kind: sorted(names) for kind, names in dtypes.items()}


def held_parameters(trainer) -> list[int]:
    """The parameters each process holds (call on every process): all under DDP, about 1/N under FSDP or ZeRO-3."""
    def local(p):
        return p.ds_tensor.numel() if hasattr(p, "ds_tensor") else p.to_local().numel() if hasattr(
            p, "to_local") else p.numel()

    model = getattr(trainer, "model_wrapped", trainer.model)
    held = torch.tensor([sum(local(p) for p in model.parameters())], device=trainer.accelerator.device)
    return trainer.accelerator.gather(held).tolist()


def write_atomic(path: Path, text: str) -> None:
    """Write beside `path` and rename: a kill never leaves a half-written file."""
    path.with_suffix(path.suffix + ".tmp").write_text(text)
    os.replace(path.with_suffix(path.suffix + ".tmp"), path)


def read_jsonl_lenient(path: Path) -> list[dict]:
    """A JSON-lines file's records, without a last line a kill cut short; [] without the file."""
    records = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return records
