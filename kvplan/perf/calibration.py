"""Calibration files (`kvplan verify --profile`): what one GPU measured, read without torch.

A calibration file is JSON:

    {
      "format": "kvplan-calibration/1",
      "measured_on": {"gpu": "NVIDIA H200", "sku": "h200", "driver": "570.86.15",
                      "versions": {"torch": "2.11.0", "triton": "3.6.0", "cuda": "12.8",
                                   "kvplan": "0.1.0"},
                      "date": "2026-12-02T13:00:00Z", "meaningful": true},
      "datasheet": {"bandwidth_bytes_per_s": 4.8e12, "peak_flop_per_s": {"bf16": 9.89e14},
                    "interconnect_bytes_per_s": 4.5e11},
      "gemm": [{"op": "qkv", "dtype": "bf16", "m": 1, "n": 6144, "k": 4096,
                "seconds": 1.4e-05}, ...],
      "decode_attention": [{"batch": 8, "context_tokens": 4096, "kv_bytes": 134217728,
                            "seconds": 3.3e-05}, ...],
      "all_reduce": [{"gpus": 2, "bytes": 16777216, "seconds": 6.1e-05}, ...],
      "notes": ["..."]
    }

Every point is one measured kernel: a torch.matmul of (m × k) by (k × n) in `dtype`; the
paged decode attention kernel over `batch` sequences of `context_tokens` tokens reading
`kv_bytes` of one layer's KV; an all-reduce of `bytes` over `gpus` GPUs. `datasheet` holds the
figures of the SKU the file was measured on, so that the fractions the speed model takes from
it (kvplan.perf.calibration_map) do not depend on the catalogue read later. `meaningful` is
false for a run without a GPU (Triton's interpreter): its timings say nothing about speed.

Anything else in the file, or a value out of range, is refused with one line naming the file,
the field and the value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kvplan.limits as limits
from kvplan.errors import KvplanError, shown
from kvplan.files import parse_json, read_text

FORMAT = "kvplan-calibration/1"
MAX_POINTS = 10_000  # per section
MAX_TEXT = 200  # characters of a name or version
# Element bytes of the GEMM dtypes a profile times (inputs and output in the same dtype).
GEMM_ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
GEMM_OPS = ("qkv", "out", "mlp_up", "mlp_down", "gemm")
MEASURED_ON = {"gpu", "sku", "driver", "versions", "date", "meaningful"}
DATASHEET = {"bandwidth_bytes_per_s", "peak_flop_per_s", "interconnect_bytes_per_s"}
SECTIONS = {"format", "measured_on", "datasheet", "gemm", "decode_attention", "all_reduce", "notes"}


@dataclass(frozen=True)
class GemmPoint:
    """One timed matmul: (m × k) @ (k × n), inputs and output in `dtype`."""

    op: str
    dtype: str
    m: int
    n: int
    k: int
    seconds: float

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    @property
    def bytes_moved(self) -> int:
        """Both inputs read once and the output written once: the least a kernel moves."""
        return (self.m * self.k + self.k * self.n + self.m * self.n) * GEMM_ELEMENT_BYTES[
            self.dtype
        ]


@dataclass(frozen=True)
class AttentionPoint:
    """One timed paged decode step of one layer: `batch` sequences of `context_tokens`."""

    batch: int
    context_tokens: int
    kv_bytes: int  # KV bytes the kernel read, the whole batch
    seconds: float


@dataclass(frozen=True)
class AllReducePoint:
    """One timed all-reduce of `bytes` (the buffer's size) over `gpus` GPUs."""

    gpus: int
    bytes: int
    seconds: float


@dataclass(frozen=True)
class Calibration:
    """A calibration file, checked (see the module docstring)."""

    origin: str  # the path, as the user gave it
    gpu: str
    sku: str | None  # kvplan's SKU name the GPU was matched to; None: unknown
    driver: str | None
    versions: dict[str, str]
    date: str
    meaningful: bool
    bandwidth_bytes_per_s: float
    peak_flop_per_s: dict[str, float]
    interconnect_bytes_per_s: float | None
    gemm: tuple[GemmPoint, ...]
    decode_attention: tuple[AttentionPoint, ...]
    all_reduce: tuple[AllReducePoint, ...]
    notes: tuple[str, ...]

    @property
    def name(self) -> str:
        """How notes name it: the file's name and where it was measured."""
        return f"{Path(self.origin).name} ({self.gpu}, {self.date[:10]})"


def read_calibration(path: Path, option: str = "--calibration") -> Calibration:
    """The calibration file at `path`, every field checked.

    Raises:
        KvplanError: one line naming `option`, the file, the field and the value.
    """
    where = f"{option} {shown(path)}"
    text = read_text(path, limits.JSON_FILE_BYTES, option)
    return parse_calibration(parse_json(text, where), where, str(path))


def parse_calibration(data: Any, where: str, origin: str) -> Calibration:
    """A calibration from a parsed JSON document; `where` prefixes every error."""
    if not isinstance(data, dict):
        raise KvplanError(f"{where}: not a calibration file (a JSON object with format {FORMAT!r})")
    if data.get("format") != FORMAT:
        raise KvplanError(f"{where}: format: {_short(data.get('format'))} is not {FORMAT!r}")
    _known(data, SECTIONS, where)
    on = _mapping(data.get("measured_on"), f"{where}: measured_on", MEASURED_ON)
    sheet = _mapping(data.get("datasheet"), f"{where}: datasheet", DATASHEET)
    peaks = _mapping(sheet.get("peak_flop_per_s"), f"{where}: datasheet.peak_flop_per_s", None)
    versions = _mapping(on.get("versions", {}), f"{where}: measured_on.versions", None)
    link = sheet.get("interconnect_bytes_per_s")
    return Calibration(
        origin=origin,
        gpu=_text(on.get("gpu"), f"{where}: measured_on.gpu"),
        sku=_text(on.get("sku"), f"{where}: measured_on.sku", optional=True),
        driver=_text(on.get("driver"), f"{where}: measured_on.driver", optional=True),
        versions={
            _text(k, f"{where}: measured_on.versions"): _text(
                v, f"{where}: measured_on.versions.{k}"
            )
            for k, v in versions.items()
        },
        date=_text(on.get("date"), f"{where}: measured_on.date"),
        meaningful=_flag(on.get("meaningful"), f"{where}: measured_on.meaningful"),
        bandwidth_bytes_per_s=_positive(
            sheet.get("bandwidth_bytes_per_s"), f"{where}: datasheet.bandwidth_bytes_per_s"
        ),
        peak_flop_per_s={
            _text(k, f"{where}: datasheet.peak_flop_per_s"): _positive(
                v, f"{where}: datasheet.peak_flop_per_s.{k}"
            )
            for k, v in peaks.items()
        },
        interconnect_bytes_per_s=None
        if link is None
        else _positive(link, f"{where}: datasheet.interconnect_bytes_per_s"),
        gemm=tuple(_points(data, "gemm", where, _gemm)),
        decode_attention=tuple(_points(data, "decode_attention", where, _attention)),
        all_reduce=tuple(_points(data, "all_reduce", where, _all_reduce)),
        notes=tuple(
            _text(n, f"{where}: notes[{i}]", limit=2000)
            for i, n in enumerate(_list(data, "notes", where))
        ),
    )


def _gemm(point: dict[str, Any], where: str) -> GemmPoint:
    _known(point, {"op", "dtype", "m", "n", "k", "seconds"}, where)
    op, dtype = point.get("op"), point.get("dtype")
    if not isinstance(op, str) or op not in GEMM_OPS:
        raise KvplanError(f"{where}.op: {_short(op)} (allowed: {', '.join(GEMM_OPS)})")
    if not isinstance(dtype, str) or dtype not in GEMM_ELEMENT_BYTES:
        raise KvplanError(
            f"{where}.dtype: {_short(dtype)} (allowed: {', '.join(GEMM_ELEMENT_BYTES)})"
        )
    m, n, k = (_count(point.get(key), f"{where}.{key}") for key in ("m", "n", "k"))
    return GemmPoint(op, dtype, m, n, k, _seconds(point.get("seconds"), f"{where}.seconds"))


def _attention(point: dict[str, Any], where: str) -> AttentionPoint:
    _known(point, {"batch", "context_tokens", "kv_bytes", "seconds"}, where)
    return AttentionPoint(
        _count(point.get("batch"), f"{where}.batch"),
        _count(point.get("context_tokens"), f"{where}.context_tokens"),
        _count(point.get("kv_bytes"), f"{where}.kv_bytes"),
        _seconds(point.get("seconds"), f"{where}.seconds"),
    )


def _all_reduce(point: dict[str, Any], where: str) -> AllReducePoint:
    _known(point, {"gpus", "bytes", "seconds"}, where)
    gpus = _count(point.get("gpus"), f"{where}.gpus")
    if gpus < 2:
        raise KvplanError(f"{where}.gpus: {gpus} (an all-reduce needs at least 2 GPUs)")
    return AllReducePoint(
        gpus,
        _count(point.get("bytes"), f"{where}.bytes"),
        _seconds(point.get("seconds"), f"{where}.seconds"),
    )


def _points(data: dict[str, Any], section: str, where: str, parse: Any) -> list[Any]:
    return [
        parse(_mapping(item, f"{where}: {section}[{i}]", None), f"{where}: {section}[{i}]")
        for i, item in enumerate(_list(data, section, where))
    ]


def _list(data: dict[str, Any], section: str, where: str) -> list[Any]:
    value = data.get(section, [])
    if not isinstance(value, list):
        raise KvplanError(f"{where}: {section}: must be a list, not {type(value).__name__}")
    if len(value) > MAX_POINTS:
        raise KvplanError(f"{where}: {section}: {len(value):,} entries (at most {MAX_POINTS:,})")
    return value


def _mapping(value: Any, where: str, allowed: set[str] | None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise KvplanError(f"{where}: must be an object, not {type(value).__name__}")
    if allowed is not None:
        _known(value, allowed, where)
    return value


def _known(value: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in value if k not in allowed)
    if unknown:
        raise KvplanError(
            f"{where}: unknown field {_short(unknown[0])} (allowed: {', '.join(sorted(allowed))})"
        )


def _text(value: Any, where: str, optional: bool = False, limit: int = MAX_TEXT) -> Any:
    if value is None and optional:
        return None
    if (
        not isinstance(value, str)
        or not value.strip()
        or len(value) > limit
        or not value.isprintable()
    ):
        raise KvplanError(
            f"{where}: {_short(value)} is not a text of 1 to {limit} printable characters"
        )
    return value


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise KvplanError(f"{where}: {_short(value)} is not true or false")
    return value


def _positive(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise KvplanError(f"{where}: {_short(value)} is not a number")
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise KvplanError(f"{where}: {_short(value)} must be a finite number above 0")
    return number


# One timed kernel call longer than an hour is not a measurement of a step's operation.
MAX_SECONDS = 3600.0


def _seconds(value: Any, where: str) -> float:
    seconds = _positive(value, where)
    if seconds > MAX_SECONDS:
        raise KvplanError(f"{where}: {_short(value)} s is more than {MAX_SECONDS:,.0f} s")
    return seconds


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 2**53:
        raise KvplanError(f"{where}: {_short(value)} is not a whole number from 1 to 2^53")
    return value


def _short(value: Any) -> str:
    """A value for an error line: its repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
