"""RLHF against a learned reward model, on the bundled tiny model: assets/build_reward_model.py builds one from the
policy's own completions, and both scripts train two steps against it, their held-out evaluation reporting the
learned reward, the true rewards of --eval_reward_funcs, and the KL to the start.

The tiny model writes no words VADER scores, and reads at most 64 characters, so here it answers the addition
prompts as chats, and its reward model is learned from `length`, a true reward its completions differ on; the
SmolLM2 recipes learn one from `sentiment` on assets/sentiment (BENCHMARKS.md, section 18).
"""

import json
from pathlib import Path

import pytest
import yaml
from conftest import ADDITION, REPO, read_jsonl, run_script, write_jsonl
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer



@pytest.fixture(scope="module")
def chats(tmp_path_factory) -> Path:
    """The addition prompts as one-turn chats, with no answer column: a reward model's task."""
    out = tmp_path_factory.mktemp("chats")
    for split in ("train", "test"):
        write_jsonl(out / f"{split}.jsonl", [{"prompt": [{"role": "user", "content": row["prompt"]}]}
                                             for row in read_jsonl(ADDITION / f"{split}.jsonl")])
    return out


@pytest.fixture(scope="module")
def reward_model(tmp_path_factory, chat_model, chats):
    out = tmp_path_factory.mktemp("rlhf") / "reward-model"
    proc = run_script("assets/build_reward_model.py", "--policy", chat_model, "--dataset_name", chats,
                      "--system_prompt", "", "--reward", "length", "--prompts", 12, "--test_prompts", 6, "--samples",
                      3, "--max_new_tokens", 8, "--temperature", 1.0, "--layers", 1, "--min_gap", 0.05, "--pairs", 200,
                      "--handwritten", REPO / "assets" / "no-such.jsonl", "--out", out, cwd=out.parent, fresh=True)
    return out, proc.stdout


@pytest.fixture(scope="module")
def runs(reward_model, chat_model, chats, tmp_path_factory):
    """Two GRPO steps (full fine-tuning, its reference a copy) and two PPO updates (LoRA, its reference the adapter
    disabled) against the tiny reward model, each evaluated on 4 held-out prompts."""
    model, _ = reward_model
    tmp = tmp_path_factory.mktemp("rlhf-runs")
    common = dict(model_name_or_path=str(chat_model), dataset_name=str(chats), eval_reward_funcs=["sentiment",
                  "length"], eval_num_samples=2, eval_max_prompts=4, per_device_eval_batch_size=8, temperature=1.0,
                  report_to="none", save_strategy="no", seed=1)
    configs = {
        "grpo": common | dict(reward_funcs=[], reward_model_name_or_path=[str(model)], beta=0.04, num_generations=2,
                              per_device_train_batch_size=4, max_completion_length=8, max_steps=2, logging_steps=1,
                              learning_rate=0.01),
        "ppo": common | dict(reward_model_path=str(model), total_episodes=16, per_device_train_batch_size=8,
                             num_mini_batches=2, response_length=8, stop_token="eos", learning_rate=0.03,
                             use_peft=True, lora_r=4, lora_alpha=8, lora_target_modules=["q_proj", "v_proj"],
                             num_sample_generations=0),
    }
    out = {}
    for algo, config in configs.items():
        path = tmp / f"{algo}.yaml"
        path.write_text(yaml.safe_dump(config | {"output_dir": str(tmp / algo)}))
        proc = run_script(f"{algo}_trl_example.py", "--config", path, cwd=tmp)
        out[algo] = (tmp / algo, proc.stdout, path)
    return out


def test_the_builder_reports_its_pairs_and_agreement(reward_model):
    out, stdout = reward_model
    build = json.loads((out / "build.json").read_text())
    assert build["train_pairs"] > 0 and build["test_pairs"] > 0
    agreement = build["held_out_agreement"]
    assert agreement["pairs"] == build["test_pairs"]
    assert set(agreement) == {"all", "pairs", "grpo", "ppo", "gap>=0.3", "gap>=0.5"}
    assert all(0.0 <= agreement[k] <= 1.0 for k in ("all", "grpo", "ppo"))
    lines = read_jsonl(out / "samples.jsonl")
    assert [line["split"] for line in lines] == ["train"] * 12 * 3 + ["test"] * 6 * 3  # each completion, its reward
    assert all(line["length"] is not None and line["ids"] for line in lines)
    assert f"held-out agreement with --reward length: {agreement['all']:.3f}" in stdout
    assert build["loss_first"] is not None and build["handwritten_agreement"] is None  # no such file: skipped
    # a path inside the repo is recorded from its root, one outside it as it is: build.json holds no machine's paths
    assert build["settings"]["handwritten"] == "assets/no-such.jsonl" and build["settings"]["out"] == str(out)
    assert "reward model: the policy's first 1 of" in stdout and "LOAD REPORT" not in stdout  # said in one line
    assert "{'loss'" not in stdout  # short log lines, not the trainer's dicts


