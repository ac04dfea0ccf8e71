"""ppo_trl_example.py: the reward adapter on its own, and end-to-end runs as a subprocess with tiny settings."""

import json
import re
import shutil

import pytest
import torch
import yaml
from conftest import (ADDITION, MULTIPROCESS, RANK_PROBE, REPO, SHUTDOWN_PROBE, TINY_MODEL, accelerate_ddp,
                      assert_adapter_trained, assert_held_out_summary, assert_no_preventable_warnings,
                      assert_run_summary, assert_summary_means, assert_trained, ddp_flags, default_run, read_jsonl,
                      run_script, spied, spied_calls, write_jsonl)

from rewards import accuracy_reward, get_reward_funcs

SCRIPT = "ppo_trl_example.py"
TINY = ["--total_episodes", 64, "--per_device_train_batch_size", 16, "--num_mini_batches", 1]  # 4 PPO updates

# A reward module that records what it was called with, next to the run (cwd).
SPY_REWARDS = """
import json

def spy(completions, prompts, completion_ids, **kwargs):
    with open("spy.jsonl", "a") as f:
        for i, completion in enumerate(completions):
            f.write(json.dumps({"prompt": prompts[i], "completion": completion, "completion_ids": completion_ids[i],
                                **{k: v[i] for k, v in kwargs.items()}}) + "\\n")
    return [float(len(c)) for c in completions]
"""


def answer_of(prompt: str) -> str:
    a, b = prompt.rstrip("=").split("+")
    return str(int(a) + int(b))


def tiny_tokenizer():
    """The bundled tokenizer as the script prepares it: left padding and a pad token of its own."""
    from transformers import AutoTokenizer

    from ppo_trl_example import set_ppo_pad_token, stop_token_ids

    tokenizer = AutoTokenizer.from_pretrained(TINY_MODEL, padding_side="left")
    set_ppo_pad_token(tokenizer, stop_token_ids(tokenizer, str(TINY_MODEL)))
    return tokenizer


# (special tokens beside the eos, the unknown token, the tokenizer's own pad, the chat template) -> the pad PPO gets,
# or None for a new one
PAD_CASES = {
    "pythia": (["<|padding|>", "<unk>"], "<unk>", None, "", "<|padding|>"),  # named for padding beats unknown
    "smollm2": (["<|endoftext|>", "<|im_start|>", "<repo_name>"], "<|endoftext|>", "<|im_end|>", "<|im_start|>",
                "<|endoftext|>"),
    "llama3": (["<|begin_of_text|>", "<|reserved_special_token_0|>", "<|start_header_id|>"], None, None,
               "<|start_header_id|>", "<|reserved_special_token_0|>"),  # the bos and template tokens never pad
    "gpt2": ([], None, None, "", None),
    "qwen2.5": (["<|endoftext|>", "<|im_start|>"], None, "<|endoftext|>", "<|im_start|>", "<|endoftext|>"),  # kept
}


@pytest.mark.ppo_trainer
@pytest.mark.parametrize("case", PAD_CASES)
def test_ppo_pad_token_comes_from_the_vocabulary(tmp_path, case):
    """PPO's pad is never a stop token; a vocabulary token serves when one fits (no new embedding row, so a LoRA
    adapter stays adapter-sized), and only a vocabulary without one gets a new `<|pad|>`."""
    from transformers import AutoTokenizer

    from ppo_trl_example import set_ppo_pad_token, stop_token_ids

    special, unk, pad, template, expected = PAD_CASES[case]
    tokenizer = AutoTokenizer.from_pretrained(TINY_MODEL)  # eos <|endoftext|>, unk <unk>: both replaced below
    tokenizer.add_special_tokens({"eos_token": "<|im_end|>", "additional_special_tokens": special})
    tokenizer.unk_token, tokenizer.pad_token = unk, pad
    tokenizer.bos_token = "<|begin_of_text|>" if "<|begin_of_text|>" in special else None
    tokenizer.chat_template = template + "{{ messages }}"
    size = len(tokenizer)
    set_ppo_pad_token(tokenizer, stop_token_ids(tokenizer, str(tmp_path)))  # no generation_config.json there
    assert tokenizer.pad_token_id not in (tokenizer.eos_token_id, tokenizer.bos_token_id)
    if expected is None:
        assert tokenizer.pad_token == "<|pad|>" and len(tokenizer) == size + 1
    else:
        assert tokenizer.pad_token == expected and len(tokenizer) == size


