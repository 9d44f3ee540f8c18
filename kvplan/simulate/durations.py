"""Durations people type for SLOs and run lengths: "2s", "50ms", "1.5min"; a unit is required."""

from __future__ import annotations

import math
import re

from kvplan.errors import KvplanError

# Seconds per unit; a bare number is refused because "50" could be seconds or milliseconds.
_SECONDS_PER_UNIT = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}


def parse_seconds(text: str, option: str) -> float:
    """Seconds from "2s", "50ms", "250us", "1.5min" or "1h"; must be positive and finite.

    Raises:
        KvplanError: no unit, an unknown unit, or a value that is not positive.
    """
    # The sign is matched so that "-2s" is refused as negative, not as a missing unit.
    match = re.fullmatch(r"\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zµ]*)\s*", text)
    units = ", ".join(_SECONDS_PER_UNIT)
    if not match or not match.group(2):
        raise KvplanError(f"{option}: {text!r} needs a time unit ({units}), e.g. 2s or 50ms")
    number, unit = match.groups()
    if unit not in _SECONDS_PER_UNIT:
        raise KvplanError(f"{option}: unknown time unit {unit!r} in {text!r} (allowed: {units})")
    seconds = float(number) * _SECONDS_PER_UNIT[unit]
    if not seconds > 0 or math.isinf(seconds):
        raise KvplanError(f"{option}: {text!r} must be a positive duration")
    return seconds
