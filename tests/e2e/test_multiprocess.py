"""Two processes under `accelerate launch --config_file accelerate_configs/ddp.yaml` on CPU (gloo): on one machine,
and as two "machines" (the README's multi-node command, both nodes on 127.0.0.1)."""

import importlib.util
import json
import os
import statistics
import subprocess
import sys

import pytest
import torch
from conftest import (MULTIPROCESS, RANK_PROBE, REPO, SHUTDOWN_PROBE, THREADS, TINY_MODEL, accelerate_ddp,
                      assert_no_preventable_warnings, ddp_flags, free_port, read_jsonl, run_script, script_python)

pytestmark = MULTIPROCESS

TINY_PARAMS = 424_800  # the bundled model's parameters (its embedding and output layer are tied: counted once)


def test_grpo_two_processes(tmp_path):
    (tmp_path / "probe.py").write_text(RANK_PROBE)
    (tmp_path / "sitecustomize.py").write_text(SHUTDOWN_PROBE)
    out = tmp_path / "out"
    steps = 3
    proc = run_script("grpo_trl_example.py", "--output_dir", out, "--max_steps", steps, "--logging_steps", 1,
                      "--eval_num_samples", 0, "--reward_funcs", "accuracy", "probe.rank_probe",
                      "--reward_weights", 1.0, 0.0, *ddp_flags(2), cwd=tmp_path, launcher=accelerate_ddp(2),
                      env={"PYTHONPATH": str(tmp_path), "PROBE_DIR": str(tmp_path)})

    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["global_step"] == steps
    # the run names the mode accelerate set up, and each process held the whole model (DDP replicates it)
    device = "cpu (gloo)" if ddp_flags(2) else "cuda (nccl)"
    assert proc.stdout.count(f"distributed: DDP, 2 processes on {device}") == 1
    assert summary["distributed"]["mode"] == "DDP" and summary["distributed"]["held_parameters"] == [TINY_PARAMS] * 2
    assert "find_unused_parameters" not in proc.stdout + proc.stderr  # no DDP warning: every parameter is used

    # outputs are written once, by the main process, and are complete
    assert proc.stdout.count("GRPO: 3 steps") == 1
    assert [m["step"] for m in read_jsonl(out / "metrics.jsonl")] == [1, 2, 3]
    assert len(read_jsonl(out / "completions.jsonl")) == steps * 2 * 16  # gathered from both ranks
    assert (out / "model.safetensors").exists() and (out / "reward_curve.png").exists()

    # the data is split across ranks: at every step the two ranks scored different prompts
    rank0, rank1 = ([set(call) for call in read_jsonl(tmp_path / f"rank{r}.jsonl")] for r in (0, 1))
    assert len(rank0) == len(rank1) == steps
    for prompts0, prompts1 in zip(rank0, rank1):
        assert len(prompts0) == len(prompts1) == 2  # 16 completions per rank = 2 prompts x 8 generations
        assert not set(prompts0) & set(prompts1)

    # each process freed its DDP model itself, before Python's shutdown
    assert [(tmp_path / f"ddp-alive-rank{r}").read_text() for r in (0, 1)] == ["0", "0"]


@pytest.mark.parametrize("script, length", [("grpo_trl_example.py", ["--max_steps", 4]),
                                            ("ppo_trl_example.py", ["--total_episodes", 256,  # 4 updates
                                                                    "--per_device_train_batch_size", 32])])
