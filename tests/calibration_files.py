"""A hand-written `verify --profile` calibration file for h100-sxm, with its arithmetic.

H100 SXM datasheet (sku_profiles/h100-sxm.yaml): 3.35 TB/s HBM3, 989.4 TFLOP/s dense bf16,
NVLink 450 GB/s one way. Every time below is chosen from a stated efficiency:

- GEMM m × 4096 @ 4096 × 4096 in bf16, each the slower of its bytes (m·4096 + 4096² +
  m·4096) · 2 at 0.8 × 3.35e12 B/s and its FLOPs 2 · m · 4096² at 0.7 · m / (m + 64) of
  989.4e12: m = 1 streams 33,570,816 B (memory-bound), m = 512 computes at 0.622 of the peak
  in 27.9 µs (its 41.9 MB would take 15.6 µs: compute-bound), m = 8192 at 0.693. So
  gemm_bandwidth_fraction 0.8, gemm_compute_fraction 0.7 · 8192 / 8256 and m½ from the
  512 point: 512 · (0.6946 / 0.6222 − 1) = 59.5 (the largest point is not quite saturated).
- Decode attention, one layer of 8 KV heads × 128 × 2 (K, V) × 2 B = 4,096 B per token:
  t = B · (L + 256) · 4096 / (0.8 × 3.35e12) at (1, 1024), (8, 4096), (32, 2048): fraction
  0.8, fixed cost 256 tokens.
- All-reduce over 2 GPUs: bus bytes 2 · (2 − 1)/2 × size = size; t = 10 µs + size / (0.7 ×
  450e9) at 1 MiB and 16 MiB: fraction 0.7, latency 10 µs.
"""

from __future__ import annotations

import json
from pathlib import Path

BANDWIDTH = 3.35e12
PEAK_BF16 = 989.4e12
LINK = 450e9
TOKEN_BYTES = 8 * 128 * 2 * 2


def gemm(m: int, bytes_per_s: float, peak: float) -> dict:
    """m × 4096 @ 4096 × 4096 in bf16: the slower of its bytes at `bytes_per_s` and its FLOPs
    at 0.7 · m / (m + 64) of `peak`."""
    moved = (m * 4096 + 4096**2 + m * 4096) * 2
    seconds = max(moved / bytes_per_s, 2 * m * 4096**2 / (0.7 * m / (m + 64) * peak))
    return {"op": "gemm", "dtype": "bf16", "m": m, "n": 4096, "k": 4096, "seconds": seconds}


def calibration_data(bandwidth_scale: float = 1.0, compute_scale: float = 1.0) -> dict:
    """The file's contents; `bandwidth_scale` 0.5 halves every achieved bandwidth (the
    memory-bound times double), `compute_scale` likewise for FLOP/s."""
    bw, peak = 0.8 * BANDWIDTH * bandwidth_scale, PEAK_BF16 * compute_scale
    attention = [
        {
            "batch": b,
            "context_tokens": n,
            "kv_bytes": b * n * TOKEN_BYTES,
            "seconds": b * (n + 256) * TOKEN_BYTES / bw,
        }
        for b, n in ((1, 1024), (8, 4096), (32, 2048))
    ]
    return {
        "format": "kvplan-calibration/1",
        "measured_on": {
            "gpu": "NVIDIA H100 80GB HBM3",
            "sku": "h100-sxm",
            "driver": "570.86.15",
            "versions": {"torch": "2.11.0", "triton": "3.6.0", "cuda": "12.8"},
            "date": "2026-12-02T13:00:00Z",
            "meaningful": True,
        },
        "datasheet": {
            "bandwidth_bytes_per_s": BANDWIDTH,
            "peak_flop_per_s": {"bf16": PEAK_BF16},
            "interconnect_bytes_per_s": LINK,
        },
        "gemm": [gemm(m, bw, peak) for m in (1, 512, 8192)],
        "decode_attention": attention,
        "all_reduce": [
            {"gpus": 2, "bytes": size, "seconds": 10e-6 + size / (0.7 * LINK)}
            for size in (2**20, 16 * 2**20)
        ],
        "notes": ["hand-written for the tests"],
    }


def write_calibration(path: Path, **scales: float) -> Path:
    path.write_text(json.dumps(calibration_data(**scales)))
    return path
