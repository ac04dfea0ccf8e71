"""Two processes under `accelerate launch --config_file accelerate_configs/ddp.yaml` on CPU (gloo): on one machine,
and as two "machines" (the README's multi-node command, both nodes on 127.0.0.1)."""

import json
import os
import subprocess
import sys

import pytest
from conftest import (RANK_PROBE, REPO, SHUTDOWN_PROBE, THREADS, accelerate_ddp, ddp_flags, free_port, read_jsonl,
                      run_script)


def test_grpo_two_processes(tmp_path):
    (tmp_path / "probe.py").write_text(RANK_PROBE)
    (tmp_path / "sitecustomize.py").write_text(SHUTDOWN_PROBE)
    out = tmp_path / "out"
    steps = 3
    proc = run_script("grpo_trl_example.py", "--output_dir", out, "--max_steps", steps, "--logging_steps", 1,
                      "--eval_strategy", "no", "--reward_funcs", "accuracy", "probe.rank_probe",
                      "--reward_weights", 1.0, 0.0, *ddp_flags(2), cwd=tmp_path, launcher=accelerate_ddp(2),
                      env={"PYTHONPATH": str(tmp_path), "PROBE_DIR": str(tmp_path)})

    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["global_step"] == steps

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


def test_grpo_two_machines(tmp_path):
    """The README's multi-node launch: `--num_machines 2 --machine_rank 0|1 --main_process_ip`, one process each
    (`--num_processes` counts the processes over all machines).

    Both "machines" share this disk, as nodes often share a file system: the outputs must be written once,
    by the global main process, not once per node.
    """
    out, port, steps = tmp_path / "out", free_port(), 2
    args = ["--output_dir", out, "--max_steps", steps, "--logging_steps", 1, "--eval_strategy", "no",
            "--eval_num_samples", 2, "--eval_max_prompts", 7, *ddp_flags(2)]
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
    assert [stdout.count("held-out evaluation") for stdout, _ in outputs] == [1, 0]
    assert not (tmp_path / "machine0" / "out").exists() and not (tmp_path / "machine1" / "out").exists()
