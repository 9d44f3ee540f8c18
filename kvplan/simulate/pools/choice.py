"""One pool's answer in `kvplan pools`: its degree, instance count, latencies and rejections."""

from __future__ import annotations

from dataclasses import dataclass, field

# The decode pool's share also misses the requests the prefill pool rejected (they never
# reach it); they are listed under this reason in its `rejected`.
PREFILL_REJECTED = "rejected by the prefill pool"


@dataclass(frozen=True)
class PoolChoice:
    """One pool's answer: the fewest instances of `tp` GPUs meeting its target (None: none)."""

    role: str  # prefill, decode or colocated
    tp: int
    pp: int
    instances: int | None
    ttft_s: float | None  # at the SLO percentile of the returned requests, for the count found
    tpot_s: float | None  # (or the largest tried)
    tried: tuple[tuple[int, int, bool], ...]  # (tp, instances, met) in the order simulated
    # Share of the workload's requests meeting this pool's target(s), rejected ones missing.
    slo_met_fraction: float | None = None
    rejected: dict[str, int] = field(default_factory=dict)  # reason -> requests, this pool

    @property
    def gpus(self) -> int | None:
        return None if self.instances is None else self.instances * self.tp * self.pp

    @property
    def reported_instances(self) -> int:
        """The count its latencies are for: the one found, or else the largest tried."""
        return self.instances or max(n for _, n, _ in self.tried)
