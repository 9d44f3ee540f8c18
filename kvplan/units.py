"""Byte units and human-entered sizes ("128k", "1M", "51.38GiB"), shared by every layer."""

import re

from kvplan.errors import KvplanError

KIB = 2**10
MIB = 2**20
GIB = 2**30
TIB = 2**40

_TOKEN_SUFFIX = {"": 1, "k": 1024, "m": 1024**2}
_BYTE_SUFFIX = {
    "": 1,
    "b": 1,
    "kib": KIB,
    "mib": MIB,
    "gib": GIB,
    "tib": TIB,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}


def parse_tokens(text: str | int, what: str = "context") -> int:
    """Token count from "8192", "8k", "128K" or "1M" (k = 1024, M = 1024²); must be ≥ 1."""
    if isinstance(text, int):
        value = text
    else:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*", text)
        if not match:
            raise KvplanError(
                f"{what}: {text!r} is not a token count; use an integer or a k/M suffix "
                "(8k = 8192, 128k = 131072, 1M = 1048576)"
            )
        number, suffix = match.groups()
        scaled = float(number) * _TOKEN_SUFFIX[suffix.lower()]
        if scaled != int(scaled):
            raise KvplanError(f"{what}: {text!r} is not a whole number of tokens")
        value = int(scaled)
    if value < 1:
        raise KvplanError(f"{what}: {text!r} must be at least 1 token")
    return value


def parse_bytes(text: str | int, what: str = "memory") -> int:
    """Bytes from "51.38GiB", "80GB" (10⁹), "1024MiB" or a plain integer; must be ≥ 0."""
    if isinstance(text, int):
        value = text
    else:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
        if not match or match.group(2).lower() not in _BYTE_SUFFIX:
            raise KvplanError(
                f"{what}: {text!r} is not a size; use bytes or a unit "
                "(GiB, MiB, KiB = powers of 2; GB, MB = powers of 10), e.g. 51.38GiB"
            )
        number, unit = match.groups()
        value = int(float(number) * _BYTE_SUFFIX[unit.lower()])
    if value < 0:
        raise KvplanError(f"{what}: {text!r} must not be negative")
    return value
