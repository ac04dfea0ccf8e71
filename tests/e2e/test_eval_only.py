"""--eval_only: a saved model or LoRA adapter evaluated without training, as a training run evaluates its policy.

Each case trains for a couple of steps with the held-out evaluation on, then evaluates what the run saved with the
same flags and --eval_only: the same sampling settings, prompts and seed give the same completions and metrics as
the run's own evaluation after training; and nothing trains or is saved.
"""

import json
import shutil

import pytest
from conftest import default_run, run_script

RUNS = {
    "grpo": ["--max_steps", 4, "--logging_steps", 1],
    "ppo": ["--total_episodes", 128],  # 2 PPO updates of 64 prompts
}
# A rate and a number of steps at which training moves several of the evaluation's completions, not one: at 0.01 and
# 2 GRPO steps (the first with no signal) one sample of 12 moved, and once in the suite none did.
LORA = ["--use_peft", "--lora_r", 4, "--lora_alpha", 8, "--lora_target_modules", "q_proj", "v_proj",
        "--learning_rate", 0.03]


@pytest.mark.parametrize("script", ["grpo", "ppo"])
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_eval_only_scores_a_saved_policy_as_training_did(tmp_path, script, lora):
    flags = [*RUNS[script], "--eval_num_samples", 2, "--eval_max_prompts", 6, "--seed", 3, *(LORA if lora else [])]
    if script == "grpo" and lora:  # bf16 autocast, as on a CPU that computes bf16 (the tiny recipe pins fp32): the
        flags += ["--bf16", "true"]  # evaluation runs in training's precision, or its KL, continuous, differs
    trained, evaluated = tmp_path / "trained", tmp_path / "evaluated"
    run_script(f"{script}_trl_example.py", *flags, "--output_dir", trained, cwd=tmp_path)
    proc = run_script(f"{script}_trl_example.py", *default_run(script), *flags, "--model_name_or_path", trained,
                      "--eval_only",
                      "--output_dir", evaluated, cwd=tmp_path)

    training, only = (json.loads((out / "eval.json").read_text()) for out in (trained, evaluated))
    assert training["before_per_prompt"] != training["after_per_prompt"]  # training moved it, so the check can fail
    # the same; the KL to the reference only where the evaluation has one too: a GRPO adapter's base, as in training
    assert {k: v for k, v in only["model"].items() if k != "kl"} == {
        k: v for k, v in training["after"].items() if k != "kl"}
    if "kl" in only["model"]:
        assert script == "grpo" and lora and only["model"]["kl"] == pytest.approx(training["after"]["kl"])
        assert only["model_per_prompt"] == training["after_per_prompt"]
    else:
        assert only["model_per_prompt"] == [p | {"kl_to_reference": None} for p in training["after_per_prompt"]]
    assert only["sampling"] == training["sampling"] and only["num_prompts"] == training["num_prompts"] == 6
    assert "before" not in only and "after" not in only

    # nothing trained or was saved: the table has the one column, and the folder holds eval.json alone
    assert f"{'reward':<14}{'metric':<18}{'model':>15}\n" in proc.stdout
    assert "steps in" not in proc.stdout and sorted(p.name for p in evaluated.iterdir()) == ["eval.json"]
    if not lora:  # with the run's own folder: its eval.json is kept, and the evaluation goes beside it, said
        kept = (trained / "eval.json").read_text()
        proc = run_script(f"{script}_trl_example.py", *default_run(script), *flags, "--model_name_or_path", trained,
                          "--eval_only", "--output_dir", trained, cwd=tmp_path)
        assert (trained / "eval.json").read_text() == kept and proc.stdout.rstrip().endswith(
            f"written to {trained / 'eval-2.json'} (the eval.json there is kept)")
        assert json.loads((trained / "eval-2.json").read_text())["model"] == only["model"]
    if lora:  # the adapter's folder, loaded on its base model
        assert (trained / "adapter_config.json").exists() and not (trained / "model.safetensors").exists()

        # the same adapter from the hub (here its offline cache): an adapter repository has no config.json.
        # A GPU recipe's --use_vllm does not start vLLM for an evaluation, which generates with transformers.
        cache = tmp_path / "hub"
        snapshot = cache / "models--me--my-adapter" / "snapshots" / ("0" * 40)
        shutil.copytree(trained, snapshot)
        (snapshot.parents[1] / "refs").mkdir()
        (snapshot.parents[1] / "refs" / "main").write_text("0" * 40)
        (snapshot.parents[1] / ".no_exist" / ("0" * 40)).mkdir(parents=True)  # the hub has no config.json there, as
        (snapshot.parents[1] / ".no_exist" / ("0" * 40) / "config.json").touch()  # an online lookup records it
        vllm = ["--use_vllm"] if script == "grpo" else []
        run_script(f"{script}_trl_example.py", *default_run(script), *flags, *vllm, "--model_name_or_path",
                   "me/my-adapter", "--eval_only",
                   "--output_dir", tmp_path / "from-hub", cwd=tmp_path, env={"HF_HUB_CACHE": str(cache)})
        hub = json.loads((tmp_path / "from-hub" / "eval.json").read_text())
        assert hub["model"] == only["model"] and hub["model_per_prompt"] == only["model_per_prompt"]


def test_eval_only_needs_samples(tmp_path, fails_early):
    assert fails_early(tmp_path, "--eval_only", "--eval_num_samples", 0).startswith(
        "error: --eval_only evaluates --eval_num_samples K")
