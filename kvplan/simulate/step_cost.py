"""Step times: the step model of `kvplan.perf`, or a measured table, as pieces linear in steps.

The event loop asks two things: the time of one step it has composed (decode sequences and
prefill chunks), and, for a run of decode-only steps in which every sequence gains one token
a step, the step times as pieces s(j) = a + b·j, so it can sum a thousand steps without
taking them one by one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kvplan.engine.deployment import Deployment
from kvplan.engine.pool import largest_fitting
from kvplan.perf.efficiency import Efficiency
from kvplan.perf.step_model import StepShape
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


class ModelCost:
    """The per-operation step model (`perf.step_model`), with the simulator's factors.

    The KV a step reads is × kv_bytes_factor; every time × step_time_factor. A decode-only run
    is one linear piece: everything but attention depends on the step's sequences alone, and
    attention on the bytes read, which grow by `read_slope` a step (`StepModel.decode_line`).
    """

    def __init__(
        self,
        deployment: Deployment,
        sku: SkuSpec,
        efficiency: Efficiency,
        kv_bytes_factor: float = 1.0,
        step_time_factor: float = 1.0,
    ) -> None:
        self.model = efficiency.model(deployment, sku)
        self.kv_bytes_factor = kv_bytes_factor
        self.step_time_factor = step_time_factor

    def step_s(
        self,
        decode_seqs: int,
        decode_read_bytes: int,
        decode_kv_tokens: int,
        chunks: Sequence[tuple[int, int]],
        prefix_read_bytes: int,
    ) -> float:
        factor = self.kv_bytes_factor
        shape = StepShape(
            decode_seqs, decode_read_bytes * factor, tuple(chunks), prefix_read_bytes * factor
        )
        return self.model.step_s(shape) * self.step_time_factor

    def decode_pieces(
        self, decode_seqs: int, read_bytes: int, read_slope: int, kv_tokens: int, kv_slope: int
    ) -> list[Piece]:
        a, per_byte = self.model.decode_line(decode_seqs)
        factor, scale = self.kv_bytes_factor, self.step_time_factor
        start = (a + read_bytes * factor * per_byte) * scale
        return [(0, start, read_slope * factor * per_byte * scale)]


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
