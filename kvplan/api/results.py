"""Typed results of the Python API: what each command computes, before any rounding.

Every field is exact (bytes and tokens are integers) and named with its unit, as in the CLI's
`--format json` output, which is each result's `model_dump()` plus the sentences the report
layer writes around it. A result holds every number any format shows (the table, its notes,
the startup lines, the HTML page's charts): the report layer renders these records and
nothing else, so a table and its JSON cannot disagree.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# What a pool's blocks are (engine.pages.PageUnit, spelled here so that reading a result does
# not load the engines; a test holds the two equal).
BlockUnit = Literal["page", "byte", "slot"]


class Result(BaseModel):
    """A frozen result."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class ContextPoint(Result):
    """Requests of `context_tokens` tokens that fit at once, the deployment planned afresh
    for that context (what `kvplan report --context` would say)."""

    context_tokens: int
    max_concurrency: int


def unsampled(curve: list[ContextPoint] | None) -> bool:
    """A capacity curve is sampled only on request (the HTML page's charts): the dump leaves
    `concurrency_by_context` out when it was not asked for."""
    return curve is None


class FormulaFactor(Result):
    """One named factor of a layer kind's bytes per token (or per sequence, for state)."""

    label: str
    value: int


class TokensKept(Result):
    """`count` sequences each keeping `tokens` tokens in one layer of the kind."""

    tokens: int
    count: int


class FormulaTerm(Result):
    """One layer kind's share of the KV formula with the model's numbers, whole deployment:
    Π factors × tokens kept × sequences × layers × TP ranks = `kv_bytes`."""

    kind: str
    layers: int
    factors: list[FormulaFactor]
    tokens_kept: list[TokensKept]
    window_tokens: int | None  # the sliding window or the chunk, for those kinds
    kv_bytes: int


class BudgetTerms(Result):
    """One GPU's KV budget term by term, in bytes: total · utilization − weights − reserve."""

    total_bytes: int
    total_basis: str
    utilization: float
    requested_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    fixed_kv_memory: bool


class Sequences(Result):
    """`count` sequences of `tokens` tokens each."""

    tokens: int
    count: int


class WeightsPerGpu(Result):
    """How the binding GPU holds its weights, in bytes."""

    split_bytes: int
    routed_expert_bytes: int
    replicated_bytes: int
    total_bytes: int


class WeightsBreakdown(Result):
    """Where the weight bytes come from (computed, or a checkpoint's safetensors headers)."""

    basis: str
    checkpoint: str | None
    scaled_to_index_total: bool
    total_bytes: int
    vision_bytes: int
    per_gpu: WeightsPerGpu
    bytes_by_dtype: dict[str, int] | None = None
    bytes_by_role: dict[str, int] | None = None
    tensors: int | None = None


class SizeReport(Result):
    """`kvplan size`: the exact KV bytes beside the engine's charge; weights; the fit on a SKU."""

    model: str
    engine: str
    context: int
    batch: int
    sequences: list[Sequences]
    kv_dtype: str
    weight_dtype: str
    tp: int
    pp: int
    dp: int
    ep: bool
    gpus: int
    tokens_per_block: int
    exact_kv_bytes: int
    exact_kv_bytes_per_gpu: int
    kv_bytes: int
    kv_bytes_per_gpu: int
    kv_bytes_per_token: int  # the physics: one token in every layer that keeps tokens
    kv_bytes_per_token_per_gpu: int  # the physics, binding GPU
    # What the engine's pool stores for one token, binding GPU (hf: MLA decompressed; naive:
    # the textbook 2·layers·hidden; SGLang: a slot in every layer, cross-attention included).
    engine_kv_bytes_per_token_per_gpu: int
    kv_bytes_per_request: int
    kv_bytes_per_request_per_gpu: int
    kv_bytes_by_kind: dict[str, int]
    naive_kv_bytes: int
    full_reservation_kv_bytes: int | None
    weights_bytes: int  # the checkpoint's, whole deployment
    weights_bytes_per_gpu: int  # as the engine loads them on --sku; without one, the checkpoint's
    checkpoint_weights_bytes_per_gpu: int
    params: int
    active_params: int
    published_params: int | None
    max_context: int
    extended_context: int | None
    context_limit: int
    rope_scaling: dict[str, Any] | None
    weights: WeightsBreakdown
    layers: dict[str, int]
    num_heads: int  # query heads; fewer KV heads (or MLA) is where the textbook formula errs
    num_kv_heads: int
    formula_terms: list[FormulaTerm]
    engine_summary: str  # how the engine charges a request (--explain)
    kv_block_unit: BlockUnit  # what the engine charges a request in: pages, bytes or slots
    # On a SKU (None without one): the engine's budget and verdict, the same as `report`'s.
    sku: str | None = None
    memory_bytes: int | None = None
    kv_budget_bytes_per_gpu: int | None = None
    kv_budget_uncertainty_bytes: int | None = None
    budget: BudgetTerms | None = None
    free_bytes: int | None = None
    max_concurrency: int | None = None
    max_context_tokens: int | None = None
    fits: bool | None = None
    verdict: str | None = None
    # Why the figures may not be the engine's own (ollama's Go engine models), else None.
    engine_caveat: str | None = None
    notes: list[str]


