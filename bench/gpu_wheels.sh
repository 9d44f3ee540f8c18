#!/usr/bin/env bash
# Run here (with package-registry access), before bench/verify_gpu.sh goes to a GPU machine
# that has torch, triton, typer, rich and pyyaml but no pydantic and no registry: downloads
# kvplan's missing dependencies as CPython 3.12 x86-64 wheels into .whl/ (git-ignored), which
# verify_gpu.sh installs into a private folder on that machine.
#
#   bash bench/gpu_wheels.sh           # then carry .whl/ with the working tree
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d .whl \
    "pydantic==2.14.4" "pydantic-core==2.50.5" "annotated-types==0.8.0" \
    "typing-inspection==0.4.5" "typing-extensions==4.16.0"
ls -l .whl
