"""Byte units and human-entered numbers ("128k", "1M", "51.38GiB", "8"), shared by every layer.

Numbers are read with integer arithmetic only: "1.5k" is 15 × 1024 / 10, exactly, and a value
that is not a whole number of tokens or bytes is refused rather than rounded. A float would
turn 9007199254740993 into ...992 and "1.0000000000000001k" into 1024. Only ASCII digits are
numbers (Python's int() also reads "８" and "٣"), and every value has a stated maximum
(kvplan.limits).
"""

from __future__ import annotations

import math
import re
import unicodedata
from fractions import Fraction

import kvplan.limits as limits
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

# A decimal with an optional fraction and unit, spaces around; re.ASCII keeps [0-9] and the
# unit letters to ASCII (without it, [a-zA-Z] is ASCII but \s would match U+3000 and friends).
# A minus sign is read so that "-1" is refused as too small, not as unreadable.
_NUMBER = re.compile(r"[ \t]*(-?[0-9]+)(?:\.([0-9]+))?[ \t]*([a-zA-Z]*)[ \t]*", re.ASCII)
_TOKEN_HELP = "use an integer or a k/M suffix (8k = 8192, 128k = 131072, 1M = 1048576)"
_BYTE_HELP = (
    "use bytes or a unit (GiB, MiB, KiB = powers of 2; GB, MB = powers of 10), e.g. 51.38GiB"
)


def gib(value: int | float) -> str:
    """Bytes as GiB with two decimals (the table unit)."""
    return f"{value / GIB:,.2f} GiB"


def _why_not_a_number(text: str) -> str:
    """The reason `text` did not parse, pointing at a non-ASCII digit when there is one."""
    foreign = next((c for c in text if unicodedata.category(c) == "Nd" and not c.isascii()), None)
    if foreign is not None:
        return f"{foreign!r} is not an ASCII digit; write numbers with 0-9"
    return ""


def _check_length(text: str, what: str) -> None:
    """Refuse a number longer than kvplan.limits.NUMBER_CHARS before reading it."""
    if len(text) > limits.NUMBER_CHARS:
        raise KvplanError(
            f"{what}: {text[:16]!r}… has {len(text):,} characters; a number has at most "
            f"{limits.NUMBER_CHARS}"
        )


def _scaled(
    text: str,
    what: str,
    units: dict[str, int],
    kind: str,
    help_text: str,
    *,
    floor: bool = False,
    decimals: bool = True,
) -> int:
    """The exact integer `text` denotes with `units`: refused when it is not a whole number,
    or rounded down to one with `floor`."""
    _check_length(text, what)
    match = _NUMBER.fullmatch(text)
    if not match or match.group(3).lower() not in units or (match.group(2) and not decimals):
        reason = _why_not_a_number(text)
        raise KvplanError(f"{what}: {text!r} is not {kind}; {reason or help_text}")
    whole, fraction, unit = match.groups()
    fraction = fraction or ""
    scaled = Fraction(int(whole + fraction) * units[unit.lower()], 10 ** len(fraction))
    _refuse_signed_zero(whole, scaled, text, what, kind, help_text)
    if scaled.denominator != 1 and not floor:
        raise KvplanError(f"{what}: {text!r} is not a whole number ({kind})")
    return math.floor(scaled)


def _refuse_signed_zero(
    whole: str, value: Fraction, text: str, what: str, kind: str, help_text: str
) -> None:
    """ "-0" reads as 0 to int(): a sign on a size, count or fraction is a typo, not a zero
    (a negative value is refused as out of range by the caller)."""
    if whole.startswith("-") and value == 0:
        raise KvplanError(f"{what}: {text!r} has a minus sign; {kind} has none ({help_text})")


def _bounded(value: int, text: object, what: str, minimum: int, limit: limits.Limit) -> int:
    if value < minimum:
        raise KvplanError(f"{what}: {text} must be between {minimum} and {limit.maximum:,}")
    if value > limit.maximum:
        raise KvplanError(f"{what}: {limit.describe(value)}")
    return value


def _given_int(text: str | int, what: str) -> int | None:
    """`text` when it is already an int (YAML gave one); bool is not a number."""
    if isinstance(text, bool):
        raise KvplanError(f"{what}: {text!r} is not a number")
    return text if isinstance(text, int) else None


def parse_tokens(
    text: str | int, what: str = "context", limit: limits.Limit = limits.CONTEXT
) -> int:
    """Token count from "8192", "8k", "128K", "1.5k" or "1M" (k = 1024, M = 1024²).

    Raises:
        KvplanError: not a whole number of tokens, below 1, or above `limit`.
    """
    value = _given_int(text, what)
    if value is None:
        value = _scaled(str(text), what, _TOKEN_SUFFIX, "a token count", _TOKEN_HELP)
    return _bounded(value, text, what, 1, limit)


