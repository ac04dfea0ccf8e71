"""The configs in accelerate_configs/, read as `accelerate launch --config_file` reads them (the runs under each are
tests/e2e/test_multiprocess.py's)."""

import pytest
from conftest import REPO


@pytest.mark.parametrize("config, expected", [
    ("ddp", {"distributed_type": "MULTI_GPU"}),
    ("fsdp", {"distributed_type": "FSDP", "fsdp_config": {"fsdp_version": 2}}),
    ("zero2", {"distributed_type": "DEEPSPEED", "deepspeed_config": {"zero_stage": 2}}),
    ("zero3", {"distributed_type": "DEEPSPEED", "deepspeed_config": {"zero_stage": 3}}),
])
def test_each_config_loads_through_accelerates_parser(config, expected):
    """accelerate's own loader reads every config in accelerate_configs/ and finds the mode it names."""
    from accelerate.commands.config.config_args import load_config_from_file

    loaded = load_config_from_file(str(REPO / "accelerate_configs" / f"{config}.yaml")).to_dict()
    assert loaded["distributed_type"] == expected["distributed_type"]
    for section, values in expected.items():
        if section != "distributed_type":
            assert {k: loaded[section][k] for k in values} == values


@pytest.mark.parametrize("launch, asked", [
    (["python", "/venv/bin/accelerate", "launch", "--num_processes", "2", "grpo_trl_example.py"], 2),
    (["/venv/bin/accelerate", "launch", "--num-processes=4", "ppo_trl_example.py", "--seed", "3"], 4),
    (["accelerate", "launch", "grpo_trl_example.py"], None),  # none asked
    (["torchrun", "--nproc_per_node", "2", "grpo_trl_example.py"], None), (["bash"], None)])
def test_a_launch_that_started_fewer_processes_than_asked_says_so(launch, asked, monkeypatch, capsys):
    """Issue 83: `accelerate launch --num_processes 2` without a config ran one process on a CPU, and nothing said
    so: accelerate's simple launcher starts one unless a config, --multi_gpu or --multi_cpu says how to spread it."""
    from types import SimpleNamespace

    import psutil

    from extras import outputs

    parent = SimpleNamespace(cmdline=lambda: launch)
    monkeypatch.setattr(psutil, "Process", lambda: SimpleNamespace(parent=lambda: parent))
    assert outputs.launch_asked() == asked
    accelerator = SimpleNamespace(is_main_process=True, num_processes=1, device=SimpleNamespace(type="cpu"),
                                  state=SimpleNamespace(distributed_type="NO", backend=None))
    outputs.print_distributed_mode(SimpleNamespace(accelerator=accelerator))
    said = capsys.readouterr().out
    assert said.startswith("distributed: single process, 1 process on cpu\n")
    assert ("WARNING: accelerate launch was asked for 2 processes and started 1 process: without a config" in said
            ) is (asked == 2) and ("--multi_cpu" in said) is bool(asked)
