"""bench/decode_bench.py runs end to end (CPU smoke mode) and writes its CSV."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import torch

BENCH = Path(__file__).resolve().parents[2] / "bench" / "decode_bench.py"


def test_bench_cpu_smoke_writes_csv(tmp_path):
    csv_path = tmp_path / "bench.csv"
    env = {**os.environ}
    if not torch.cuda.is_available():
        env["TRITON_INTERPRET"] = "1"
    run = subprocess.run(
        [sys.executable, str(BENCH), "--cpu-smoke", "--csv", str(csv_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    rows = list(csv.DictReader(csv_path.open()))
    kernels = {row["kernel"] for row in rows}
    assert {"d2d_copy", "triton", "torch_sdpa_gather"} <= kernels
    for row in rows:
        if row["kernel"] == "triton":
            # bf16 output rounding on values of magnitude up to ~4 (see test_decode.py).
            assert float(row["max_abs_err"]) < 2e-2
            assert int(row["num_splits"]) == 2
