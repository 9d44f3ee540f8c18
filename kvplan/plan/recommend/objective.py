"""What a recommendation must achieve (`Objective`) and what it costs (`Cost`).

The search asks an objective for the longest request, the requests that must run at once, a
score for each candidate, and whether more KV can ever lower that score (`kv_monotone`, which
allows the dominance pruning). `ConcurrencyTarget` is today's objective. A goodput objective
(requests/s within TTFT/TPOT SLOs, from `kvplan simulate`) implements the same protocol: its
`score` simulates traffic on the candidate's capacity (achieved = goodput, wanted = the rate)
and it sets `kv_monotone = False`, so every max_num_seqs and memory fraction is tried.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Protocol

import kvplan.limits as limits
from kvplan.errors import KvplanError
from kvplan.plan.capacity import Capacity
from kvplan.plan.engines import KvPool
from kvplan.specs import SkuSpec


@dataclass(frozen=True)
class Score:
    """How far one candidate gets: `achieved` against `wanted`, and whether the scheduler
    admits the target at all (max_num_seqs × dp)."""

    achieved: float
    wanted: float
    admitted: bool = True

    @property
    def meets(self) -> bool:
        return self.admitted and self.achieved >= self.wanted

    @property
    def fraction(self) -> float:
        return self.achieved / self.wanted if self.wanted else 1.0


class Objective(Protocol):
    """What a deployment must achieve; the search ranks the ones that do by cost."""

    @property
    def context_tokens(self) -> int:
        """The longest request, in tokens: the deployment's max_model_len."""
        ...

    @property
    def running_requests(self) -> int:
        """Requests the deployment must run at once, all replicas (max_num_seqs × dp ≥ it)."""
        ...

    @property
    def kv_monotone(self) -> bool:
        """More KV budget never lowers the score (allows the dominance pruning)."""
        ...

    def score(self, capacity: Capacity, headroom: Fraction) -> Score:
        """The score of one candidate, `headroom` of each KV budget kept unused."""
        ...


@dataclass(frozen=True)
class ConcurrencyTarget:
    """`concurrency` requests of `context_tokens` tokens each, held in KV at once."""

    context_tokens: int
    concurrency: int
    kv_monotone: bool = True

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise KvplanError(f"--concurrency: {self.concurrency} must be at least 1 request")
        limits.BATCH.check(self.concurrency, "--concurrency")
        if self.context_tokens < 1:
            raise KvplanError(f"--context: {self.context_tokens} must be at least 1 token")

    @property
    def running_requests(self) -> int:
        return self.concurrency

    def score(self, capacity: Capacity, headroom: Fraction) -> Score:
        """Requests of the context the KV within the headroom holds, over every replica."""
        dp = capacity.deployment.dp
        held = 0
        if capacity.kv_usable:
            held = usable_pool(capacity, headroom).requests_at(self.context_tokens) * dp
        admitted = capacity.scheduler.max_num_seqs * dp >= self.concurrency
        return Score(min(held, limits.BATCH.maximum), self.concurrency, admitted)


def usable_pool(capacity: Capacity, headroom: Fraction) -> KvPool:
    """The pool the engine builds from the KV budget less `headroom` of it (rounded up)."""
    budget = capacity.budget
    kept = budget.kv_bytes
    if kept > 0:
        kept -= math.ceil(kept * headroom)
    profile = capacity.deployment.engine
    return profile.pool(capacity.layout, replace(budget, kv_bytes=kept))


class Cost(Protocol):
    """What a candidate costs; None leaves the SKU out (no price known)."""

    @property
    def name(self) -> str: ...

    def of(self, sku: SkuSpec, gpus: int) -> float | None: ...


@dataclass(frozen=True)
class GpuCount:
    """Cost = GPUs."""

    name: str = "gpus"

    def of(self, sku: SkuSpec, gpus: int) -> float | None:
        return gpus


@dataclass(frozen=True)
class PricePerHour:
    """Cost = GPUs × price of one GPU-hour: `prices` (SKU name, price), else the SKU file's."""

    prices: tuple[tuple[str, float], ...] = ()
    name: str = "price"

    def price(self, sku: SkuSpec) -> float | None:
        return dict(self.prices).get(sku.name, sku.price_per_hour)

    def of(self, sku: SkuSpec, gpus: int) -> float | None:
        price = self.price(sku)
        return None if price is None else price * gpus
