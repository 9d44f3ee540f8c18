"""Recommendations → typed records: the numbers of `kvplan recommend`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.api.results_recommend import (
    RecommendCandidate,
    RecommendLoss,
    RecommendReport,
    SearchSummary,
    ThroughputTarget,
)
from kvplan.plan.recommend import GoodputTarget, held_within_headroom

if TYPE_CHECKING:
    from kvplan.plan.recommend import Candidate, Loss, Recommendation


def recommend_report(result: Recommendation) -> RecommendReport:
    """The numbers of `kvplan recommend` (docs/commands/recommend.md)."""
    base, objective, stats = result.base, result.objective, result.stats
    context = objective.context_tokens

    def record(c: Candidate | None, losses: tuple[Loss, ...] = ()) -> RecommendCandidate | None:
        return None if c is None else recommend_candidate(c, context, losses)

    ranked = [record(r.candidate, r.losses) for r in result.ranked]
    searched = {
        key: ["released" if v is None else v for v in values]
        for key, values in stats.searched.items()
    }
    return RecommendReport(
        model=base.model.name,
        engine=base.engine.name,
        engine_version=base.settings.version,
        context_tokens=context,
        concurrency=getattr(objective, "concurrency", None),
        throughput=_throughput(objective),
        headroom_fraction=float(result.headroom),
        rank_by=result.cost.name,
        meets=bool(ranked),
        ranked=ranked,
        closest_miss=record(result.closest_miss),
        unquantised_miss=record(result.unquantised_miss),
        search=SearchSummary(
            skus=stats.skus,
            points=stats.points,
            capacities_evaluated=stats.evaluated,
            refused_by_engine=stats.refused,
            beyond_cost_bound=stats.beyond_bound,
            skus_without_price=list(stats.unpriced),
            searched=searched,  # type: ignore[arg-type]
            simulations=stats.simulated,
        ),
    )


def _throughput(objective: object) -> ThroughputTarget | None:
    if not isinstance(objective, GoodputTarget):
        return None
    return ThroughputTarget(
        workload=objective.workload,
        requests=objective.requests,
        offered_requests_per_s=objective.offered_requests_per_s,
        slo_ttft_s=objective.slo_ttft_s,
        slo_tpot_s=objective.slo_tpot_s,
        slo_attainment_fraction=objective.slo_attainment,
        notes=list(objective.simulator.notes),
    )


def recommend_candidate(
    c: Candidate, context_tokens: int, losses: tuple[Loss, ...] = ()
) -> RecommendCandidate:
    """One evaluated deployment: settings, exact bytes per GPU, requests held, command."""
    d, capacity = c.deployment, c.capacity
    scheduler, budget = capacity.scheduler, capacity.budget
    usable = capacity.kv_usable
    goodput = c.score.goodput_requests_per_s
    command = d.engine.launch_command(d, c.sku, context_tokens)
    return RecommendCandidate(
        sku=c.sku.name,
        gpus=c.gpus,
        nodes=c.nodes,
        tp=d.tp,
        pp=d.pp,
        dp=d.dp,
        ep=d.ep,
        weight_dtype=d.weight_dtype or d.model.weight_dtype,
        kv_dtype=d.kv_dtype,
        gpu_memory_utilization=budget.utilization,
        kv_memory_bytes=d.settings.kv_memory_bytes,
        max_num_seqs=scheduler.max_num_seqs,
        max_num_batched_tokens=scheduler.max_num_batched_tokens,
        tokens_per_block=capacity.layout.tokens_per_block,
        cost=c.cost,
        weights_bytes_per_gpu=capacity.weights_bytes_per_gpu,
        kv_budget_bytes_per_gpu=budget.kv_bytes,
        kv_budget_uncertainty_bytes=budget.uncertainty_bytes,
        kv_blocks=capacity.pool.num_blocks if usable else 0,
        kv_blocks_within_headroom=c.usable.num_blocks if usable else 0,
        kv_block_unit=capacity.layout.unit,
        kv_bytes_per_block_per_gpu=capacity.layout.bytes_per_block,
        max_concurrency=capacity.max_concurrency(),
        concurrency_within_headroom=held_within_headroom(capacity, c.headroom, context_tokens),
        meets=c.score.meets,
        slo_met_fraction=None if goodput is None else c.score.achieved,
        goodput_requests_per_s=goodput,
        launch_command=command,
        # Log lines only beside a command: they describe what that command starts.
        log_lines=capacity.log_lines() if command else [],
        startup=capacity.startup_figures() if command else {},
        notes=d.engine.notes(d, c.sku),
        loses_by=[RecommendLoss(kind=x.kind, value=x.value, first=x.first) for x in losses],
    )