class CapacityRow(Result):
    """One row of `kvplan report`: a model on a SKU at a TP degree, per GPU and per deployment."""

    model: str
    sku: str
    engine: str
    tp: int
    pp: int
    dp: int
    ep: bool
    gpus: int
    nodes: int  # nodes one replica spans (tp · pp over the SKU's GPUs per node)
    kv_dtype: str
    batch: int
    context: int
    memory_bytes: int
    weights_bytes_per_gpu: int
    kv_budget_bytes_per_gpu: int
    kv_budget_uncertainty_bytes: int
    budget: BudgetTerms
    tokens_per_block: int
    kv_blocks: int
    kv_block_unit: BlockUnit  # what kv_blocks counts: token pages, bytes or llama.cpp slots
    kv_bytes_per_block_per_gpu: int  # one of them on the binding GPU
    kv_bytes_per_request_per_gpu: int
    kv_capacity_tokens: int
    max_context_tokens: int
    context_limit: int  # the model's limit as served (its native one, or the RoPE-extended)
    native_limit_binds: bool
    max_concurrency: int
    fitting_batch: int
    kv_bytes_per_token_per_gpu: int  # the physics, binding GPU
    engine_kv_bytes_per_token_per_gpu: int  # what the engine's pool stores per token
    decode_batch: int
    decode_context_tokens: int  # the context the decode figures are computed at (0: none)
    decode_tokens_per_s: float | None
    # The test-split median |error| of throughput as a fraction (0.12 = ±12 %); None: not fitted.
    decode_tokens_per_s_band_fraction: float | None
    decode_step_s: float | None
    verdict: str
    log_lines: list[str]
    # Every number the log lines print, exact, by the engine's own names (vLLM: num_gpu_blocks,
    # the float max_concurrency, needed_bytes, estimated_max_model_len; docs/engines.md).
    startup: dict[str, Any]
    notes: list[str]
    # The requests held against context, sampled when asked (`report(..., curves=True)`).
    concurrency_by_context: list[ContextPoint] | None = Field(None, exclude_if=unsampled)


class RefusedRow(Result):
    """A row of `kvplan report` that the engine refuses to start (its TP degree): the
    combination and the engine's reason, no figures."""

    model: str
    sku: str
    engine: str
    tp: int
    pp: int
    kv_dtype: str
    batch: int
    context: int
    verdict: str  # "refused: " + refused
    refused: str  # the engine's reason


def dump(result: Result) -> dict[str, Any]:
    """A result as the JSON the CLI prints: exact integers, nested records as dicts."""
    return result.model_dump(mode="json")


def json_text(result: Result) -> str:
    """`json.dumps(dump(result))`, in a third of the time where the record allows.

    The python-mode dump holds the same values as the json-mode one wherever they are JSON's
    own (numbers, strings, booleans, None, lists and string-keyed dicts; a tuple is written
    as its list), and skips the json mode's per-value conversion. A NaN or infinity (which
    the json mode writes as null inside a dict of Any) or any other value sends the record
    the json-mode way instead.
    """
    try:
        return _PLAIN_JSON.encode(result.model_dump())
    except (TypeError, ValueError):
        return json.dumps(dump(result))


_PLAIN_JSON = json.JSONEncoder(allow_nan=False)  # json.dumps' own, refusing NaN and infinities
