"""PPO's extras: what trl 1.12's PPOTrainer would fail on late or ignore, stopped in one line before anything loads,
and the held-out evaluation of its policy, sampled as PPOTrainer samples."""

import os
import sys
from contextlib import contextmanager, nullcontext

from accelerate import PartialState
import transformers
from transformers import AutoModelForSequenceClassification, AutoTokenizer, GenerationConfig

from extras.evaluation import BeforeAfterEval, RewardModelReward, Sampling, prompt_token_ids


def check_options(script_args, training_args) -> None:
    """What trl 1.12's PPOTrainer would fail on late or ignore, in one line each, before anything loads."""
    rollout = training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps
    if rollout % training_args.num_mini_batches:
        sys.exit(f"error: per_device_train_batch_size x gradient_accumulation_steps ({rollout}) must split into "
                 f"--num_mini_batches ({training_args.num_mini_batches}) equal minibatches")
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true":
        sys.exit("error: PPO does not run under DeepSpeed here: trl 1.12's PPOTrainer fails when it saves (it hands "
                 "transformers the policy as the DeepSpeed engine), and ZeRO-3 cannot wrap the reward functions' "
                 "adapter, which has no parameters; launch with accelerate_configs/ddp.yaml")
    if training_args.save_strategy in ("epoch", "best"):
        sys.exit(f"error: --save_strategy {training_args.save_strategy} never saves under trl 1.12's PPOTrainer, "
                 "which has no epochs or evaluation; use --save_strategy steps --save_steps N")
    if training_args.reward_model_path and script_args.reward_weights is not None:
        sys.exit("error: --reward_weights weighs --reward_funcs, which --reward_model_path replaces")
    if training_args.reward_model_path and PartialState().is_main_process:
        print(f"scoring with the reward model {training_args.reward_model_path}; --reward_funcs is not used")
    if (weights := script_args.reward_weights) is not None and len(weights) != len(script_args.reward_funcs):
        sys.exit(f"error: {len(weights)} --reward_weights for {len(script_args.reward_funcs)} --reward_funcs")


def check_prompts(datasets: list, tokenizer, training_args) -> None:
    """Prompts PPOTrainer would mishandle, in one line each: too few for a rollout (its dataloader drops the last
    partial batch and would loop forever), a reward model with another tokenizer, or a prompt holding the pad token
    (which PPOTrainer takes for padding)."""
    rollout = (training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps
               * PartialState().num_processes)
    if len(datasets[0]) < rollout:
        sys.exit(f"error: the training split has {len(datasets[0])} prompts, fewer than one PPO rollout "
                 f"(per_device_train_batch_size x gradient_accumulation_steps x processes = {rollout}); use more "
                 "prompts or a smaller batch")
    if training_args.reward_model_path:
        probe = "The reward model reads the policy's token ids: 3 + 4 = 7."
        theirs = AutoTokenizer.from_pretrained(training_args.reward_model_path)
        if theirs(probe).input_ids != tokenizer(probe).input_ids:
            sys.exit(f"error: the reward model {training_args.reward_model_path} has a different tokenizer from the "
                     "policy's; PPOTrainer feeds it the policy's token ids, so they must share one")
    if any(tokenizer.pad_token_id in ids for d in datasets for ids in d["input_ids"]):
        sys.exit(f"error: a prompt holds the pad token {tokenizer.pad_token!r}, which PPO would mask out as padding "
                 "(the tokenizer writes it for text it does not know); clean the prompts")


def evaluation(trainer, dataset, source: str, reward_funcs: list, script_args) -> BeforeAfterEval:
    """The evaluation of a PPOTrainer's policy, sampled as trl 1.12's PPOTrainer samples (`sampling`), added to it as
    a callback; a reward model scores the policy's own ids, as in training."""
    from trl.models import unwrap_model_for_generation

    args, tokenizer = trainer.args, trainer.processing_class
    rewards = reward_funcs or [reward_model_reward(trainer.reward_model.reward_model, tokenizer,
                                                   args.per_device_eval_batch_size)]

    @contextmanager
    def policy():
        with unwrap_model_for_generation(trainer.model, trainer.accelerator) as unwrapped:
            yield unwrapped.policy  # PPOTrainer wraps policy and value model together

    evaluation = BeforeAfterEval(dataset, source, tokenizer, rewards, script_args.eval_num_samples,
                                 script_args.eval_max_prompts, sampling(args, tokenizer, trainer.stop_token_id),
                                 args.seed, policy, trainer.accelerator, args.output_dir,
                                 args.per_device_eval_batch_size)
    trainer.add_callback(evaluation)
    return evaluation


def sampling(args, tokenizer, stop: int | None) -> Sampling:
    """PPOTrainer's GenerationConfig (its `train` builds the same), and its cut: up to and including the first stop
    token (`truncate_response`), then up to the first pad (`get_reward`'s end)."""
    config = GenerationConfig(max_new_tokens=args.response_length, temperature=args.temperature + 1e-7, top_k=0.0,
                              top_p=1.0, do_sample=True, eos_token_id=stop, pad_token_id=tokenizer.pad_token_id)

    def end(ids: list[int]) -> list[int]:
        ids = ids[: ids.index(stop) + 1] if stop is not None and stop in ids else ids
        return ids[: ids.index(tokenizer.pad_token_id)] if tokenizer.pad_token_id in ids else ids

    return Sampling(config, end)


def reward_model_reward(reward_model, tokenizer, batch_size: int) -> RewardModelReward:
    """A PPO reward model as the evaluation's reward: it scores the policy's own ids, as in training."""
    return RewardModelReward(reward_model, "reward_model", lambda prompt, completion, ids: prompt_token_ids(
        tokenizer, prompt) + ids, tokenizer.pad_token_id, batch_size)


def evaluate_only(policy, tokenizer, dataset, source: str, reward_funcs: list, script_args, args) -> None:
    """--eval_only for PPO: the policy as it is, sampled as PPOTrainer would, with no value model, reference or
    trainer; eval.json and the table as a training run writes them."""

    state = PartialState()
    policy.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    rewards = reward_funcs or [reward_model_reward(AutoModelForSequenceClassification.from_pretrained(
        args.reward_model_path, num_labels=1).eval().to(state.device), tokenizer, args.per_device_eval_batch_size)]
    stop = tokenizer.eos_token_id if args.stop_token == "eos" else args.stop_token_id  # PPOTrainer's stop token
    BeforeAfterEval(dataset, source, tokenizer, rewards, script_args.eval_num_samples, script_args.eval_max_prompts,
                    sampling(args, tokenizer, stop), args.seed, lambda: nullcontext(policy.to(state.device)), state,
                    args.output_dir, args.per_device_eval_batch_size).evaluate_only(step=0)


@contextmanager
def new_value_head(path: str):
    """Load a value model with its new `score` head said in one line, where transformers' load report calls it missing
    (as it is, by design); the report of any other missing weight is kept."""
    reports, logger = [], transformers.utils.logging.get_logger("transformers.modeling_utils")

    def hold(record) -> bool:
        if "LOAD REPORT" in record.getMessage():
            reports.append(record.getMessage())
            return False
        return True

    logger.addFilter(hold)
    try:
        yield
    finally:
        logger.removeFilter(hold)
    for report in reports:
        missing = [line.split("|")[0].strip() for line in report.splitlines() if "| MISSING" in line]
        if not missing or not all(key.startswith("score.") for key in missing):
            logger.warning(report)
        elif PartialState().is_main_process:
            print(f"value model: {path} with a new value head ({', '.join(missing)}), which starts at random and "
                  "trains with the policy")
