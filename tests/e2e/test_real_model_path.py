"""What the bundled model cannot reveal: real kinds of tokenizer, reward models with their own tokenizer, rewards that
score nothing, TRL's --sft_model_path. Both scripts run end to end on tiny stand-ins of real checkpoints
(tests/model_zoo.py), under a spy that records the token ids of every `generate` call, training's and the held-out
evaluation's, so the test can check that both feed the model the same ids.
"""

import json

import model_zoo
import pytest
from conftest import ADDITION, default_run, read_jsonl, run_script, write_jsonl

# Runs a script with transformers' generate wrapped: every prompt it is given (padding removed) goes to $SPY_FILE,
# marked with whether the call came from the held-out evaluation.
SPY = '''
import json, os, runpy, sys, traceback
import transformers

original = transformers.GenerationMixin.generate

def generate(self, *args, input_ids=None, attention_mask=None, **kwargs):
    from_eval = any(frame.filename.endswith("evaluation.py") for frame in traceback.extract_stack())
    mask = attention_mask.tolist() if attention_mask is not None else [[1] * input_ids.shape[1]] * input_ids.shape[0]
    with open(os.environ["SPY_FILE"], "a") as f:
        for row, keep in zip(input_ids.tolist(), mask):
            f.write(json.dumps({"eval": from_eval, "ids": [t for t, k in zip(row, keep) if k]}) + "\\n")
    return original(self, *args, input_ids=input_ids, attention_mask=attention_mask, **kwargs)

transformers.GenerationMixin.generate = generate
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))  # as `python script.py` would
runpy.run_path(sys.argv[0], run_name="__main__")
'''
NONE_REWARD = "def none(completions, **kwargs):\n    return [None] * len(completions)\n"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("models")
    return {"bos": model_zoo.build_bos_llama(tmp / "bos-llama"), "qwen": model_zoo.build_qwen2(tmp / "qwen2"),
            "qwen-rm": model_zoo.build_qwen2(tmp / "qwen2-rm", reward_model=True)}


def spied_run(tmp_path, script: str, *args):
    (tmp_path / "spy.py").write_text(SPY)
    (tmp_path / "never.py").write_text(NONE_REWARD)
    proc = run_script(script, *args, "--output_dir", tmp_path / "out", cwd=tmp_path,
                      launcher=[str(tmp_path / "spy.py")],
                      env={"SPY_FILE": str(tmp_path / "spy.jsonl"), "PYTHONPATH": str(tmp_path)})
    calls = read_jsonl(tmp_path / "spy.jsonl")
    train = {tuple(c["ids"]) for c in calls if not c["eval"]}
    held_out = {tuple(c["ids"]) for c in calls if c["eval"]}
    assert train and held_out
    return proc, train, held_out


def expected_ids(model_dir, prompts) -> set[tuple]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return {tuple(tokenizer(p).input_ids) if isinstance(p, str) else
            tuple(tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=True,
                                                return_dict=True)["input_ids"])
            for p in prompts}


def prompts_of(split: str) -> list:
    return [row["prompt"] for row in read_jsonl(ADDITION / f"{split}.jsonl")]


