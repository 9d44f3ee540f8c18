"""What a recommendation must achieve (`Objective`) and what it costs (`Cost`).

The search asks an objective for the longest request, the requests that must run at once, a
score for each candidate, whether more KV can ever lower that score (`kv_monotone`, which
allows the dominance pruning), the max_num_seqs values worth trying and whether replicas of a
dense model count (`replicas`). `ConcurrencyTarget` holds requests in KV; `GoodputTarget`
(`goodput.py`) serves a request rate within TTFT/TPOT targets, scored by simulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Protocol

import kvplan.limits as limits
from kvplan.engine import KvPool
from kvplan.errors import KvplanError
from kvplan.plan.capacity import Capacity
from kvplan.specs import SkuSpec


@dataclass(frozen=True)
class Score:
    """How far one candidate gets: `achieved` against `wanted`, and whether the scheduler
    admits the target at all (max_num_seqs × dp)."""

    achieved: float
    wanted: float
    admitted: bool = True
    goodput_requests_per_s: float | None = None  # throughput targets: requests/s within SLO
    simulated: bool = False  # a simulation ran (False: arithmetic settled it)

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

    @property
    def replicas(self) -> bool:
        """Whether dp replicas of a dense model are searched (they add throughput, not KV per
        request)."""
        ...

    @property
    def prunes_larger_blocks(self) -> bool:
        """Whether a block size that is a multiple of another one offered is left out (it
        never holds more KV; its steps are no faster)."""
        ...

    def max_num_seqs_choices(self, need: int, default: int) -> tuple[int | None, ...]:
        """max_num_seqs values to try, in order, for a replica that must admit `need`
        requests on an engine whose default is `default` (None: the engine's default)."""
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
    replicas: bool = False

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise KvplanError(f"--concurrency: {self.concurrency} must be at least 1 request")
        limits.BATCH.check(self.concurrency, "--concurrency")
        if self.context_tokens < 1:
            raise KvplanError(f"--context: {self.context_tokens} must be at least 1 token")

    @property
    def running_requests(self) -> int:
        return self.concurrency

    @property
    def prunes_larger_blocks(self) -> bool:
        return self.kv_monotone

    def max_num_seqs_choices(self, need: int, default: int) -> tuple[int, ...]:
        """The smallest value that admits the target (a larger one only costs sampler memory);
        without `kv_monotone`, every doubling up to the engine's default."""
        if self.kv_monotone:
            return (need,)
        values = [need]
        while values[-1] * 2 < default:
            values.append(values[-1] * 2)
        return (*values, default) if default > need else tuple(values)

    def score(self, capacity: Capacity, headroom: Fraction) -> Score:
        """Requests of the context the KV within the headroom holds, over every replica."""
        held = held_within_headroom(capacity, headroom, self.context_tokens)
        admitted = capacity.scheduler.max_num_seqs * capacity.deployment.dp >= self.concurrency
        return Score(held, self.concurrency, admitted)


def held_within_headroom(capacity: Capacity, headroom: Fraction, context_tokens: int) -> int:
    """Requests of `context_tokens` the KV within the headroom holds, over every replica."""
    if not capacity.kv_usable:
        return 0
    held = usable_pool(capacity, headroom).requests_at(context_tokens) * capacity.deployment.dp
    return min(held, limits.BATCH.maximum)


def kv_bytes_within_headroom(kv_bytes: int, headroom: Fraction) -> int:
    """A KV budget in bytes less `headroom` of it (rounded up); a budget ≤ 0 as it is."""
    return kv_bytes - math.ceil(kv_bytes * headroom) if kv_bytes > 0 else kv_bytes


def usable_pool(capacity: Capacity, headroom: Fraction) -> KvPool:
    """The pool the engine builds from the KV budget less `headroom` of it (rounded up)."""
    budget = capacity.budget
    kept = kv_bytes_within_headroom(budget.kv_bytes, headroom)
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
