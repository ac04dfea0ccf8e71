"""PPO's extras: what trl 1.12's PPOTrainer would fail on late or ignore, stopped in one line before anything loads;
the held-out evaluation of its policy, sampled as PPOTrainer samples; and what it lacks for DeepSpeed and for resume
(docs/ppo.md)."""

import os
import sys
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch
import transformers
from accelerate import PartialState
from transformers import GenerationConfig

from extras.evaluation import (BeforeAfterEval, RewardModelReward, Sampling, during_training, prompt_token_ids,
                               reference_of)
from extras.outputs import held_load_reports, missing_weights


def check_options(script_args, training_args) -> None:
    """What trl 1.12's PPOTrainer would fail on late or ignore, in one line each, before anything loads."""
    rollout = training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps
    if rollout % training_args.num_mini_batches:
        sys.exit(f"error: per_device_train_batch_size x gradient_accumulation_steps ({rollout}) must split into "
                 f"--num_mini_batches ({training_args.num_mini_batches}) equal minibatches")
    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true":  # on a CPU extras/checks.py refuses it first
        sys.exit("error: PPO does not run under FSDP: trl 1.12's PPOTrainer has no FSDP code, and generates from the "
                 "policy inside the FSDP-wrapped module, outside the forward in which FSDP gathers its weights; launch "
                 "with accelerate_configs/zero3.yaml to shard PPO's models")
    strategy = getattr(training_args.eval_strategy, "value", training_args.eval_strategy)
    if strategy != "no" and (strategy != "steps" or not script_args.eval_num_samples):
        sys.exit(f"error: --eval_strategy {strategy} evaluates nothing under trl 1.12's PPOTrainer, which has no "
                 "evaluation: the held-out curve is --eval_strategy steps --eval_steps N with --eval_num_samples K "
                 "(docs/evaluation.md)")
    if training_args.save_strategy in ("epoch", "best"):
        sys.exit(f"error: --save_strategy {training_args.save_strategy} never saves under trl 1.12's PPOTrainer, "
                 "which has no epochs or evaluation; use --save_strategy steps --save_steps N")
    if training_args.reward_model_path and PartialState().is_main_process:
        print(f"scoring with the reward model {training_args.reward_model_path}; --reward_funcs is not used")


def evaluation(trainer, dataset, source: str, reward_funcs: list, script_args) -> BeforeAfterEval:
    """The evaluation of a PPOTrainer's policy, sampled as trl 1.12's PPOTrainer samples (`sampling`), added to it as
    a callback; a reward model scores the policy's own ids, as in training, before `reward_funcs` (the training
    rewards and --eval_reward_funcs). The KL is to PPOTrainer's reference (under LoRA, the adapter disabled)."""
    from trl.models import unwrap_model_for_generation

    args = trainer.args
    tokenizer = trainer.processing_class
    reward_model = trainer.reward_model.reward_model
    rewards = [reward_model_reward(reward_model, tokenizer, args.per_device_eval_batch_size)] if (
        reward_model is not None) else []

    @contextmanager
    def policy():
        with unwrap_model_for_generation(trainer.model, trainer.accelerator) as unwrapped:
            yield unwrapped.policy  # PPOTrainer wraps policy and value model together

    stops = trainer.policy_model.generation_config.eos_token_id  # what ends a completion in training
    evaluation = BeforeAfterEval(dataset, source, tokenizer, rewards + reward_funcs, script_args.eval_num_samples,
                                 script_args.eval_max_prompts, sampling(args, tokenizer, stops),
                                 args.seed, policy, trainer.accelerator, args.output_dir,
                                 args.per_device_eval_batch_size,
                                 reference_of(trainer.ref_model, trainer.is_peft_model),
                                 trained=tuple(f.__name__ for f in rewards or trainer.reward_model.reward_funcs))
    during_training(trainer, evaluation, load_best=lambda checkpoint: load_policy(trainer, checkpoint))
    trainer.add_callback(evaluation)
    return evaluation


def sampling(args, tokenizer, stops: int | list[int] | None) -> Sampling:
    """PPOTrainer's GenerationConfig (its `train` builds the same), and its cut: up to and including the first stop
    token (`truncate_response`), then up to the first pad (`get_reward`'s end)."""
    stops = [] if stops is None else [stops] if isinstance(stops, int) else list(stops)
    config = GenerationConfig(max_new_tokens=args.response_length, temperature=args.temperature + 1e-7, top_k=0.0,
                              top_p=1.0, do_sample=True, eos_token_id=stops or None,
                              pad_token_id=tokenizer.pad_token_id)

    def end(ids: list[int]) -> list[int]:
        ids = ids[: min(ids.index(stop) for stop in stops if stop in ids) + 1] if set(stops) & set(ids) else ids
        return ids[: ids.index(tokenizer.pad_token_id)] if tokenizer.pad_token_id in ids else ids

    return Sampling(config, end)