@pytest.mark.ppo_trainer
def test_ppo_pad_token_is_none_of_the_models_stop_tokens(tmp_path):
    """A model whose generation config stops on several tokens (Llama 3, Qwen3): none of them pads."""
    from transformers import AutoTokenizer, GenerationConfig

    from ppo_trl_example import set_ppo_pad_token, stop_token_ids

    tokenizer = AutoTokenizer.from_pretrained(TINY_MODEL)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|eot_id|>", "<|reserved_special_token_1|>"]})
    tokenizer.pad_token = "<|eot_id|>"
    eos_ids = [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|eot_id|>")]
    GenerationConfig(eos_token_id=eos_ids).save_pretrained(tmp_path)
    assert stop_token_ids(tokenizer, str(tmp_path)) == set(eos_ids)
    set_ppo_pad_token(tokenizer, stop_token_ids(tokenizer, str(tmp_path)))
    assert tokenizer.pad_token == "<unk>"


def check_train_logs(out, n_updates: int, names: list[str]) -> list[dict]:
    """metrics.jsonl has one line per PPO update, with each reward's mean."""
    metrics = read_jsonl(out / "metrics.jsonl")
    assert [m["step"] for m in metrics] == list(range(1, n_updates + 1))
    for m in metrics:
        assert all(f"rewards/{name}/mean" in m for name in names)
    return metrics


# ---------------------------------------------------------------- the adapter on its own


@pytest.mark.ppo_trainer
def test_reward_adapter_gives_known_rewards_through_trl_get_reward():
    """Known completions give known weighted rewards, read out by TRL's own get_reward() as PPOTrainer reads them: a
    reward may be async (run to its end), and a completion that never stopped loses --missing_eos_penalty."""
    from datasets import Dataset
    from trl.experimental.utils import get_reward

    from ppo_trl_example import RewardAdapter, rows_by_prompt

    tokenizer = tiny_tokenizer()
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    rows = [{"prompt": "3+4=", "answer": "Add them. #### 7"}, {"prompt": "12+30=", "answer": "#### 42"}]
    dataset = Dataset.from_list(rows).map(lambda row: {"input_ids": tokenizer(row["prompt"]).input_ids})

    async def one_char(completions, **kwargs):  # None: cannot score. Async, as GRPOTrainer takes them too
        return [1.0 if len(c) == 1 else None for c in completions]

    width = 8  # prompts left-padded to this width, as PPOTrainer's collator does to a batch's longest
    funcs = [*get_reward_funcs(["accuracy"], max_completion_length=4), one_char]
    adapter = RewardAdapter(tokenizer, rows_by_prompt([dataset], funcs, tokenizer), funcs, reward_weights=[2.0, 0.5],
                            stops={eos}, missing_eos_penalty=1.0)
    adapter.prompt_width = width  # as PromptWidths sets it when PPOTrainer draws the batch

    def query_response(prompt: str, completion_ids: list[int], length: int = 5) -> list[int]:
        ids = tokenizer(prompt).input_ids
        return [pad] * (width - len(ids)) + ids + completion_ids + [pad] * (length - len(completion_ids))

    def encode(text: str) -> list[int]:
        return tokenizer(text).input_ids

    batch = torch.tensor([
        query_response("3+4=", encode("7") + [eos]),     # right:  2 * 1 + 0.5 * 1
        query_response("3+4=", encode("8") + [eos]),     # wrong:  2 * 0 + 0.5 * 1
        query_response("12+30=", encode("42") + [eos]),  # right, `one_char` None counts 0:  2 * 1
        query_response("12+30=", encode("4")),           # cut at the length limit, no eos:  2 * 0 + 0.5 * 1 - 1
        query_response("12+30=", [eos]),                 # empty:  2 * 0, `one_char` None
    ])
    _, scores, _ = get_reward(adapter, batch, pad, width)
    assert scores.tolist() == [2.5, 0.5, 2.0, -0.5, 0.0]

    records, adapter.records = adapter.records, []
    assert [(r["prompt"], r["completion"], r["accuracy"], r["one_char"]) for r in records] == [
        ("3+4=", "7", 1.0, 1.0), ("3+4=", "8", 0.0, 1.0), ("12+30=", "42", 1.0, None), ("12+30=", "4", 0.0, 1.0),
        ("12+30=", "", 0.0, None),
    ]


@pytest.mark.ppo_trainer
def test_one_prompt_may_repeat_with_columns_no_reward_reads():
    """Rows with one prompt are one row to the rewards: they may differ in a column no reward reads (an `id`), not in
    one a reward reads (`answer`); a reward that declares no columns reads them all."""
    from datasets import Dataset

    from ppo_trl_example import rows_by_prompt

    tokenizer = tiny_tokenizer()

    def rows(*answers_and_ids):
        dataset = Dataset.from_list([{"prompt": "3+4=", "answer": a, "id": i} for a, i in answers_and_ids])
        return [dataset.map(lambda row: {"input_ids": tokenizer(row["prompt"]).input_ids})]

    accuracy = get_reward_funcs(["accuracy"], max_completion_length=4)
    assert len(rows_by_prompt(rows(("7", 1), ("7", 2)), accuracy, tokenizer)) == 1
    with pytest.raises(SystemExit, match=r"prompt '3\+4=' and different \['answer'\], which the rewards read"):
        rows_by_prompt(rows(("7", 1), ("8", 1)), accuracy, tokenizer)

    async def reads_anything(completions, **kwargs):  # no declared columns: every column counts
        return [0.0] * len(completions)

    with pytest.raises(SystemExit, match=r"different \['id'\]"):
        rows_by_prompt(rows(("7", 1), ("7", 2)), [reads_anything], tokenizer)


def parse(*flags):
    """The script's own parsing of `flags`, in-process, as its __main__ parses them."""
    import ppo_trl_example as ppo

    return ppo.parse_args([str(flag) for flag in flags])


@pytest.mark.ppo_trainer
def test_a_recipe_replaces_the_default_runs_settings(tmp_path):
    """A named recipe's run takes nothing from the default run's: what the recipe leaves unset is TRL's default (the
    tiny model's 4-token responses and learning rate cannot leak into a real model's run)."""
    from dataclasses import fields

    import ppo_trl_example as ppo

    recipe = REPO / "recipes" / "Qwen2.5-0.5B-Instruct" / "ppo" / "config_gsm8k.yaml"
    script_args, training_args, model_args = parse("--config", recipe)
    assert model_args.model_name_or_path == "Qwen/Qwen2.5-0.5B-Instruct" and script_args.dataset_name == "openai/gsm8k"
    assert script_args.reward_funcs == ["accuracy", "format"] and training_args.reward_model_path is None
    (tmp_path / "mine.yaml").write_text("model_name_or_path: my-org/my-model\ndataset_name: my-org/my-data\n")
    (tmp_path / "nothing.yaml").write_text("model_name_or_path: my-org/my-model\nseed: 42\n")  # TRL's defaults
    mine, trls = ({f.name: getattr(args, f.name) for args in parse("--config", tmp_path / recipe) for f in fields(args)}
                  for recipe in ("mine.yaml", "nothing.yaml"))
    left = set(yaml.safe_load(ppo.DEFAULT_RECIPE.read_text())) - {"model_name_or_path", "dataset_name"}
    assert left and {key: mine[key] for key in left} == {key: trls[key] for key in left}


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--max_steps", 5], "--max_steps is not supported here: PPOTrainer ignores it: set --total_episodes"),
        (["--num_mini_batches", 3], "(64) must split into --num_mini_batches (3) equal minibatches"),
        (["--reward_weights", 1.0, 0.5], "2 --reward_weights for 1 rewards (accuracy): give one weight per reward"),
        (["--reward_funcs", "accuracy", "length", "--reward_weights", 0.1], "1 --reward_weights for 2 rewards"),
        (["--dtype", "bfloat16", "--use_peft"], "--dtype bfloat16 would train the value model ("),
        (["--reward_funcs", "acuracy"], "unknown reward 'acuracy'; choose one of: accuracy"),
        (["--value_model_path", "./no-such-model"], "--value_model_path ./no-such-model: no such"),
        (["--eval_strategy", "epoch"], "--eval_strategy epoch evaluates nothing under trl 1.12's PPOTrainer"),
        (["--eval_strategy", "steps", "--eval_num_samples", 0], "--eval_strategy steps evaluates nothing under"),
    ],
)
@pytest.mark.ppo_trainer
def test_bad_settings_stop_before_any_model_loads(flags, message, monkeypatch):
    import transformers

    import ppo_trl_example as ppo

    def no_loading(*args, **kwargs):
        raise AssertionError("a model was loaded before the error")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_loading)
    with pytest.raises(SystemExit, match=re.escape(message)):  # before any model loads
        ppo.main(*parse(*flags))


