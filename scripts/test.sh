#!/usr/bin/env bash
# Creates .venv (if missing), installs kvplan with its test, verify and plot extras (CPU torch 2.13.0),
# checks ruff, then runs the whole suite; GPU-only tests skip themselves without CUDA.
# With no arguments it then runs the kernel tests again under Triton 3.6, the version on the
# GPU machine, in a second small venv (.venv/triton-3.6): the interpreter and the sm_90 AOT
# compile must pass under both, so an API difference shows here before the first GPU run.
set -euo pipefail
cd "$(dirname "$0")/.."
# The HTML report's tests drive a real headless Chromium: Debian's package, installed once
# (quietly; skipped where it is already there). Without apt or root the tests that need it
# skip themselves and say why.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 \
    && [ "$(id -u)" = 0 ]; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        chromium chromium-driver; } >/dev/null 2>&1 \
        || echo "scripts/test.sh: could not install chromium; the browser tests will skip" >&2
fi
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "torch==2.13.0" -e ".[test,verify,plot]"
.venv/bin/ruff check .
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
if [ "$#" -eq 0 ]; then
    python3 -m venv .venv/triton-3.6
    .venv/triton-3.6/bin/python -m pip install -q "torch==2.13.0" "triton==3.6.0" \
        numpy pytest hypothesis -e .
    TRITON_INTERPRET=1 .venv/triton-3.6/bin/python -m pytest -q -p no:cacheprovider tests/kernels
fi
