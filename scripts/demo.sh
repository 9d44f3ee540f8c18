#!/usr/bin/env bash
# Creates .venv (if missing), installs the calculator alone (no torch/triton), and runs it on the
# shipped catalogue: the models list, one sizing with its formula, and a per-SKU report.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
.venv/bin/kvplan models
.venv/bin/kvplan size llama-3.1-70b --context 128k --batch 8 --tp 8 --sku h100-sxm --explain
.venv/bin/kvplan report --model llama-3.1-70b --sku h100 --sku h200 --sku mi300x --context 32k --batch 8
