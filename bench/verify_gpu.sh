#!/usr/bin/env bash
# kvplan verify on one H200 in one go, under 10 minutes: the capacity proof for
# Llama-3.1-8B (bf16 and fp8 KV) at its longest context, the speed-model profile
# (verify --profile: a calibration file), the memory check at non-power-of-two
# contexts (3000 x 8, 10000 x 1), DeepSeek-V2-Lite (MLA), bench/decode_bench.py with its
# config sweep at 32 x 8k, and the GPU-only tests. Records and tables land in docs/examples/
# (RECORDS=...), a summary table in docs/examples/verify-gpu-summary.md; when $OUT is set (the
# device tool's output folder) everything is also packed into $OUT/verify-gpu.tar.gz.
#
#   bash bench/gpu_wheels.sh     # here, once: pydantic & co. as wheels into .whl/
#   bash bench/verify_gpu.sh     # there, from the repository root
#
# Written for a machine with torch 2.11 and Triton 3.6 in its python3 and no package
# registry: kvplan is installed editable without dependencies, and the ones the image lacks
# (pydantic) come from .whl/. A failed check (exit 1) is a result and the script goes on;
# each step has a time limit and steps past the overall deadline are skipped and listed.
# Leave clocks and power limits as they are: the records keep what nvidia-smi reported.
set -uo pipefail
cd "$(dirname "$0")/.."
RECORDS=${RECORDS:-docs/examples}
PY=${PYTHON:-python3}
DEADLINE_S=${DEADLINE_S:-560}
SITE=${SITE:-/tmp/kvplan-site}
mkdir -p "$RECORDS"
unset TRITON_INTERPRET PYTORCH_CUDA_ALLOC_CONF  # the interpreter; allocator rules verify replays
export PYTHONUNBUFFERED=1
SKIPPED=()

install_kvplan() {
    if ! $PY -c "import pydantic" 2>/dev/null; then
        if ! ls .whl/*.whl >/dev/null 2>&1; then
            echo "pydantic is missing and .whl/ holds no wheels: run bash bench/gpu_wheels.sh" \
                "where a registry is reachable, and bring .whl/ along" >&2
            exit 2
        fi
        $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$SITE" .whl/*.whl || exit 2
        export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
    fi
    if ! $PY -c "import kvplan.validate.harness" 2>/dev/null; then
        $PY -m pip install -q --no-index --no-deps --no-build-isolation -e . || exit 2
    fi
    $PY -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
}

# step NAME LIMIT_S COMMAND...: run unless the deadline has passed; exit 0 and 1 both go on.
# DRY_RUN=1 prints each step's command instead (the tests check those commands parse).
step() {
    local name=$1 limit=$2
    shift 2
    if [ "${DRY_RUN:-0}" = 1 ]; then
        echo "$*"
        return
    fi
    local left=$((DEADLINE_S - SECONDS))
    if [ "$left" -lt 30 ]; then
        SKIPPED+=("$name")
        echo "== $name: skipped, ${left}s left of the ${DEADLINE_S}s budget" >&2
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "== $name (limit ${limit}s, ${SECONDS}s elapsed): $*" >&2
    timeout "$limit" "$@" 2>&1 | tee "$RECORDS/verify-$name.txt"
    local code=${PIPESTATUS[0]}
    if [ "$code" -ne 0 ] && [ "$code" -ne 1 ]; then
        echo "== $name exited $code" >&2
    fi
}

verify() {
    local name=$1 limit=$2
    shift 2
    step "$name" "$limit" $PY -m kvplan.cli verify "$@" --device cuda \
        --json "$RECORDS/verify-$name.json"
}

if [ "${DRY_RUN:-0}" != 1 ]; then
    install_kvplan
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,power.draw \
        --format=csv | tee "$RECORDS/verify-nvidia-smi.txt"
fi

# The capacity claim at the longest context (131,072 tokens), bf16 and fp8 KV.
verify capacity-llama-3.1-8b-bf16 120 llama-3.1-8b --sku h200 --capacity --kv-dtype bf16
verify capacity-llama-3.1-8b-fp8 120 llama-3.1-8b --sku h200 --capacity --kv-dtype fp8
# The speed model's operations on this GPU (GEMMs, paged decode over batch x context, an
# all-reduce when several GPUs are visible), written as a calibration file, and the report
# it changes.
step profile-llama-3.1-8b 120 $PY -m kvplan.cli verify llama-3.1-8b --sku h200 --device cuda \
    --profile "$RECORDS/calibration-h200.json"
step report-calibrated 30 $PY -m kvplan.cli report -m llama-3.1-8b --sku h200 --tp 1 \
    --calibration "$RECORDS/calibration-h200.json"
# Measured memory where the caching allocator rounds (no power-of-two sizes).
verify llama-3.1-8b-bf16-8x3000 60 llama-3.1-8b --kv-dtype bf16 --batch 8 --context 3000
verify llama-3.1-8b-bf16-1x10000 60 llama-3.1-8b --kv-dtype bf16 --batch 1 --context 10000
# The kernel's bandwidth target case, and MLA.
verify llama-3.1-8b-bf16-32x8k 60 llama-3.1-8b --kv-dtype bf16 --batch 32 --context 8k
verify deepseek-v2-lite-bf16-32x8k 90 deepseek-v2-lite --kv-dtype bf16 --batch 32 --context 8k
# The sweep first at the target case, then the default cases (with baselines).
step decode-bench-sweep 150 $PY bench/decode_bench.py --cases 32x8192 --kv-dtypes bf16 \
    --sweep-config --no-baselines --csv "$RECORDS/decode-bench-sweep.csv"
step decode-bench 120 $PY bench/decode_bench.py --csv "$RECORDS/decode-bench.csv"
# The GPU-only tests: compiled kernels, the CUDA memory check.
step pytest-gpu 90 $PY -m pytest -q -p no:cacheprovider -m gpu tests/test_verify.py \
    tests/kernels/test_decode.py

[ "${DRY_RUN:-0}" = 1 ] && exit 0
$PY bench/verify_summary.py "$RECORDS" | tee "$RECORDS/verify-gpu-summary.md"
if [ "${#SKIPPED[@]}" -gt 0 ]; then
    echo "skipped for time: ${SKIPPED[*]}" | tee -a "$RECORDS/verify-gpu-summary.md"
fi
if [ -n "${OUT:-}" ]; then
    tar czf "$OUT/verify-gpu.tar.gz" "$RECORDS"/verify-* "$RECORDS"/decode-bench*.csv \
        "$RECORDS"/calibration-*.json 2>/dev/null
fi
echo "done in ${SECONDS}s" >&2
