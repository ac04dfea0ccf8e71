"""What the pages tell a vLLM user, checked against the trl GRPO runs on (1.16): the vLLM versions it supports, and
the server command it runs. vLLM itself runs only on a GPU (docs/testing.md)."""

import inspect
import re
import shlex

import pytest
from conftest import HAS_PPO_TRAINER, REPO

pytestmark = pytest.mark.skipif(HAS_PPO_TRAINER, reason="GRPO's trl, 1.16: trl 1.12 supports other vLLM versions")
PAGES = [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "recipes").glob("*/*/*.yaml"),
         REPO / "extras" / "checks.py"]


def test_every_vllm_install_line_gives_the_range_trl_supports():
    from trl.import_utils import is_vllm_available

    low, high = re.search(r'Version\("([\d.]+)"\) <= _vllm_base_version <= Version\("([\d.]+)"\)',
                          inspect.getsource(is_vllm_available)).groups()
    supported = {f'vllm>={low.removesuffix(".0")},<={high.removesuffix(".0")}'}
    given = {(str(page.relative_to(REPO)), found) for page in PAGES
             for found in re.findall(r'vllm>=[\d.]+,<=[\d.]+', page.read_text())}
    assert len(given) >= 4 and {found for _, found in given} == supported, given


def test_the_server_recipe_starts_vllm_as_trl_does():
    """`trl vllm-serve` is deprecated in trl 1.16 and runs vLLM's own `vllm serve` with the flags its trainers rely on:
    the recipe's command is that one, with each of them."""
    from trl.scripts.vllm_serve import ScriptArguments, build_command

    header = (REPO / "recipes" / "Qwen2.5-0.5B-Instruct" / "grpo" / "config_gsm8k_vllm_server.yaml").read_text()
    command = shlex.split(" ".join(line.lstrip("# ").rstrip("\\") for line in header.splitlines()
                                   if line.startswith("#   ")))
    serve = command[command.index("serve") - 1:command.index("&")]
    model = serve[2]
    trls = build_command(ScriptArguments(model=model))
    trainer_facing = trls[trls.index("--weight-transfer-config"):]  # the flags after vLLM's usual ones
    assert serve[:2] == ["vllm", "serve"] and "VLLM_SERVER_DEV_MODE=1" in command[:command.index("serve")]
    assert serve[3:] == trainer_facing
    assert "trl vllm-serve" not in header.replace("`trl vllm-serve`", "")  # named only as what it replaces