def reward_model_reward(reward_model, tokenizer, batch_size: int) -> RewardModelReward:
    """A PPO reward model as the evaluation's reward: it scores the policy's own ids, as in training."""
    return RewardModelReward(reward_model, "reward_model", lambda prompt, completion, ids: prompt_token_ids(
        tokenizer, prompt) + ids, tokenizer.pad_token_id, batch_size)


def evaluate_only(policy, reward_model, tokenizer, dataset, source: str, reward_funcs: list, script_args, args,
                  stops: set[int]) -> None:
    """--eval_only for PPO: the policy as it is, sampled as PPOTrainer would, with no value model, reference or
    trainer; eval.json and the table as a training run writes them. `reward_model` (or None), prepared by the script
    as for training, and `stops`, the run's stop tokens: the script's."""
    state = PartialState()
    policy.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    if reward_model is not None:
        reward_funcs = [reward_model_reward(reward_model.eval().to(state.device), tokenizer,
                                            args.per_device_eval_batch_size)] + reward_funcs
    from extras.eval_only import once

    once(BeforeAfterEval(dataset, source, tokenizer, reward_funcs, script_args.eval_num_samples,
                         script_args.eval_max_prompts, sampling(args, tokenizer, sorted(stops)), args.seed,
                         lambda: nullcontext(policy.to(state.device)), state, args.output_dir,
                         args.per_device_eval_batch_size), step=0)


@contextmanager
def new_value_head(path: str):
    """Load a value model with its new `score` head said in one line, where transformers' load report calls it missing
    (as it is, by design); the report of any other missing weight is kept."""
    with held_load_reports() as reports:
        yield
    for report in reports:
        missing = missing_weights(report)
        if not missing or not all(key.startswith("score.") for key in missing):
            transformers.utils.logging.get_logger("transformers.modeling_utils").warning(report)
        elif PartialState().is_main_process:
            print(f"value model: {path} with a new value head ({', '.join(missing)}), which starts at random and "
                  "trains with the policy")


@contextmanager
def adapter_outside_deepspeed():
    """trl 1.12's PPOTrainer hands its reward model to DeepSpeed, which cannot take the reward functions' adapter (no
    weights, no config): the adapter stays outside, and only a reward model inside it goes in (sharded by ZeRO-3)."""
    import trl.experimental.ppo.ppo_trainer as ppo_trainer

    prepare = ppo_trainer.prepare_deepspeed

    def prepare_inside(model, accelerator):
        if not hasattr(model, "reward_funcs"):  # the reference model, as TRL prepares it
            return prepare(model, accelerator)
        if model.reward_model is not None:
            model.reward_model = prepare(model.reward_model, accelerator)
        return model

    ppo_trainer.prepare_deepspeed = prepare_inside
    try:
        yield
    finally:
        ppo_trainer.prepare_deepspeed = prepare


def save_policy(trainer, output_dir: str) -> None:
    """Under DeepSpeed, the policy (or its adapter) and the tokenizer, gathered from the engine that holds it with the
    value model (trl 1.12's save_model hands transformers the bare policy as the engine, and fails). Every process."""
    state = trainer.accelerator.get_state_dict(trainer.model)  # ZeRO-3: each process's shards, gathered
    policy = trainer.accelerator.unwrap_model(trainer.model).policy
    if trainer.args.should_save:
        policy.save_pretrained(output_dir, state_dict={k.removeprefix("policy."): v for k, v in state.items()
                                                       if k.startswith("policy.")})
        trainer.processing_class.save_pretrained(output_dir)


def save_value_model(trainer, checkpoint: str) -> None:
    """The value model, beside the policy in a checkpoint (under DeepSpeed the engine's checkpoint holds both)."""
    if not trainer.is_deepspeed_enabled and trainer.args.should_save:
        trainer.accelerator.unwrap_model(trainer.model).value_model.save_pretrained(Path(checkpoint) / "value_model")


def train_until_asked(trainer, train) -> None:
    """`train()`, trl 1.12's PPO loop, stopping when a callback asks (`control.should_training_stop`, as the no-signal
    watchdog does), which the loop never reads: StopWhenAsked raises once the update is over, and the run then ends as
    it does after its last update, its checkpoint saved, then train end."""
    trainer.add_callback(StopWhenAsked)  # the last callback: every other one has seen the update when it stops
    try:
        train()
    except StopTraining:
        if trainer.args.save_strategy == "steps":
            trainer._save_checkpoint(trainer.model, trial=None)
            trainer.control = trainer.callback_handler.on_save(trainer.args, trainer.state, trainer.control)
        trainer.control = trainer.callback_handler.on_train_end(trainer.args, trainer.state, trainer.control)


class StopTraining(Exception):
    """Leaves PPOTrainer's loop (train_until_asked)."""


