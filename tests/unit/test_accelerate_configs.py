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
