"""Two processes under `accelerate launch --config_file accelerate_configs/ddp.yaml` on CPU (gloo)."""

import json

from conftest import accelerate_ddp, read_jsonl, run_script

# A reward that scores nothing and records which prompts each rank was given, one line per call.
RANK_PROBE = '''
import json, os

def rank_probe(completions, prompts, **kwargs):
    with open(os.path.join(os.environ["PROBE_DIR"], f"rank{os.environ['RANK']}.jsonl"), "a") as f:
        f.write(json.dumps(sorted(set(map(str, prompts)))) + "\\n")
    return [0.0] * len(completions)
'''


def test_grpo_two_processes(tmp_path):
    (tmp_path / "probe.py").write_text(RANK_PROBE)
    out = tmp_path / "out"
    steps = 3
    proc = run_script("grpo_trl_example.py", "--output_dir", out, "--max_steps", steps, "--logging_steps", 1,
                      "--eval_strategy", "no", "--reward_funcs", "accuracy", "probe.rank_probe",
                      "--reward_weights", 1.0, 0.0, cwd=tmp_path, launcher=accelerate_ddp(2),
                      env={"PYTHONPATH": str(tmp_path), "PROBE_DIR": str(tmp_path)})

    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["global_step"] == steps

    # outputs are written once, by the main process, and are complete
    assert proc.stdout.count("GRPO: 3 steps") == 1
    assert [m["step"] for m in read_jsonl(out / "metrics.jsonl")] == [1, 2, 3]
    assert len(read_jsonl(out / "completions.jsonl")) == steps * 2 * 16  # gathered from both ranks
    assert (out / "model.safetensors").exists() and (out / "reward_curve.png").exists()

    # the data is split across ranks: at every step the two ranks scored different prompts
    rank0, rank1 = read_jsonl(tmp_path / "rank0.jsonl"), read_jsonl(tmp_path / "rank1.jsonl")
    assert len(rank0) == len(rank1) == steps
    for prompts0, prompts1 in zip(rank0, rank1):
        assert len(prompts0) == len(prompts1) == 2  # 16 completions per rank = 2 prompts x 8 generations
        assert not set(prompts0) & set(prompts1)
