"""Every private corner of trl (1.16 for GRPO, 1.12 for PPO: docs/versions.md) and transformers that the scripts and
that an upgrade that changes one fails here, loudly and by name, instead of somewhere deep in a training run. None
has a public equivalent in these versions; where one appears, the corner goes.

GRPO (grpo_trl_example.py, extras/)
    trl.trainer.utils._use_triton     runtime.score_completions_only replaces it on a CPU: read by the chunked LM
                                      head at each forward to score only the completions' positions (else every
                                      position, off Triton)
    GRPOTrainer._logs                 outputs.grpo_completions reads the last generation batch for completions.jsonl,
                                      with the columns rewards add through `log_extra` (the tool episodes)
    GRPOTrainer._tokenize_prompts     evaluation.prompt_token_ids copies it, so eval feeds the ids training feeds
    create_model_card, per instance   outputs.tidy silences it: the trainers write a hub model card at every checkpoint

PPO (ppo_trl_example.py)
    trl.experimental.utils.get_reward RewardAdapter is a reward model to it (base_model_prefix, score)
    PPOTrainer.train's batches        PromptWidths wraps self.dataloader and self.eval_dataloader: the loop draws
                                      from them, and a batch's width is the prompt width get_reward is given
    PPOTrainer.train's loop           never reads control.should_training_stop (StopWhenAsked raises from a callback's
                                      on_step_end) and saves with Trainer._save_checkpoint(model, trial)
    accelerator.print, per instance   outputs.record silences it: train() prints "===training policy===" through it
    Trainer.is_distributed_loading_by_transformers
                                      read when saving, set only in Trainer.__init__ (which PPOTrainer skips), so
                                      PPOTrainerWithRewardLogs sets it as a class attribute

PPO's extras (extras/ppo.py)
    ppo_trainer.prepare_deepspeed     adapter_outside_deepspeed swaps the module's global while PPOTrainer.__init__
                                      runs: DeepSpeed cannot take the reward adapter, which has no weights
    Trainer._load_from_checkpoint     resume loads the policy and the value model through it, each standing in as
                                      trainer.model, which it reads after loading (to tie the weights)
    Trainer._load_rng_state           resume restores each process's RNG states through it
    generate_completions, per instance, and sample_generations_freq
                                      a resumed run shows TRL's sample tables where the whole run's count says
    callback_handler.callbacks        resume puts its callback first, before the run's records read the step
"""

import inspect

import model_zoo
import pytest
from conftest import ALGOS, CHAT_TEMPLATE, HAS_PPO_TRAINER

from extras.evaluation import prompt_token_ids


