"""`kvplan size`: the exact KV bytes of a batch, what the engine charges for it, weights, fit.

Two figures per quantity, always side by side: the physics (kvmath's bytes at exactly each
length) and the engine's charge (its blocks, from the one engine model). On a SKU, the fit is
the engine's own answer (`Capacity`), the same one `report`, `check` and `claim` give.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kvplan.engine import KvLayout
from kvplan.engine.batch import Batch
from kvplan.engine.deployment import Deployment
from kvplan.engine.resolved import resolve
from kvplan.engine.weights import WeightBytes
from kvplan.kvmath import (
    naive_kv_bytes_per_token,
    num_kv_heads_per_gpu,
)
from kvplan.plan.capacity import Capacity
from kvplan.plan.context_limit import beyond_limit_sentence
from kvplan.specs import ModelSpec, SkuSpec


@dataclass(frozen=True)
class SizeResult:
    """Everything `kvplan size` reports; bytes exact, rounding only in `report`.

    "whole deployment" figures sum every GPU that holds the batch; "per GPU" figures are
    the binding GPU's (the largest pipeline stage, one data-parallel replica's share).
    """

    deployment: Deployment
    batch: Batch
    layout: KvLayout  # the engine's blocks and charges
    exact_kv_bytes: int  # physics at exactly each length, whole deployment
    exact_kv_bytes_per_gpu: int
    kv_bytes: int  # the engine's charge for the batch, whole deployment
    kv_bytes_per_gpu: int
    kv_bytes_per_token: int  # physics, one token in every layer, whole replica
    kv_bytes_per_token_per_gpu: int
    kv_bytes_per_request: int  # the engine's charge for one request of the longest length
    kv_bytes_per_request_per_gpu: int
    kv_bytes_by_kind: dict[str, int]  # physics per layer kind, whole deployment
    layers: dict[str, int]
    weights: WeightBytes
    naive_kv_bytes: int
    full_reservation_kv_bytes: int | None  # physics if windowed layers kept full length
    capacity: Capacity | None  # the engine's budget and verdict on --sku
    notes: tuple[str, ...]

    @property
    def context(self) -> int:
        return self.batch.longest

    @property
    def fits(self) -> bool | None:
        """The engine's verdict on the SKU for the whole batch (None without a SKU)."""
        if self.capacity is None:
            return None
        return self.capacity.fits

    @property
    def weights_bytes_per_gpu(self) -> int:
        """Weight bytes on the binding GPU as the engine loads them on the SKU (vLLM adds its
        RoPE table and MXFP4 padding), the figure every command shows; without a SKU, the
        checkpoint's (`weights.per_gpu_bytes`)."""
        if self.capacity is None:
            return self.weights.per_gpu_bytes
        return self.capacity.weights_bytes_per_gpu

    @property
    def free_bytes_per_gpu(self) -> int | None:
        """KV budget left after the batch on the binding GPU; negative: short by that much
        (None without a SKU)."""
        if self.capacity is None:
            return None
        return self.capacity.budget.kv_bytes - self.kv_bytes_per_gpu


def _engine_bytes(deployment: Deployment, layout: KvLayout, batch: Batch) -> tuple[int, int]:
    """The engine's charge for `batch`: (whole deployment, binding GPU)."""
    whole = deployment.tp * sum(
        count * layout.request_bytes_all_stages(tokens) for tokens, count in batch
    )
    share = batch.per_replica(deployment.dp)
    per_gpu = max(
        sum(count * stage.request_bytes(tokens) for tokens, count in share)
        for stage in layout.stages
    )
    return whole, per_gpu


def _exact_bytes(deployment: Deployment, batch: Batch) -> tuple[int, int, dict[str, int]]:
    """Physics for `batch`: (whole deployment, binding GPU, whole deployment per kind)."""
    caches = deployment.exact_caches()
    by_kind: Counter[str] = Counter()
    for cache in caches:
        by_kind[cache.kind] += deployment.tp * sum(
            count * cache.bytes_per_seq(tokens) for tokens, count in batch
        )
    share = batch.per_replica(deployment.dp)
    per_gpu = max(
        sum(count * caches[i].bytes_per_seq(tokens) for i in r for tokens, count in share)
        for r in deployment.stage_ranges()
    )
    return sum(by_kind.values()), per_gpu, dict(by_kind)


