"""The held-out evaluation's metrics, from fixed rewards: which metrics a reward gets follows its declaration."""

import math
from types import SimpleNamespace

import model_zoo
import pytest
import torch
from conftest import HAS_PPO_TRAINER

from extras.evaluation import up_to_first
from extras.stats import metrics_of, pass_at_k
from rewards import get_reward_funcs


def test_correctness_rewards_get_pass_at_k_whatever_their_name():
    """`code` declares itself a correctness reward, so it gets pass@k, but no maj@k: it has no final answer to vote
    on."""
    [code] = get_reward_funcs(["code"], max_completion_length=8)
    rewards = [[1.0, 0.5], [0.0, 0.0], [1.0, 1.0]]  # [prompt][sample]: a 0.5 passes half the asserts, not the task
    metrics = metrics_of(code, rewards, greedy_rewards=[1.0, 0.0, 0.5], texts=[["a", "b"]] * 3, num_samples=2)
    assert metrics == pytest.approx({"mean_reward": 3.5 / 6, "greedy_accuracy": 1 / 3,
                                     "pass@1": (0.5 + 0.0 + 1.0) / 3, "pass@2": 2 / 3})


def test_accuracy_gets_maj_at_k_from_its_final_answers():
    [accuracy] = get_reward_funcs(["accuracy"], max_completion_length=8)
    texts = [["so 7", "so 7", "so 8"], ["so 1", "so 2", "so 2"]]
    rewards = [[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]  # the majority answer is right on prompt 1, wrong on prompt 2
    metrics = metrics_of(accuracy, rewards, greedy_rewards=[1.0, 1.0], texts=texts, num_samples=3)
    assert metrics["maj@3"] == 0.5 and metrics["pass@1"] == pytest.approx((2 / 3 + 1 / 3) / 2)


@pytest.mark.parametrize("texts, rewards, maj", [
    (["8", "7"], [0.0, 1.0], 0.5), (["12", "9"], [0.0, 1.0], 0.5),  # a tie of two, one right: a coin's chance
    (["9", "12"], [1.0, 0.0], 0.5), (["3", "4", "5"], [0.0, 0.0, 1.0], 1 / 3), (["7", "7"], [1.0, 1.0], 1.0),
    (["7", "7", "3", "3", "5"], [1.0, 1.0, 0.0, 0.0, 0.0], 0.5), (["no answer", "x"], [0.0, 0.0], 0.0)])
def test_maj_at_k_counts_a_tie_as_a_fair_coin(texts, rewards, maj):
    """Answers tied for the most votes are picked among by a fair coin, never by their string order: [wrong 8,
    right 7] and [wrong 12, right 9] score alike."""
    [accuracy] = get_reward_funcs(["accuracy"], max_completion_length=8)
    metrics = metrics_of(accuracy, [rewards], greedy_rewards=[0.0], texts=[texts], num_samples=len(texts))
    assert metrics[f"maj@{len(texts)}"] == pytest.approx(maj)


def test_other_rewards_and_reward_models_get_their_means():
    def reward_model(completions, **kwargs): ...

    metrics = metrics_of(reward_model, [[0.5, -1.0], [2.0, None]], greedy_rewards=[1.0, 3.0], texts=[["a", "b"]] * 2,
                         num_samples=2)
    assert metrics == {"mean_reward": 0.5, "greedy_reward": 2.0}


def test_pass_at_k_is_the_binomial_formula():
    """The product form used for speed equals 1 - C(n-c, k) / C(n, k) everywhere on a grid."""
    for n in range(1, 17):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12), (n, c, k)


