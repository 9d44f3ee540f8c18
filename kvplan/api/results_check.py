"""Typed results of `kvplan check` and `kvplan claim` (see kvplan.api.results)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kvplan.api.results import BudgetTerms, ContextPoint, FormulaTerm, Result, unsampled


class ProductResult(Result):
    """One product of a `kvplan check` file: its promise against what its SKU holds."""

    name: str
    model: str
    sku: str
    tp: int
    pp: int
    dp: int
    ep: bool
    engine: str
    kv_dtype: str
    promised_context: int
    promised_concurrency: int
    supported_concurrency: int
    supported_context_at_promised_concurrency: int
    kv_bytes_per_request_per_gpu: int
    kv_bytes_needed_per_gpu: int
    kv_budget_bytes_per_gpu: int
    kv_budget_uncertainty_bytes: int  # the band of the engine terms kvplan estimates (±)
    # requests of the promised context held with the budget at its band's low end (None: no
    # band, or the promise fails)
    supported_concurrency_at_band_low_end: int | None
    weights_bytes_per_gpu: int
    memory_bytes: int
    budget: BudgetTerms
    weights_fit: bool  # the weights fit the engine's share (a fixed KV budget: the device)
    overcommit_bytes: int  # a fixed KV pool and the weights beyond the device (else 0)
    native_limit_binds: bool  # the longest context is the model's limit, not memory's
    beyond_limit: str | None  # the promised context past the model's limit, as a sentence
    extended_context: int | None  # the RoPE scaling's reach past the native limit
    rope_scaling: dict[str, Any] | None
    ok: bool
    # ok with the estimated KV budget, not at the low end of its band (budget − uncertainty)
    within_estimate_band: bool
    failure: str | None
    notes: list[str]
    concurrency_by_context: list[ContextPoint] | None = Field(None, exclude_if=unsampled)


class CheckReport(Result):
    """Every product of a deployment file, checked; `ok` when every promise holds."""

    path: str  # the deployment file
    ok: bool
    products: list[ProductResult]


class EngineReserve(Result):
    """What the engine keeps out of the KV pool besides weights, per GPU, in bytes."""

    utilization: float
    headroom_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int


class ClaimReport(Result):
    """`kvplan claim`: the bytes behind "serves context L at batch B" on a SKU."""

    model: str
    sku: str
    engine: str
    tp: int
    pp: int
    gpus: int
    kv_dtype: str
    weight_dtype: str
    context: int
    batch: int
    native_context_limit: int
    kv_bytes_per_token: int  # the physics: one token in every layer that keeps tokens
    kv_bytes_per_token_per_gpu: int  # the physics, binding GPU
    # What the engine's pool stores for one token, binding GPU (hf: MLA decompressed; naive:
    # the textbook 2·layers·hidden; SGLang: a slot in every layer, cross-attention included).
    engine_kv_bytes_per_token_per_gpu: int
    kv_bytes_per_request: int
    kv_bytes_per_request_per_gpu: int
    kv_bytes_batch: int
    kv_bytes_batch_per_gpu: int
    weights_bytes: int  # the checkpoint's, whole deployment
    weights_bytes_per_gpu: int  # as the engine loads them (RoPE table, MXFP4 padding)
    checkpoint_weights_bytes_per_gpu: int
    engine_reserve_bytes_per_gpu: int
    engine_reserve: EngineReserve
    total_bytes_per_gpu: int
    memory_bytes: int
    free_bytes_per_gpu: int
    fits: bool
    verdict: str
    within_native_limit: bool
    max_context_tokens_at_batch: int
    max_concurrency_at_context: int
    kv_budget_bytes_per_gpu: int
    kv_budget_uncertainty_bytes: int
    budget: BudgetTerms
    formula_terms: list[FormulaTerm]
    notes: list[str]
    concurrency_by_context: list[ContextPoint] | None = Field(None, exclude_if=unsampled)
