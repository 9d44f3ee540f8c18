"""Guardrail results → typed records: the numbers of `kvplan check` and `kvplan claim`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.api.build import budget_terms, curve, formula_records
from kvplan.api.results_check import CheckReport, ClaimReport, EngineReserve, ProductResult
from kvplan.plan.context_limit import beyond_limit_sentence

if TYPE_CHECKING:
    from kvplan.plan.guardrail import ClaimSheet, GuardrailResult, ProductCheck


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
        engine_kv_bytes_per_token_per_gpu=result.layout.kv_bytes_per_token,
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