def test_evaluate_computes_the_metrics_of_fixed_completions(monkeypatch):
    """evaluate() end to end with the generation stubbed: known completions give hand-computed metrics."""
    from accelerate import PartialState
    from datasets import Dataset

    from extras import evaluation

    # prompt ids -> (4 sampled completions, the greedy one); gold answers 2, 4, 6
    completions = {
        (1,): (["2", "2", "3", "5"], "2"),   # 2 right; the majority answer 2 is right; greedy right
        (2,): (["5", "5", "4", "9"], "33"),  # 1 right; the majority answer 5 is wrong;  greedy wrong
        (3,): (["1", "2", "10", "8"], "6"),  # 0 right; four answers tied, none right; greedy right
    }
    calls = []

    def fake_generate(model, tokenizer, prompt_ids, num_samples, sampling, batch_size):
        config = sampling.config
        calls.append((num_samples, config.do_sample, config.temperature, config.max_new_tokens))
        texts = [completions[tuple(ids)][0] if sampling.config.do_sample else [completions[tuple(ids)][1]]
                 for ids in prompt_ids]
        return texts, [[[0] * len(t) for t in sample] for sample in texts]

    monkeypatch.setattr(evaluation, "generate", fake_generate)
    dataset = Dataset.from_list([{"prompt": f"{a}+{a}=", "answer": str(2 * a), "input_ids": [a]} for a in (1, 2, 3)])

    async def length(completions, **kwargs):  # not a correctness reward: it gets means only. Async: run to its end
        return [float(len(c)) for c in completions]

    [accuracy] = get_reward_funcs(["accuracy"], max_completion_length=8)
    from transformers import GenerationConfig

    sampling = evaluation.Sampling(GenerationConfig(do_sample=True, temperature=0.7, max_new_tokens=5), lambda ids: ids)
    results = evaluation.evaluate(torch.nn.Linear(1, 1), tokenizer=None, dataset=dataset,
                                  reward_funcs=[accuracy, length], num_samples=4, sampling=sampling,
                                  seed=0, accelerator=PartialState(), batch_size=8)
    assert calls == [(4, True, 0.7, 5), (1, False, None, 5)]  # sampled as training samples, then greedy
    assert results["accuracy"] == pytest.approx({
        "mean_reward": 3 / 12,
        "greedy_accuracy": 2 / 3,
        "pass@1": (2 / 4 + 1 / 4 + 0) / 3,
        "pass@4": 2 / 3,  # any of 4 right: prompts 1 and 2
        "maj@4": 1 / 3,
    })
    assert results["length"] == pytest.approx({"mean_reward": 13 / 12, "greedy_reward": 4 / 3})


@pytest.mark.parametrize("batch_size, num_samples, prompts_per_call", [
    (8, 4, [2, 2, 1]),  # 2 prompts x 4 samples = 8 completions per call
    (3, 4, [1, 1, 1, 1, 1]),  # fewer than one prompt's samples: one prompt per call
    (2, 1, [2, 2, 1]),  # greedy: one completion per prompt
])
def test_generation_batches_follow_per_device_eval_batch_size(batch_size, num_samples, prompts_per_call):
    """The evaluation generates at most --per_device_eval_batch_size completions per `generate` call (always one
    prompt's K samples together): a large model with long completions can evaluate in small batches."""
    from transformers import GenerationConfig

    from extras import evaluation

    seen = []

    class Model(torch.nn.Linear):
        def generate(self, input_ids, attention_mask, generation_config):
            seen.append(len(input_ids))
            rows = input_ids.repeat_interleave(generation_config.num_return_sequences, dim=0)
            return torch.cat([rows, torch.ones_like(rows)], dim=1)  # one new token per completion

    class Batch(dict):
        def to(self, device):
            return self

    tokenizer = SimpleNamespace(pad=lambda batch, **kwargs: Batch(input_ids=torch.tensor(batch["input_ids"]),
                                                                  attention_mask=torch.ones(len(batch["input_ids"]))),
                                decode=lambda ids, skip_special_tokens: str(ids))
    sampling = evaluation.Sampling(GenerationConfig(do_sample=num_samples > 1, max_new_tokens=1), lambda ids: ids)
    texts, _ = evaluation.generate(Model(1, 1), tokenizer, [[p] for p in range(5)], num_samples, sampling, batch_size)
    assert seen == prompts_per_call and len(texts) == 5 and {len(t) for t in texts} == {num_samples}


