"""Measured step times (`--step-times FILE.csv`), interpolated, in place of the roofline.

The file has one row per measured step: `batch_size` (sequences in the step, decoding and
prefilling), `kv_tokens` (tokens in the KV cache that the step attends over), `prefill_tokens`
(prompt tokens the step computes) and `step_s` (seconds). The rows must cover every
combination of the values each column takes (a grid, as a sweep produces); between grid
lines the time is multilinear, beyond the outermost lines it continues the outermost cell's
slope, and it never falls below the table's fastest step.
"""

from __future__ import annotations

import csv
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import kvplan.limits as limits
from kvplan.engine.pool import largest_fitting
from kvplan.errors import KvplanError
from kvplan.files import read_text
from kvplan.simulate.step_cost import Piece
from kvplan.units import parse_float

COLUMNS = ("batch_size", "kv_tokens", "prefill_tokens", "step_s")
MAX_ROWS = 1_000_000


@dataclass(frozen=True)
class StepTable:
    """Step times on a grid of (batch size, KV tokens, prefill tokens)."""

    source: str
    axes: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
    times_s: dict[tuple[int, int, int], float]

    @property
    def fastest_s(self) -> float:
        return min(self.times_s.values())

    def time_s(self, batch_size: int, kv_tokens: int, prefill_tokens: int) -> float:
        """Interpolated seconds for one step (see the module docstring)."""
        weights = [
            _bracket(axis, value)
            for axis, value in zip(self.axes, (batch_size, kv_tokens, prefill_tokens), strict=True)
        ]
        total = 0.0
        for corner in itertools.product(*weights):
            weight = math.prod(w for _, w in corner)
            if weight:
                total += weight * self.times_s[tuple(v for v, _ in corner)]  # type: ignore[index]
        return max(total, self.fastest_s)


def _bracket(axis: tuple[int, ...], value: int) -> list[tuple[int, float]]:
    """The two grid values around `value` and their weights (outside: the outer two)."""
    if len(axis) == 1:
        return [(axis[0], 1.0)]
    index = min(max(_floor_index(axis, value), 0), len(axis) - 2)
    low, high = axis[index], axis[index + 1]
    share = (value - low) / (high - low)
    return [(low, 1.0 - share), (high, share)]


def _floor_index(axis: tuple[int, ...], value: int) -> int:
    low = largest_fitting(lambda i: axis[i] <= value, len(axis) - 1)
    return low if axis[low] <= value else -1


def read_step_table(path: Path) -> StepTable:
    """The table in `path` (see the module docstring).

    Raises:
        KvplanError: unreadable file, wrong columns, a bad value, or a grid with holes.
    """
    lines = read_text(path, limits.TABLE_FILE_BYTES, "--step-times").splitlines()
    try:
        return _table(path, lines)
    except csv.Error as error:  # a cell over the csv module's 128 KiB, a NUL byte
        raise KvplanError(f"--step-times {path}: not CSV: {error}") from None


def _table(path: Path, lines: list[str]) -> StepTable:
    reader = csv.reader(lines)
    header = [name.strip() for name in next(reader, [])]
    if sorted(header) != sorted(COLUMNS):
        raise KvplanError(
            f"--step-times {path}: columns {header} (need exactly: {', '.join(COLUMNS)})"
        )
    times: dict[tuple[int, int, int], float] = {}
    for line, cells in enumerate(reader, start=2):
        if not any(cell.strip() for cell in cells):
            continue
        row = dict(zip(header, (cell.strip() for cell in cells), strict=False))
        key, seconds = _row(path, line, row)
        if key in times:
            raise KvplanError(f"--step-times {path}:{line}: {key} is measured twice")
        times[key] = seconds
        if len(times) > MAX_ROWS:
            raise KvplanError(f"--step-times {path}: more than {MAX_ROWS:,} rows")
    if not times:
        raise KvplanError(f"--step-times {path}: no rows")
    axes = tuple(tuple(sorted({key[i] for key in times})) for i in range(3))
    expected = math.prod(len(axis) for axis in axes)
    if expected != len(times):
        raise KvplanError(
            f"--step-times {path}: the rows are not a full grid: {len(times):,} of "
            f"{expected:,} (batch_size × kv_tokens × prefill_tokens) combinations"
        )
    return StepTable(str(path), axes, times)  # type: ignore[arg-type]


def _row(path: Path, line: int, row: dict[str, str]) -> tuple[tuple[int, int, int], float]:
    values = []
    for name in COLUMNS[:3]:
        text = row.get(name, "")
        if not (text.isascii() and text.isdigit() and len(text) <= limits.NUMBER_CHARS):
            raise KvplanError(
                f"--step-times {path}:{line}: {name} {text!r} is not a whole number ≥ 0"
            )
        values.append(int(text))
    where = f"--step-times {path}:{line}: step_s"
    seconds = parse_float(row.get("step_s", ""), where)
    if not 0 < seconds <= limits.DURATION.maximum:
        raise KvplanError(
            f"{where} {row.get('step_s')!r} is not a positive time up to "
            f"{limits.DURATION.maximum:,} s"
        )
    return (values[0], values[1], values[2]), seconds


class TableCost:
    """A `StepCost` reading a `StepTable`; every time × step_time_factor."""

    def __init__(self, table: StepTable, step_time_factor: float = 1.0) -> None:
        self.table = table
        self.step_time_factor = step_time_factor

    def step_s(
        self,
        decode_seqs: int,
        decode_read_bytes: int,
        decode_kv_tokens: int,
        chunks: Sequence[tuple[int, int]],
        prefix_read_bytes: int,
    ) -> float:
        batch = decode_seqs + len(chunks)
        kv_tokens = decode_kv_tokens + sum(done for done, _ in chunks)
        prefill_tokens = sum(chunk for _, chunk in chunks)
        return self.table.time_s(batch, kv_tokens, prefill_tokens) * self.step_time_factor

    def decode_pieces(
        self, decode_seqs: int, read_bytes: int, read_slope: int, kv_tokens: int, kv_slope: int
    ) -> list[Piece]:
        # Linear between the KV grid lines the run crosses; a new piece starts at each.
        starts = [0]
        if kv_slope > 0:
            for line in self.table.axes[1][1:-1]:
                if line > kv_tokens:
                    starts.append(-(-(line - kv_tokens) // kv_slope))
        pieces = []
        for first in sorted(set(starts)):
            here = self._decode_s(decode_seqs, kv_tokens + kv_slope * first)
            slope = self._decode_s(decode_seqs, kv_tokens + kv_slope * (first + 1)) - here
            pieces.append((first, here - slope * first, slope))
        return pieces

    def _decode_s(self, decode_seqs: int, kv_tokens: int) -> float:
        return self.table.time_s(decode_seqs, kv_tokens, 0) * self.step_time_factor