@pytest.mark.ppo_trainer
def test_fsdp_is_refused_by_name(monkeypatch):
    """On GPUs, where FSDP would build (on a CPU extras/checks.py refuses it for both scripts): trl 1.12's PPOTrainer
    has no FSDP code, so PPO stops with the reason and the config that shards it instead."""
    from extras import ppo as extras_ppo

    script_args, training_args, _ = parse()
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")  # what `accelerate launch --config_file fsdp.yaml` sets
    with pytest.raises(SystemExit, match=r"PPO does not run under FSDP: .* accelerate_configs/zero3\.yaml"):
        extras_ppo.check_options(script_args, training_args)


@pytest.mark.ppo_trainer
def test_data_and_reward_model_mismatches_stop_before_any_model_loads(tmp_path, monkeypatch, addition_rows):
    """Conversations for a tokenizer without a chat template, and a reward model that tokenizes differently from the
    policy (PPOTrainer hands it the policy's ids), each stop with one sentence before a model loads."""
    import model_zoo
    import transformers

    import ppo_trl_example as ppo

    def no_loading(*args, **kwargs):
        raise AssertionError("a model was loaded before the error")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_loading)
    monkeypatch.setattr(transformers.AutoModelForSequenceClassification, "from_pretrained", no_loading)

    chat = write_jsonl(tmp_path / "chat.jsonl", [{"prompt": [{"role": "user", "content": r["prompt"]}],
                                                  "answer": r["answer"]} for r in addition_rows])
    with pytest.raises(SystemExit, match="error: the prompts are conversations.*tiny-llama-addition.*no chat template"):
        ppo.main(*parse("--dataset_name", chat))

    qwen_rm = model_zoo.build_qwen2(tmp_path / "qwen-rm", reward_model=True)  # a byte-level BPE, not the policy's
    message = f"error: the reward model {re.escape(str(qwen_rm))} has a different tokenizer"
    with pytest.raises(SystemExit, match=message):
        ppo.main(*parse("--reward_model_path", qwen_rm))


# ---------------------------------------------------------------- end to end


