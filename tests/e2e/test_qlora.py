"""QLoRA on a CPU, where bitsandbytes runs its 4-bit (nf4) and 8-bit layers as it does on a GPU: both scripts train a
LoRA adapter on a quantized base, and the adapter keeps its updates at a fine-tuning learning rate.

trl 1.16 casts a quantized model's adapters to bf16, where an Adam step of 1e-5 is below half a unit of most
weights' last place and rounds away (1.4% of the bundled model's lora_A entries moved in two steps, against all of
them in fp32): grpo_trl_example.py casts them back, whether the base was quantized by flag or saved so (a `*-bnb-4bit`
checkpoint). trl 1.12's PPOTrainer keeps peft's fp32.
"""

import json

import pytest
from conftest import ADDITION, TINY_MODEL, run_script, safetensors_weights

# The held-out evaluation before training: on a CPU with AVX512-BF16, bitsandbytes repacked a 4-bit layer the first
# time it ran in eval mode, for a matmul with no backward, and no adapter got a gradient after it (or, where a layer's
# width is no multiple of 64, as the bundled model's 96, the repacking failed)
LORA = ["--use_peft", "--lora_r", 4, "--lora_alpha", 8, "--lora_target_modules", "q_proj", "v_proj",
        "--learning_rate", 1e-5, "--save_strategy", "steps", "--save_steps", 1, "--eval_num_samples", 1,
        "--eval_max_prompts", 2]
LENGTH = {"grpo_trl_example.py": ["--max_steps", 3], "ppo_trl_example.py": ["--total_episodes", 3 * 64]}  # 3 updates
FORMAT = {4: "nf4", 8: "int8"}


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("script", ["grpo_trl_example.py", "ppo_trl_example.py"])
def test_a_quantized_base_trains_fp32_adapters_that_keep_their_updates(tmp_path, script, bits):
    """And --eval_only of the adapter scores what the run's own evaluation after training scored, on its base
    quantized as it was trained (issue 82: GRPO's evaluated it on the base unquantized, pass@1 0.583 against the run's
    0.167, saying nothing, and refused --load_in_4bit with a false message); without the flag it stops in one line
    that says how to load it as trained."""
    out = tmp_path / "out"
    proc = run_script(script, f"--load_in_{bits}bit", *LORA, *LENGTH[script], "--output_dir", out, cwd=tmp_path)
    assert_fp32_adapters_that_move(proc, out, FORMAT[bits])
    if bits == 8:
        return
    only = ["--model_name_or_path", out, "--dataset_name", ADDITION, *LORA, "--eval_only", "--output_dir",
            tmp_path / "evaluated"]
    refused = run_script(script, *only, cwd=tmp_path, check=False)
    assert refused.returncode == 1 and refused.stderr.strip().splitlines()[-1] == (
        f"error: --eval_only would load {out} otherwise than its run trained it (its summary.json): add "
        "--load_in_4bit true to evaluate it as trained")
    run_script(script, *only, "--load_in_4bit", cwd=tmp_path)
    trained, evaluated = (json.loads((folder / "eval.json").read_text()) for folder in (out, tmp_path / "evaluated"))
    assert [(p["completions"], p["greedy_completion"]) for p in evaluated["model_per_prompt"]] == [
        (p["completions"], p["greedy_completion"]) for p in trained["after_per_prompt"]]
    assert {k: v for k, v in evaluated["model"].items() if k != "kl"} == {
        k: v for k, v in trained["after"].items() if k != "kl"}


@pytest.mark.parametrize("script", ["grpo_trl_example.py", "ppo_trl_example.py"])
def test_a_checkpoint_saved_quantized_trains_fp32_adapters_too(tmp_path, script):
    """A model saved in 4 bits (as the hub's `*-bnb-4bit` are) is quantized with no flag: GRPO's cast back was keyed
    to --load_in_4bit, and its adapters trained in bf16; PPO passed a quantization_config of None, which loads such a
    checkpoint's packed weights as plain ones and fails, and its value model, made from the same checkpoint, would
    have been 4-bit, its layers frozen: it is dequantized, and trains in full. In bf16 mixed precision, on every CPU
    (GRPO's default where it computes bf16): there trl 1.12's PPOTrainer cast the frozen embeddings and LM head to bf16,
    and its generation, outside autocast, failed on them."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

    saved = tmp_path / "tiny-bnb-4bit"
    AutoModelForCausalLM.from_pretrained(TINY_MODEL, quantization_config=BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4")).save_pretrained(saved)
    AutoTokenizer.from_pretrained(TINY_MODEL).save_pretrained(saved)
    out = tmp_path / "out"
    shape = (["--max_completion_length", 4] if script.startswith("grpo") else
             ["--response_length", 4, "--per_device_train_batch_size", 64])  # the default run's, which LENGTH counts in
    proc = run_script(script, "--model_name_or_path", saved, "--dataset_name", ADDITION, *shape, *LORA,
                      *LENGTH[script], "--bf16", "true", "--output_dir", out, cwd=tmp_path)
    assert_fp32_adapters_that_move(proc, out, "nf4")


def assert_fp32_adapters_that_move(proc, out, quantized: str) -> None:
    """The run says what it held, the base quantized and the adapters (and PPO's value model) trained in fp32; and
    lora_A, which gets its first gradient once lora_B has left 0, moves between the first checkpoint and the last by
    about the learning rate, which a bf16 weight would round away."""
    compute = {"compute": "bf16 autocast"} if "--bf16" in proc.args else {}  # mixed precision over the fp32 weights
    if compute and "ppo_trl_example.py" in " ".join(map(str, proc.args)):  # trl 1.12 samples outside autocast
        compute["not_under_autocast"] = "rollouts and held-out evaluation"
    under = (", computed under bf16 autocast" + (" but for its rollouts and held-out evaluation"
                                                 if "not_under_autocast" in compute else "")) if compute else ""
    assert f"weights: trained in float32{under}; frozen in float32, {quantized}" in proc.stdout
    weights = json.loads((out / "summary.json").read_text())["weights"]
    assert weights == {"trained": ["float32"], "frozen": ["float32", quantized], **compute}
    first, last = (safetensors_weights(out / f"checkpoint-{step}" / "adapter_model.safetensors") for step in (1, 3))
    lora_a = [name for name in first if "lora_A" in name]
    assert lora_a and all(first[name].dtype == last[name].dtype == first[name].float().dtype for name in lora_a)
    moved = sum((first[name] != last[name]).sum().item() for name in lora_a)
    assert moved / sum(first[name].numel() for name in lora_a) > 0.9