def test_the_best_checkpoint_by_a_held_out_metric_under_two_processes(tmp_path, script, length):
    """Issue 84: under DDP each process evaluates its half of the held-out prompts, the points are gathered, and the
    model saved is the checkpoint the metric ranks best, as in one process."""
    out = tmp_path / "out"
    run_script(script, *length, "--eval_num_samples", 2, "--eval_max_prompts", 8, "--eval_strategy", "steps",
               "--eval_steps", 1, "--save_strategy", "steps", "--save_steps", 1, "--metric_for_best_model",
               "accuracy/pass@1", "--load_best_model_at_end", "true", "--output_dir", out, *ddp_flags(2),
               cwd=tmp_path, launcher=accelerate_ddp(2))
    assert json.loads((out / "summary.json").read_text())["world_size"] == 2
    report = json.loads((out / "eval.json").read_text())
    points = {point["step"]: point["metrics"]["accuracy"]["pass@1"] for point in report["during"]}
    assert sorted(points) == [1, 2, 3, 4] and all(len(p["per_prompt"]["accuracy"]) == 8 for p in report["during"])
    best = report["best"]
    assert best["step"] == max(points, key=points.get) and best["saved"], (points, best)
    assert report["after"]["accuracy"]["pass@1"] == points[best["step"]]  # the best's policy, evaluated again

    from safetensors.torch import load_file

    ended, kept = (load_file(folder / "model.safetensors") for folder in (out, out / f"checkpoint-{best['step']}"))
    assert all(torch.equal(ended[k], kept[k]) for k in kept)


def test_grpo_two_machines(tmp_path):
    """The README's multi-node launch: `--num_machines 2 --machine_rank 0|1 --main_process_ip`, one process each
    (`--num_processes` counts the processes over all machines).

    Both "machines" share this disk, as nodes often share a file system: the outputs must be written once,
    by the global main process, not once per node.
    """
    out, port, steps = tmp_path / "out", free_port(), 2
    args = ["--output_dir", out, "--max_steps", steps, "--logging_steps", 1, "--eval_strategy", "no",
            "--eval_num_samples", 2, "--eval_max_prompts", 7, *ddp_flags(2),
            "--dataset_name", REPO / "assets" / "addition" / "train.jsonl"]  # no test split: 10% of train is held out
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **THREADS}
    machines = []
    for rank in (0, 1):
        (tmp_path / f"machine{rank}").mkdir()
        machines.append(subprocess.Popen(
            [sys.executable, *accelerate_ddp(2, port, machines=(rank, 2)), str(REPO / "grpo_trl_example.py"),
             *map(str, args)],
            cwd=tmp_path / f"machine{rank}", env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ))
    outputs = [machine.communicate(timeout=300) for machine in machines]
    for machine, (stdout, stderr) in zip(machines, outputs):
        if machine.returncode != 0:
            pytest.fail(f"a machine exited with {machine.returncode}\n{stdout[-2000:]}\n{stderr[-4000:]}")

    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["global_step"] == steps
    # one set of outputs: the summary is printed by machine 0 alone, and every step is logged once
    assert [stdout.count("GRPO: 2 steps") for stdout, _ in outputs] == [1, 0]
    assert [m["step"] for m in read_jsonl(out / "metrics.jsonl")] == [1, 2]
    assert len(read_jsonl(out / "completions.jsonl")) == steps * 2 * 16  # gathered from both machines
    # the held-out evaluation ran on both machines, each on its own slice of the 7 prompts (4 and 3, padded to 4), and
    # scored each prompt once; it was written once
    report = json.loads((out / "eval.json").read_text())
    assert report["num_prompts"] == 7 and set(report["before"]["accuracy"]) >= {"pass@1", "pass@2"}
    for when in ("before", "after"):
        assert [p["process"] for p in report[f"{when}_per_prompt"]] == [0, 0, 0, 0, 1, 1, 1]
        assert all(len(p["rewards"]["accuracy"]) == 2 for p in report[f"{when}_per_prompt"])
    assert report["before"]["accuracy"]["pass@1"] == pytest.approx(
        sum(sum(p["rewards"]["accuracy"]) for p in report["before_per_prompt"]) / 14)
    # the table, once (the closing line's "..s of it held-out evaluation" is there too when the evaluations took 0.05 s)
    assert [sum(line.startswith("held-out evaluation, ") for line in stdout.splitlines())
            for stdout, _ in outputs] == [1, 0]
    assert [stdout.count("no 'test' split: evaluating on") for stdout, _ in outputs] == [1, 0]  # said once, too
    assert not (tmp_path / "machine0" / "out").exists() and not (tmp_path / "machine1" / "out").exists()


