"""Plan objects → typed results: the numbers every format shows, exact and unrounded.

This module builds the records of `size` and `report`; build_check.py those of `check` and
`claim`, build_recommend.py those of `recommend`.

The report layer adds the sentences around them (reasons, vendor questions, formula lines);
nothing here rounds or formats a number.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.api.results import (
    BudgetTerms,
    CapacityRow,
    ContextPoint,
    FormulaFactor,
    FormulaTerm,
    RefusedRow,
    Sequences,
    SizeReport,
    TokensKept,
    WeightsBreakdown,
    WeightsPerGpu,
)
from kvplan.engine.nodes import gpus_per_node
from kvplan.plan.capacity import concurrency_curve
from kvplan.plan.sizing import formula_terms

if TYPE_CHECKING:
    from kvplan.engine import Budget
    from kvplan.plan.capacity import Capacity, Refusal
    from kvplan.plan.sizing import SizeResult

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
        "engine_kv_bytes_per_token_per_gpu": result.layout.kv_bytes_per_token,
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
        kv_bytes_per_token_per_gpu=d.kv_bytes_per_token_per_gpu,
        engine_kv_bytes_per_token_per_gpu=row.layout.kv_bytes_per_token,
        decode_batch=decode.batch if decode else 0,
        decode_context_tokens=decode.context_tokens if decode else 0,
        # The decode estimate is one replica's; dp replicas decode side by side.
        decode_tokens_per_s=decode.tokens_per_s * d.dp if decode else None,
        decode_tokens_per_s_band_fraction=(
            decode.band.median_fraction if decode and decode.band else None
        ),
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
