#!/usr/bin/env bash
# Creates .venv (if missing), installs kvplan with its test and verify extras (CPU torch 2.13.0),
# checks ruff, then runs the whole suite; GPU-only tests skip themselves without CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "torch==2.13.0" -e ".[test,verify]"
.venv/bin/ruff check .
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