def test_grpo_keeps_a_completion_up_to_its_first_stop_token():
    """GRPOTrainer's mask keeps a completion up to and including its first stop token: the tokenizer's eos on trl
    1.12, any eos id of the model's generation config from trl 1.14."""
    assert up_to_first(2)([5, 6, 2, 7, 2]) == [5, 6, 2]
    assert up_to_first([2, 9])([5, 9, 2]) == [5, 9]
    assert up_to_first([2, 9])([5, 6]) == [5, 6]  # ran to the length limit
    assert up_to_first(None)([5, 0, 6]) == [5, 0, 6]  # GRPO keeps a pad token the model wrote


@pytest.mark.ppo_trainer
def test_ppo_ends_a_completion_where_ppo_trainer_does():
    """PPO's rule (`ppo_sampling`) also cuts at its first pad, which GRPO keeps."""
    from extras.ppo import sampling as ppo_sampling

    args = SimpleNamespace(response_length=8, temperature=0.7)
    ppo = lambda stop: ppo_sampling(args, SimpleNamespace(pad_token_id=0), stop)  # noqa: E731
    assert ppo(2).end([5, 6, 2, 7, 2]) == [5, 6, 2]  # PPOTrainer's truncate_response
    assert ppo(2).end([5, 0, 6, 2]) == [5]  # get_reward's sequence ends before the first pad
    assert ppo(None).end([5, 6, 2, 7]) == [5, 6, 2, 7]  # no stop token: runs to the length limit
    config = ppo(2).config
    assert (config.temperature, config.top_k, config.top_p, config.max_new_tokens) == (0.7 + 1e-7, 0, 1.0, 8)


def test_log_probs_of_left_padded_batches_equal_each_sequence_alone():
    """The KL's log-probabilities: a batch of prompts and completions of different lengths, left-padded, gives each
    completion's summed log-probability (at the temperature) that the model gives it unpadded."""
    from transformers import AutoModelForCausalLM

    from conftest import TINY_MODEL
    from extras.evaluation import log_probs

    model = AutoModelForCausalLM.from_pretrained(TINY_MODEL).eval()
    prompts = [[5, 6, 7], [8], [9, 10, 11, 12, 13]]
    completions = [[[14, 15], [16]], [[17, 18, 19, 20], [21, 22]], [[23], [24, 25, 26]]]
    batched = log_probs(model, prompts, completions, temperature=0.7, batch_size=4)
    for prompt, samples, values in zip(prompts, completions, batched):
        for completion, value in zip(samples, values):
            ids = torch.tensor([prompt + completion])
            with torch.no_grad():
                logps = (model(input_ids=ids).logits[0, :-1] / 0.7).log_softmax(-1)
            alone = sum(logps[len(prompt) - 1 + i, token].item() for i, token in enumerate(completion))
            assert value == pytest.approx(alone, abs=1e-4)


def test_the_kl_reference_is_the_trainers_or_the_policy_without_its_adapter():
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from conftest import TINY_MODEL
    from extras.evaluation import log_probs, reference_of

    frozen = object()
    with reference_of(frozen, lora=False)(torch.nn.Linear(1, 1)) as reference:
        assert reference is frozen
    assert reference_of(None, lora=False) is None  # GRPO with beta 0 and no LoRA: no KL
    plain = AutoModelForCausalLM.from_pretrained(TINY_MODEL)
    policy = get_peft_model(AutoModelForCausalLM.from_pretrained(TINY_MODEL), LoraConfig(target_modules="all-linear",
                                                                                         init_lora_weights=False))
    prompts, completions = [[5, 6]], [[[7, 8, 9]]]
    with reference_of(None, lora=True)(policy) as reference:
        [[without]] = log_probs(reference, prompts, completions, temperature=1.0)
    assert without == pytest.approx(log_probs(plain, prompts, completions, temperature=1.0)[0][0], abs=1e-5)
    assert log_probs(policy, prompts, completions, temperature=1.0)[0][0] != pytest.approx(without, abs=1e-3)