def test_default_task_outputs(tmp_path):
    out = tmp_path / "out"
    # TRL's sample tables after updates 1 and 3 score test prompts too; those scores must not leak into the logs
    # a fresh process, as every other run in one process is not (tests/warm_python.py): what it prints is all its own
    proc = run_script(SCRIPT, "--output_dir", out, *TINY, "--num_sample_generations", 2, cwd=tmp_path, fresh=True)
    assert "model response" in proc.stdout
    assert_no_preventable_warnings(proc.stdout + proc.stderr)
    assert "step 4/4: reward " in proc.stdout.replace("\r", "\n")  # each log in one short line
    assert "value model: " in proc.stdout and "with a new value head (score.weight)" in proc.stdout
    assert not (out / "README.md").exists()  # no hub model card unless --push_to_hub

    metrics = check_train_logs(out, 4, ["accuracy"])
    assert all(m["reward"] == pytest.approx(m["rewards/accuracy/mean"]) for m in metrics)  # one reward, weight 1
    assert all("objective/kl" in m for m in metrics)  # training_curves.png's KL panel (tests/unit/test_plots.py)

    # completions.jsonl: every completion of every update, with its reward
    rows = read_jsonl(out / "completions.jsonl")
    assert len(rows) == 4 * 16
    train_prompts = {r["prompt"] for r in read_jsonl(ADDITION / "train.jsonl")}
    for row in rows:
        assert row["prompt"] in train_prompts
        assert row["accuracy"] == accuracy_reward([row["completion"]], answer=[answer_of(row["prompt"])])[0]
    for m in metrics:  # the logged reward is the mean over that update's completions
        step_rows = [r for r in rows if r["step"] == m["step"]]
        assert m["reward"] == pytest.approx(sum(r["accuracy"] for r in step_rows) / len(step_rows))

    assert_run_summary(out, proc.stdout, steps=4, bf16_on_gpu=False)  # PPO's precision is --dtype's
    # 4 PPO epochs: after the first pass over a batch the policy has moved, so its ratio to the rollout policy is not 1
    assert all(m["policy/approxkl_avg"] > 1e-6 for m in metrics)

    # the saved policy is a plain causal LM (no policy/value wrapper), trained, with a pad token that is not eos
    assert_trained(out)
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with safe_open(out / "model.safetensors", "pt") as f:
        assert not any(k.startswith(("policy.", "value_model.", "score")) for k in f.keys())
    model = AutoModelForCausalLM.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.pad_token is not None and tokenizer.pad_token_id != tokenizer.eos_token_id
    assert model.get_input_embeddings().num_embeddings == len(tokenizer)
    ids = tokenizer("2+3=", return_tensors="pt").input_ids
    assert model.generate(ids, max_new_tokens=2, do_sample=False).shape[1] > ids.shape[1]


def test_gsm8k_layout_columns_reach_the_rewards(tmp_path, addition_rows):
    """question/answer columns with '#### N' answers: each completion's reward gets its own row's `answer`."""
    data = write_jsonl(tmp_path / "gsm8k.jsonl",
                       [{"question": r["prompt"], "answer": f"Add the digits.\n#### {r['answer']}"}
                        for r in addition_rows])
    (tmp_path / "spy_rewards.py").write_text(SPY_REWARDS)
    out = tmp_path / "out"
    run_script(SCRIPT, "--dataset_name", data, "--dataset_prompt_column", "question",
               "--reward_funcs", "accuracy", "spy_rewards.spy", "--reward_weights", 2.0, 0.5,
               "--output_dir", out, *TINY, "--eval_num_samples", 0, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})

    calls = read_jsonl(tmp_path / "spy.jsonl")
    assert len(calls) == 4 * 16
    for row in calls:
        assert row["answer"] == f"Add the digits.\n#### {answer_of(row['prompt'])}"  # this prompt's own answer
        assert isinstance(row["completion"], str) and row["completion_ids"]

    metrics = check_train_logs(out, 4, ["accuracy", "spy"])
    rows = read_jsonl(out / "completions.jsonl")
    assert sum(r["accuracy"] for r in rows) > 0  # the starting policy is right ~2/3 of the time
    for row in rows:
        assert row["accuracy"] == accuracy_reward([row["completion"]], answer=[answer_of(row["prompt"])])[0]
        assert row["spy"] == len(row["completion"])
    # the weights are applied: PPO's score is 2 x accuracy + 0.5 x spy, per completion and so per update
    for m in metrics:
        assert m["objective/scores"] == pytest.approx(2 * m["rewards/accuracy/mean"] + 0.5 * m["rewards/spy/mean"])
        step_rows = [r for r in rows if r["step"] == m["step"]]
        assert m["reward"] == pytest.approx(sum(2 * r["accuracy"] + 0.5 * r["spy"] for r in step_rows) / 16)
    assert len({r["spy"] for r in rows}) > 1  # the rewards vary, so a swapped weight would show


