"""Plan objects → typed results: the numbers every format shows, exact and unrounded.

The report layer adds the sentences around them (reasons, vendor questions, formula lines);
nothing here rounds or formats a number.
"""

from __future__ import annotations

from kvplan.api.results import (
    BudgetTerms,
    CapacityRow,
    CheckReport,
    ClaimReport,
    ContextPoint,
    EngineReserve,
    FormulaFactor,
    FormulaTerm,
    ProductResult,
    RecommendCandidate,
    RecommendLoss,
    RecommendReport,
    RefusedRow,
    SearchSummary,
    Sequences,
    SizeReport,
    ThroughputTarget,
    TokensKept,
    WeightsBreakdown,
    WeightsPerGpu,
)
from kvplan.engine import Budget
from kvplan.engine.nodes import gpus_per_node
from kvplan.plan.capacity import Capacity, Refusal, concurrency_curve
from kvplan.plan.context_limit import beyond_limit_sentence
from kvplan.plan.guardrail import ClaimSheet, GuardrailResult, ProductCheck
from kvplan.plan.recommend import (
    Candidate,
    GoodputTarget,
    Loss,
    Recommendation,
    held_within_headroom,
)
from kvplan.plan.sizing import SizeResult, formula_terms

# Checkpoint tensor roles, in the order a breakdown lists them.
WEIGHT_ROLES = ("split", "kv", "expert", "replicated", "vision", "unloaded")


def budget_terms(budget: Budget) -> BudgetTerms:
    """The budget's terms, bytes per GPU."""
    return BudgetTerms(
        total_bytes=budget.total_bytes,
        total_basis=budget.total_basis,
        utilization=budget.utilization,
        requested_bytes=budget.requested_bytes,
        activation_bytes=budget.activation_bytes,
        non_torch_bytes=budget.non_torch_bytes,
        cudagraph_bytes=budget.cudagraph_bytes,
        fixed_kv_memory=budget.fixed,
    )


def formula_records(result: SizeResult) -> list[FormulaTerm]:
    """The KV formula per layer kind with the model's numbers, whole deployment."""
    layers = result.deployment.model.layers
    windows = {"sliding": layers.sliding_window, "chunked": layers.chunk_size}
    return [
        FormulaTerm(
            kind=term.kind,
            layers=term.layers,
            factors=[FormulaFactor(label=label, value=value) for label, value in term.factors],
            tokens_kept=[TokensKept(tokens=t, count=c) for t, c in term.tokens_kept],
            window_tokens=windows.get(term.kind),
            kv_bytes=term.bytes_total,
        )
        for term in formula_terms(result)
    ]


def curve(capacity: Capacity, sampled: bool) -> list[ContextPoint] | None:
    """The requests held against context, when `sampled` and the KV holds any (else None)."""
    if not sampled or not capacity.kv_usable:
        return None
    return [
        ContextPoint(context_tokens=tokens, max_concurrency=held)
        for tokens, held in concurrency_curve(capacity)
    ]


