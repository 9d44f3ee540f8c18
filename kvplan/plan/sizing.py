"""`kvplan size`: KV and weight bytes of one deployment plan, with the comparisons users need."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from kvplan.errors import KvplanError
from kvplan.kvmath import (
    LayerCache,
    layer_caches,
    naive_kv_bytes_per_token,
    num_kv_heads_per_gpu,
    stage_layer_ranges,
)
from kvplan.plan.engines import Engine, EngineOptions
from kvplan.plan.weights import WeightBytes, weight_bytes
from kvplan.specs import ModelSpec, SkuSpec, kv_dtype_info


@dataclass(frozen=True)
class Deployment:
    """What is being sized: a model on tp × pp GPUs with one engine and dtypes."""

    model: ModelSpec
    engine: Engine
    kv_dtype: str = "bf16"
    weight_dtype: str | None = None  # None: the model's released dtype
    tp: int = 1
    pp: int = 1
    options: EngineOptions = field(default_factory=EngineOptions)
    exact_weights_bytes: int | None = None  # safetensors total_size, when imported from HF

    def __post_init__(self) -> None:
        for name, value in (("--tp", self.tp), ("--pp", self.pp)):
            if value < 1:
                raise KvplanError(f"{name}: {value} must be at least 1")
        kv_dtype_info(self.kv_dtype)  # fail early on a typo
        stage_layer_ranges(self.model.num_layers, self.pp)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    def options_for(self, full_reservation: bool | None) -> EngineOptions:
        """The engine options, with the hybrid-allocator switch overridden when given."""
        if full_reservation is None:
            return self.options
        return EngineOptions(self.options.tokens_per_block, full_reservation)

    def stage_caches(self, full_reservation: bool | None = None) -> list[tuple[LayerCache, ...]]:
        """The layer caches one GPU of each pipeline stage holds."""
        options = self.options_for(full_reservation)
        caches = self.engine.caches(self.model, kv_dtype_info(self.kv_dtype), self.tp, options)
        return [
            tuple(caches[i] for i in r) for r in stage_layer_ranges(self.model.num_layers, self.pp)
        ]

    def kv_bytes_per_gpu(self, lengths: list[int], full_reservation: bool | None = None) -> int:
        """KV bytes on the binding GPU for a batch of sequences of `lengths` tokens."""
        return max(self._stage_kv_bytes(lengths, full_reservation))

    def _stage_kv_bytes(self, lengths: list[int], full_reservation: bool | None) -> list[int]:
        options = self.options_for(full_reservation)
        return [
            sum(self.engine.seq_bytes(self.model, caches, n, options) for n in lengths)
            for caches in self.stage_caches(full_reservation)
        ]

    def kv_bytes_total(self, lengths: list[int], full_reservation: bool | None = None) -> int:
        """KV bytes summed over every GPU of the deployment."""
        return self.tp * sum(self._stage_kv_bytes(lengths, full_reservation))

    def weights(self) -> WeightBytes:
        return weight_bytes(
            self.model, self.weight_dtype, self.tp, self.pp, self.exact_weights_bytes
        )


@dataclass(frozen=True)
class SkuFit:
    """Weights + KV against one GPU's memory (no engine reserve: that is `kvplan report`)."""

    sku: SkuSpec
    memory_bytes: int
    weights_bytes_per_gpu: int
    kv_bytes_per_gpu: int

    @property
    def free_bytes(self) -> int:
        return self.memory_bytes - self.weights_bytes_per_gpu - self.kv_bytes_per_gpu

    @property
    def fits(self) -> bool:
        return self.free_bytes >= 0


@dataclass(frozen=True)
class SizeResult:
    """Everything `kvplan size` reports; bytes exact, rounding only in `report`."""

    deployment: Deployment
    lengths: tuple[int, ...]
    kv_bytes: int
    kv_bytes_per_gpu: int
    kv_bytes_per_token: int
    kv_bytes_per_token_per_gpu: int
    kv_bytes_per_request: int
    kv_bytes_by_kind: dict[str, int]
    layers: dict[str, int]
    weights: WeightBytes
    naive_kv_bytes: int
    full_reservation_kv_bytes: int | None
    sku_fit: SkuFit | None
    notes: tuple[str, ...]

    @property
    def context(self) -> int:
        return max(self.lengths)

    @property
    def batch(self) -> int:
        return len(self.lengths)


def check_lengths(lengths: list[int] | tuple[int, ...]) -> None:
    """A batch has at least one sequence and every sequence at least one token."""
    if not lengths:
        raise KvplanError("--batch: at least one sequence is needed")
    for n in lengths:
        if n < 1:
            raise KvplanError(f"--context: {n} must be at least 1 token")