@pytest.mark.ppo_trainer
def test_reward_model(tmp_path):
    """A sequence-classification reward model, built here with random weights, scores instead of the functions."""
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer
    from trl.experimental.utils import get_reward

    torch.manual_seed(0)
    rm_dir = tmp_path / "reward-model"
    reward_model = AutoModelForSequenceClassification.from_config(AutoConfig.from_pretrained(TINY_MODEL, num_labels=1))
    reward_model.save_pretrained(rm_dir)
    AutoTokenizer.from_pretrained(TINY_MODEL).save_pretrained(rm_dir)

    out = tmp_path / "out"
    proc = run_script(SCRIPT, "--reward_model_path", rm_dir, "--output_dir", out, *TINY, "--eval_num_samples", 2,
                      "--eval_max_prompts", 4, cwd=tmp_path)
    assert f"scoring with the reward model {rm_dir}" in proc.stdout
    metrics = check_train_logs(out, 4, ["reward_model"])
    assert all(m["reward"] == pytest.approx(m["rewards/reward_model/mean"]) for m in metrics)
    assert "rewards/accuracy/mean" not in metrics[0]

    # Each logged score is the reward model's output on that prompt + completion (+ eos, when it stopped).
    tokenizer = tiny_tokenizer()
    rows = read_jsonl(out / "completions.jsonl")
    matches = 0
    for row in rows:
        prompt_ids = tokenizer(row["prompt"]).input_ids
        ids = prompt_ids + tokenizer(row["completion"]).input_ids
        scores = [get_reward(reward_model, torch.tensor([c]), tokenizer.pad_token_id, len(prompt_ids))[1].item()
                  for c in (ids + [tokenizer.eos_token_id], ids)]
        matches += any(abs(s - row["reward_model"]) < 1e-4 for s in scores)
    assert matches >= 0.9 * len(rows)  # a decoded completion may have lost a special token it sampled

    # The held-out evaluation scores with the reward model too: its mean is the mean of the per-prompt scores in
    # eval.json, and each of those is the reward model's output on that prompt + completion
    report = json.loads((out / "eval.json").read_text())
    for when in ("before", "after"):
        per_prompt = report[f"{when}_per_prompt"]
        scores = [r for p in per_prompt for r in p["rewards"]["reward_model"]]
        assert len(scores) == 8 and len(set(scores)) > 1
        assert report[when]["reward_model"]["mean_reward"] == pytest.approx(sum(scores) / 8)
        assert report[when]["reward_model"]["greedy_reward"] == pytest.approx(
            sum(p["greedy"]["reward_model"] for p in per_prompt) / 4)
        matches = 0
        for p in per_prompt:
            prompt_ids = tokenizer(p["prompt"]).input_ids
            for completion, score in zip(p["completions"], p["rewards"]["reward_model"]):
                ids = prompt_ids + tokenizer(completion).input_ids
                matches += any(abs(get_reward(reward_model, torch.tensor([c]), tokenizer.pad_token_id,
                                              len(prompt_ids))[1].item() - score) < 1e-4
                               for c in (ids + [tokenizer.eos_token_id], ids))
        assert matches >= 0.75 * len(scores)


def test_reward_model_path_must_be_a_classifier(tmp_path, fails_early):
    error = fails_early(tmp_path, "--reward_model_path", TINY_MODEL, script=SCRIPT)
    assert "is LlamaForCausalLM with" in error and "a reward model is a sequence-classification model" in error


def test_lora_saves_an_adapter(tmp_path):
    out = tmp_path / "out"
    run_script(SCRIPT, "--use_peft", "--lora_r", 4, "--lora_alpha", 8, "--lora_target_modules", "q_proj", "v_proj",
               "--output_dir", out, *TINY, cwd=tmp_path)
    check_train_logs(out, 4, ["accuracy"])
    assert (out / "adapter_config.json").exists() and (out / "adapter_model.safetensors").exists()
    assert not (out / "model.safetensors").exists()  # only the adapter, not a second copy of the model
    adapter = json.loads((out / "adapter_config.json").read_text())
    assert adapter["r"] == 4 and set(adapter["target_modules"]) == {"q_proj", "v_proj"}
    assert_adapter_trained(out)

    from peft import AutoPeftModelForCausalLM
    from transformers import AutoTokenizer

    model = AutoPeftModelForCausalLM.from_pretrained(out)
    ids = AutoTokenizer.from_pretrained(out)("2+3=", return_tensors="pt").input_ids
    assert model.generate(input_ids=ids, max_new_tokens=2, do_sample=False).shape[1] > ids.shape[1]


def test_conversational_prompts(tmp_path, chat_model, addition_rows):
    """Message-list prompts go through the chat template; rewards get messages, as in GRPO."""
    data = write_jsonl(tmp_path / "chat.jsonl",
                       [{"prompt": [{"role": "user", "content": r["prompt"]}], "answer": r["answer"]}
                        for r in addition_rows])
    (tmp_path / "spy_rewards.py").write_text(SPY_REWARDS)
    out = tmp_path / "out"
    run_script(SCRIPT, *default_run("ppo"), "--model_name_or_path", chat_model, "--dataset_name", data,
               "--system_prompt", "Add.", "--reward_funcs", "accuracy", "spy_rewards.spy", "--output_dir", out, *TINY,
               cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})

    for row in read_jsonl(tmp_path / "spy.jsonl"):
        system, user = row["prompt"]
        assert system == {"role": "system", "content": "Add."} and user["role"] == "user"
        assert row["answer"] == answer_of(user["content"])
        assert row["completion"][0]["role"] == "assistant"
    rows = read_jsonl(out / "completions.jsonl")
    assert rows and all(r["prompt"].startswith("system: Add.\nuser: ") and r["prompt"].endswith("assistant: ")
                        for r in rows)  # the prompt as the model saw it, chat template applied
    summary = json.loads((out / "summary.json").read_text())
    assert summary["script_args"]["system_prompt"] == "Add." and summary["global_step"] == 4