def test_a_build_can_pair_an_earlier_builds_completions(reward_model, chat_model, chats):
    """--reuse_samples: other training settings on the same completions, without sampling again; here
    --freeze_embeddings, which keeps the policy's token embeddings as they are, where the first build trained them."""
    out, _ = reward_model
    again = out.parent / "again"
    proc = run_script("assets/build_reward_model.py", "--policy", chat_model, "--dataset_name", chats,
                      "--system_prompt", "", "--reward", "length", "--max_new_tokens", 8, "--layers", 1, "--min_gap",
                      0.05, "--pairs", 50, "--handwritten", out.parent / "none.jsonl", "--reuse_samples",
                      out / "samples.jsonl", "--freeze_embeddings", "--out", again, cwd=out.parent)
    assert f"36 train and 18 test completions from {out / 'samples.jsonl'}" in proc.stdout
    assert "sampling 3 completions" not in proc.stdout and "completions in" not in proc.stdout
    assert read_jsonl(again / "samples.jsonl") == read_jsonl(out / "samples.jsonl")
    build = json.loads((again / "build.json").read_text())
    assert build["train_pairs"] == 50 and build["test_pairs"] == json.loads((out / "build.json").read_text())[
        "test_pairs"]  # the same held-out completions, paired alike
    policy = AutoModelForCausalLM.from_pretrained(chat_model).get_input_embeddings().weight
    frozen, trained = (AutoModelForSequenceClassification.from_pretrained(path).get_input_embeddings().weight[
        :len(policy)] for path in (again, out))  # the policy's rows (a build adds a pad token's)
    assert torch.equal(frozen, policy) and not torch.equal(trained, policy)
    other = run_script("assets/build_reward_model.py", "--reward", "sentiment", "--reuse_samples",
                       out / "samples.jsonl", "--out", out.parent / "other", cwd=out.parent, check=False)
    assert other.returncode != 0
    assert "has no `sentiment` scores: it was sampled with another --reward" in other.stderr
    missing = run_script("assets/build_reward_model.py", "--reuse_samples", out / "nosuch.jsonl", cwd=out.parent,
                         check=False)
    assert missing.returncode != 0 and "nosuch.jsonl: no such file" in missing.stderr


def test_the_reward_model_is_the_policys_first_layers_under_one_output(reward_model, chat_model):
    out, _ = reward_model
    config = AutoConfig.from_pretrained(out)
    assert config.num_hidden_layers == 1 and config.num_labels == 1
    assert config.architectures == ["LlamaForSequenceClassification"]
    tokenizer = AutoTokenizer.from_pretrained(out)
    policy_tokenizer = AutoTokenizer.from_pretrained(chat_model)
    assert tokenizer.get_vocab().items() >= policy_tokenizer.get_vocab().items()  # PPO feeds it the policy's ids
    # it pads with a token of its own, no stop token, so that every reader finds a completion's true last token
    assert tokenizer.pad_token == "<|pad|>" and tokenizer.pad_token_id == config.pad_token_id


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_both_scripts_train_against_it_and_report_both_rewards_and_the_kl(runs, algo):
    out, stdout, _ = runs[algo]
    report = json.loads((out / "eval.json").read_text())
    learned = "reward-model" if algo == "grpo" else "reward_model"  # GRPOTrainer names a model by its folder
    for when in ("before", "after"):
        assert set(report[when]) == {learned, "sentiment", "length", "kl"}
        assert set(report[when][learned]) == {"mean_reward", "greedy_reward"}
    # the start against itself: no KL; after training the policy has moved from its reference
    assert report["before"]["kl"]["to_reference"] == pytest.approx(0.0, abs=1e-4)
    assert abs(report["after"]["kl"]["to_reference"]) > 1e-3
    assert all(len(p["kl_to_reference"]) == 2 for p in report["after_per_prompt"])
    for row in (learned, "sentiment", "length", "kl"):
        assert f"\n{row:<14}" in stdout  # the table's rows
    # training read the reward model alone: its reward is what was logged
    logged = [r for r in read_jsonl(out / "metrics.jsonl") if "reward" in r]
    assert len(logged) == 2
    if algo == "grpo":
        assert all(set(k for k in r if k.startswith("rewards/")) == {f"rewards/{learned}/mean",
                                                                     f"rewards/{learned}/std"} for r in logged)


def test_ppo_eval_only_reads_a_reward_model_as_training_does(runs, reward_model, tmp_path):
    """A reward model saved with another pad (a stop token, as many are) is read at PPO's pad in --eval_only as in
    training: the start policy's evaluation scores as the training run's own evaluation before training did."""
    import shutil

    model, _ = reward_model
    other = tmp_path / "reward-model-padding-with-eos"
    shutil.copytree(model, other)
    config = json.loads((other / "config.json").read_text())
    eos = AutoTokenizer.from_pretrained(other).eos_token_id
    (other / "config.json").write_text(json.dumps({**config, "pad_token_id": eos}))
    trained, _, recipe = runs["ppo"]
    run_script("ppo_trl_example.py", "--config", recipe, "--reward_model_path", other, "--eval_only",
               "--output_dir", tmp_path / "evaluated", cwd=tmp_path)
    only, training = (json.loads((out / "eval.json").read_text()) for out in (tmp_path / "evaluated", trained))
    assert only["model"]["reward_model"] == pytest.approx(training["before"]["reward_model"])
