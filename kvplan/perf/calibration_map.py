"""From a calibration file's measured points to the speed model's per-operation efficiencies.

The one place that knows how measured kernels map onto the model's constants
(kvplan/perf/constants.yaml). Each fit uses the operation's own cost form:

- GEMM (m × k @ k × n): a small-m matmul streams its weights, so its bandwidth fraction is
  the best bytes moved ÷ seconds ÷ datasheet bandwidth over the points; a large-m matmul
  computes, and its compute fraction f is the best FLOP/s ÷ the dtype's peak. Between them the
  model takes efficiency(m) = f · m / (m + m½) (`gemm_half_efficiency_tokens` = m½), so each
  compute-bound point below f gives m½ = m · (f / its fraction − 1); their median is kept.
- Decode attention: t = B · (L + L₀) · bytes per token ÷ (fraction · bandwidth), a fixed cost
  L₀ per sequence (`attention_decode_fixed_tokens`) beside the KV it reads; least squares of
  t on B · L · bytes per token and B · bytes per token, without intercept, gives both.
- All-reduce: t = latency + bus bytes ÷ (fraction · link bandwidth), bus bytes 2 (n − 1) / n
  of the buffer (a ring's traffic per GPU, as nccl-tests' busbw counts it); a line through
  the points gives both.

Fractions above 1 (a shape that stayed in L2) are taken as 1 and said so. The fitted values
replace the shipped constants of the same names (`PerfConstants.with_overrides`); every other
constant (elementwise kernels, engine overhead, grouped GEMMs) keeps its shipped value.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

from kvplan.errors import KvplanError
from kvplan.perf.calibration import Calibration
from kvplan.perf.constants import PerfConstants, shipped_constants
from kvplan.perf.efficiency import Efficiency
from kvplan.specs import SkuSpec

# The smallest fraction a fit may give, as the efficiency options allow: below it the file's
# times and datasheet figures disagree by a million times, and no measurement says that.
MIN_FRACTION = 1e-6


def fitted_values(calibration: Calibration) -> tuple[dict[str, float], list[str]]:
    """The step-model constants the points determine (names of constants.yaml), and notes.

    Raises:
        KvplanError: a fitted value that is not finite, or (in a meaningful file) a fraction
            below MIN_FRACTION.
    """
    values: dict[str, float] = {}
    notes: list[str] = []
    values |= _gemm(calibration, notes)
    values |= _attention(calibration, notes)
    values |= _all_reduce(calibration, notes)
    for name, value in list(values.items()):
        if name.endswith("_fraction") and value > 1:
            notes.append(f"{calibration.name}: {name} measured {value:.3f}, taken as 1")
            values[name] = 1.0
    for name, value in values.items():
        # A CPU file's fractions are real readings of a slow device, shown but never used.
        floor = MIN_FRACTION if name.endswith("_fraction") and calibration.meaningful else 0.0
        if not math.isfinite(value) or value < floor:
            raise KvplanError(
                f"{calibration.origin}: its points give {name} = {value:.3g}, not a measured "
                f"efficiency (a fraction from {MIN_FRACTION:g} to 1, other values finite and "
                "at least 0); check the seconds and the datasheet figures"
            )
    return values, notes


def step_constants(calibration: Calibration) -> PerfConstants:
    """The fitted values as constants overriding the shipped ones (`with_overrides`)."""
    values, _ = fitted_values(calibration)
    source = f"measured by kvplan verify --profile: {calibration.name}"
    return PerfConstants(values, dict.fromkeys(values, source), {}, calibration.origin)


def calibrated_for(
    calibration: Calibration, sku: SkuSpec, default: Efficiency
) -> tuple[Efficiency, list[str]]:
    """The efficiency `sku`'s step times use, and the notes that say which.

    A file applies to the SKU it was measured on only: its fractions are of that SKU's
    datasheet and that GPU's kernels. Other SKUs, and files measured without a GPU, keep
    `default`.
    """
    if not calibration.meaningful:
        return default, [
            f"--calibration {calibration.name}: measured without a GPU (timings not "
            "meaningful); not used"
        ]
    if calibration.sku != sku.name:
        return default, [
            f"--calibration {calibration.name}: measured on {calibration.sku or 'an unknown SKU'}"
            f"; {sku.name} keeps the shipped constants"
        ]
    base = default.constants or shipped_constants()
    efficiency = replace(default, constants=base.with_overrides(step_constants(calibration)))
    values, notes = fitted_values(calibration)
    fitted = ", ".join(f"{name} {value:.4g}" for name, value in values.items())
    return efficiency, [f"step times calibrated by {calibration.name}: {fitted}", *notes]


def _gemm(calibration: Calibration, notes: list[str]) -> dict[str, float]:
    points = calibration.gemm
    if not points:
        return {}
    bandwidth = max(p.bytes_moved / p.seconds for p in points)
    values = {"gemm_bandwidth_fraction": bandwidth / calibration.bandwidth_bytes_per_s}
    fractions = [
        (p.m, p.flops / p.seconds / calibration.peak_flop_per_s[p.dtype], p.bytes_moved / p.seconds)
        for p in points
        if p.dtype in calibration.peak_flop_per_s
    ]
    if not fractions:
        notes.append(f"{calibration.name}: no peak FLOP/s for the GEMM dtypes; compute not fitted")
        return values
    best = max(f for _, f, _ in fractions)
    values["gemm_compute_fraction"] = best
    # Only compute-bound points say how efficiency grows with m: one that streams bytes at
    # more than 2/3 of the best bandwidth is (nearly) timed by its reads, not its FLOPs.
    halves = [
        m * (best / f - 1) for m, f, rate in fractions if f < best and rate <= bandwidth * 2 / 3
    ]
    if halves:
        values["gemm_half_efficiency_tokens"] = statistics.median(halves)
    else:
        notes.append(
            f"{calibration.name}: no compute-bound GEMM below the largest; "
            "gemm_half_efficiency_tokens keeps the shipped value"
        )
    return values


def _attention(calibration: Calibration, notes: list[str]) -> dict[str, float]:
    points = calibration.decode_attention
    if not points:
        return {}
    # t = a · x + b · y, x = B · L · bytes per token (= kv_bytes), y = B · bytes per token.
    xs = [float(p.kv_bytes) for p in points]
    ys = [p.kv_bytes / p.context_tokens for p in points]
    ts = [p.seconds for p in points]
    sxx = sum(x * x for x in xs)
    syy = sum(y * y for y in ys)
    sxy = sum(x * y for x, y in zip(xs, ys, strict=True))
    stx = sum(t * x for t, x in zip(ts, xs, strict=True))
    sty = sum(t * y for t, y in zip(ts, ys, strict=True))
    determinant = sxx * syy - sxy * sxy
    if len(points) < 2 or determinant <= 1e-12 * sxx * syy:
        # One context length: no way to tell the fixed cost from the reads; all reads.
        a, b = sum(ts) / sum(xs), 0.0
        notes.append(
            f"{calibration.name}: decode attention at one context only; no fixed cost fitted"
        )
    else:
        a = (stx * syy - sty * sxy) / determinant
        b = (sty * sxx - stx * sxy) / determinant
    if a <= 0:
        notes.append(f"{calibration.name}: decode attention times do not grow with KV; not fitted")
        return {}
    return {
        "attention_decode_bandwidth_fraction": 1 / (a * calibration.bandwidth_bytes_per_s),
        "attention_decode_fixed_tokens": max(b / a, 0.0),
    }


def _all_reduce(calibration: Calibration, notes: list[str]) -> dict[str, float]:
    points = calibration.all_reduce
    link = calibration.interconnect_bytes_per_s
    if not points:
        return {}
    if link is None:
        notes.append(
            f"{calibration.name}: no interconnect bandwidth in its datasheet; all-reduce not fitted"
        )
        return {}
    xs = [2 * (p.gpus - 1) / p.gpus * p.bytes for p in points]
    ts = [p.seconds for p in points]
    if len(set(xs)) < 2:
        notes.append(f"{calibration.name}: all-reduce at one size only; not fitted")
        return {}
    slope, intercept = statistics.linear_regression(xs, ts)
    if slope <= 0:
        notes.append(f"{calibration.name}: all-reduce times do not grow with size; not fitted")
        return {}
    return {
        "collective_bandwidth_fraction": 1 / (slope * link),
        "collective_latency_s": max(intercept, 0.0),
    }