def launch(config: str, num_processes: int = 2) -> list[str]:
    """`accelerate launch` with one of accelerate_configs/, in fp32 (the configs ask for bf16, a GPU setting)."""
    return ["-m", "accelerate.commands.launch", "--config_file", str(REPO / "accelerate_configs" / f"{config}.yaml"),
            "--num_processes", str(num_processes), "--main_process_port", str(free_port()), "--mixed_precision", "no"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks what is refused on a machine without a GPU")
@pytest.mark.parametrize("script, config, flags, message", [
    ("grpo_trl_example.py", "fsdp", [], "error: FSDP shards a model across GPUs only: on a CPU accelerate would run "
                                        "plain DDP under FSDP's name"),
    ("grpo_trl_example.py", "ddp", ["--use_cpu", "false"], "error: 2 processes on a machine with no GPU would each "
                                                           "train a model of their own"),
    ("ppo_trl_example.py", "ddp", ["--num_generations", 4], "error: unknown option --num_generations: that is GRPO's "
                                                            "option"),  # a mistake the parser stops
])
def test_launches_that_would_run_as_something_else_stop(tmp_path, script, config, flags, message):
    """FSDP on CPUs (accelerate makes it plain DDP there) and processes that would not talk to each other stop
    before any weights load, with one line, rather than running under a name that is not theirs; and a mistake in
    the command is said once, not once per process."""
    proc = run_script(script, *flags, "--output_dir", tmp_path / "out", cwd=tmp_path, launcher=launch(config),
                      check=False)
    assert proc.returncode != 0 and proc.stderr.count(message) == 1  # once: the other process leaves quietly
    assert "Loading weights" not in proc.stderr and not (tmp_path / "out").exists()


deepspeed = pytest.mark.skipif(
    torch.cuda.is_available() or (importlib.util.find_spec("deepspeed") is None and not os.environ.get("CI")),
    reason="DeepSpeed on CPU processes, with deepspeed installed (setup.sh installs it); not skipped in CI")


@deepspeed
def test_grpo_under_deepspeed_zero3_shards_and_learns_as_one_process(tmp_path):
    """ZeRO-3 on 2 CPU processes (gloo): the run names it, each process holds half of the parameters, the saved model
    reloads as an ordinary checkpoint and has moved, and its reward curve matches one process with the same seed and
    global batch (32 completions a step): the mean reward over its 4 steps within 0.12 of one process's, where 5 seeds
    differed by at most 0.070 (BENCHMARKS.md, section 10; 0.069 over 10 steps)."""
    flags = ["--max_steps", 4, "--logging_steps", 1, "--eval_strategy", "no", "--eval_num_samples", 0, "--seed", 1]
    zero3, one = tmp_path / "zero3", tmp_path / "one"
    proc = run_script("grpo_trl_example.py", *flags, "--output_dir", zero3, cwd=tmp_path, launcher=launch("zero3"))
    run_script("grpo_trl_example.py", *flags, "--per_device_train_batch_size", 32, "--save_strategy", "no",
               "--output_dir", one, cwd=tmp_path)

    assert proc.stdout.count("distributed: DeepSpeed ZeRO-3, 2 processes on cpu (gloo)") == 1
    distributed = json.loads((zero3 / "summary.json").read_text())["distributed"]
    assert distributed["mode"] == "DeepSpeed ZeRO-3" and distributed["held_parameters"] == [TINY_PARAMS // 2] * 2
    assert json.loads((one / "summary.json").read_text())["distributed"]["held_parameters"] == [TINY_PARAMS]

    assert_reloads_as_the_tiny_model(zero3)  # gathered from both processes, not one's shard

    rewards = {run: [m["reward"] for m in read_jsonl(run / "metrics.jsonl")] for run in (zero3, one)}
    assert len(rewards[zero3]) == len(rewards[one]) == 4
    assert abs(statistics.mean(rewards[zero3]) - statistics.mean(rewards[one])) <= 0.12


@deepspeed
def test_grpo_under_deepspeed_zero2(tmp_path):
    """ZeRO-2 shards gradients and optimizer state, not the parameters: each process holds the whole model."""
    out = tmp_path / "out"
    proc = run_script("grpo_trl_example.py", "--max_steps", 2, "--logging_steps", 1, "--eval_strategy", "no",
                      "--output_dir", out, cwd=tmp_path, launcher=launch("zero2"))
    assert proc.stdout.count("distributed: DeepSpeed ZeRO-2, 2 processes on cpu (gloo)") == 1
    # DeepSpeed's deprecated collectives among them; accelerate's launcher imports DeepSpeed itself, before any of
    # the script runs, and its notice that DeepSpeed runs on the CPU is about this run: it stays
    output = (proc.stdout + proc.stderr).replace("Setting accelerator to CPU. If you have GPU or other accelerator, "
                                                 "we were unable to detect it.", "", 1)
    assert_no_preventable_warnings(output)
    distributed = json.loads((out / "summary.json").read_text())["distributed"]
    assert distributed["mode"] == "DeepSpeed ZeRO-2" and distributed["held_parameters"] == [TINY_PARAMS] * 2
    assert_reloads_as_the_tiny_model(out)


# PPO's policy and value model, held together by one DeepSpeed engine: the tiny model twice, plus the value head
PPO_PARAMS = 2 * TINY_PARAMS + 96


@deepspeed
def test_ppo_under_deepspeed_zero3_shards_learns_as_one_process_and_resumes(tmp_path):
    """PPO under ZeRO-3 on 2 CPU processes, with reward functions: the run names it, each process holds half of the
    policy's and value model's parameters, the saved policy reloads whole and has moved, and the reward curve matches
    one process with the same seed and global batch (64 completions an update): the mean reward over its 4 updates
    within 0.12 of one process's, where 5 seeds differed by at most 0.070 (BENCHMARKS.md, section 10; 0.036 over 10
    updates, which took this test 110 s). A run resumed under ZeRO-3 from the checkpoint of update 2 (both models and
    the optimizer in DeepSpeed's own checkpoint, the RNG states of each process) repeats updates 3-4 exactly."""
    flags = ["--total_episodes", 256, "--eval_num_samples", 0, "--seed", 1, "--save_strategy", "steps",
             "--save_steps", 2]
    zero3, one, resumed = tmp_path / "zero3", tmp_path / "one", tmp_path / "resumed"
    proc = run_script("ppo_trl_example.py", *flags, "--per_device_train_batch_size", 32, "--output_dir", zero3,
                      cwd=tmp_path, launcher=launch("zero3"))
    run_script("ppo_trl_example.py", *flags, "--output_dir", one, cwd=tmp_path)
    run_script("ppo_trl_example.py", *flags, "--per_device_train_batch_size", 32, "--output_dir", resumed,
               "--resume_from_checkpoint", zero3 / "checkpoint-2", cwd=tmp_path, launcher=launch("zero3"))

    assert proc.stdout.count("distributed: DeepSpeed ZeRO-3, 2 processes on cpu (gloo)") == 1
    distributed = json.loads((zero3 / "summary.json").read_text())["distributed"]
    assert distributed["mode"] == "DeepSpeed ZeRO-3" and distributed["held_parameters"] == [PPO_PARAMS // 2] * 2
    assert json.loads((one / "summary.json").read_text())["distributed"]["held_parameters"] == [PPO_PARAMS]
    assert_reloads_as_the_tiny_model(zero3)  # the policy alone, gathered from both processes

    rewards = {run: [m["reward"] for m in read_jsonl(run / "metrics.jsonl")] for run in (zero3, one, resumed)}
    assert len(rewards[zero3]) == len(rewards[one]) == 4
    assert abs(statistics.mean(rewards[zero3]) - statistics.mean(rewards[one])) <= 0.12
    assert rewards[resumed] == pytest.approx(rewards[zero3][2:], abs=1e-6)


@deepspeed
def test_ppo_with_a_reward_model_and_lora_runs_the_same_under_zero2_and_zero3(tmp_path):
    """A LoRA policy scored by a reward model under ZeRO-2 (each process holds every parameter) and ZeRO-3 (half;
    the reward model is sharded too, inside the reward adapter): the same seed gives the same rewards and the same
    held-out scores, and each saves an adapter that loads on the base model and has moved."""
    from peft import AutoPeftModelForCausalLM
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(0)
    rm = tmp_path / "reward-model"
    reward_model = AutoModelForSequenceClassification.from_config(AutoConfig.from_pretrained(TINY_MODEL, num_labels=1))
    reward_model.save_pretrained(rm)
    AutoTokenizer.from_pretrained(TINY_MODEL).save_pretrained(rm)
    runs = {stage: tmp_path / stage for stage in ("zero2", "zero3")}
    for stage, out in runs.items():
        proc = run_script("ppo_trl_example.py", "--reward_model_path", rm, "--use_peft", "--total_episodes", 256,
                          "--per_device_train_batch_size", 32, "--eval_max_prompts", 4, "--output_dir", out,
                          cwd=tmp_path, launcher=launch(stage))
        assert proc.stdout.count(f"distributed: DeepSpeed ZeRO-{stage[-1]}, 2 processes on cpu (gloo)") == 1
        assert f"scoring with the reward model {rm}" in proc.stdout

    held = {stage: json.loads((out / "summary.json").read_text())["distributed"]["held_parameters"]
            for stage, out in runs.items()}
    assert held["zero2"][0] > PPO_PARAMS and held["zero2"] == [held["zero2"][0]] * 2  # and the adapter's
    assert held["zero3"] == [held["zero2"][0] // 2] * 2
    metrics = {stage: read_jsonl(out / "metrics.jsonl") for stage, out in runs.items()}
    assert [m["reward"] for m in metrics["zero3"]] == pytest.approx([m["reward"] for m in metrics["zero2"]], abs=1e-4)
    assert all(m["reward"] == pytest.approx(m["rewards/reward_model/mean"]) for m in metrics["zero3"])
    scores = {stage: json.loads((out / "eval.json").read_text())["before"]["reward_model"]["mean_reward"]
              for stage, out in runs.items()}
    assert scores["zero3"] == pytest.approx(scores["zero2"], abs=1e-4)
    for out in runs.values():
        adapter = AutoPeftModelForCausalLM.from_pretrained(out)
        assert any(p.abs().sum() > 0 for n, p in adapter.named_parameters() if "lora_B" in n)  # B starts at zero


def assert_reloads_as_the_tiny_model(out):
    """The saved model loads as an ordinary checkpoint of the bundled model's architecture, and has moved."""
    from transformers import AutoModelForCausalLM

    saved, start = (AutoModelForCausalLM.from_pretrained(path).state_dict() for path in (out, TINY_MODEL))
    assert {k: v.shape for k, v in saved.items()} == {k: v.shape for k, v in start.items()}
    assert any(not torch.equal(saved[k], start[k]) for k in start if ".layers." in k)


# Runs a script as `python script.py` would, recording the settings accelerate's PartialState is given each time it
# starts the process group (one JSON line per start in $SPY_FILE): the backend, and the timeout where transformers
# passes one (it does not with --use_cpu).
INIT_SPY = '''
import json, os, runpy, sys
import torch.distributed as dist
from accelerate import PartialState

init = PartialState.__init__
def __init__(self, *args, **kwargs):
    if not dist.is_initialized():
        timeout = kwargs.get("timeout") and kwargs["timeout"].total_seconds()
        with open(os.environ["SPY_FILE"], "a") as f:
            f.write(json.dumps({"backend": kwargs.get("backend"), "timeout": timeout}) + "\\n")
    init(self, *args, **kwargs)
PartialState.__init__ = __init__

sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
'''


@pytest.mark.parametrize("script", ["grpo_trl_example.py", "ppo_trl_example.py"])
def test_the_process_group_gets_the_runs_own_timeout_and_backend(tmp_path, script):
    """--ddp_backend and --ddp_timeout reach the process group: it is started once per process, from the run's own
    config, not from one built with TrainingArguments' defaults (30 minutes) before the run's arguments were read.
    The run stops at an option check right after parsing: the group has been started by then."""
    (tmp_path / "spy.py").write_text(INIT_SPY)
    spy = tmp_path / "spy.jsonl"
    torchrun = ["-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port()),
                str(tmp_path / "spy.py")]
    backend = "gloo" if ddp_flags(2) else "nccl"
    proc = run_script(script, "--ddp_timeout", 1234, "--ddp_backend", backend, "--eval_num_samples", 1,
                      "--eval_max_prompts", 0, *ddp_flags(2), cwd=tmp_path, launcher=torchrun,
                      env={"SPY_FILE": str(spy)}, check=False)
    assert proc.stderr.count("error: --eval_max_prompts 0 leaves no prompt to evaluate") == 1  # once per launch
    timeout = None if ddp_flags(2) else 1234.0  # transformers 5.23 passes no timeout for a CPU run
    assert read_jsonl(spy) == [{"backend": backend, "timeout": timeout}] * 2


# What trl 1.12's PPOTrainer would do under accelerate_configs/fsdp.yaml, without accelerate (which builds FSDP only on
# GPUs): its policy and value model sharded by FSDP2 as one module, each decoder layer a unit, and the policy
# generating on its own, outside that module's forward
FSDP_GENERATION_PROBE = """
import torch, torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification
from trl.experimental.ppo.ppo_trainer import PolicyAndValueWrapper

dist.init_process_group("gloo")
policy = AutoModelForCausalLM.from_pretrained({model!r})
value = AutoModelForSequenceClassification.from_pretrained({model!r}, num_labels=1)
model = PolicyAndValueWrapper(policy, value)
for layer in [*policy.model.layers, *value.model.layers]:
    fully_shard(layer)
fully_shard(model)
try:
    result = f"generated {{model.policy.generate(torch.tensor([[3, 4, 5]]), max_new_tokens=3).tolist()}}"
except RuntimeError as err:
    result = f"failed: {{err}}"
open(f"rank{{dist.get_rank()}}.txt", "w").write(result)
dist.destroy_process_group()
"""


def test_ppo_refuses_fsdp_for_a_reason_that_still_holds(tmp_path):
    """PPO refuses FSDP (extras/ppo.py) because trl 1.12's PPOTrainer generates from the policy inside the FSDP-wrapped
    module, outside the forward in which FSDP gathers the weights. On 2 CPU processes with FSDP2 that generation
    fails on every process; the day it does not, the refusal can be reconsidered."""
    (tmp_path / "probe.py").write_text(FSDP_GENERATION_PROBE.format(model=str(TINY_MODEL)))
    ppo_python = script_python("ppo_trl_example.py")
    proc = subprocess.run([ppo_python, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                           str(free_port()), "probe.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **THREADS, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr
    for rank in (0, 1):
        assert (tmp_path / f"rank{rank}.txt").read_text().startswith(
            "failed: aten.embedding.default got mixed torch.Tensor and DTensor")
