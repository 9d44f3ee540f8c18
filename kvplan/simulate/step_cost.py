"""Step times: the roofline of `perf/roofline.py`, or a measured table, as pieces linear in steps.

The event loop asks two things: the time of one step it has composed (decode sequences and
prefill chunks), and, for a run of decode-only steps in which every sequence gains one token
a step, the step times as pieces s(j) = a + b·j, so it can sum a thousand steps without
taking them one by one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from kvplan.engine.deployment import Deployment
from kvplan.engine.pool import largest_fitting
from kvplan.perf.roofline import (
    Efficiency,
    chunk_flops_function,
    matmul_params_per_token,
    step_rates,
    weight_bytes_read,
)
from kvplan.specs import SkuSpec

# (first step j, a, b): s(j) = a + b·j from j up to the next piece's first step.
Piece = tuple[int, float, float]


class StepCost(Protocol):
    """Seconds per scheduler step of one instance."""

    def step_s(
        self,
        decode_seqs: int,
        decode_read_bytes: int,
        decode_kv_tokens: int,
        chunks: Sequence[tuple[int, int]],
        prefix_read_bytes: int,
    ) -> float:
        """One step: `decode_seqs` sequences reading `decode_read_bytes` of KV over
        `decode_kv_tokens` tokens, and `chunks` of (cached tokens, new tokens) whose cached
        prefixes read `prefix_read_bytes`."""
        ...

    def decode_pieces(
        self, decode_seqs: int, read_bytes: int, read_slope: int, kv_tokens: int, kv_slope: int
    ) -> list[Piece]:
        """Decode-only steps j = 0, 1, …: reads grow by `read_slope` bytes and tokens by
        `kv_slope` a step; the step times as linear pieces, the last one open-ended."""
        ...


class RooflineCost:
    """`perf.step_rates`: a step takes max(bytes read / bandwidth, FLOPs / compute).

    Bytes: the weights once for the step's tokens (`perf.weight_bytes_read`) plus the KV it
    reads × kv_bytes_factor. FLOPs: 2 · matmul params per token for every token plus each
    chunk's attention (`perf.prefill_chunk_flops`). Every time × step_time_factor.
    """

    def __init__(
        self,
        deployment: Deployment,
        sku: SkuSpec,
        efficiency: Efficiency,
        kv_bytes_factor: float = 1.0,
        step_time_factor: float = 1.0,
    ) -> None:
        self.deployment = deployment
        self.rates = step_rates(deployment, sku, efficiency=efficiency)
        self.matmul_flops_per_token = 2 * matmul_params_per_token(deployment.model)
        self.kv_bytes_factor = kv_bytes_factor
        self.step_time_factor = step_time_factor
        self._weights: dict[int, int] = {}
        self._dense = deployment.model.moe is None
        self._chunk_flops = chunk_flops_function(deployment.model)

    def weight_bytes(self, tokens: int) -> int:
        """Weight bytes a step of `tokens` tokens reads (MoE: more tokens touch more experts)."""
        key = 1 if self._dense else tokens
        found = self._weights.get(key)
        if found is None:
            found = self._weights[key] = weight_bytes_read(self.deployment, key)
        return found

    def step_s(
        self,
        decode_seqs: int,
        decode_read_bytes: int,
        decode_kv_tokens: int,
        chunks: Sequence[tuple[int, int]],
        prefix_read_bytes: int,
    ) -> float:
        tokens, flops = decode_seqs, self.matmul_flops_per_token * decode_seqs
        for done, chunk in chunks:
            tokens += chunk
            flops += self._chunk_flops(done, chunk)
        kv = (decode_read_bytes + prefix_read_bytes) * self.kv_bytes_factor
        return self.rates.step_s(self.weight_bytes(tokens) + kv, flops) * self.step_time_factor

    def decode_pieces(
        self, decode_seqs: int, read_bytes: int, read_slope: int, kv_tokens: int, kv_slope: int
    ) -> list[Piece]:
        rates, factor = self.rates, self.step_time_factor
        memory_s = (self.weight_bytes(decode_seqs) + read_bytes * self.kv_bytes_factor) / (
            rates.bytes_per_s
        )
        memory_slope_s = read_slope * self.kv_bytes_factor / rates.bytes_per_s
        compute_s = self.matmul_flops_per_token * decode_seqs / rates.flop_per_s
        if memory_s >= compute_s:
            return [(0, memory_s * factor, memory_slope_s * factor)]
        if memory_slope_s <= 0:
            return [(0, compute_s * factor, 0.0)]
        # Compute-bound until the growing reads cross the compute line.
        crossing = math.ceil((compute_s - memory_s) / memory_slope_s)
        rising = (crossing, memory_s * factor, memory_slope_s * factor)
        return [(0, compute_s * factor, 0.0), rising]


def run_s(pieces: list[Piece], steps: int) -> float:
    """Σ s(j) for j < steps."""
    total = 0.0
    for index, (first, a, b) in enumerate(pieces):
        if first >= steps:
            break
        end = min(steps, pieces[index + 1][0]) if index + 1 < len(pieces) else steps
        count = end - first
        total += count * a + b * (first + end - 1) * count / 2
    return total


def steps_starting_before(pieces: list[Piece], limit: int, seconds: float) -> int:
    """How many of the first `limit` steps start less than `seconds` after the first starts."""
    if seconds <= 0:
        return 0
    # Step n − 1 starts at T(n − 1); step 0 starts at 0 < seconds, so at least 1.
    return largest_fitting(lambda n: run_s(pieces, n - 1) < seconds, limit, lower=1)


def itl_samples(pieces: list[Piece], steps: int, weight: int) -> list[tuple[float, int]]:
    """(step time, tokens) pairs standing for `steps` steps of `weight` tokens each.

    Each linear piece is two points at its 1/4 and 3/4 marks: a piece of step times rising
    evenly has its quartiles there, so percentiles over many pieces stay within a piece's own
    spread without keeping one sample per step.
    """
    samples = []
    for index, (first, a, b) in enumerate(pieces):
        if first >= steps:
            break
        end = min(steps, pieces[index + 1][0]) if index + 1 < len(pieces) else steps
        count = end - first
        if count == 1 or b == 0:
            samples.append((a + b * first, count * weight))
            continue
        span = count - 1
        half = count * weight / 2
        samples.append((a + b * (first + span / 4), half))
        samples.append((a + b * (first + 3 * span / 4), half))
    return samples