@pytest.fixture(scope="module")
def grpo_trainer(tmp_path_factory):
    """A GRPOTrainer on the bundled model, built in-process as the script builds it, with a BOS-adding tokenizer."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from rewards import get_reward_funcs

    tmp = tmp_path_factory.mktemp("grpo")
    model_dir = model_zoo.build_bos_llama(tmp / "model")  # a Llama-style BOS on plain text
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.pad_token = tokenizer.eos_token
    args = GRPOConfig(output_dir=str(tmp / "out"), use_cpu=True, bf16=False, per_device_train_batch_size=4,
                      num_generations=4, max_completion_length=2, report_to="none", beta=0.0)
    dataset = Dataset.from_list([{"prompt": "3+4=", "answer": "7"}] * 4)
    def numbered(completions, log_extra, **kwargs):  # logs a column of its own, as LogEpisodes does
        log_extra("number", list(range(len(completions))))
        return [0.0] * len(completions)

    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=[*get_reward_funcs(["accuracy"], 2), numbered],
                          args=args, train_dataset=dataset, processing_class=tokenizer)
    return trainer, tokenizer


def test_grpo_logs_hold_the_last_generation_batch(grpo_trainer):
    trainer, _ = grpo_trainer
    trainer.train()
    logs = trainer._logs
    assert set(logs) >= {"prompt", "completion", "rewards"}
    assert len(logs["prompt"]) == len(logs["completion"]) == len(logs["rewards"]["accuracy"]) == 4
    assert all(isinstance(p, str) and isinstance(c, str) for p, c in zip(logs["prompt"], logs["completion"]))
    assert list(logs["extra"]["number"]) == [0, 1, 2, 3]  # one entry per completion, in the same order


@pytest.mark.parametrize("prompt", ["3+4=", [{"role": "user", "content": "3+4="}]], ids=["plain", "chat"])
def test_eval_tokenizes_prompts_as_grpo_does(grpo_trainer, prompt):
    """The held-out evaluation and GRPOTrainer give the model the same ids, BOS included for plain text."""
    trainer, tokenizer = grpo_trainer
    [trained_ids], _, _ = trainer._tokenize_prompts([prompt])
    assert list(trained_ids) == prompt_token_ids(tokenizer, prompt)
    if isinstance(prompt, str):
        assert trained_ids[0] == tokenizer.bos_token_id


@pytest.mark.ppo_trainer
def test_saving_reads_an_attribute_only_trainer_init_sets():
    """PPOTrainer skips Trainer.__init__, which sets is_distributed_loading_by_transformers; saving reads it. If
    Trainer stops reading it, or PPOTrainer starts setting it, the class attribute in ppo_trl_example can go."""
    from transformers import Trainer
    from trl.experimental.ppo import PPOTrainer

    import ppo_trl_example

    assert "self.is_distributed_loading_by_transformers =" in inspect.getsource(Trainer.__init__)
    assert "self.is_distributed_loading_by_transformers" in inspect.getsource(Trainer._save)
    assert "is_distributed_loading_by_transformers" not in inspect.getsource(PPOTrainer.__init__)
    assert ppo_trl_example.PPOTrainerWithRewardLogs.is_distributed_loading_by_transformers is False


@pytest.mark.ppo_trainer
def test_get_reward_reads_the_backbone_by_base_model_prefix_and_the_score_head():
    """RewardAdapter has no weights; get_reward must still reach it through these two names
    (tests/e2e/test_ppo.py checks the scores it gives through get_reward)."""
    from trl.experimental.utils import get_reward

    source = inspect.getsource(get_reward)
    assert "getattr(model, model.base_model_prefix)" in source and "model.score(" in source


# ---------------------------------------------------------------- PPO's corners, read in trl 1.12's source


def ppo_source(name: str) -> str:
    from trl.experimental.ppo import PPOTrainer

    return inspect.getsource(getattr(PPOTrainer, name))


@pytest.mark.ppo_trainer
def test_ppo_draws_batches_from_its_dataloaders_and_scores_with_the_batch_width():
    """PromptWidths: the loop draws each rollout from self.dataloader (read when train() starts), the sample tables
    from self.eval_dataloader, and each hands get_reward the batch's width as the prompt width."""
    train, tables = ppo_source("train"), ppo_source("generate_completions")
    assert "dataloader = self.dataloader" in train and "yield from dataloader" in train
    assert "context_length = queries.shape[1]" in train
    assert "for batch in self.eval_dataloader:" in tables and "context_length = query.shape[1]" in tables
    for source in (train, tables):
        assert "reward_model, postprocessed_query_response, processing_class.pad_token_id, context_length" in source


@pytest.mark.ppo_trainer
def test_ppo_loop_never_reads_should_training_stop_and_saves_through_save_checkpoint():
    """extras/ppo.py's StopWhenAsked raises from on_step_end, after which the loop would save: train_until_asked saves
    through the same Trainer._save_checkpoint. If the loop learns to stop, the callback can go."""
    from transformers import Trainer

    train = ppo_source("train")
    assert "should_training_stop" not in train
    step_end = train.index("self.callback_handler.on_step_end(")
    assert train.index("self._save_checkpoint(model, trial=None)", step_end) > step_end
    assert list(inspect.signature(Trainer._save_checkpoint).parameters) == ["self", "model", "trial"]


@pytest.mark.ppo_trainer
def test_ppo_prints_its_one_line_through_accelerator_print():
    assert 'accelerator.print("===training policy===")' in ppo_source("train")


@pytest.mark.ppo_trainer
def test_ppo_prepares_the_reward_model_for_deepspeed_through_the_module_global():
    """adapter_outside_deepspeed swaps trl.experimental.ppo.ppo_trainer.prepare_deepspeed: PPOTrainer.__init__ must
    look it up there, at call time."""
    import trl.experimental.ppo.ppo_trainer as ppo_trainer

    assert callable(ppo_trainer.prepare_deepspeed)
    assert "self.reward_model = prepare_deepspeed(self.reward_model, accelerator)" in ppo_source("__init__")


