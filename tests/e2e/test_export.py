"""extras/export.py: a run's model merged into a standalone folder that scores what the run's own model scored,
written as GGUF that transformers reads back as it was written, and answering prompts as the run sampled."""

import json
import subprocess
import sys

import pytest
import torch
from conftest import REPO, TINY_MODEL, run_script, safetensors_weights

EXPORT = [sys.executable, "-m", "extras.export"]


def export(*args, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([*EXPORT, *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def greedy(eval_json) -> list[str]:
    report = json.loads(eval_json.read_text())
    when = "after" if "after_per_prompt" in report else "model"
    return [prompt["greedy_completion"] for prompt in report[f"{when}_per_prompt"]]


@pytest.mark.parametrize("script, flags", [
    ("grpo_trl_example.py", ["--max_steps", 3, "--use_peft", "--lora_target_modules", "all-linear"]),
    ("grpo_trl_example.py", ["--max_steps", 3, "--use_peft", "--lora_target_modules", "all-linear",
                             "--load_in_4bit", "true"]),  # QLoRA: merged into its base dequantized
    ("ppo_trl_example.py", ["--total_episodes", 192, "--use_peft", "--lora_target_modules", "all-linear"]),
    ("ppo_trl_example.py", ["--total_episodes", 192, "--use_peft", "--lora_target_modules", "all-linear",
                            "--load_in_4bit", "true"]),
    ("grpo_trl_example.py", ["--max_steps", 3]),  # a full fine-tune, saved the same way
    ("ppo_trl_example.py", ["--total_episodes", 192]),
], ids=["grpo-lora", "grpo-qlora", "ppo-lora", "ppo-qlora", "grpo-full", "ppo-full"])
def test_a_merged_model_scores_what_the_runs_model_scored(tmp_path, script, flags):
    """The merged folder alone (the adapter's base is not beside it) gives the run's own "after" greedy completions
    on every held-out prompt, evaluated by --eval_only as the run sampled (its recipe), and its weights moved."""
    run = tmp_path / "run"
    run_script(script, *flags, "--learning_rate", 3e-3, "--eval_num_samples", 2, "--output_dir", run, cwd=tmp_path)
    proc = export(run, "--merge")
    merged = run / "merged"
    assert f"merged: {merged}" in proc.stdout and not (merged / "adapter_config.json").exists()
    assert {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json"} <= {
        p.name for p in merged.iterdir()}
    moved = safetensors_weights(merged / "model.safetensors")
    start = safetensors_weights(TINY_MODEL / "model.safetensors")
    assert any(not torch.equal(moved[k], start[k]) for k in start)
    recipe = REPO / "recipes" / "tiny" / ("grpo.yaml" if script.startswith("grpo") else "ppo.yaml")
    run_script(script, "--config", recipe, "--model_name_or_path", merged, "--dataset_name", REPO / "assets" /
               "addition", "--eval_only", "--eval_num_samples", 2, "--output_dir", tmp_path / "scored", cwd=tmp_path)
    assert greedy(tmp_path / "scored" / "eval.json") == greedy(run / "eval.json")
    again = export(run, "--merge", check=False)  # nothing is written over
    assert again.returncode == 1 and again.stderr.strip().splitlines()[-1] == (
        f"error: {merged} exists: move it, or name another place with --out")


def test_what_gguf_cannot_hold_stops_in_one_line_and_writes_nothing(tmp_path):
    """The bundled tiny model's tokenizer is character-level (WordLevel), which llama.cpp's GGUF has no kind for."""
    proc = export(TINY_MODEL, "--gguf", "q8_0", "--out", tmp_path / "tiny.gguf", check=False)
    assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1] == (
        "error: GGUF export writes byte-level BPE tokenizers (SmolLM2's, Qwen2's); this one is WordLevel: "
        "llama.cpp's convert_hf_to_gguf.py converts the merged folder (--merge)")
    assert not list(tmp_path.iterdir())


def test_a_qwen2_written_as_gguf_reads_back_with_the_same_logits(tmp_path):
    """Qwen2's family: biases on Q, K and V, rotary halves left as they are, a tokenizer whose embedding has rows
    past its tokens (Qwen2.5's 151,936 for 151,665: here 40 more), written as unused padding tokens."""
    from model_zoo import build_qwen2
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = build_qwen2(tmp_path / "qwen2", vocab_size=None)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model.resize_token_embeddings(len(tokenizer) + 40)
    model.save_pretrained(folder)
    export(folder, "--gguf", "f32", "--out", tmp_path / "gguf" / "qwen2.gguf")
    read = AutoModelForCausalLM.from_pretrained(tmp_path / "gguf", gguf_file="qwen2.gguf", dtype=torch.float32)
    read_tokenizer = AutoTokenizer.from_pretrained(tmp_path / "gguf", gguf_file="qwen2.gguf")
    messages = [{"role": "user", "content": "What is 12 + 13? Reply with just the number."}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    assert read_tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                              return_dict=True)["input_ids"] == ids["input_ids"][0].tolist()
    with torch.no_grad():
        assert torch.equal(read(**ids).logits, model(**ids).logits)


def test_a_first_look_answers_through_the_runs_sampling(tmp_path):
    run = tmp_path / "run"
    run_script("grpo_trl_example.py", "--max_steps", 2, "--eval_num_samples", 0, "--output_dir", run, cwd=tmp_path)
    proc = export(run, "--chat", "3+4=", "1+1=")
    assert "sampling as the run did: {'temperature': 1.0" in proc.stdout and "up to 4 tokens" in proc.stdout
    assert proc.stdout.count("\n> ") == 2 and "> 3+4=" in proc.stdout and "> 1+1=" in proc.stdout


def test_smollm2_trained_merged_and_written_back_to_gguf_reads_back_the_same(tmp_path, smollm2):
    """The round trip the README promises: SmolLM2 (converted from its GGUF), trained with LoRA, merged, written as
    GGUF and read back by transformers: in f32 the same logits and greedy completions as the merged folder; in q8_0
    the same answers to the task's prompts."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run = tmp_path / "run"
    run_script("grpo_trl_example.py", "--model_name_or_path", smollm2, "--dataset_name", REPO / "assets" /
               "chat-addition", "--system_prompt", "Be brief.", "--use_peft", "--lora_target_modules", "all-linear",
               "--learning_rate", 3e-4, "--max_steps", 1, "--per_device_train_batch_size", 8, "--num_generations", 8,
               "--max_completion_length", 8, "--eval_num_samples", 0, "--save_strategy", "no", "--output_dir", run,
               cwd=tmp_path)
    export(run, "--merge")
    files = tmp_path / "gguf"  # a folder of its own: transformers reads the run's adapter_config.json as the model
    files.mkdir()
    for kind in ("f32", "q8_0"):
        proc = export(run, "--gguf", kind, "--out", files / f"model-{kind}.gguf")
        assert f"gguf: {files / f'model-{kind}.gguf'}" in proc.stdout
    merged = AutoModelForCausalLM.from_pretrained(run / "merged", dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(run / "merged")
    prompts = [json.loads(line)["prompt"] for line in (REPO / "assets" / "chat-addition" / "test.jsonl").open()][:4]
    for kind in ("f32", "q8_0"):
        read = AutoModelForCausalLM.from_pretrained(files, gguf_file=f"model-{kind}.gguf", dtype=torch.float32)
        read_tokenizer = AutoTokenizer.from_pretrained(files, gguf_file=f"model-{kind}.gguf")
        for prompt in prompts:
            messages = [{"role": "system", "content": "Be brief."}, *prompt]
            ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                                return_dict=True)
            assert read_tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                      return_dict=True)["input_ids"] == ids["input_ids"][0].tolist()
            with torch.no_grad():
                if kind == "f32":
                    assert torch.equal(read(**ids).logits, merged(**ids).logits)
                answers = [model.generate(**ids, max_new_tokens=8, do_sample=False)[0, ids["input_ids"].shape[1]:]
                           for model in (merged, read)]
            assert torch.equal(*answers), (kind, prompt, [tokenizer.decode(a) for a in answers])
