"""--eval_only: a saved model or LoRA adapter evaluated once, as a run evaluates its policy, with nothing trained or
saved: eval.json, or eval-N.json beside one already there, and the table (docs/evaluation.md). A run's folder is
sampled as its run sampled, and loaded as it trained. Imported where a run sets it.
"""

import itertools
import sys
from pathlib import Path

from extras.evaluation import BeforeAfterEval, for_grpo
from extras.summary import run_settings

# What a run's held-out evaluation samples with, and on which prompts: --eval_only of the run's folder takes the run's
# (from its summary.json) for each left at the parser's default, and so scores what the run's "after" scored
# (not PPO's stop_token_id, nor generation_kwargs: the trainers fill those in, and summary.json holds what they made)
SAMPLING = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "max_completion_length",
            "response_length", "chat_template_kwargs", "system_prompt", "eval_num_samples", "eval_max_prompts",
            "dataset_test_split", "seed")


def as_the_run_sampled(summary: Path, values, defaults: dict) -> dict:
    """The run's value of each SAMPLING option that `values` leave at the parser's `defaults` and the run did not."""
    settings = run_settings(summary)
    return {key: settings[key] for key in SAMPLING if key in settings and key in defaults
            and getattr(values, key) == defaults[key] and settings[key] != defaults[key]}


def check_as_trained(path: str, model_args) -> None:
    """A run's model or LoRA adapter: its base loaded as the run loaded it, quantized (QLoRA) or not, as its
    summary.json records; a model without one is evaluated as the flags load it."""
    trained = run_settings(Path(path) / "summary.json")
    if not trained:
        return
    keys = ["load_in_4bit", "load_in_8bit"] + (["bnb_4bit_quant_type", "use_bnb_nested_quant"]
                                               if trained.get("load_in_4bit") else [])
    if differ := [key for key in keys if trained.get(key) != getattr(model_args, key)]:
        flags = " ".join(f"--{key} {str(trained.get(key)).lower()}" for key in differ)
        sys.exit(f"error: --eval_only would load {path} otherwise than its run trained it (its summary.json): add "
                 f"{flags} to evaluate it as trained")


def model_to_evaluate(path: str, model_args, training_args):
    """GRPO's --eval_only: `path` for GRPOTrainer to load, or where it is a LoRA adapter (a folder or a hub repository
    with no config.json, which GRPOTrainer cannot load), the adapter on the base model its config names, quantized
    where --load_in_4bit/8bit say so."""
    from transformers.utils import find_adapter_config_file

    if not find_adapter_config_file(path, revision=model_args.model_revision):
        return path
    from peft import AutoPeftModelForCausalLM
    from trl import get_quantization_config

    return AutoPeftModelForCausalLM.from_pretrained(path, revision=model_args.model_revision, dtype=model_args.dtype,
                                                    quantization_config=get_quantization_config(model_args),  # QLoRA's
                                                    trust_remote_code=training_args.trust_remote_code)


def evaluate_only(trainer, dataset, source: str, reward_funcs: list, script_args) -> None:
    """GRPO's --eval_only: the trainer's policy evaluated once, as `for_grpo` evaluates it before and after training,
    with nothing trained or saved; then every process leaves together. The policy runs in the precision training runs
    it in: accelerate's prepare, which train() would call, puts --bf16's autocast on its forward."""
    trainer.model_wrapped = trainer.accelerator.prepare_model(trainer.model, evaluation_mode=True)
    once(for_grpo(trainer, dataset, source, reward_funcs, script_args), trainer.state.global_step)
    trainer.end()


def once(evaluation: BeforeAfterEval, step: int) -> None:
    """The model as it is, once: eval.json and the table with one column, `model`. An eval.json already in the
    folder (a run's, or an earlier evaluation's) is kept: this one goes to the first free eval-N.json."""
    evaluation.run("model", step)
    if not (evaluation.output_dir / "eval.json").exists():
        return evaluation.write()
    free = next(n for n in itertools.count(2) if not (evaluation.output_dir / f"eval-{n}.json").exists())
    evaluation.write(f"eval-{free}.json", note="the eval.json there is kept")