class StopWhenAsked(transformers.TrainerCallback):
    """Raises StopTraining at the end of an update where a callback asked training to stop."""

    def on_step_end(self, args, state, control, **kwargs):
        if control.should_training_stop and state.global_step < state.max_steps:
            raise StopTraining


def load_policy(trainer, checkpoint: str) -> None:
    """--load_best_model_at_end, which trl 1.12's PPOTrainer does not do: the checkpoint's policy (or adapter) into
    the run's, before its "after" evaluation and its save. Under DeepSpeed, the engine's checkpoint, both models."""
    if trainer.is_deepspeed_enabled:
        from transformers.integrations.deepspeed import deepspeed_load_checkpoint

        return deepspeed_load_checkpoint(trainer.model, checkpoint)
    wrapped = trainer.model
    trainer.model = policy = trainer.accelerator.unwrap_model(wrapped).policy  # as resume() loads it, below
    trainer._load_from_checkpoint(checkpoint, model=policy)
    trainer.model = wrapped


def resume(trainer, checkpoint: str) -> None:
    """Continue from `checkpoint`, which trl 1.12's PPOTrainer cannot (trl #2657): the policy (or adapter), the value
    model, optimizer and scheduler now; the update and episode counters, the RNG states and the place in the data
    when training starts, so that the run goes on as if it had never stopped."""
    from trl.experimental.ppo.ppo_trainer import OnlineTrainerState

    if trainer.is_deepspeed_enabled:  # the engine's own checkpoint: both models and the optimizer
        from transformers.integrations.deepspeed import deepspeed_load_checkpoint

        deepspeed_load_checkpoint(trainer.model, checkpoint)
    else:
        # Trainer._load_from_checkpoint loads full weights, shards or a LoRA adapter into `model`, then reads
        # trainer.model to tie its weights: so each of the two models stands in as trainer.model while it loads
        wrapped = trainer.model
        models = trainer.accelerator.unwrap_model(wrapped)
        for model, folder in [(models.policy, checkpoint), (models.value_model, f"{checkpoint}/value_model")]:
            trainer.model = model
            trainer._load_from_checkpoint(folder, model=model)
        trainer.model = wrapped
        trainer.optimizer.load_state_dict(torch.load(f"{checkpoint}/optimizer.pt", weights_only=True))
    trainer.lr_scheduler.load_state_dict(torch.load(f"{checkpoint}/scheduler.pt", weights_only=True))
    saved = OnlineTrainerState.load_from_json(str(Path(checkpoint) / "trainer_state.json"))
    trainer.dataloader = SkipBatches(trainer.dataloader, saved.global_step)
    trainer.callback_handler.callbacks.insert(0, Resumed(trainer, checkpoint, saved))  # before the run's records


class Resumed(transformers.TrainerCallback):
    """Where PPOTrainer's train() has set its counters to 0: the saved ones, the updates left, the RNG states; and its
    sample tables at the updates where the run would have shown them (its loop counts from 1 again)."""

    def __init__(self, trainer, checkpoint: str, saved):
        self.trainer = trainer
        self.checkpoint = checkpoint
        self.saved = saved

    def on_train_begin(self, args, state, control, **kwargs):
        state.global_step = self.saved.global_step
        state.episode = self.saved.episode
        state.log_history = self.saved.log_history
        # the best checkpoint so far, by --metric_for_best_model (the held-out evaluation's)
        state.best_metric = self.saved.best_metric
        state.best_global_step = self.saved.best_global_step
        kept = self.saved.best_model_checkpoint  # as Trainer's resume: not a checkpoint moved away since
        state.best_model_checkpoint = kept if kept and Path(kept).is_dir() else None
        args.num_total_batches -= self.saved.global_step  # the loop's count, read after this callback
        # The loop counts updates from 1 again: TRL's sample tables are asked for at every update, and shown at the
        # updates where the whole run's count says
        if args.num_sample_generations > 0:
            every = self.trainer.sample_generations_freq
            show = self.trainer.generate_completions

            def on_the_whole_runs_count(sampling: bool = False) -> None:
                if not sampling or (state.global_step - 1) % every == 0:
                    show(sampling)

            self.trainer.sample_generations_freq = 1
            self.trainer.generate_completions = on_the_whole_runs_count
        self.trainer._load_rng_state(self.checkpoint)

    def on_train_end(self, args, state, control, **kwargs):
        args.num_total_batches += self.saved.global_step


class SkipBatches:
    """`dataloader`, `skip` batches in: its order comes from its sampler's own generator, replayed batch by batch."""

    def __init__(self, dataloader, skip: int):
        self.dataloader = dataloader
        self.live = None
        epochs, rest = divmod(skip, len(dataloader))
        for _ in range(epochs):
            for _ in dataloader:
                pass
        if rest:
            self.live = iter(dataloader)
            for _ in range(rest):
                next(self.live)

    def __len__(self) -> int:
        return len(self.dataloader)

    def __iter__(self):
        live = self.live
        self.live = None
        yield from live if live is not None else self.dataloader
