"""Token-count distributions for synthetic workloads: fixed, uniform, lognormal, empirical.

Written as `512`, `fixed:512`, `uniform:128-2048`, `lognormal:mean=1000,sigma=1` or
`empirical:FILE` (one token count per line, or the first column of a CSV). Samples come from
the `random.Random` the workload passes in, so one seed gives one workload.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

import kvplan.limits as limits
from kvplan.errors import KvplanError
from kvplan.files import read_text
from kvplan.units import parse_tokens

KINDS = ("fixed", "uniform", "lognormal", "empirical")
# An empirical file larger than this is a trace, not a length distribution.
MAX_EMPIRICAL_ROWS = 10_000_000


@dataclass(frozen=True)
class TokenDistribution:
    """Where token counts come from; `low`/`high` bound every sample (tokens, inclusive)."""

    kind: str
    text: str  # what the user wrote, for the report
    low: int = 1
    high: int = 1
    mean_tokens: float = 0.0  # lognormal: the mean of the distribution (not of its log)
    sigma: float = 0.0  # lognormal: standard deviation of ln(tokens)
    values: tuple[int, ...] = ()  # empirical: the observed counts

    def sample(self, rng: random.Random) -> int:
        """One token count, at least 1."""
        if self.kind == "fixed":
            return self.low
        if self.kind == "uniform":
            return rng.randint(self.low, self.high)
        if self.kind == "empirical":
            return self.values[rng.randrange(len(self.values))]
        # Lognormal by its mean m: ln X ~ N(mu, sigma²) with mu = ln m − sigma²/2.
        mu = math.log(self.mean_tokens) - self.sigma**2 / 2
        return max(1, round(rng.lognormvariate(mu, self.sigma)))

    @property
    def smallest_tokens(self) -> int:
        """The smallest count this distribution can give."""
        return self.low


def parse_distribution(text: str, option: str) -> TokenDistribution:
    """A distribution from its written form (see the module docstring).

    Raises:
        KvplanError: an unknown kind, a bad number, or an unreadable empirical file.
    """
    kind, _, rest = text.partition(":")
    kind = kind.strip().lower()
    if not rest and kind not in KINDS:
        value = parse_tokens(text, option)
        return TokenDistribution("fixed", text, value, value)
    if kind == "fixed":
        value = parse_tokens(rest, option)
        return TokenDistribution("fixed", text, value, value)
    if kind == "uniform":
        return _uniform(text, rest, option)
    if kind == "lognormal":
        return _lognormal(text, rest, option)
    if kind == "empirical":
        return _empirical(text, Path(rest.strip()), option)
    raise KvplanError(
        f"{option}: unknown distribution {kind!r} in {text!r} (allowed: a token count, "
        "fixed:N, uniform:LOW-HIGH, lognormal:mean=M,sigma=S, empirical:FILE)"
    )


def _uniform(text: str, rest: str, option: str) -> TokenDistribution:
    low_text, dash, high_text = rest.partition("-")
    if not dash:
        raise KvplanError(f"{option}: {text!r}: write uniform:LOW-HIGH, e.g. uniform:128-2048")
    low, high = parse_tokens(low_text, option), parse_tokens(high_text, option)
    if low > high:
        raise KvplanError(f"{option}: {text!r}: LOW {low} is above HIGH {high}")
    return TokenDistribution("uniform", text, low, high)


def _lognormal(text: str, rest: str, option: str) -> TokenDistribution:
    fields = {}
    for part in rest.split(","):
        key, equals, value = part.partition("=")
        if not equals or key.strip() not in ("mean", "sigma"):
            raise KvplanError(
                f"{option}: {text!r}: write lognormal:mean=M,sigma=S (M in tokens, S the "
                "standard deviation of ln tokens), e.g. lognormal:mean=1000,sigma=1"
            )
        try:
            fields[key.strip()] = float(value)
        except ValueError:
            problem = f"{key.strip()} {value!r} is not a number"
            raise KvplanError(f"{option}: {text!r}: {problem}") from None
    mean, sigma = fields.get("mean"), fields.get("sigma")
    if mean is None or sigma is None:
        raise KvplanError(f"{option}: {text!r}: give both mean= and sigma=")
    if not (mean >= 1 and math.isfinite(mean)) or not (0 <= sigma <= 5):
        raise KvplanError(f"{option}: {text!r}: mean must be at least 1 token and sigma in [0, 5]")
    return TokenDistribution("lognormal", text, 1, 1, mean_tokens=mean, sigma=sigma)


def _empirical(text: str, path: Path, option: str) -> TokenDistribution:
    lines = read_text(path, limits.TABLE_FILE_BYTES, option).splitlines()
    values = []
    for number, line in enumerate(lines, start=1):
        cell = line.split(",")[0].strip()
        digits = cell.isascii() and cell.isdigit() and len(cell) <= limits.NUMBER_CHARS
        if not cell or (number == 1 and not digits):
            continue  # blank lines and a header
        if not digits or not 1 <= int(cell) <= limits.CONTEXT.maximum:
            raise KvplanError(
                f"{option}: {path}:{number}: {cell!r} is not a token count (a whole number ≥ 1)"
            )
        values.append(int(cell))
        if len(values) > MAX_EMPIRICAL_ROWS:
            raise KvplanError(f"{option}: {path}: more than {MAX_EMPIRICAL_ROWS:,} rows")
    if not values:
        raise KvplanError(f"{option}: {path}: no token counts in the file")
    return TokenDistribution("empirical", text, min(values), max(values), values=tuple(values))