@MULTIPROCESS
def test_two_processes(tmp_path):
    """`accelerate launch --config_file accelerate_configs/ddp.yaml` with 2 CPU processes (DDP over gloo): each process
    gets its own prompts, rewards are averaged over both, both processes' completions are recorded, a plain policy is
    saved, and the eval is split between them."""
    (tmp_path / "probe.py").write_text(RANK_PROBE)
    (tmp_path / "sitecustomize.py").write_text(SHUTDOWN_PROBE)
    out = tmp_path / "out"
    run_script(SCRIPT, "--output_dir", out, "--total_episodes", 64, "--per_device_train_batch_size", 16,
               "--num_mini_batches", 1, "--save_strategy", "steps", "--save_steps", 1, "--eval_num_samples", 2,
               "--eval_max_prompts", 7, "--reward_funcs", "accuracy", "probe.rank_probe", "--reward_weights", 1.0, 0.0,
               *ddp_flags(2), cwd=tmp_path, launcher=accelerate_ddp(2),
               env={"PYTHONPATH": str(tmp_path), "PROBE_DIR": str(tmp_path)})
    metrics = check_train_logs(out, 2, ["accuracy"])  # 64 episodes / (16 x 2 processes) = 2 updates
    rows = read_jsonl(out / "completions.jsonl")
    assert [sum(r["step"] == step for r in rows) for step in (1, 2)] == [32, 32]  # 16 from each process
    # the ranks scored different prompts at each update: the data is split between them
    # (calls of 16 prompts are training's; the held-out evaluation's calls are shorter)
    rank0, rank1 = ([c for c in read_jsonl(tmp_path / f"rank{r}.jsonl") if len(c) == 16] for r in (0, 1))
    assert len(rank0) == len(rank1) == 2 and all(not set(p0) & set(p1) for p0, p1 in zip(rank0, rank1))
    for m in metrics:  # `reward` is TRL's mean over both processes; the per-reward mean and the rows must agree
        assert m["reward"] == pytest.approx(m["rewards/accuracy/mean"])
        assert m["reward"] == pytest.approx(sum(r["accuracy"] for r in rows if r["step"] == m["step"]) / 32)
    distributed = json.loads((out / "summary.json").read_text())["distributed"]
    assert distributed["mode"] == "DDP" and distributed["processes"] == 2
    policy_and_value = 2 * 424_800 + 96  # the bundled model twice (its head tied), and the value model's score head
    assert distributed["held_parameters"] == [policy_and_value] * 2  # DDP: each process holds both whole
    # the held-out evaluation: 7 prompts, 4 on process 0 and 3 on process 1 (padded with a repeat to 4, so both run
    # as many forward passes), each prompt scored once in eval.json
    report = json.loads((out / "eval.json").read_text())
    assert report["num_prompts"] == 7
    for when in ("before", "after"):
        assert [p["process"] for p in report[f"{when}_per_prompt"]] == [0, 0, 0, 0, 1, 1, 1]
    eval0, eval1 = ({p for c in read_jsonl(tmp_path / f"rank{r}.jsonl") if len(c) != 16 for p in c} for r in (0, 1))
    assert len(eval0) == 4 and len(eval1) == 3 and not eval0 & eval1  # its own slice: 4 + 3 distinct prompts

    from safetensors import safe_open

    for weights in (out / "model.safetensors", out / "checkpoint-1" / "model.safetensors"):
        with safe_open(weights, "pt") as f:  # the policy alone, not the DDP-wrapped policy + value model
            assert not any(k.startswith(("module.", "policy.", "value_model.")) for k in f.keys())
    # each process freed its DDP model itself, before Python's shutdown
    assert [(tmp_path / f"ddp-alive-rank{r}").read_text() for r in (0, 1)] == ["0", "0"]


def test_yaml_config_with_value_model_and_ppo_settings(tmp_path):
    """A --config YAML (a flag beats it) with --value_model_path, --num_ppo_epochs, --response_length,
    --missing_eos_penalty, --kl_coef and --activation_checkpointing, each checked in what the run did."""
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    value_dir = tmp_path / "value-model"
    value_model = AutoModelForSequenceClassification.from_config(AutoConfig.from_pretrained(TINY_MODEL, num_labels=1))
    value_model.save_pretrained(value_dir)
    AutoTokenizer.from_pretrained(TINY_MODEL).save_pretrained(value_dir)
    out = tmp_path / "out"
    config = tmp_path / "ppo.yaml"
    config.write_text(f"output_dir: {out}\ntotal_episodes: 64\nper_device_train_batch_size: 16\nnum_mini_batches: 1\n"
                      f"model_name_or_path: {TINY_MODEL}\ndataset_name: {ADDITION}\nreport_to: none\n"
                      "num_sample_generations: 0\nstop_token: eos\n"
                      f"value_model_path: {value_dir}\nnum_ppo_epochs: 1\nresponse_length: 2\n"
                      "missing_eos_penalty: 1.0\nkl_coef: 0.5\nactivation_checkpointing: true\n"
                      "eval_num_samples: 0\n"  # the evaluation's generation would switch checkpointing too
                      "bf16: false\n")  # PPO's default, pinned: bf16 rounds the rollout's pass and the update's apart
    launcher, env, spy = spied(tmp_path)
    proc = run_script(SCRIPT, "--config", config, "--kl_coef", 0.2, cwd=tmp_path, launcher=launcher, env=env)
    assert_no_preventable_warnings(proc.stdout + proc.stderr)  # checkpointing on, one minibatch of one epoch

    assert spied_calls(spy, "AutoModelForSequenceClassification.from_pretrained") == [str(value_dir)]
    # trl 1.12's PPOTrainer ignores the flag; the script turns it on for the two models that train (and TRL turns
    # it back on for the policy after each update's generation, which it runs without)
    policy, value, *after_generation = spied_calls(spy, "activation_checkpointing_enable")
    assert (policy, value) == ("LlamaForCausalLM", "LlamaForSequenceClassification")
    assert after_generation == ["LlamaForCausalLM"] * 4
    metrics = check_train_logs(out, 4, ["accuracy"])
    rows = read_jsonl(out / "completions.jsonl")
    # --response_length 2: at most 2 tokens (one character each here); the tiny model's two-digit sums are cut short
    assert all(len(r["completion"]) <= 2 for r in rows) and any(len(r["completion"]) == 2 for r in rows)
    for m in metrics:
        # --missing_eos_penalty 1.0: a completion that used its 2 tokens has no eos, and loses 1 from its score
        step_rows = [r for r in rows if r["step"] == m["step"]]
        expected = sum(r["accuracy"] - 1.0 * (len(r["completion"]) == 2) for r in step_rows) / len(step_rows)
        assert m["objective/scores"] == pytest.approx(expected)
        # --kl_coef 0.2 (the flag, not the YAML's 0.5): the non-score reward is -kl_coef x KL
        assert m["objective/non_score_reward"] == pytest.approx(-0.2 * m["objective/kl"])
        # --num_ppo_epochs 1 with one minibatch: the only pass is on the rollout policy itself, a ratio of 1
        assert m["policy/approxkl_avg"] < 1e-9
    assert json.loads((out / "summary.json").read_text())["training_args"]["kl_coef"] == 0.2