def weights_breakdown(result: SizeResult) -> WeightsBreakdown:
    """Where the weight bytes come from and how one GPU holds them.

    `per_gpu` is the binding GPU: split bytes are its 1/tp share (k/v projections past one
    KV head per rank count whole heads), replicated bytes sit whole on every rank.
    """
    d, weights = result.deployment, result.weights
    shards = d.expert_shards
    stage = max(weights.stages, key=lambda s: s.per_gpu_bytes(d.tp, expert_shards=shards))
    checkpoint = weights.checkpoint
    return WeightsBreakdown(
        basis="computed" if checkpoint is None else checkpoint.basis,
        checkpoint=checkpoint.source if checkpoint else None,
        scaled_to_index_total=weights.scale != 1.0,
        total_bytes=weights.total_bytes,
        vision_bytes=weights.vision_bytes,
        per_gpu=WeightsPerGpu(
            split_bytes=-(-stage.sharded_bytes // d.tp),
            routed_expert_bytes=-(-stage.routed_expert_bytes // shards),
            replicated_bytes=stage.replicated_bytes,
            total_bytes=weights.per_gpu_bytes,
        ),
        bytes_by_dtype=dict(checkpoint.bytes_by_dtype) if checkpoint else None,
        bytes_by_role=(
            {role: checkpoint.role_bytes(role) for role in WEIGHT_ROLES} if checkpoint else None
        ),
        tensors=checkpoint.num_tensors if checkpoint else None,
    )


def size_report(result: SizeResult) -> SizeReport:
    """The numbers of `kvplan size` (docs/commands/size.md)."""
    d, weights, model = result.deployment, result.weights, result.deployment.model
    fields: dict = {
        "model": model.name,
        "engine": d.engine.name,
        "context": result.context,
        "batch": result.batch.size,
        "sequences": [Sequences(tokens=t, count=c) for t, c in result.batch],
        "kv_dtype": d.kv_dtype,
        "weight_dtype": weights.weight_dtype,
        "tp": d.tp,
        "pp": d.pp,
        "dp": d.dp,
        "ep": d.ep,
        "gpus": d.gpus,
        "tokens_per_block": result.layout.tokens_per_block,
        "exact_kv_bytes": result.exact_kv_bytes,
        "exact_kv_bytes_per_gpu": result.exact_kv_bytes_per_gpu,
        "kv_bytes": result.kv_bytes,
        "kv_bytes_per_gpu": result.kv_bytes_per_gpu,
        "kv_bytes_per_token": result.kv_bytes_per_token,
        "kv_bytes_per_token_per_gpu": result.kv_bytes_per_token_per_gpu,
        "kv_bytes_per_request": result.kv_bytes_per_request,
        "kv_bytes_per_request_per_gpu": result.kv_bytes_per_request_per_gpu,
        "kv_bytes_by_kind": result.kv_bytes_by_kind,
        "naive_kv_bytes": result.naive_kv_bytes,
        "full_reservation_kv_bytes": result.full_reservation_kv_bytes,
        "weights_bytes": weights.total_bytes,
        "weights_bytes_per_gpu": result.weights_bytes_per_gpu,
        "checkpoint_weights_bytes_per_gpu": weights.per_gpu_bytes,
        "params": weights.params.total,
        "active_params": weights.params.active,
        "published_params": model.params,
        "max_context": model.max_context,
        "extended_context": model.extended_context,
        "context_limit": model.context_limit,
        "rope_scaling": model.rope_scaling.model_dump() if model.rope_scaling else None,
        "weights": weights_breakdown(result),
        "layers": result.layers,
        "num_heads": model.attention.num_heads,
        "num_kv_heads": model.attention.num_kv_heads,
        "formula_terms": formula_records(result),
        "engine_summary": d.engine.summary,
        "kv_block_unit": result.layout.unit,
        "engine_caveat": d.engine.caveat(d),
        "notes": list(result.notes),
    }
    capacity = result.capacity
    if capacity is not None:
        budget = capacity.budget
        fields |= {
            "sku": capacity.sku.name,
            "memory_bytes": budget.total_bytes,
            "kv_budget_bytes_per_gpu": budget.kv_bytes,
            "kv_budget_uncertainty_bytes": budget.uncertainty_bytes,
            "budget": budget_terms(budget),
            "free_bytes": result.free_bytes_per_gpu,
            "max_concurrency": capacity.max_concurrency(),
            "max_context_tokens": capacity.max_context_tokens,
            "fits": result.fits,
            "verdict": capacity.verdict,
        }
    return SizeReport(**fields)


def capacity_row(row: Capacity, curves: bool = False) -> CapacityRow:
    """One row of `kvplan report` (docs/commands/report.md), bytes per GPU; with `curves`,
    the requests it holds against context."""
    d, budget = row.deployment, row.budget
    decode = row.decode()
    return CapacityRow(
        model=d.model.name,
        sku=row.sku.name,
        engine=d.engine.name,
        tp=d.tp,
        pp=d.pp,
        dp=d.dp,
        ep=d.ep,
        gpus=d.gpus,
        nodes=d.nodes_per_replica(gpus_per_node(d.settings, row.sku)),
        kv_dtype=d.kv_dtype,
        batch=row.batch,
        context=row.context_tokens,
        memory_bytes=budget.total_bytes,
        weights_bytes_per_gpu=row.weights_bytes_per_gpu,
        kv_budget_bytes_per_gpu=budget.kv_bytes,
        kv_budget_uncertainty_bytes=budget.uncertainty_bytes,
        budget=budget_terms(budget),
        tokens_per_block=row.layout.tokens_per_block,
        kv_blocks=row.pool.num_blocks if row.kv_usable else 0,
        kv_block_unit=row.layout.unit,
        kv_bytes_per_block_per_gpu=row.layout.bytes_per_block,
        kv_bytes_per_request_per_gpu=row.request_bytes_per_gpu(),
        kv_capacity_tokens=row.kv_capacity_tokens,
        max_context_tokens=row.max_context_tokens,
        context_limit=d.model.context_limit,
        native_limit_binds=row.native_limit_binds,
        max_concurrency=row.max_concurrency(),
        fitting_batch=row.fitting_batch,
        kv_bytes_per_token_per_gpu=row.layout.kv_bytes_per_token,
        decode_batch=decode.batch if decode else 0,
        # The decode estimate is one replica's; dp replicas decode side by side.
        decode_tokens_per_s=decode.tokens_per_s * d.dp if decode else None,
        decode_step_s=decode.step_s if decode else None,
        verdict=row.verdict,
        log_lines=row.log_lines(),
        startup=row.startup_figures(),
        notes=d.engine.notes(d, row.sku),
        concurrency_by_context=curve(row, curves and row.max_concurrency() > 0),
    )


def refused_row(refusal: Refusal) -> RefusedRow:
    """A row of `kvplan report` whose TP degree the engine refuses."""
    d = refusal.deployment
    return RefusedRow(
        model=d.model.name,
        sku=refusal.sku.name,
        engine=d.engine.name,
        tp=refusal.tp,
        pp=d.pp,
        kv_dtype=d.kv_dtype,
        batch=refusal.batch,
        context=refusal.context_tokens,
        verdict=f"refused: {refusal.reason}",
        refused=refusal.reason,
    )


def product_result(check: ProductCheck, curves: bool = False) -> ProductResult:
    """One product of `kvplan check` (docs/commands/check.md); with `curves`, the requests
    its deployment holds against context."""
    d, model = check.capacity.deployment, check.capacity.deployment.model
    return ProductResult(
        name=check.product.name,
        model=d.model.name,
        sku=check.capacity.sku.name,
        tp=d.tp,
        pp=d.pp,
        dp=d.dp,
        ep=d.ep,
        engine=d.engine.name,
        kv_dtype=d.kv_dtype,
        promised_context=check.promised_context_tokens,
        promised_concurrency=check.promised_concurrency,
        supported_concurrency=check.supported_concurrency,
        supported_context_at_promised_concurrency=check.supported_context_tokens,
        kv_bytes_per_request_per_gpu=check.kv_bytes_per_request_per_gpu,
        kv_bytes_needed_per_gpu=check.kv_bytes_needed_per_gpu,
        kv_budget_bytes_per_gpu=check.kv_budget_bytes_per_gpu,
        kv_budget_uncertainty_bytes=check.capacity.budget.uncertainty_bytes,
        supported_concurrency_at_band_low_end=check.low_end_concurrency,
        weights_bytes_per_gpu=check.capacity.weights_bytes_per_gpu,
        memory_bytes=check.capacity.budget.total_bytes,
        budget=budget_terms(check.capacity.budget),
        weights_fit=check.capacity.budget.weights_fit,
        overcommit_bytes=check.capacity.overcommit_bytes,
        native_limit_binds=check.capacity.native_limit_binds,
        beyond_limit=beyond_limit_sentence(model, check.promised_context_tokens),
        extended_context=model.extended_context,
        rope_scaling=model.rope_scaling.model_dump() if model.rope_scaling else None,
        ok=check.ok,
        within_estimate_band=check.within_band,
        failure=check.failure,
        notes=list(check.notes),
        concurrency_by_context=curve(check.capacity, curves),
    )


def check_report(result: GuardrailResult, curves: bool = False) -> CheckReport:
    """Every product of a deployment file, checked (what a CI pipeline reads)."""
    products = [product_result(check, curves) for check in result.checks]
    return CheckReport(path=str(result.path), ok=result.ok, products=products)


def claim_report(sheet: ClaimSheet, curves: bool = False) -> ClaimReport:
    """The numbers of `kvplan claim` (docs/commands/claim.md); with `curves`, the requests
    the deployment holds against context."""
    result, capacity = sheet.size, sheet.capacity
    d, budget = result.deployment, capacity.budget
    return ClaimReport(
        model=d.model.name,
        sku=capacity.sku.name,
        engine=d.engine.name,
        tp=d.tp,
        pp=d.pp,
        gpus=d.gpus,
        kv_dtype=d.kv_dtype,
        weight_dtype=result.weights.weight_dtype,
        context=result.context,
        batch=result.batch.size,
        native_context_limit=d.model.max_context,
        kv_bytes_per_token=result.kv_bytes_per_token,
        kv_bytes_per_token_per_gpu=result.kv_bytes_per_token_per_gpu,
        kv_bytes_per_request=result.kv_bytes_per_request,
        kv_bytes_per_request_per_gpu=sheet.kv_bytes_per_request_per_gpu,
        kv_bytes_batch=result.kv_bytes,
        kv_bytes_batch_per_gpu=result.kv_bytes_per_gpu,
        weights_bytes=result.weights.total_bytes,
        weights_bytes_per_gpu=sheet.weights_bytes_per_gpu,
        checkpoint_weights_bytes_per_gpu=result.weights.per_gpu_bytes,
        engine_reserve_bytes_per_gpu=sheet.reserve_bytes_per_gpu,
        engine_reserve=EngineReserve(
            utilization=budget.utilization,
            headroom_bytes=sheet.headroom_bytes_per_gpu,
            activation_bytes=budget.activation_bytes,
            non_torch_bytes=budget.non_torch_bytes,
            cudagraph_bytes=budget.cudagraph_bytes,
        ),
        total_bytes_per_gpu=sheet.total_bytes_per_gpu,
        memory_bytes=sheet.memory_bytes,
        free_bytes_per_gpu=sheet.free_bytes_per_gpu,
        fits=sheet.fits,
        verdict=sheet.verdict,
        within_native_limit=sheet.within_native_limit,
        max_context_tokens_at_batch=capacity.max_context_tokens,
        max_concurrency_at_context=capacity.max_concurrency(),
        kv_budget_bytes_per_gpu=budget.kv_bytes,
        kv_budget_uncertainty_bytes=budget.uncertainty_bytes,
        budget=budget_terms(budget),
        formula_terms=formula_records(result),
        notes=list(result.notes),
        concurrency_by_context=curve(capacity, curves),
    )


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
