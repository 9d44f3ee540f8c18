"""Evaluated candidates, how they rank, and why an alternative loses to the first."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

from kvplan.engine import KvPool
from kvplan.engine.deployment import Deployment
from kvplan.engine.nodes import nodes_spanned
from kvplan.plan.capacity import Capacity
from kvplan.plan.recommend.objective import Score, held_within_headroom, usable_pool
from kvplan.specs import SkuSpec, kv_dtype_info


@dataclass(frozen=True)
class Candidate:
    """One point of the space, evaluated: its capacity, cost and score."""

    capacity: Capacity
    cost: float
    score: Score
    headroom: Fraction

    @cached_property
    def usable(self) -> KvPool:
        """The pool less the headroom share of the KV budget."""
        return usable_pool(self.capacity, self.headroom)

    @cached_property
    def held(self) -> int:
        """Requests of the target's context the KV within the headroom holds, all replicas."""
        return held_within_headroom(self.capacity, self.headroom, self.capacity.context_tokens)

    @property
    def goodput(self) -> float:
        """Requests/s within SLO for a throughput target; 0 for a KV target."""
        return self.score.goodput_requests_per_s or 0.0

    @property
    def deployment(self) -> Deployment:
        return self.capacity.deployment

    @property
    def sku(self) -> SkuSpec:
        return self.capacity.sku

    @property
    def gpus(self) -> int:
        return self.deployment.gpus

    @property
    def nodes(self) -> int:
        """Nodes of the deployment's GPUs per node it needs."""
        return nodes_spanned(self.gpus, self.deployment.settings, self.sku)

    @property
    def quantised(self) -> tuple[tuple[str, str], ...]:
        """("weights", dtype) and ("kv", dtype) for what the search quantised."""
        d = self.deployment
        parts = []
        if d.weight_dtype not in (None, d.model.weight_dtype):
            parts.append(("weights", d.weight_dtype or ""))
        if kv_dtype_info(d.kv_dtype).is_quantised:
            parts.append(("kv", d.kv_dtype))
        return tuple(parts)

    @property
    def bits_kept(self) -> tuple[float, float]:
        """Bits per KV element (scales included) and per weight (whole model): with cost,
        parts quantised and KV held equal, the ranking keeps the more precise, KV first."""
        d = self.deployment
        kv = kv_dtype_info(d.kv_dtype)
        kv_bits = kv.bits + (kv.metadata_bits / kv.group_elements if kv.group_elements else 0)
        weights = d.weights()
        return kv_bits, weights.total_bytes * 8 / max(weights.params.total, 1)

    @property
    def shape(self) -> tuple[str, int, str | None, str]:
        """What tells alternatives apart: SKU, GPUs, weight and KV dtypes."""
        d = self.deployment
        return (self.sku.name, self.gpus, d.weight_dtype, d.kv_dtype)


@dataclass(frozen=True)
class Loss:
    """One way an alternative is worse than the first: `kind`, its value, the first's."""

    # gpus or price (the cost), weights, kv, nodes, pipeline, held (requests in KV) or slo_met
    # (share within SLO), then for a throughput target held and goodput (requests/s within
    # SLO), utilization, order
    kind: str
    value: float | str
    first: float | str


@dataclass(frozen=True)
class Ranked:
    candidate: Candidate
    losses: tuple[Loss, ...]  # empty for the first


def _rank_key(c: Candidate) -> tuple:
    """Cost, then fewer quantised parts, fewer nodes and stages, more achieved; for a
    throughput target, whose achieved is the share within SLO, then more requests held and
    a higher goodput (docs/commands/recommend.md: more requests held wins a tie); then more
    bits kept (KV, then weights); then a lower fraction."""
    d = c.deployment
    return (
        c.cost,
        len(c.quantised),
        c.nodes,
        d.pp,
        -c.score.achieved,
        -c.held,
        -c.goodput,
        tuple(-bits for bits in c.bits_kept),
        c.capacity.budget.utilization,
        c.deployment.settings.tokens_per_block or 0,
        c.sku.name,
        d.tp,
        d.dp,
    )


def _miss_key(c: Candidate) -> tuple:
    """The closest miss: most achieved, then the largest KV budget, then the cheapest (for a
    throughput target, the cheapest before the largest KV: more KV does not always help)."""
    if c.score.goodput_requests_per_s is not None:
        return (-c.score.achieved, c.cost, -c.capacity.budget.kv_bytes, _rank_key(c))
    return (-c.score.achieved, -c.capacity.budget.kv_bytes, c.cost, _rank_key(c))


def closer(candidate: Candidate, miss: Candidate | None) -> Candidate:
    return candidate if miss is None or _miss_key(candidate) < _miss_key(miss) else miss


def rank_candidates(meeting: list[Candidate], top: int, cost_name: str) -> tuple[Ranked, ...]:
    """The best candidate of each shape, the `top` best shapes, each with its losses."""
    best: dict[tuple, Candidate] = {}
    for candidate in sorted(meeting, key=_rank_key):
        best.setdefault(candidate.shape, candidate)
    chosen = list(best.values())[:top]
    if not chosen:
        return ()
    first = chosen[0]
    return tuple(Ranked(c, losses(c, first, cost_name) if c is not first else ()) for c in chosen)


def losses(c: Candidate, first: Candidate, cost_name: str) -> tuple[Loss, ...]:
    """Every way `c` is worse than `first`, in the order the ranking weighs them."""
    found = []
    if c.cost > first.cost:
        found.append(Loss(cost_name, c.cost, first.cost))
    first_parts = dict(first.quantised)
    found += [
        Loss(part, dtype, first_parts.get(part, ""))
        for part, dtype in c.quantised
        if first_parts.get(part) != dtype
    ]
    if c.nodes > first.nodes:
        found.append(Loss("nodes", c.nodes, first.nodes))
    if c.deployment.pp > first.deployment.pp:
        found.append(Loss("pipeline", c.deployment.pp, first.deployment.pp))
    throughput = c.score.goodput_requests_per_s is not None
    if c.score.achieved < first.score.achieved:
        found.append(
            Loss("slo_met" if throughput else "held", c.score.achieved, first.score.achieved)
        )
    elif throughput and c.held < first.held:
        found.append(Loss("held", c.held, first.held))
    elif throughput and c.goodput < first.goodput:
        found.append(Loss("goodput", c.goodput, first.goodput))
    utilization, first_utilization = (x.capacity.budget.utilization for x in (c, first))
    if utilization > first_utilization:
        found.append(Loss("utilization", utilization, first_utilization))
    if not found:
        found.append(Loss("order", c.sku.name, first.sku.name))
    return tuple(found)
