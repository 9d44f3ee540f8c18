"""The step model's constants: kvplan/perf/constants.yaml, or a file of the same format.

Every constant has a value and a `source:`; the file's header comment gives the format. A
calibration file (written by `verify --profile`, or by hand) names some constants and keeps
the shipped values for the rest (`with_overrides`). The step model reads the constants once
per deployment × SKU (kvplan.perf.step_model), never per step.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from kvplan.errors import KvplanError

FORMAT = "kvplan-perf-constants/1"
NAME = re.compile(r"[a-z][a-z0-9_]*(\.[a-z0-9][a-z0-9_.-]*)?")
# The metrics a band is kept for (bench/speed_errors.py writes them).
BAND_METRICS = ("output_tokens_per_s", "itl_ms", "ttft_ms", "latency_s")
BAND_FIELDS = ("median_abs_log_ratio", "worst_abs_log_ratio", "cases", "source")


@dataclass(frozen=True)
class Band:
    """The test-split error of one speed metric: |ln(predicted / measured)| median and worst."""

    median_abs_log_ratio: float
    worst_abs_log_ratio: float
    cases: int
    source: str

    @property
    def median_fraction(self) -> float:
        """The median error as a fraction of the figure: e^median − 1 (0.1 = ±10 %)."""
        return math.expm1(self.median_abs_log_ratio)


@dataclass(frozen=True)
class PerfConstants:
    """Named constants with their sources, and the test-split bands."""

    values: dict[str, float]
    sources: dict[str, str]
    bands: dict[str, Band] = field(default_factory=dict)
    origin: str = "kvplan/perf/constants.yaml"

    def __hash__(self) -> int:  # a key of the step-model caches; values never change
        found = self.__dict__.get("_hash")
        if found is None:
            found = hash((self.origin, tuple(sorted(self.values.items()))))
            object.__setattr__(self, "_hash", found)  # frozen: remembered beside the fields
        return found

    def value(self, name: str) -> float:
        """The constant `name` (KeyError for a name the file lacks: a bug, not user input)."""
        return self.values[name]

    def engine_value(self, name: str, engine_key: str) -> float:
        """`name.engine_key`, else `name.other`."""
        return self.values.get(f"{name}.{engine_key}", self.values[f"{name}.other"])

    def with_overrides(self, other: PerfConstants) -> PerfConstants:
        """These constants with `other`'s values (and sources, and bands) where it has them."""
        for name in other.values:
            if name not in self.values:
                raise KvplanError(f"{other.origin}: constants.{name}: not a step-model constant")
        return PerfConstants(
            {**self.values, **other.values},
            {**self.sources, **other.sources},
            {**self.bands, **other.bands},
            f"{self.origin} + {other.origin}",
        )


def parse_constants(data: Any, origin: str) -> PerfConstants:
    """Constants from a loaded YAML document (see the module docstring).

    Raises:
        KvplanError: one line naming `origin`, the field and the value.
    """
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise KvplanError(f"{origin}: format: must be {FORMAT!r}")
    unknown = set(data) - {"format", "constants", "bands"}
    if unknown:
        raise KvplanError(f"{origin}: unknown field(s) {sorted(unknown)}")
    entries = data.get("constants") or {}
    if not isinstance(entries, dict):
        raise KvplanError(f"{origin}: constants: must be a mapping of name to value and source")
    values, sources = {}, {}
    for name, entry in entries.items():
        values[name], sources[name] = _entry(origin, name, entry)
    bands = {m: _band(origin, m, b) for m, b in (data.get("bands") or {}).items()}
    return PerfConstants(values, sources, bands, origin)


def _entry(origin: str, name: Any, entry: Any) -> tuple[float, str]:
    where = f"{origin}: constants.{name}"
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise KvplanError(f"{where}: not a constant name (lower-case, digits, _ . -)")
    if not isinstance(entry, dict) or set(entry) != {"value", "source"}:
        raise KvplanError(f"{where}: needs exactly `value` and `source`")
    value, source = entry["value"], entry["source"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise KvplanError(f"{where}.value: {value!r} is not a finite number")
    if value < 0 or (name.split(".")[0].endswith("_fraction") and not 0 < value <= 1):
        raise KvplanError(f"{where}.value: {value!r} out of range (fractions in (0, 1], else ≥ 0)")
    if not isinstance(source, str) or not source.strip():
        raise KvplanError(f"{where}.source: every constant says where it comes from")
    return float(value), source


def _band(origin: str, metric: Any, band: Any) -> Band:
    where = f"{origin}: bands.{metric}"
    if metric not in BAND_METRICS:
        raise KvplanError(f"{where}: unknown metric (allowed: {', '.join(BAND_METRICS)})")
    if not isinstance(band, dict) or set(band) != set(BAND_FIELDS):
        raise KvplanError(f"{where}: needs exactly {', '.join(BAND_FIELDS)}")
    try:
        return Band(
            float(band["median_abs_log_ratio"]),
            float(band["worst_abs_log_ratio"]),
            int(band["cases"]),
            str(band["source"]),
        )
    except (TypeError, ValueError):
        raise KvplanError(f"{where}: median/worst must be numbers, cases an integer") from None


@lru_cache(maxsize=1)
def shipped_constants() -> PerfConstants:
    """The constants shipped with kvplan (kvplan/perf/constants.yaml), read once."""
    text = resources.files("kvplan.perf").joinpath("constants.yaml").read_text("utf-8")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: the same safe semantics
    return parse_constants(yaml.load(text, Loader=loader), "kvplan/perf/constants.yaml")


def read_constants(path: Path) -> PerfConstants:
    """Constants from a file of the shipped format (a calibration file, a fitted copy).

    Raises:
        KvplanError: an unreadable file, bad YAML or a field out of the format.
    """
    try:
        text = path.read_text("utf-8")
        data = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError) as error:
        raise KvplanError(f"{path}: cannot read: {error}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        raise KvplanError(f"{path}{where}: not YAML") from None
    return parse_constants(data, str(path))
