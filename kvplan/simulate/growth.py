"""A request's charge as it grows, compressed so the event loop can jump many steps at once.

The engine model charges a request of L tokens f(L) units (blocks of the engine's layout, or
bytes). Every layout kvplan has is of one shape: f is constant between block boundaries and
grows only when a request crosses one, f(mB + 1) − f(mB) = r(m) for a block of B tokens, and
r never increases with m (a full-attention group adds a block every B tokens for ever; a
window or a chunk stops adding once the request passes it; a recurrent state never adds).
So f is a handful of rates and the lengths where they change, found once by binary search
and checked against f at sample lengths; a layout of another shape is a bug, refused.

`Lockstep` then sums f over many requests that all gain one token per step: requests whose
lengths agree modulo B cross their boundaries on the same steps, so the blocks k steps need
are a sum over at most B residues, whatever the number of requests.
"""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from kvplan.engine.pool import largest_fitting

# Evenly spaced boundaries at which the compressed profile is compared with f itself.
CHECK_POINTS = 48


@dataclass(frozen=True)
class GrowthProfile:
    """f(L) for 1 ≤ L ≤ max_tokens as rates between breakpoints (see the module docstring).

    `starts[i]` is the first boundary length (a multiple of `tokens_per_block`) of segment i,
    whose boundaries each add `rates[i]` units.
    """

    value: Callable[[int], int] = field(repr=False, compare=False)  # f(tokens), cached
    tokens_per_block: int
    max_tokens: int
    starts: tuple[int, ...]
    rates: tuple[int, ...]

    @property
    def flat(self) -> bool:
        """One rate at every boundary: a request never changes segment."""
        return len(self.starts) <= 1

    def segment(self, tokens: int) -> int:
        """Index of the segment holding the next boundary at or after `tokens` (−1: none)."""
        block = self.tokens_per_block
        boundary = max(-(-tokens // block) * block, block)
        return bisect_right(self.starts, boundary) - 1

    def rate(self, segment: int) -> int:
        """Units each boundary of `segment` adds (0 before the first segment)."""
        return self.rates[segment] if segment >= 0 else 0

    def next_start(self, segment: int) -> int | None:
        """Length at which the segment after `segment` begins, or None for the last one."""
        following = segment + 1
        return self.starts[following] if following < len(self.starts) else None


def growth_profile(
    function: Callable[[int], int], tokens_per_block: int, max_tokens: int
) -> GrowthProfile:
    """Compress `function` over 1 ≤ L ≤ max_tokens (see the module docstring).

    The block B is where f first grows: f(1) = … = f(B) < f(B + 1). That is the layout's
    block (vLLM's 16 tokens), one token for byte pools, or a padding the engine applies to a
    byte charge (llama.cpp pads a slot's cells to 256). `tokens_per_block` stands for B when f
    never grows (a request of constant charge).

    Raises:
        RuntimeError: `function` is not of the shape every kvplan layout has (a bug).
    """
    cached = lru_cache(maxsize=1 << 16)(function)
    block = _first_growth(cached, max_tokens) or tokens_per_block

    def gain(m: int) -> int:
        return cached(m * block + 1) - cached(m * block)

    last = (max_tokens - 1) // block  # boundaries m·B < max_tokens can be crossed
    starts: list[int] = []
    rates: list[int] = []
    m = 1
    while m <= last:
        rate = gain(m)
        # The last boundary with this rate, r being non-increasing.
        end = largest_fitting(lambda k, rate=rate: gain(k) == rate, last, lower=m)
        starts.append(m * block)
        rates.append(rate)
        m = end + 1
    profile = GrowthProfile(cached, block, max_tokens, tuple(starts), tuple(rates))
    _check(profile, gain, last)
    return profile


def _first_growth(f: Callable[[int], int], max_tokens: int) -> int | None:
    """The largest L with f(L) = f(1) when f grows by max_tokens (f is monotone), else None."""
    if f(max_tokens) == f(1):
        return None
    return largest_fitting(lambda n: f(n) == f(1), max_tokens - 1)  # L = 1 holds: ≥ 1


def _check(profile: GrowthProfile, gain: Callable[[int], int], last: int) -> None:
    """Compare the compressed profile with f at segment edges and evenly spaced boundaries."""
    rates, block, f = profile.rates, profile.tokens_per_block, profile.value
    if any(r < 0 for r in rates) or any(a <= b for a, b in itertools.pairwise(rates)):
        raise RuntimeError(f"charge rates {rates} are not non-increasing")
    boundaries = {1, last} | {s // block for s in profile.starts}
    boundaries |= {1 + i * (last - 1) // CHECK_POINTS for i in range(CHECK_POINTS + 1)}
    for m in sorted(b for b in boundaries if 1 <= b <= last):
        if gain(m) != profile.rate(profile.segment(m * block)):
            raise RuntimeError(f"charge at boundary {m * block} differs from its profile")
        edge = m * block
        last_tokens = profile.max_tokens
        inside = [edge + j for j in {2, block} if 2 <= j <= block and edge + j <= last_tokens]
        if any(f(length) != f(m * block + 1) for length in inside):
            raise RuntimeError(f"charge grows between boundaries after {m * block} tokens")
    if f(1) != f(min(block, profile.max_tokens)):
        raise RuntimeError("charge grows inside the first block")


class Lockstep:
    """Σ f(L_i) over requests that each gain one token per step, with the units k steps add.

    A member joined at length L on step G crosses its boundaries on the steps where
    L + (step − G) ≡ 0 (mod B): its residue (L − G) mod B fixes them, so members are kept as
    Σ rates per residue. `total` is exact: members leave with f of their exact length.
    """

    def __init__(self, profile: GrowthProfile) -> None:
        self.profile = profile
        self.by_residue = [0] * profile.tokens_per_block
        self.rate_sum = 0
        self.total = 0

    def add(self, tokens: int, step: int, rate: int) -> int:
        """Add a member of `tokens` tokens on `step` gaining `rate` per boundary; its residue."""
        residue = (tokens - step) % self.profile.tokens_per_block
        self.by_residue[residue] += rate
        self.rate_sum += rate
        self.total += self.profile.value(tokens)
        return residue

    def remove(self, tokens: int, residue: int, rate: int) -> int:
        """Remove a member now `tokens` long; its charge f(tokens)."""
        self.by_residue[residue] -= rate
        self.rate_sum -= rate
        charge = self.profile.value(tokens)
        self.total -= charge
        return charge

    def change_rate(self, residue: int, old: int, new: int) -> None:
        self.by_residue[residue] += new - old
        self.rate_sum += new - old

    def need(self, step: int, steps: int) -> int:
        """Units the members gain over `steps` steps from `step` (each step before it runs)."""
        block = self.profile.tokens_per_block
        if block == 1:
            return steps * self.rate_sum
        if steps == 1:
            return self.by_residue[-step % block]
        cycles, rest = divmod(steps, block)
        by_residue = self.by_residue
        return cycles * self.rate_sum + sum(by_residue[(-step - j) % block] for j in range(rest))

    def steps_within(self, step: int, free: int, limit: int) -> int:
        """The most steps (≤ limit) from `step` whose gains fit in `free` units."""
        if self.rate_sum == 0:
            return limit
        block = self.profile.tokens_per_block
        if block == 1:
            return min(limit, free // self.rate_sum)
        # Whole cycles of B steps each add rate_sum; walk the last two cycles step by step.
        steps = max(0, free // self.rate_sum - 1) * block
        if steps >= limit:
            return limit
        used = self.need(step, steps)
        by_residue = self.by_residue
        while steps < limit:
            gain = by_residue[(-step - steps) % block]
            if used + gain > free:
                break
            used += gain
            steps += 1
        return steps