def size(deployment: Deployment, lengths: list[int], sku: SkuSpec | None = None) -> SizeResult:
    """Size `deployment` for a batch of sequences with the given token `lengths`."""
    check_lengths(lengths)
    model, dtype = deployment.model, kv_dtype_info(deployment.kv_dtype)
    kinds = model.layer_kinds
    tp = deployment.tp
    notes: list[str] = list(model.notes)

    # Exact bytes per kind over the whole deployment (engine rounding shows in kv_bytes).
    exact_caches = layer_caches(model, dtype, tp)
    by_kind: Counter[str] = Counter()
    for cache in exact_caches:
        by_kind[cache.kind] += tp * sum(cache.bytes_per_seq(n) for n in lengths)
    per_token_per_gpu = max(
        sum(exact_caches[i].token_bytes for i in r)
        for r in stage_layer_ranges(model.num_layers, deployment.pp)
    )
    windowed = any(k in ("sliding", "chunked") for k in kinds)
    full_reservation = (
        deployment.kv_bytes_total(lengths, full_reservation=True) if windowed else None
    )
    context = max(lengths)
    if context > model.max_context:
        notes.append(
            f"context {context:,} exceeds {model.name}'s native limit of "
            f"{model.max_context:,} tokens"
        )
    if tp > model.attention.num_kv_heads and any(
        k in ("full", "sliding", "chunked") for k in kinds
    ):
        notes.append(
            f"tp {tp} > {model.attention.num_kv_heads} KV heads: each GPU holds one replicated "
            "KV head, so KV per GPU stops shrinking"
        )
    if "mla" in kinds and tp > 1:
        notes.append("MLA latent is not split by heads: every TP rank holds the whole latent")

    weights = deployment.weights()
    kv_per_gpu = deployment.kv_bytes_per_gpu(lengths)
    fit = None
    if sku is not None:
        fit = SkuFit(sku, sku.memory_bytes, weights.per_gpu_bytes, kv_per_gpu)
    return SizeResult(
        deployment=deployment,
        lengths=tuple(lengths),
        kv_bytes=deployment.kv_bytes_total(lengths),
        kv_bytes_per_gpu=kv_per_gpu,
        kv_bytes_per_token=tp * sum(c.token_bytes for c in exact_caches),
        kv_bytes_per_token_per_gpu=per_token_per_gpu,
        kv_bytes_per_request=deployment.kv_bytes_total([context]),
        kv_bytes_by_kind=dict(by_kind),
        layers=dict(Counter(kinds)),
        weights=weights,
        naive_kv_bytes=sum(naive_kv_bytes_per_token(model, dtype.name) * n for n in lengths),
        full_reservation_kv_bytes=full_reservation,
        sku_fit=fit,
        notes=tuple(notes),
    )


@dataclass(frozen=True)
class FormulaTerm:
    """One layer kind's share of the KV formula, with every factor named (for --explain)."""

    kind: str
    layers: int
    factors: tuple[tuple[str, int], ...]  # (label, value), multiplied together per token
    tokens_kept: tuple[int, ...]  # per sequence
    bytes_total: int  # whole deployment (all TP ranks)


def formula_terms(result: SizeResult) -> list[FormulaTerm]:
    """The exact formula per layer kind with the model's numbers, whole deployment."""
    deployment = result.deployment
    model, tp = deployment.model, deployment.tp
    dtype = kv_dtype_info(deployment.kv_dtype)
    caches = layer_caches(model, dtype, tp)
    terms = []
    for kind, count in result.layers.items():
        sample = next(c for c in caches if c.kind == kind)
        kept = tuple(sample.tokens_kept(n) for n in result.lengths)
        if kind in ("full", "sliding", "chunked"):
            heads = num_kv_heads_per_gpu(model.attention.num_kv_heads, tp)
            factors = [("K and V", 2), ("kv heads per GPU", heads)]
            factors.append(("bytes per head row", dtype.row_bytes(model.attention.head_dim)))
        elif kind == "mla":
            mla = model.mla
            assert mla is not None
            factors = [
                (
                    "latent bytes (kv_lora_rank + qk_rope_head_dim)",
                    dtype.row_bytes(mla.kv_lora_rank + mla.qk_rope_head_dim),
                )
            ]
        else:
            factors = [("state bytes per sequence", sample.bytes_per_seq(1))]
        terms.append(
            FormulaTerm(kind, count, tuple(factors), kept, result.kv_bytes_by_kind.get(kind, 0))
        )
    return terms
