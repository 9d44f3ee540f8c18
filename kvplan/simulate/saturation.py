"""Whether a run's offered rate is more than the deployment sustains, and what it sustains.

Over the arrival window [0, T] (T the last scheduled arrival) a stable system returns about
what arrives; an overloaded one returns at its service rate μ and its backlog grows by
(λ − μ) per second for as long as arrivals last, so every latency grows with the run's
length. kvplan compares the second half of the window, (T/2, T], where an overloaded
system is saturated: the backlog (requests scheduled and not returned; rejected ones leave
at once) grew by more than a twentieth of that half's arrivals plus three Poisson standard
deviations (3 √arrivals) means overload. The service rate is then estimated as the requests
returned after T/2 over the time from T/2 to the last return: saturated throughout but for
the last batch draining, so within one batch's time of μ.

Goodput is counted over the window as well, not over a makespan that includes the drain:
the share of the workload meeting the SLO × the rate served in the window (the offered
rate, or the sustainable one when overloaded). A workload with no window (offline, or a
closed loop with every request scheduled at t = 0) measures throughput over its makespan.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

# The backlog must grow by more than this share of the second half's arrivals, ...
GROWTH_FRACTION = 0.05
# ... plus this many standard deviations of a Poisson count of those arrivals.
GROWTH_DEVIATIONS = 3.0


@dataclass(frozen=True)
class Saturation:
    """The arrival window of a run and whether the deployment kept up with it."""

    window_s: float | None  # 0 to the last scheduled arrival; None: all at t = 0
    offered_requests_per_s: float | None  # requests ÷ window_s
    overloaded: bool
    backlog_growth_requests: int  # over the window's second half
    # Estimated when overloaded (the service rate in saturation); None otherwise.
    sustainable_requests_per_s: float | None

    @property
    def served_requests_per_s(self) -> float | None:
        """The rate the window was served at: the offered rate, or the sustainable one."""
        if self.overloaded:
            return self.sustainable_requests_per_s
        return self.offered_requests_per_s

    def note(self) -> str | None:
        """The one line saying the run is overloaded (None when it is not)."""
        if not self.overloaded:
            return None
        return (
            f"overloaded: {self.offered_requests_per_s:,.2f} req/s offered, about "
            f"{self.sustainable_requests_per_s:,.2f} req/s sustainable (requests returned "
            f"while saturated); the queue grew by {self.backlog_growth_requests:,} requests "
            "over the second half of the arrivals and grows without bound, so latencies "
            "depend on the run's length"
        )


def saturation(scheduled_s: Sequence[float], returns: Sequence[tuple[float, float]]) -> Saturation:
    """The window and overload verdict of a run (see the module docstring).

    Args:
        scheduled_s: every offered request's scheduled arrival, seconds, sorted.
        returns: (scheduled arrival, return time) of each returned request, seconds.
    """
    window = scheduled_s[-1] if scheduled_s else 0.0
    if window <= 0:
        return Saturation(None, None, False, 0, None)
    offered = len(scheduled_s) / window
    half = window / 2
    finishes = sorted(finish for _, finish in returns)

    def backlog(t: float) -> int:
        return sum(1 for arrival, finish in returns if arrival <= t < finish)

    growth = backlog(window) - backlog(half)
    arrivals = len(scheduled_s) - bisect_right(scheduled_s, half)
    threshold = GROWTH_FRACTION * arrivals + GROWTH_DEVIATIONS * math.sqrt(arrivals)
    if growth <= threshold or not finishes:
        return Saturation(window, offered, False, growth, None)
    after = len(finishes) - bisect_right(finishes, half)
    span = finishes[-1] - half
    sustainable = after / span if span > 0 else 0.0
    return Saturation(window, offered, True, growth, sustainable)
