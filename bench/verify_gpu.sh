#!/usr/bin/env bash
# kvplan verify on one GPU (written for an H200, 141 GB): the runs docs/verify.md describes.
# Writes one JSON record and one summary table per run under docs/examples/, and keeps going
# when a run exits 1 (a failed check is a result); any other exit code stops the script.
#
#   bash bench/verify_gpu.sh            # from the repository root, kvplan[verify] installed
#
# Every run uses all layers: Llama-3.1-8B at 32 x 8k is 32 GiB of bf16 KV (+ null pages),
# at 1 x 64k 8 GiB; fp8 halves both; DeepSeek-V2-Lite at 32 x 8k is 8.2 GB of MLA latent.
# Leave clocks and power limits as they are (a locked clock measures a GPU nobody serves on);
# nvidia-smi clocks are recorded.
set -uo pipefail

OUT=${OUT:-docs/examples}
KVPLAN=${KVPLAN:-kvplan}
mkdir -p "$OUT"
unset TRITON_INTERPRET  # the interpreter would run the "GPU" kernels on the CPU

run() {
    local name=$1
    shift
    echo "== $name: kvplan verify $*" >&2
    "$KVPLAN" verify "$@" --device cuda --json "$OUT/verify-$name.json" \
        | tee "$OUT/verify-$name.txt"
    local code=${PIPESTATUS[0]}
    if [ "$code" -ne 0 ] && [ "$code" -ne 1 ]; then
        echo "verify $name exited $code" >&2
        exit "$code"
    fi
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,power.draw \
    --format=csv | tee "$OUT/verify-nvidia-smi.txt"

run llama-3.1-8b-bf16-32x8k  llama-3.1-8b --kv-dtype bf16 --batch 32 --context 8k
run llama-3.1-8b-fp8-32x8k   llama-3.1-8b --kv-dtype fp8  --batch 32 --context 8k
run llama-3.1-8b-bf16-1x64k  llama-3.1-8b --kv-dtype bf16 --batch 1  --context 64k
run llama-3.1-8b-fp8-1x64k   llama-3.1-8b --kv-dtype fp8  --batch 1  --context 64k
run deepseek-v2-lite-bf16-32x8k deepseek-v2-lite --kv-dtype bf16 --batch 32 --context 8k
# Same config twice: a difference smaller than the p10-p90 spread is noise.
run llama-3.1-8b-bf16-32x8k-again llama-3.1-8b --kv-dtype bf16 --batch 32 --context 8k
# The GPU-only tests (compiled kernels, CUDA memory accounting).
python -m pytest tests/test_verify.py -m gpu -q
