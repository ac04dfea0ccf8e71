"""`uv run SCRIPT` builds an environment from the script's own header (PEP 723) and trains in it, each script on its
own trl: a copied script carries what it runs on (docs/versions.md). setup.sh puts uv in .venv; uv's package cache
makes the environments after the first in seconds."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, START_ENV, THREADS, script_header

UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")


def pip_find_links() -> str | None:
    """The local wheel folders pip is set to read (this machine keeps torch's CPU build in one), which uv does not
    read: without them uv takes PyPI's torch, the CUDA build (several GB)."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    folders = [line.split("=", 1)[1].strip("'\"") for line in listed.splitlines() if "find-links=" in line]
    return " ".join(dict.fromkeys(folders)) or None


@pytest.mark.parametrize("script, flags", [
    ("grpo_trl_example.py", ["--max_steps", "2"]),
    ("ppo_trl_example.py", ["--total_episodes", "16"]),
])
def test_uv_run_trains_each_script_on_the_trl_its_header_names(tmp_path, script, flags):
    if UV is None:
        message = "no uv: setup.sh installs it into .venv (or pip install uv)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    env = {**START_ENV, **THREADS}
    if "UV_FIND_LINKS" not in env and (links := pip_find_links()):
        env["UV_FIND_LINKS"] = links
    out = tmp_path / "out"
    proc = subprocess.run([UV, "run", "--quiet", str(REPO / script), *flags, "--output_dir", str(out)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    trl = next(d.split("==")[1] for d in script_header(script)["dependencies"] if d.startswith("trl=="))
    assert proc.stdout.splitlines()[0] == f"{script} on trl {trl}"  # the script's own first line, with no warning
    summary = json.loads((out / "summary.json").read_text())
    assert summary["versions"]["trl"] == trl and summary["global_step"] == (2 if script.startswith("grpo") else 1)