def size(
    deployment: Deployment, batch: Batch | Sequence[int], sku: SkuSpec | None = None
) -> SizeResult:
    """Size `deployment` for `batch` (a Batch, or one length per sequence in tokens), and fit
    it on `sku` when one is given."""
    if not isinstance(batch, Batch):
        batch = Batch.of(batch)
    model, profile = deployment.model, deployment.engine
    layout = profile.layout(deployment, sku)
    exact, exact_per_gpu, by_kind = _exact_bytes(deployment, batch)
    kv, kv_per_gpu = _engine_bytes(deployment, layout, batch)
    caches = deployment.exact_caches()
    full_reservation = None
    if model.has_windowed_layers:
        reserved = deployment.exact_caches(full_reservation=True)
        full_reservation = deployment.tp * sum(
            count * sum(c.bytes_per_seq(tokens) for c in reserved) for tokens, count in batch
        )
    context = batch.longest
    dtype = resolve(deployment).k_dtype
    capacity = Capacity(deployment, sku, sequences=batch) if sku is not None else None
    return SizeResult(
        deployment=deployment,
        batch=batch,
        layout=layout,
        exact_kv_bytes=exact,
        exact_kv_bytes_per_gpu=exact_per_gpu,
        kv_bytes=kv,
        kv_bytes_per_gpu=kv_per_gpu,
        kv_bytes_per_token=deployment.tp * sum(c.context_token_bytes for c in caches),
        kv_bytes_per_token_per_gpu=deployment.kv_bytes_per_token_per_gpu,
        kv_bytes_per_request=deployment.tp * layout.request_bytes_all_stages(context),
        kv_bytes_per_request_per_gpu=layout.request_bytes(context),
        kv_bytes_by_kind=by_kind,
        layers=dict(Counter(model.layer_kinds)),
        weights=deployment.weights(),
        naive_kv_bytes=batch.total_tokens * naive_kv_bytes_per_token(model, dtype.name),
        full_reservation_kv_bytes=full_reservation,
        capacity=capacity,
        notes=tuple(_notes(deployment, context) + profile.notes(deployment, sku)),
    )


def _notes(deployment: Deployment, context: int) -> list[str]:
    """What the user should know about this plan, whatever the engine."""
    model, tp = deployment.model, deployment.tp
    kinds = model.layer_kinds
    notes = list(model.notes) + context_notes(model, context)
    if tp > model.attention.num_kv_heads and model.has_kv_head_layers:
        notes.append(
            f"tp {tp} > {model.attention.num_kv_heads} KV heads: each GPU holds one replicated "
            "KV head, so KV per GPU stops shrinking"
        )
    if "mla" in kinds and tp > 1:
        notes.append("MLA latent is not split by heads: every TP rank holds the whole latent")
    return notes


def context_notes(model: ModelSpec, context: int) -> list[str]:
    """What a context past the native limit rests on: an applied RoPE scaling, one to
    declare (the model card's), or nothing."""
    rope, extended = model.rope_scaling, model.extended_context
    notes = []
    if extended is not None and rope is not None:
        how = (
            "applied"
            if rope.applied
            else "recommended, not applied: declare it with "
            f"--rope-scaling {rope.rope_type}:{rope.factor:g}"
        )
        where = f" ({rope.source})" if rope.source else ""
        notes.append(
            f"context limit: native {model.max_context:,} tokens; {extended:,} with RoPE "
            f"{rope.label()}{where}, {how}"
        )
    if context <= model.max_context:
        return notes
    if extended is not None and context <= extended:
        served = "served" if rope is not None and rope.applied else "not served until declared"
        notes.append(
            f"context {context:,} is past {model.name}'s native limit of {model.max_context:,} "
            f"tokens, within the RoPE extension ({extended:,}): {served}"
        )
    else:
        notes.append(str(beyond_limit_sentence(model, context)))
    return notes


@dataclass(frozen=True)
class FormulaTerm:
    """One layer kind's share of the KV formula, with every factor named (for --explain)."""

    kind: str
    layers: int
    factors: tuple[tuple[str, int], ...]  # (label, value), multiplied together per token
    tokens_kept: tuple[tuple[int, int], ...]  # (tokens kept, sequences) per distinct length
    bytes_total: int  # whole deployment (all TP ranks)


def formula_terms(result: SizeResult) -> list[FormulaTerm]:
    """The exact formula per layer kind with the model's numbers, whole deployment."""
    deployment = result.deployment
    model, tp = deployment.model, deployment.tp
    dtype = resolve(deployment).k_dtype
    caches = deployment.exact_caches()
    terms = []
    for kind, count in result.layers.items():
        sample = next(c for c in caches if c.kind == kind)
        kept = tuple((sample.tokens_kept(n), k) for n, k in result.batch)
        if kind in ("full", "sliding", "chunked"):
            heads = num_kv_heads_per_gpu(model.attention.num_kv_heads, tp)
            factors = [("K and V", 2), ("kv heads per GPU", heads)]
            factors.append(("bytes per head row", dtype.row_bytes(model.attention.head_dim)))
        elif kind == "mla" and model.mla is not None:
            width = model.mla.kv_lora_rank + model.mla.qk_rope_head_dim
            factors = [("latent bytes (kv_lora_rank + qk_rope_head_dim)", dtype.row_bytes(width))]
        else:
            factors = [("state bytes per sequence", sample.bytes_per_seq(1))]
        terms.append(
            FormulaTerm(kind, count, tuple(factors), kept, result.kv_bytes_by_kind.get(kind, 0))
        )
    return terms
