"""A throughput objective: serve a workload with enough requests meeting TTFT/TPOT targets.

`GoodputTarget` scores a candidate by simulating the workload on it (`kvplan simulate`'s
engine, reached through the `Simulator` the caller hands in: `plan` does not import
`simulate`). A candidate meets the target when at least `slo_attainment` of the workload's
requests meet every SLO; requests the deployment rejects (longer than --context) count as
misses. Among those that meet, cheaper ranks first, then a larger share within SLO.

Arithmetic settles a candidate before any run where it can: vLLM refuses to start when its
KV (less the headroom) cannot hold one request of max_model_len tokens, so such a point
scores 0 unsimulated; the simulator may rule out a point whose quickest decode step is
already slower than the TPOT target (`Simulated.simulated` False).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Protocol

from kvplan.engine.deployment import Deployment
from kvplan.engine.pool import UNLIMITED_REQUESTS
from kvplan.errors import KvplanError
from kvplan.plan.capacity import Capacity
from kvplan.plan.recommend.objective import Score, held_within_headroom, kv_bytes_within_headroom
from kvplan.specs import SkuSpec


@dataclass(frozen=True)
class Simulated:
    """What one simulation of the workload gave (or an arithmetic bound on it)."""

    slo_met_fraction: float  # requests meeting every SLO / all requests (rejected: missed)
    goodput_requests_per_s: float  # requests meeting every SLO / the run's makespan
    simulated: bool = True  # False: a bound settled it without a run (fraction: the bound)


class Simulator(Protocol):
    """Serves the workload with `deployment` on `sku` (max_model_len = the target's context)."""

    def __call__(self, deployment: Deployment, sku: SkuSpec) -> Simulated: ...

    @property
    def notes(self) -> tuple[str, ...]:
        """What it could not simulate and why (e.g. a SKU with no peak FLOP/s)."""
        ...


@dataclass(frozen=True)
class GoodputTarget:
    """At least `slo_attainment` (0 < a ≤ 1) of the workload's requests meet every SLO."""

    context_tokens: int  # max_model_len: longer requests are rejected
    slo_attainment: float
    simulator: Simulator = field(compare=False, repr=False)
    workload: str = ""  # how the workload was made, e.g. "Poisson 10 req/s, 1,000 requests…"
    requests: int = 0  # requests in the workload
    offered_requests_per_s: float | None = None  # requests / last arrival (None: one instant)
    slo_ttft_s: float | None = None  # the targets the simulator judges by, for the report
    slo_tpot_s: float | None = None
    # More KV can lower attainment: a larger pool admits a larger batch, whose steps are
    # slower for every request in it (Llama-3.1-8B on one H100, 6 req/s of 6000 + 1024 tokens,
    # TTFT 2 s: 47.3 % within SLO at utilization 0.92, 46.7 % at 0.95). So no dominance
    # pruning: fractions are tried from the lowest up.
    kv_monotone: bool = False
    replicas: bool = True
    # A larger block only holds less KV, its steps are no faster: not worth a simulation.
    prunes_larger_blocks: bool = True

    def __post_init__(self) -> None:
        if not 0 < self.slo_attainment <= 1:
            raise KvplanError(
                f"--slo-attainment: {self.slo_attainment:g} must be above 0 and at most 100%"
            )
        if self.context_tokens < 1:
            raise KvplanError(f"--context: {self.context_tokens} must be at least 1 token")

    @property
    def running_requests(self) -> int:
        return 1

    def max_num_seqs_choices(self, need: int, default: int) -> tuple[int | None, ...]:
        """The engine's default only (each value is a simulation; --max-num-seqs fixes it),
        pinned in the command when the engine has one, left unset when it has no limit."""
        return (None,) if default >= UNLIMITED_REQUESTS else (default,)

    def score(self, capacity: Capacity, headroom: Fraction) -> Score:
        """The share of requests meeting every SLO, simulated with the KV within headroom."""
        if held_within_headroom(capacity, headroom, self.context_tokens) < 1:
            return Score(0.0, self.slo_attainment, goodput_requests_per_s=0.0)
        run = self.simulator(_within_headroom(capacity, headroom), capacity.sku)
        return Score(
            run.slo_met_fraction,
            self.slo_attainment,
            goodput_requests_per_s=run.goodput_requests_per_s,
            simulated=run.simulated,
        )


def _within_headroom(capacity: Capacity, headroom: Fraction) -> Deployment:
    """The deployment with its KV budget fixed at the budget less `headroom` of it (the
    simulated pool is the one `usable_pool` sizes)."""
    deployment = capacity.deployment
    budget = capacity.budget.kv_bytes
    if not headroom or budget <= 0:
        return deployment
    kept = kv_bytes_within_headroom(budget, headroom)
    return deployment.replace(settings=replace(deployment.settings, kv_memory_bytes=kept))
