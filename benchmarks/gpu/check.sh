#!/usr/bin/env bash
# The GPU check: both scripts on an offline H100/H200 in one run of at most 8 minutes (docs/testing.md, "The GPU check").
#
#   bash benchmarks/gpu/prepare.sh                           # on a machine with PyPI: builds .gpu/ (what travels)
#   DRY=1 SKIP_INSTALL=1 bash benchmarks/gpu/check.sh       # the CPU rehearsal: every phase, tiny, GPU-only ones left out
#   BUDGET=450 bash benchmarks/gpu/check.sh                  # on the GPU machine, with .gpu/ carried there
#
# On the lent machine, three calls back to back (files in /tmp stay only while it is warm; each call carries at most
# 64 MiB with the working tree, and prepare.sh's last lines give each call's size):
#   carry .gpu/w1                        mkdir -p /tmp/w && cp .gpu/w1/part.aa /tmp/w/
#   carry .gpu/w2                        cp .gpu/w2/* /tmp/w/
#   carry .gpu/whl .gpu/smol_tok.tar.xz  BUDGET=450 bash benchmarks/gpu/check.sh     (results come back from $OUT)
#
# In order, stopping at the first failure of the first three:
#   0. installs .gpu/whl/* (each optional group in a --target of its own, so that a Liger, bitsandbytes or DeepSpeed
#      that fails to import breaks only its own run: trl imports liger_kernel whenever it is installed; and each
#      script's trl apart, as setup.sh's two environments: GRPO's the newest, PPO's 1.12), starts an nvidia-smi
#      sampler, records versions and a bf16 matmul rate (env_check.py), and imports each script and extras/ on its trl;
#   1. builds the stand-ins (build_models.py) and SmolLM2: converted from its GGUF if the two halves were staged in
#      /tmp/w by earlier calls, otherwise random weights of its shape with its real tokenizer;
#   2. parses and checks every run below as its script would (args_check.py);
#   A. together: the default GRPO and PPO runs (bf16 and fp32) with the held-out evaluation, PPO under accelerate's
#      bf16 autocast, the vLLM refusal, GRPO under FSDP, ZeRO-2 and ZeRO-3 and PPO under ZeRO-2 and ZeRO-3 (with
#      checkpoints) with one process (PPO refuses FSDP), both under ZeRO-3 with named LoRA targets, and both SmolLM2
#      recipes with before/after;
#   B. alone: Qwen2.5-0.5B's shape outside the trainers (micro.py): forward+backward MFU, generation, Liger's loss,
#      trl's chunked LM head against materialised logits;
#   C. alone: GRPO and PPO steps of the Qwen2.5-0.5B recipes on its stand-in, timed (benchmarks/timed_run.py): LoRA,
#      QLoRA (with its adapters' movement at the recipe's learning rate), Liger, full.
# Then summarize.py writes $OUT/summary.md (also printed), with env.txt, micro.json and logs.tgz beside it.
#
# Env: BUDGET (s, default 450): a phase of A/B/C that would not fit in what is left is skipped, and says so.
#      DRY=1: the CPU rehearsal. SKIP_INSTALL=1: the python's own packages instead of .gpu/whl. STOP_AFTER=imports
#      or args: stop after phase 0 or 2 (tests/e2e/test_gpu_check.py). PY (python3), G (.gpu), W (/tmp/gpucheck).
#      PY_GRPO, PY_PPO: each script's interpreter: $PY with that script's trl first on its path, or with
#      SKIP_INSTALL=1, setup.sh's .venv and .venv-ppo where they are, else $PY.
set -u -o pipefail
cd "$(dirname "$0")/../.."
T0=$(date +%s)
BUDGET=${BUDGET:-450} DRY=${DRY:-0} PY=${PY:-python3} G=${G:-.gpu} W=${W:-/tmp/gpucheck} STOP_AFTER=${STOP_AFTER:-}
LOG=$W/logs RUNS=$W/runs M=$W/models O=${OUT:-$W/out} HERE=benchmarks/gpu
rm -rf "$LOG" "$RUNS" "$M" "$W/results.tsv" "$W/timeline.txt" "$W/skipped.txt" "$W"/planned*.txt "$W/peak.json" \
    "$W/micro.json"