def test_pad_token_equal_to_eos_and_the_held_out_split(tmp_path, addition_rows):
    """A tokenizer whose pad token is its eos (PPOTrainer would cut every eos off as padding) gets a pad token of its
    own, one its vocabulary has; a dataset without a test split has a seeded 10% of train held out for the
    evaluation, and never trained on."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = tmp_path / "pad-is-eos"
    shutil.copytree(TINY_MODEL, model_dir)
    tokenizer = AutoTokenizer.from_pretrained(TINY_MODEL)
    tokenizer.pad_token = tokenizer.eos_token
    tokenizer.save_pretrained(model_dir)
    data = write_jsonl(tmp_path / "addition.jsonl", addition_rows)
    out = tmp_path / "out"
    run_script(SCRIPT, *default_run("ppo"), "--model_name_or_path", model_dir, "--dataset_name", data,
               "--eval_num_samples", 2, "--output_dir", out, *TINY, cwd=tmp_path)

    saved = AutoTokenizer.from_pretrained(out)
    assert saved.pad_token == "<unk>" and saved.pad_token_id != saved.eos_token_id  # a token it has: nothing grows
    embeddings = AutoModelForCausalLM.from_pretrained(out).get_input_embeddings()
    assert embeddings.num_embeddings == len(saved) == len(tokenizer)
    rows = read_jsonl(out / "completions.jsonl")
    assert any(r["accuracy"] == 1.0 for r in rows)  # completions still end at eos and are scored

    report = json.loads((out / "eval.json").read_text())
    assert report["num_prompts"] == 8 and report["source"] == "8 prompts held out of 'train' (seed 42)"
    from datasets import Dataset

    held_out = Dataset.from_list(addition_rows).train_test_split(test_size=0.1, seed=42)["test"]["prompt"]
    assert not {r["prompt"] for r in rows} & set(held_out)


def test_default_run_learns(tmp_path):
    """The default run (seed 42): the mean reward over the last 20% of PPO updates beats the first 20%, and held-out
    pass@1 and greedy accuracy on the test split improve, as the closing summary says.

    Margins: mean - 3 sd over 8 seeds (1-7, 42), measured by `python benchmarks/learning_seeds.py` with one thread,
    as here (BENCHMARKS.md, "Does the default run learn?"): the rise 0.174 +- 0.015 (min 0.152), the last 20%
    0.890 +- 0.015 (min 0.871), the pass@1 gain 0.316 +- 0.037 (min 0.262), the greedy gain 0.256 +- 0.050 (min
    0.200). Seed 42: rise 0.182, pass@1 0.463 -> 0.762, greedy +0.250, the same on every run since --seed reaches the
    value head. The numbers are CPU numbers, so the run stays on CPU on a GPU machine too.
    """
    out = tmp_path / "out"
    proc = run_script(SCRIPT, "--output_dir", out, "--use_cpu", "true", cwd=tmp_path)  # the default run
    summary = assert_summary_means(out, proc.stdout)  # 40 logs: 8 in each 20%
    assert summary["global_step"] == 40
    assert summary["reward_last_20pct"] - summary["reward_first_20pct"] >= 0.12
    assert summary["reward_last_20pct"] >= 0.84

    # held-out evaluation on the test split, before and after training
    report = json.loads((out / "eval.json").read_text())
    assert report["source"] == "split 'test'" and report["num_samples"] == 8
    before, after = report["before"]["accuracy"], report["after"]["accuracy"]
    assert after["pass@1"] - before["pass@1"] >= 0.20
    assert after["greedy_accuracy"] - before["greedy_accuracy"] >= 0.10
    assert re.search(r"^reward +metric +before +after$", proc.stdout, re.M)  # the closing table
    assert re.search(r"^accuracy +pass@1 +[0-9.]+±[0-9.]+ +[0-9.]+±[0-9.]+$", proc.stdout, re.M)
    assert_held_out_summary(out, proc.stdout)


def test_no_signal_watchdog(tmp_path):
    """--stop_on_no_signal ends the run after the update that showed it, which finishes as the last update of a run
    does: with --save_strategy steps its checkpoint is saved, whether or not the update was a --save_steps one."""
    (tmp_path / "const.py").write_text("def one(completions, **kwargs):\n    return [1.0] * len(completions)\n")
    out = tmp_path / "out"
    proc = run_script(SCRIPT, "--reward_funcs", "const.one", "--total_episodes", 16 * 10,
                      "--per_device_train_batch_size", 16, "--no_signal_patience", 3, "--stop_on_no_signal",
                      "--save_strategy", "steps", "--save_steps", 2, "--output_dir", out, cwd=tmp_path,
                      env={"PYTHONPATH": str(tmp_path)})
    assert "WARNING: no learning signal for 3 logging steps (step 3): the mean reward has stayed at 1" in proc.stdout
    assert "--num_generations" not in proc.stdout  # GRPO's option, which PPO refuses
    assert json.loads((out / "summary.json").read_text())["global_step"] == 3
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-3"]
    assert json.loads((out / "checkpoint-3" / "trainer_state.json").read_text())["global_step"] == 3


def test_a_completion_ends_at_its_first_stop_token_whatever_the_recipe_says(tmp_path):
    """A recipe written from TRL's docs sets no stop_token, whose default (None) generates past the eos: the rewards
    would score the model's invented next turns. The script's default ends each completion at the eos, and at every
    stop token the model's generation config lists (Llama 3 and Qwen list several): here the digit 1 as well, so a
    completion that writes a 1 ends there, in training and in the held-out evaluation."""
    from transformers import AutoTokenizer

    model = tmp_path / "model"
    shutil.copytree(TINY_MODEL, model)
    tokenizer = AutoTokenizer.from_pretrained(model)
    generation = json.loads((model / "generation_config.json").read_text())
    stops = [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("1")]
    (model / "generation_config.json").write_text(json.dumps({**generation, "eos_token_id": stops}))
    recipe = {k: v for k, v in yaml.safe_load((REPO / "recipes" / "tiny" / "ppo.yaml").read_text()).items()
              if k != "stop_token"}
    recipe.update(model_name_or_path=str(model), dataset_name=str(ADDITION), total_episodes=128, eval_num_samples=2,
                  missing_eos_penalty=1.0)
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    out = tmp_path / "out"
    run_script(SCRIPT, "--config", tmp_path / "recipe.yaml", "--output_dir", out, cwd=tmp_path)

    records = read_jsonl(out / "completions.jsonl")
    completions = [r["completion"] for r in records]
    assert sum("1" in c for c in completions) > 10  # the model writes the stop token, so the check can fail
    assert all(c.index("1") == len(c) - 1 for c in completions if "1" in c)
    # --missing_eos_penalty takes "stopped" as the stop does: a completion that ends at the 1 stopped, and is not
    # penalised (trl 1.12 alone counts the tokenizer's eos only); each update's reward is its completions' accuracy
    # less the penalty of those that never stopped, and val/num_eos_tokens counts every stop
    assert all(r["stopped"] for r in records if r["completion"].endswith("1"))
    for log in (m for m in read_jsonl(out / "metrics.jsonl") if "reward" in m):
        mine = [r for r in records if r["step"] == log["step"]]
        assert log["reward"] == pytest.approx(sum((r["accuracy"] or 0.0) - (not r["stopped"]) for r in mine)
                                              / len(mine), abs=1e-5)
        assert log["val/num_eos_tokens"] == sum(r["stopped"] for r in mine)
    evaluation = json.loads((out / "eval.json").read_text())
    held_out = [completion for when in ("before", "after") for row in evaluation[f"{when}_per_prompt"]
                for completion in row["completions"]]
    assert sum("1" in c for c in held_out) > 4
    assert all(c.index("1") == len(c) - 1 for c in held_out if "1" in c)


@pytest.mark.ppo_trainer
def test_a_stop_token_id_of_ones_own_replaces_the_default(monkeypatch, tmp_path, capsys):
    """--stop_token_id N with the script's default `--stop_token eos` set too, which PPOTrainer refuses: N is the run's
    stop token. main() runs up to training, in this process."""
    import ppo_trl_example as ppo
    from transformers import AutoTokenizer

    one = AutoTokenizer.from_pretrained(TINY_MODEL).convert_tokens_to_ids("1")

    class Built(Exception):
        pass

    def built(trainer, **kwargs):
        raise Built(trainer)

    monkeypatch.setattr(ppo.PPOTrainerWithRewardLogs, "train", built)
    with pytest.raises(Built) as caught:
        ppo.main(*ppo.parse_args(["--stop_token_id", str(one), "--total_episodes", "64", "--eval_num_samples", "0",
                                  "--output_dir", str(tmp_path)]))
    trainer = caught.value.args[0]
    assert trainer.stop_token_id == one and trainer.policy_model.generation_config.eos_token_id == [one]
    assert trainer.reward_model.stops == {one} and trainer.processing_class.pad_token_id != one
