"""benchmarks/gpu/check.sh's cheapest part, on a CPU: the imports, the stand-ins, and every run's arguments checked
as its script checks them, so that the GPU's minutes go to the runs and not to a typo. The whole CPU rehearsal
(`DRY=1 SKIP_INSTALL=1 bash benchmarks/gpu/check.sh`, a few minutes) is in docs/testing.md."""

import os
import shlex
import subprocess

from conftest import REPO, script_python, script_trl

# What the rehearsal runs (DRY=1: no GPU-only run, and no SmolLM2 without .gpu/), by output folder
REHEARSED = {"grpo_default", "grpo_default_fp32", "ppo_default", "qwen_grpo_lora", "qwen_ppo_lora", "qwen_grpo_qlora",
             "qwen_ppo_qlora", "qwen_grpo_full"}


def test_the_gpu_check_imports_and_checks_every_run_before_it_starts(tmp_path):
    # Each script on its own environment's python, as the check gives each its own trl
    grpo, ppo = script_python("grpo_trl_example.py"), script_python("ppo_trl_example.py")
    env = {**os.environ, "DRY": "1", "SKIP_INSTALL": "1", "STOP_AFTER": "args", "PY": grpo, "PY_GRPO": grpo,
           "PY_PPO": ppo, "W": str(tmp_path), "G": str(tmp_path / "nothing-carried")}
    proc = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu" / "check.sh")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for script in ("grpo", "ppo"):
        imported = (tmp_path / "logs" / f"imports_{script}.log").read_text()
        assert f"imports ok: {script}_trl_example on trl {script_trl(f'{script}_trl_example.py')}" in imported

    planned = [shlex.split(line) for line in (tmp_path / "planned.txt").read_text().splitlines()]
    assert {os.path.basename(run[run.index("--output_dir") + 1]) for run in planned} == REHEARSED
    for script in ("grpo", "ppo"):  # each script's runs checked by its own interpreter
        checked = (tmp_path / "logs" / f"args_{script}.log").read_text().splitlines()
        assert [line.split()[:2] for line in checked] == [["ok", f"{script}_trl_example.py"]] * sum(
            run[0] == f"{script}_trl_example.py" for run in planned)
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert all(f"| {step} | 0 |" in summary for step in ("env_check", "imports_grpo", "imports_ppo", "build_models",
                                                         "args_grpo", "args_ppo"))


def test_the_gpu_check_stops_at_a_run_its_script_would_refuse(tmp_path):
    runs = tmp_path / "planned.txt"
    runs.write_text("grpo_trl_example.py --max_steps 1\ngrpo_trl_example.py --learning_rte 1e-5\n"
                    "ppo_trl_example.py --logging_steps 1\n")
    check = [script_python("ppo_trl_example.py"), str(REPO / "benchmarks" / "gpu" / "args_check.py"), str(runs)]
    proc = subprocess.run(check, capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 1
    ok, typo, why_typo, unread, why_unread = proc.stdout.splitlines()
    assert ok == "ok    grpo_trl_example.py --max_steps 1"
    assert typo.startswith("FAIL  grpo_trl_example.py --learning_rte") and "--learning_rate" in why_typo
    assert unread.startswith("FAIL  ppo_trl_example.py --logging_steps") and "never reads" in why_unread