mkdir -p "$LOG" "$RUNS" "$M" "$O"
: > "$W/results.tsv"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HOME=$W/hf \
    TOKENIZERS_PARALLELISM=false MPLBACKEND=Agg WANDB_DISABLED=true DRY W
PLAN=0

left() { echo $((BUDGET - $(date +%s) + T0)); }
note() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$W/timeline.txt"; }
fits() {  # fits SECONDS WHAT: is there time left for it?
    [ "$PLAN" = 1 ] || [ "$(left)" -ge "$1" ] && return 0
    echo "$2: skipped, needs ~$1 s and $(left) s are left" | tee -a "$W/skipped.txt"
    return 1
}
# run NAME TIMEOUT [VAR=value ...] -- COMMAND...: one step, its log in $LOG/NAME.log, a row in results.tsv. While
# planning (PLAN=1) it only writes the script and its arguments to planned.txt, for args_check.py.
run() {
    local name=$1 limit=$2 envs=() start rc
    shift 2
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    if [ "$PLAN" = 1 ]; then
        while [ $# -gt 0 ] && [[ "$1" != *_trl_example.py ]]; do shift; done
        [ $# -gt 0 ] && printf '%s\n' "$(printf '%q ' "$@")" >> "$W/planned.txt"  # one write: runs plan at once
        return 0
    fi
    start=$(date +%s.%N)
    note "start $name: ${envs[*]-} $*"
    env ${envs[@]+"${envs[@]}"} timeout -k 10 "$limit" "$@" > "$LOG/$name.log" 2>&1
    rc=$?
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$start" "$(date +%s.%N)" >> "$W/results.tsv"
    note "end $name: rc=$rc"
    return $rc
}
finish() {  # the summary and what comes back under $OUT
    [ -n "${SMI:-}" ] && kill "$SMI" 2> /dev/null
    $PY "$HERE/summarize.py" "$O/summary.md" 2> "$LOG/summarize.err" || cat "$LOG/summarize.err"
    cp "$LOG/env.txt" "$O/env.txt" 2> /dev/null
    cp "$W/micro.json" "$O/micro.json" 2> /dev/null
    (cd "$W" && find runs -maxdepth 2 -type f \( -name summary.json -o -name eval.json -o -name metrics.jsonl \
        -o -name record.json \) > keep.txt && tar -czf "$O/logs.tgz" logs results.tsv timeline.txt \
        $(ls skipped.txt planned*.txt peak.json micro.json 2> /dev/null) -T keep.txt)
    note "done; \$OUT: $(ls "$O" | tr '\n' ' ')"
    exit "$1"
}

# 0. Wheels, the GPU sampler, versions and the matmul rate, and the imports
if [ "${SKIP_INSTALL:-0}" != 1 ]; then
    for group in core grpo ppo liger bnb ds; do
        ls "$G/whl/$group/"*.whl > /dev/null 2>&1 || { note "no wheels for $group"; continue; }
        rm -rf "/tmp/site-$group"
        $PY -m pip install -q --no-index --no-deps --no-compile --upgrade --target "/tmp/site-$group" \
            "$G/whl/$group/"*.whl > "$LOG/pip_$group.log" 2>&1 || note "installing $group FAILED (logs/pip_$group.log)"
    done
    export PYTHONPATH=/tmp/site-core${PYTHONPATH:+:$PYTHONPATH}
    [ -d /tmp/site-core/bin ] && export PATH=$PATH:/tmp/site-core/bin
    mkdir -p "$W/bin"
    for script in grpo ppo; do  # an interpreter per script: $PY with its trl first, for it and what it launches
        printf '#!/bin/sh\nPYTHONPATH=/tmp/site-%s${PYTHONPATH:+:$PYTHONPATH} exec %s "$@"\n' "$script" "$PY" \
            > "$W/bin/python-$script"
        chmod +x "$W/bin/python-$script"
    done
    PY_GRPO=$W/bin/python-grpo PY_PPO=$W/bin/python-ppo
else
    [ -x .venv/bin/python ] && PY_GRPO=${PY_GRPO:-.venv/bin/python}
    [ -x .venv-ppo/bin/python ] && PY_PPO=${PY_PPO:-.venv-ppo/bin/python}
fi
PY_GRPO=${PY_GRPO:-$PY} PY_PPO=${PY_PPO:-$PY}
BASE=${PYTHONPATH:-} LIGER=${PYTHONPATH:-}:/tmp/site-liger BNB=${PYTHONPATH:-}:/tmp/site-bnb DS=${PYTHONPATH:-}:/tmp/site-ds
ALL=$BASE:/tmp/site-liger:/tmp/site-bnb:/tmp/site-ds
if command -v nvidia-smi > /dev/null && [ "$DRY" != 1 ]; then
    nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu,clocks.sm,power.draw,temperature.gpu \
        --format=csv,noheader,nounits -lms 500 > "$LOG/smi.csv" 2> /dev/null &
    SMI=$!
fi
{ nvidia-smi 2>&1 | head -15; $PY -m pip list 2> /dev/null; } > "$LOG/env.txt"
run env_check 120 PYTHONPATH="$ALL" -- $PY_GRPO "$HERE/env_check.py" "$W/peak.json"
cat "$LOG/env_check.log" >> "$LOG/env.txt"
for script in grpo ppo; do
    python=PY_${script^^}
    if ! run "imports_$script" 120 PYTHONPATH="$ALL" -- ${!python} -c "import ${script}_trl_example, rewards, trl
from extras import cli, code_sandbox, evaluation, outputs, ppo, tools
import torch; print('imports ok: ${script}_trl_example on trl', trl.__version__, '| cuda', torch.cuda.is_available())"
    then
        tail -30 "$LOG/imports_$script.log"
        note "${script}_trl_example.py does not import: stopping (logs/imports_$script.log)"
        finish 1
    fi
    cat "$LOG/imports_$script.log" >> "$LOG/env.txt"
done
[ "$STOP_AFTER" = imports ] && finish 0

# 1. The stand-ins, and SmolLM2: its GGUF, staged in two halves by earlier calls, or random weights of its shape
GGUF=/tmp/w/SmolLM2-135M-Instruct.Q4_1.gguf
[ ! -f "$GGUF" ] && ls /tmp/w/part.aa /tmp/w/part.ab > /dev/null 2>&1 && cat /tmp/w/part.aa /tmp/w/part.ab > "$GGUF"
if [ -f "$GGUF" ] && ! (cd /tmp/w && sha256sum -c --status sha256.txt); then
    note "SmolLM2's GGUF fails its checksum: not used"
    rm -f "$GGUF"
fi
SMOL_ARGS=()
if [ -f "$GGUF" ]; then
    SMOL=assets/SmolLM2-135M-Instruct
    run smollm2_convert 150 OMP_NUM_THREADS=8 -- $PY assets/convert_gguf.py --gguf "$GGUF" &
    run build_models 240 -- $PY_GRPO "$HERE/build_models.py" "$M"
elif [ -f "$G/smol_tok.tar.xz" ]; then
    SMOL=$M/smollm2-random SMOL_ARGS=(--model_name_or_path "$M/smollm2-random")
    note "SmolLM2's weights were not staged: its recipes run on random weights of its shape (mechanics, not learning)"
    tar -xJf "$G/smol_tok.tar.xz" -C "$M" && run build_models 240 -- $PY_GRPO "$HERE/build_models.py" "$M" "$M/smol_tok"
else
    SMOL=
    note "no SmolLM2 weights and no tokenizer (.gpu/smol_tok.tar.xz): its recipes are left out"
    run build_models 240 -- $PY_GRPO "$HERE/build_models.py" "$M"
fi
wait
Q=$M/qwen05b GSM=$M/gsm8k

# The runs. Sizes: a GPU's, or a CPU rehearsal's (a few steps, tiny shapes)
if [ "$DRY" = 1 ]; then
    GRPO_DEFAULT=(--max_steps 10) PPO_DEFAULT=(--total_episodes 128) SMOL_GRPO=(--max_steps 2 --eval_max_prompts 4)
    SMOL_PPO=(--total_episodes 16 --eval_max_prompts 4) QWEN_STEPS=3 QWEN_LENGTH=8 QWEN_BATCH=16
else
    GRPO_DEFAULT=() PPO_DEFAULT=() SMOL_GRPO=() SMOL_PPO=() QWEN_STEPS=4 QWEN_LENGTH=128 QWEN_BATCH=64
fi
[ "$SMOL" = "$M/smollm2-random" ] && SMOL_GRPO+=(--max_steps 5) SMOL_PPO+=(--total_episodes 32)
A=(OMP_NUM_THREADS=2)
launch() {  # launch PYTHON PORT [CONFIG]: accelerate with one process
    echo $1 -m accelerate.commands.launch ${3:+--config_file accelerate_configs/$3.yaml} --num_processes 1 \
        --main_process_port "$2"
}

phase_a() {
    run grpo_default 240 "${A[@]}" -- $PY_GRPO grpo_trl_example.py --eval_num_samples 8 \
        --output_dir "$RUNS/grpo_default" ${GRPO_DEFAULT[@]+"${GRPO_DEFAULT[@]}"} &
    run grpo_default_fp32 240 "${A[@]}" -- $PY_GRPO grpo_trl_example.py --bf16 false --eval_num_samples 8 \
        --output_dir "$RUNS/grpo_default_fp32" ${GRPO_DEFAULT[@]+"${GRPO_DEFAULT[@]}"} &
    run ppo_default 240 "${A[@]}" -- $PY_PPO ppo_trl_example.py --eval_num_samples 8 --output_dir "$RUNS/ppo_default" \
        ${PPO_DEFAULT[@]+"${PPO_DEFAULT[@]}"} &
    if [ "$DRY" != 1 ]; then  # vLLM is a GPU's; accelerate refuses FSDP on a CPU, and DeepSpeed has no CPU here
        run refuse_vllm 120 "${A[@]}" -- $PY_GRPO grpo_trl_example.py --use_vllm true --max_steps 1 \
            --output_dir "$RUNS/refuse_vllm" &
        run ppo_amp_bf16 240 "${A[@]}" -- $(launch "$PY_PPO" 29510) --mixed_precision bf16 ppo_trl_example.py \
            --total_episodes 640 --output_dir "$RUNS/ppo_amp_bf16" &
        run grpo_fsdp 180 "${A[@]}" -- $(launch "$PY_GRPO" 29511 fsdp) grpo_trl_example.py --max_steps 30 \
            --eval_strategy no --output_dir "$RUNS/grpo_fsdp" &
        for zero in zero2 zero3; do
            run "grpo_$zero" 180 "${A[@]}" PYTHONPATH="$DS" -- $(launch "$PY_GRPO" $((29511 + ${zero: -1})) $zero) \
                grpo_trl_example.py --max_steps 30 --eval_strategy no --output_dir "$RUNS/grpo_$zero" &
            run "ppo_$zero" 180 "${A[@]}" PYTHONPATH="$DS" -- $(launch "$PY_PPO" $((29515 + ${zero: -1})) $zero) \
                ppo_trl_example.py --total_episodes 256 --save_strategy steps --save_steps 2 \
                --output_dir "$RUNS/ppo_$zero" &
        done
        # ZeRO-3 with named LoRA targets, as every Qwen recipe has them: the target check and PPO's adapters in bf16
        run grpo_zero3_lora 180 "${A[@]}" PYTHONPATH="$DS" -- $(launch "$PY_GRPO" 29520 zero3) grpo_trl_example.py \
            --max_steps 10 --eval_strategy no --use_peft --lora_target_modules q_proj v_proj \
            --output_dir "$RUNS/grpo_zero3_lora" &
        run ppo_zero3_lora 180 "${A[@]}" PYTHONPATH="$DS" -- $(launch "$PY_PPO" 29521 zero3) ppo_trl_example.py \
            --total_episodes 128 --use_peft --lora_target_modules q_proj v_proj --output_dir "$RUNS/ppo_zero3_lora" &
    fi
    if [ -n "$SMOL" ]; then
        run smollm2_grpo 240 "${A[@]}" -- $PY_GRPO grpo_trl_example.py \
            --config recipes/SmolLM2-135M-Instruct/grpo/config_chat_addition.yaml --output_dir "$RUNS/smollm2_grpo" \
            ${SMOL_ARGS[@]+"${SMOL_ARGS[@]}"} ${SMOL_GRPO[@]+"${SMOL_GRPO[@]}"} &
        run smollm2_ppo_lora 240 "${A[@]}" -- $PY_PPO ppo_trl_example.py \
            --config recipes/SmolLM2-135M-Instruct/ppo/config_chat_addition_lora.yaml \
            --output_dir "$RUNS/smollm2_ppo_lora" ${SMOL_ARGS[@]+"${SMOL_ARGS[@]}"} ${SMOL_PPO[@]+"${SMOL_PPO[@]}"} &
    fi
    wait
}

qwen() {  # qwen NAME SCRIPT SECONDS PYTHONPATH ARGS...: a timed run of a Qwen2.5-0.5B recipe on the stand-in
    local name=$1 script=$2 seconds=$3 path=$4 size python=PY_${2^^}
    shift 4
    fits "$seconds" "$name" || return 0
    mkdir -p "$RUNS/$name"
    if [ "$script" = grpo ]; then
        size=(--max_steps "$QWEN_STEPS" --max_completion_length "$QWEN_LENGTH" --per_device_train_batch_size
              "$QWEN_BATCH" --gradient_accumulation_steps 1 --use_vllm false --eval_strategy no --logging_steps 1)
    else  # PPO: updates of QWEN_BATCH completions
        size=(--total_episodes $((QWEN_STEPS * QWEN_BATCH)) --response_length "$QWEN_LENGTH"
              --per_device_train_batch_size "$QWEN_BATCH" --gradient_accumulation_steps 1 --num_sample_generations 0)
    fi
    run "$name" $((seconds * 3)) PYTHONPATH="$path" BENCH_RECORD="$RUNS/$name/record.json" -- \
        ${!python} benchmarks/timed_run.py "${script}_trl_example.py" \
        --config "recipes/Qwen2.5-0.5B-Instruct/$script/config_gsm8k.yaml" \
        --model_name_or_path "$Q" --dataset_name "$GSM" --save_strategy no \
        --output_dir "$RUNS/$name" "${size[@]}" "$@"
}
phase_c() {
    qwen qwen_grpo_lora grpo 45 "$BASE"
    qwen qwen_ppo_lora ppo 60 "$BASE"
    # QLoRA at the recipes' learning rate (1e-5): summarize.py reads how many lora_A entries moved after the first
    # checkpoint (the adapters in bf16 kept about a tenth of them)
    qwen qwen_grpo_qlora grpo 45 "$BNB" --load_in_4bit true --save_strategy steps --save_steps 1
    qwen qwen_ppo_qlora ppo 60 "$BNB" --load_in_4bit true --save_strategy steps --save_steps $((QWEN_STEPS - 1))
    if [ "$DRY" != 1 ]; then  # Liger's Triton kernels are a GPU's
        qwen qwen_grpo_lora_liger grpo 75 "$LIGER" --use_liger_kernel true
    fi
    qwen qwen_grpo_full grpo 50 "$BASE" --use_peft false --dtype float32 --learning_rate 1e-6  # bf16 autocast
}

# 2. Every run's arguments, checked before any run starts
PLAN=1
phase_a
phase_c
PLAN=0
for script in grpo ppo; do
    python=PY_${script^^}
    grep "^${script}_trl_example.py " "$W/planned.txt" > "$W/planned_$script.txt"
    if ! run "args_$script" 120 PYTHONPATH="$ALL" -- ${!python} "$HERE/args_check.py" "$W/planned_$script.txt"; then
        grep -A1 FAIL "$LOG/args_$script.log"
        note "a run's arguments fail its script's checks: stopping (logs/args_$script.log)"
        finish 1
    fi
done
[ "$STOP_AFTER" = args ] && finish 0

note "phase A: default runs, launchers, SmolLM2 (together)"
phase_a
note "phase B: Qwen2.5-0.5B's shape outside the trainers"
fits 90 "micro-benchmark" && run micro 180 PYTHONPATH="$LIGER" -- $PY_GRPO "$HERE/micro.py" "$Q" "$W/micro.json"
note "phase C: Qwen2.5-0.5B recipes on the stand-in, timed"
phase_c
finish 0