def parse_bytes(text: str | int, what: str = "memory", limit: limits.Limit = limits.MEMORY) -> int:
    """Bytes from "51.38GiB", "80GB" (10⁹), "1024MiB" or a plain integer; 0 allowed.

    A fraction of a byte is rounded down, exactly: 51.38GiB = ⌊5138 × 2³⁰ / 100⌋ bytes, and
    2.01GB = 2,010,000,000 (through a float it would be 2,009,999,999).

    Raises:
        KvplanError: not a whole number of bytes, negative, or above `limit`.
    """
    value = _given_int(text, what)
    if value is None:
        value = _scaled(str(text), what, _BYTE_SUFFIX, "a size in bytes", _BYTE_HELP, floor=True)
    return _bounded(value, text, what, 0, limit)


def parse_count(text: str | int, what: str, limit: limits.Limit, minimum: int = 1) -> int:
    """A plain whole number ("8", "1024"): ASCII digits only, `minimum` ≤ value ≤ `limit`.

    Raises:
        KvplanError: not an integer (signs, "5.0", "1_000" and "0x10" are refused too), or
            out of range.
    """
    value = _given_int(text, what)
    if value is None:
        value = _scaled(
            str(text), what, {"": 1}, "a whole number", "write digits 0-9, e.g. 8", decimals=False
        )
    return _bounded(value, text, what, minimum, limit)


def _exact(text: str | float, what: str, kind: str, help_text: str) -> Fraction:
    """The exact value of the plain decimal `text` ("0.9", "2.5"), or of a YAML number as it
    prints (a float's repr): no exponent, unit, inf or nan.

    Raises:
        KvplanError: "`what`: `text` is not `kind`; ..." when it is not one.
    """
    if isinstance(text, float | int) and not isinstance(text, bool):
        if not math.isfinite(text):
            raise KvplanError(f"{what}: {text!r} is not {kind}; {help_text}")
        return Fraction(repr(text)) if isinstance(text, float) else Fraction(text)
    text = str(text)
    _check_length(text, what)
    match = _NUMBER.fullmatch(text)
    if not match or match.group(3):
        raise KvplanError(f"{what}: {text!r} is not {kind}; {_why_not_a_number(text) or help_text}")
    whole, fraction, _ = match.groups()
    value = Fraction(f"{whole}.{fraction or 0}")
    _refuse_signed_zero(whole, value, text, what, kind, help_text)
    return value


def parse_decimal(
    text: str | float, what: str, limit: limits.Limit, minimum: Fraction, help_text: str
) -> Fraction:
    """A plain decimal ("2", "0.5", "2.5"), exactly, from `minimum` to `limit`'s maximum.

    Text is ASCII digits with an optional fraction, at most kvplan.limits.NUMBER_CHARS
    characters; a YAML float is read as the decimal it prints as. Exponents ("1e-3"),
    "inf", "nan", signs and non-ASCII digits ("٣") are refused.

    Args:
        text: the value as written (or as YAML read it).
        what: the option or field, put before the message.
        limit: the stated maximum (kvplan.limits).
        minimum: the smallest value accepted (kvplan.limits.MIN_* ).
        help_text: how to write the value, for an unreadable one ("e.g. 2.5").

    Raises:
        KvplanError: unreadable, too long, or out of range.
    """
    value = _exact(text, what, "a number", help_text)
    if value < minimum:
        raise KvplanError(f"{what}: {text} is below kvplan's minimum of {_decimal(minimum)}")
    if value > limit.maximum:
        raise KvplanError(f"{what}: {limit.above(str(text))}")
    return value


def _decimal(value: Fraction) -> str:
    """`value` as a plain decimal (minimums are powers of ten: 1/10⁶ is 0.000001)."""
    if value <= 0:  # a minimum of 0 (a factor that may be 0) has no logarithm
        return f"{float(value):g}"
    return f"{float(value):.{max(0, -math.floor(math.log10(value)))}f}"


def parse_fraction(text: str | float, what: str, *, allow_zero: bool = False) -> float:
    """A fraction in (0, 1] ("0.9", "1"), or [0, 1] with `allow_zero`; read exactly first.

    Raises:
        KvplanError: not a plain decimal ("nan", "1e-3" and "½" are refused), or out of range.
    """
    value = _exact(text, what, "a fraction", "write a decimal such as 0.9")
    interval = "[0, 1]" if allow_zero else "(0, 1]"
    if value > 1 or value < 0 or (value == 0 and not allow_zero):
        raise KvplanError(f"{what}: {text} must be in {interval}; a fraction, 0.9 = 90 %")
    if 0 < value < limits.MIN_FRACTION:
        zero = " (or 0)" if allow_zero else ""
        raise KvplanError(
            f"{what}: {text} is below kvplan's minimum fraction of "
            f"{_decimal(limits.MIN_FRACTION)}{zero}"
        )
    return float(value)


def parse_float(text: str, what: str) -> float:
    """A finite number as a table cell writes it ("0.011", "1.5e-3", "-2"), as a float.

    ASCII only, at most kvplan.limits.NUMBER_CHARS characters: Python's float() also reads
    "٣" and "１.５". Ranges are the caller's.

    Raises:
        KvplanError: "`what`: `text` is not a finite number", also for "inf", "nan" and "1e999".
    """
    _check_length(text, what)
    try:
        value = float(text) if text.isascii() else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        reason = _why_not_a_number(text)
        raise KvplanError(f"{what}: {text!r} is not a finite number" + (reason and f"; {reason}"))
    return value
