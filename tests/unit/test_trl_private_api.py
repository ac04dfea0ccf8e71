"""The few private corners of trl 1.12 / transformers that the scripts rely on, each checked directly, so that an
upgrade that changes one fails here, loudly and by name, instead of somewhere deep in a training run.

    GRPOTrainer._logs                 grpo_trl_example.py reads the last generation batch for completions.jsonl,
                                      with the columns rewards add through `log_extra` (the tool episodes)
    GRPOTrainer._tokenize_prompts     evaluation.prompt_token_ids copies it, so eval feeds the ids training feeds
    Trainer._save_checkpoint          ppo_trl_example.py saves the unwrapped policy under DDP through it
    Trainer.is_distributed_loading_by_transformers
                                      read when saving, set only in Trainer.__init__ (which PPOTrainer skips), so
                                      ppo_trl_example.PPOTrainerWithRewardLogs sets it as a class attribute
    trl.experimental.utils.get_reward ppo_trl_example.RewardAdapter is a reward model to it (base_model_prefix, score)
"""

import inspect

import model_zoo
import pytest
from conftest import CHAT_TEMPLATE

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


@pytest.mark.newest_trl
def test_grpo_logs_hold_the_last_generation_batch(grpo_trainer):
    trainer, _ = grpo_trainer
    trainer.train()
    logs = trainer._logs
    assert set(logs) >= {"prompt", "completion", "rewards"}
    assert len(logs["prompt"]) == len(logs["completion"]) == len(logs["rewards"]["accuracy"]) == 4
    assert all(isinstance(p, str) and isinstance(c, str) for p, c in zip(logs["prompt"], logs["completion"]))
    assert list(logs["extra"]["number"]) == [0, 1, 2, 3]  # one entry per completion, in the same order


@pytest.mark.newest_trl
@pytest.mark.parametrize("prompt", ["3+4=", [{"role": "user", "content": "3+4="}]], ids=["plain", "chat"])
def test_eval_tokenizes_prompts_as_grpo_does(grpo_trainer, prompt):
    """The held-out evaluation and GRPOTrainer give the model the same ids, BOS included for plain text."""
    trainer, tokenizer = grpo_trainer
    [trained_ids], _, _ = trainer._tokenize_prompts([prompt])
    assert list(trained_ids) == prompt_token_ids(tokenizer, prompt)
    if isinstance(prompt, str):
        assert trained_ids[0] == tokenizer.bos_token_id


def test_trainer_save_checkpoint_is_still_the_hook_ppo_saves_through():
    from transformers import Trainer
    from trl.experimental.ppo import PPOTrainer

    assert list(inspect.signature(Trainer._save_checkpoint).parameters) == ["self", "model", "trial"]
    assert "self._save_checkpoint(" in inspect.getsource(PPOTrainer.train)


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


def test_get_reward_reads_the_backbone_by_base_model_prefix_and_the_score_head():
    """RewardAdapter has no weights; get_reward must still reach it through these two names
    (tests/e2e/test_ppo.py checks the scores it gives through get_reward)."""
    from trl.experimental.utils import get_reward

    source = inspect.getsource(get_reward)
    assert "getattr(model, model.base_model_prefix)" in source and "model.score(" in source