def test_grpo_bos_tokenizer_and_a_reward_model_with_its_own_tokenizer(tmp_path, models):
    """Plain-text prompts on a BOS-adding tokenizer: training and evaluation both feed BOS + prompt. A Qwen2 reward
    model (another tokenizer) mixes with reward functions under --reward_weights and is scored in the evaluation."""
    proc, train, held_out = spied_run(
        tmp_path, "grpo_trl_example.py", *default_run("grpo"), "--model_name_or_path", models["bos"],
        "--reward_model_name_or_path", models["qwen-rm"], "--reward_funcs", "accuracy", "never.none",
        "--reward_weights", 0.5, 1.0, 1.0, "--max_steps", 3, "--logging_steps", 1, "--eval_strategy", "no",
        "--eval_num_samples", 2, "--eval_max_prompts", 8)

    assert held_out == expected_ids(models["bos"], prompts_of("test")[:8])
    assert train <= expected_ids(models["bos"], prompts_of("train"))
    bos = expected_ids(models["bos"], ["1+1="]).pop()[0]
    assert all(ids[0] == bos for ids in train | held_out)

    metrics = [m for m in read_jsonl(tmp_path / "out" / "metrics.jsonl") if "reward" in m]
    assert len(metrics) == 3
    for m in metrics:  # the total is the weighted sum; the reward that scores nothing adds nothing
        assert m["rewards/none/mean"] is None
        assert m["reward"] == pytest.approx(0.5 * m["rewards/qwen2-rm/mean"] + m["rewards/accuracy/mean"], abs=1e-5)
    rows = read_jsonl(tmp_path / "out" / "completions.jsonl")
    assert all(isinstance(r["qwen2-rm"], float) for r in rows)
    assert proc.stdout.count("WARNING: reward 'none' returned None for every completion") == 1

    # The evaluation scores with the reward model as GRPOTrainer does (prompt + completion as text, in the reward
    # model's tokenizer, no special tokens added, the logit of its one label), and its means are of those scores
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    rm = AutoModelForSequenceClassification.from_pretrained(models["qwen-rm"]).eval()
    rm_tokenizer = AutoTokenizer.from_pretrained(models["qwen-rm"])
    report = json.loads((tmp_path / "out" / "eval.json").read_text())
    for when in ("before", "after"):
        assert set(report[when]["qwen2-rm"]) == {"mean_reward", "greedy_reward"}
        assert set(report[when]["accuracy"]) >= {"pass@1", "pass@2", "maj@2", "greedy_accuracy"}
        per_prompt = report[f"{when}_per_prompt"]
        assert len(per_prompt) == 8
        texts = [(p["prompt"] + c, r) for p in per_prompt
                 for c, r in [*zip(p["completions"], p["rewards"]["qwen2-rm"]),
                              (p["greedy_completion"], p["greedy"]["qwen2-rm"])]]
        with torch.inference_mode():
            expected = [rm(**rm_tokenizer(text=t, return_tensors="pt", add_special_tokens=False)).logits[0, 0].item()
                        for t, _ in texts]
        assert [r for _, r in texts] == pytest.approx(expected, abs=1e-4)
        sampled = [r for p in per_prompt for r in p["rewards"]["qwen2-rm"]]
        assert report[when]["qwen2-rm"]["mean_reward"] == pytest.approx(sum(sampled) / len(sampled))
        assert report[when]["qwen2-rm"]["greedy_reward"] == pytest.approx(
            sum(p["greedy"]["qwen2-rm"] for p in per_prompt) / 8)


def test_grpo_rejects_a_reward_model_that_is_not_a_classifier(tmp_path, models, fails_early):
    error = fails_early(tmp_path, "--reward_model_name_or_path", models["qwen"])
    assert "is Qwen2ForCausalLM with 1 labels; a reward model is a sequence-classification model" in error


def test_ppo_sft_model_path_and_bos_tokenizer(tmp_path, models):
    """TRL's --sft_model_path names the policy (and its tokenizer here); its BOS reaches training and evaluation."""
    proc, train, held_out = spied_run(
        tmp_path, "ppo_trl_example.py", *default_run("ppo"), "--sft_model_path", models["bos"], "--reward_funcs",
        "accuracy", "never.none",
        "--total_episodes", 32, "--per_device_train_batch_size", 16, "--num_mini_batches", 1,
        "--eval_num_samples", 2, "--eval_max_prompts", 8)
    assert held_out == expected_ids(models["bos"], prompts_of("test")[:8])
    assert train <= expected_ids(models["bos"], prompts_of("train"))

    from transformers import AutoTokenizer

    saved = AutoTokenizer.from_pretrained(tmp_path / "out")  # the policy trained was the SFT checkpoint
    assert saved.bos_token == "<s>" and saved("1+1=").input_ids[0] == saved.bos_token_id
    assert proc.stdout.count("WARNING: reward 'none' returned None for every completion") == 1


@pytest.mark.parametrize("script", ["grpo_trl_example.py", "ppo_trl_example.py"])
def test_chat_template_with_a_default_system_prompt(tmp_path, models, script):
    """Qwen2.5's template adds its own system prompt to a chat without one: training and evaluation both get it."""
    rows = [{"prompt": [{"role": "user", "content": f"What is {a} plus {b}?"}], "answer": str(a + b)}
            for a in range(1, 9) for b in range(1, 5)]
    (tmp_path / "chat").mkdir()
    write_jsonl(tmp_path / "chat" / "train.jsonl", rows)
    write_jsonl(tmp_path / "chat" / "test.jsonl", rows[:6])
    sizes = (["--max_steps", 2, "--logging_steps", 1, "--eval_strategy", "no", "--max_completion_length", 6]
             if script.startswith("grpo") else
             ["--total_episodes", 32, "--per_device_train_batch_size", 16, "--num_mini_batches", 1,
              "--response_length", 6])
    _, train, held_out = spied_run(tmp_path, script, *default_run(script.split("_")[0]), "--model_name_or_path",
                                   models["qwen"], "--dataset_name", tmp_path / "chat", "--eval_num_samples", 2, *sizes)
    assert held_out == expected_ids(models["qwen"], [r["prompt"] for r in rows[:6]])
    assert train <= expected_ids(models["qwen"], [r["prompt"] for r in rows])

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(models["qwen"])
    assert all("You are Qwen, created by Alibaba Cloud." in tokenizer.decode(ids) for ids in train | held_out)