def test_resume_loads_through_trainer_load_from_checkpoint_which_reads_trainer_model():
    from transformers import Trainer

    assert list(inspect.signature(Trainer._load_from_checkpoint).parameters) == ["self", "resume_from_checkpoint",
                                                                                 "model"]
    assert "self.model._keys_to_ignore_on_save" in inspect.getsource(Trainer._issue_warnings_after_load)
    assert list(inspect.signature(Trainer._load_rng_state).parameters) == ["self", "checkpoint"]


@pytest.mark.ppo_trainer
def test_resume_shows_sample_tables_through_generate_completions_and_its_frequency():
    """extras/ppo.Resumed sets sample_generations_freq to 1 and filters generate_completions by the whole run's step."""
    train = ppo_source("train")
    assert "(update - 1) % self.sample_generations_freq == 0" in train
    assert "self.generate_completions(sampling=True)" in train


@pytest.mark.parametrize("algo", ALGOS)
def test_trainers_write_a_model_card_at_each_checkpoint_through_create_model_card(algo):
    """outputs.tidy replaces create_model_card on the trainer: both trainers call it by that name when saving."""
    from trl import GRPOTrainer

    source = inspect.getsource(GRPOTrainer) if algo == "grpo" else ppo_source("_save_checkpoint")
    assert "self.create_model_card(" in source


def test_resume_puts_its_callback_first_in_the_handlers_list():
    from transformers.trainer_callback import CallbackHandler

    assert "self.callbacks = []" in inspect.getsource(CallbackHandler.__init__)


@pytest.mark.skipif(HAS_PPO_TRAINER, reason="GRPO's trl, 1.16: trl 1.12 computes the completions' logits alone")
def test_scoring_only_the_completions_gives_trls_own_log_probabilities_and_gradients(monkeypatch):
    """extras.runtime.score_completions_only: on a CPU, trl 1.16's chunked LM head scores every position of every
    row; with it, only the completions' positions reach the LM head, and the log-probabilities, entropies and every
    gradient are trl's own. Rows left-padded as GRPOTrainer pads them, labels -100 on the prompt and padding."""
    import torch
    import trl.trainer.utils as trl_utils
    from conftest import TINY_MODEL
    from transformers import AutoModelForCausalLM

    from trl.kernels import chunked_logprob

    from extras import runtime

    assert "compact = _use_triton(hidden_states.device)" in inspect.getsource(trl_utils.add_fused_lm_head)
    # trl's own, whatever a script's main() in this process set before (and put back after the test)
    monkeypatch.setattr(trl_utils, "_use_triton", chunked_logprob._use_triton)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(TINY_MODEL)
    trl_utils.add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
    prompts, completion = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [14]], 4
    width = max(map(len, prompts)) + completion
    ids = torch.tensor([[0] * (width - len(p) - completion) + p + [20 + i for i in range(completion)] for p in prompts])
    mask = torch.tensor([[0] * (width - len(p) - completion) + [1] * (len(p) + completion) for p in prompts])
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-completion] = -100  # as GRPOTrainer._get_per_token_logps_and_entropies scores them
    scored = []
    apply = trl_utils._ChunkedLogProbFunction.apply
    monkeypatch.setattr(trl_utils._ChunkedLogProbFunction, "apply", lambda hidden, *args: scored.append(
        hidden.shape[0]) or apply(hidden, *args))

    def run():
        model.zero_grad()
        out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        (out.log_probs.sum() + 0.1 * out.entropy.sum()).backward()
        return out.log_probs.detach(), out.entropy.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    trls = run()
    runtime.score_completions_only()
    ours = run()
    assert scored == [len(prompts) * (width - 1), len(prompts) * completion]  # every position; the completions'
    torch.testing.assert_close(ours[0], trls[0], rtol=0, atol=1e-6)
    torch.testing.assert_close(ours[1], trls[1], rtol=0, atol=1e-6)
    assert ours[2].keys() == trls[2].keys() and any(g.abs().max() > 0 for g in trls[2].values())
    for name in trls[2]:
        torch.testing.assert_close(ours[2][name], trls[2][name], rtol=1e-5, atol=2e-6, msg=name)