@pytest.mark.skipif(HAS_PPO_TRAINER, reason="GRPO's trl, 1.16, stops at every eos of the model's generation config")
def test_grpo_evaluation_without_trls_generation_config_stops_where_training_stops(tmp_path):
    """With --use_vllm, trl 1.16 builds no `generation_config`: the held-out evaluation builds one as trl does, and
    stops at every eos id training stops at, on a model that ships two (Qwen2.5-Instruct's `<|im_end|>` and
    `<|endoftext|>`), not only at the tokenizer's."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from extras.evaluation import for_grpo

    twin = model_zoo.build_qwen2_twin(tmp_path / "qwen")
    args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, per_device_train_batch_size=2,
                      num_generations=2, max_completion_length=4, report_to="none", beta=0.0)
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": "3+4="}], "answer": "7"}] * 2)
    trainer = GRPOTrainer(model=str(twin), reward_funcs=get_reward_funcs(["accuracy"], 4), args=args,
                          train_dataset=dataset)
    stops = set(trainer.generation_config.eos_token_id)
    tokenizer = trainer.processing_class
    assert stops == set(tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"]))
    del trainer.generation_config  # as trl 1.16 leaves it with vLLM
    script_args = SimpleNamespace(eval_num_samples=2, eval_max_prompts=2)
    evaluation = for_grpo(trainer, dataset, "split 'test'", [], script_args)
    assert set(evaluation.sampling.config.eos_token_id) == stops
    assert evaluation.sampling.config.max_new_tokens == 4 and evaluation.sampling.config.do_sample


def test_a_change_is_weighed_against_the_error_of_the_prompts_own_changes():
    """Before and after score the same prompts: the error of the change is that of each prompt's own change, which
    leaves out how hard each prompt is. Here the hard prompts stay hard and the easy ones gain, so the paired error
    is a fraction of the two errors taken as independent."""
    from extras.stats import paired_changes, standard_errors

    [accuracy] = get_reward_funcs(["accuracy"], 8)

    def scored(rewards):
        return [{"prompt": f"{i}+0=", "rewards": {"accuracy": r}, "greedy": {"accuracy": r[0]},
                 "completions": [str(i)] * len(r), "kl_to_reference": []} for i, r in enumerate(rewards)]

    before = scored([[0, 0], [0, 0], [1, 0], [1, 1], [1, 0], [0, 1]])
    after = scored([[0, 0], [0, 0], [1, 1], [1, 1], [1, 1], [1, 1]])
    change = paired_changes([accuracy], before, after, 2)["accuracy"]["pass@1"]
    each = [0, 0, 0.5, 0, 0.5, 0.5]  # after - before, prompt by prompt
    assert change["change"] == pytest.approx(sum(each) / 6)
    mean = sum(each) / 6
    assert change["standard_error"] == pytest.approx(math.sqrt(sum((e - mean) ** 2 for e in each) / 5 / 6))
    independent = math.hypot(*(standard_errors([accuracy], s, 2)["accuracy"]["pass@1"] for s in (before, after)))
    assert change["standard_error"] < independent / 2
    assert paired_changes([accuracy], before, after[::-1], 2) == {}  # not the same prompts: no pairing


def test_the_closing_summary_says_whether_a_change_beats_twice_its_error():
    from extras.summary import change_of, worse

    assert change_of({"change": 0.106, "standard_error": 0.046}, 20).endswith("better, by more than twice its error")
    assert change_of({"change": 0.05, "standard_error": 0.046}, 20).endswith("within twice its error: no change shown")
    changes = {"accuracy": {"pass@1": {"change": -0.074, "standard_error": 0.030},
                            "greedy_accuracy": {"change": -0.05, "standard_error": 0.04}}}
    [warning] = worse(changes, "PPO")
    assert warning.startswith("  WARNING: the run made the policy worse on the held-out prompts: accuracy pass@1 "
                              "(-0.074 ± 0.030), each by more") and "--kl_coef" in warning
    assert worse({"accuracy": {"pass@1": {"change": -0.05, "standard_error": 0.04}}}, "GRPO") == []


def test_eval_only_evaluates_a_file_without_a_test_split_whole():
    """Issue 83: given one file, --eval_only evaluated a held-out 10% of it (1 of 2 rows); it trains on none, so it
    evaluates all of it. A training run still holds out a seeded 10%."""
    from datasets import Dataset

    from extras.evaluation import held_out

    rows = Dataset.from_dict({"prompt": [f"{i}+1=" for i in range(20)]})
    args = SimpleNamespace(eval_only=True, dataset_test_split="test", dataset_train_split="train")
    train, test, source = held_out(rows, None, args, seed=42)
    assert len(test) == 20 and source == "split 'train', all of it (--eval_only trains on none)"
    args.eval_only = False
    train, test, source = held_out(rows, None, args, seed=42)
    assert (len(train), len(test)) == (18, 2) and source == "2 prompts held out of 'train' (seed 42)"


def test_a_reward_almost_never_earned_before_training_is_said_before_it_starts():
    """Issue 83: a base model used the rewarded answer tags in 1 of 200 samples; the run trained on almost nothing
    and said nothing. Under 2% of the held-out samples above each training reward's lowest score is said before
    training, with what helps; an --eval_reward_funcs reward does not count, nor does a reward that spreads."""
    from extras.evaluation import rarely_rewarded

    def scored(format_, count, accuracy):
        return [{"rewards": {"format": list(f), "count": list(c), "accuracy": list(a)}}
                for f, c, a in zip(format_, count, accuracy)]

    once = [[0.0] * 8 for _ in range(25)]
    once[3][5] = 0.2  # 1 of 200 used the tags
    never = [[0.0] * 8 for _ in range(25)]
    right = [[1.0] * 8 for _ in range(25)]  # an evaluation-only reward that the model meets
    said = rarely_rewarded(scored(once, never, right), trained=("format", "count"))
    assert said.startswith("WARNING: before training, 1 of 200 held-out samples earned anything from the training "
                           "rewards (format 1, count 0): the policy almost never samples what they pay for")
    assert "a worked example in each prompt" in said and "docs/your-own-run.md" in said
    penalty = [[-1.0] * 8 for _ in range(25)]  # a penalty that never varies pays nothing either
    assert rarely_rewarded(scored(once, penalty, right), trained=("format", "count")).startswith(
        "WARNING: before training, 1 of 200")
    often = [[0.2 * (i % 2) for i in range(8)] for _ in range(25)]  # half the samples
    less_negative = [[-1.0 + 0.5 * (i % 2) for i in range(8)] for _ in range(25)]
    every = [[0.2] * 8 for _ in range(25)]  # paid every time: no spread, which the watchdog says in training
    for trained in (scored(often, never, never), scored(once, less_negative, never), scored(every, never, never)):
        assert rarely_rewarded(trained, ("format", "count")) is None
    assert rarely_rewarded(scored(once, never, right), trained=("accuracy",)) is None
    assert rarely_rewarded(scored(once, never, right), trained=()) is None


def test_the_most_common_answer_given_alone_is_the_baseline_beside_the_table():
    """Issue 83: a GRPO run that answered `<answer>1</answer>` to every prompt scored the share of test rows whose
    answer is 1, and nothing said that one answer alone scores that. The most common sampled answer, given to every
    prompt, is scored by the correctness reward."""
    from datasets import Dataset

    from conftest import TINY_MODEL
    from transformers import AutoTokenizer

    from extras.evaluation import one_answer_alone

    [accuracy] = get_reward_funcs(["accuracy"], max_completion_length=8)
    dataset = Dataset.from_dict({"prompt": [f"how many? {i}" for i in range(4)], "answer": ["1", "1", "3", "1"]})
    per_prompt = [{"completions": ["<answer>1</answer>", "<answer>1</answer>", "<answer>2</answer>"]},
                  {"completions": ["<answer>1</answer>", "no idea", "<answer>3</answer>"]}]
    assert one_answer_alone(accuracy, per_prompt, dataset, AutoTokenizer.from_pretrained(TINY_MODEL)) == (
        "accuracy: the most common answer, '<answer>1</answer>' (3 of 6 samples), given to every prompt alone would "
        "score pass@1 0.750")
