"""What one deployment can serve on one SKU: KV capacity, longest context, highest concurrency.

KV grows monotonically but not linearly with context (windows, chunks, blocks), so
the longest context is found by binary search on an exact "does it fit" check,
never by dividing a budget by bytes per token.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from kvplan.errors import KvplanError
from kvplan.kvmath import stage_layer_ranges
from kvplan.perf import DecodeEstimate, Efficiency, decode_step
from kvplan.plan.budget import (
    Budget,
    MemoryOverrides,
    sglang_mem_fraction_static,
    simple_budget,
    vllm_budget,
)
from kvplan.plan.sizing import Deployment
from kvplan.plan.vllm import (
    DEFAULT_VERSION,
    StageLayout,
    VllmKvCache,
    VllmVersion,
    estimated_max_model_len,
    kv_cache_for_budget,
    page_specs,
    stage_layout,
)
from kvplan.specs import ModelSpec, SkuSpec, kv_dtype_info


@lru_cache(maxsize=4096)  # one layout per (model, tp, ...) serves every SKU of a report
def vllm_layouts(
    model: ModelSpec,
    kv_dtype: str,
    tp: int,
    pp: int,
    tokens_per_block: int | None,
    hybrid_allocator: bool,
    draft_layers: int,
    version: VllmVersion,
) -> tuple[StageLayout, ...]:
    """vLLM's grouped page specs for every pipeline stage (speculative draft layers added)."""
    dtype = kv_dtype_info(kv_dtype)
    layouts = []
    for layers in stage_layer_ranges(model.num_layers, pp):
        specs = page_specs(model, dtype, tp, layers, tokens_per_block, hybrid_allocator)
        if draft_layers and specs:
            # EAGLE's draft layer joins the target's cache group (vllm#19996: 32 + 1 layers).
            draft = next((s for s in specs if s.kind in ("full", "mla")), specs[0])
            specs = specs + [draft] * draft_layers
        layouts.append(stage_layout(specs, version))
    return tuple(layouts)


@lru_cache(maxsize=4096)
def _stage_terms(deployment: Deployment, full_reservation: bool) -> tuple[Counter, ...]:
    """Distinct layer caches per stage with their layer counts (shared by every SKU row)."""
    return tuple(Counter(caches) for caches in deployment.stage_caches(full_reservation))


def largest_fitting(fits: Callable[[int], bool], upper: int) -> int:
    """The largest n in [0, upper] with fits(n), for a monotone `fits` (0 if none)."""
    low, high = 0, upper
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


@dataclass(frozen=True)
class CapacityRequest:
    """What the planner asks: a batch size for the longest context, a context for concurrency."""

    batch: int = 1
    context_tokens: int | None = None  # None: the model's native limit
    overrides: MemoryOverrides = field(default_factory=MemoryOverrides)
    vllm_version: VllmVersion = DEFAULT_VERSION
    hybrid_allocator: bool | None = None  # None: the engine/version default
    draft_layers: int = 0  # speculative-decoding draft layers sharing the cache (EAGLE: 1)
    efficiency: Efficiency = field(default_factory=Efficiency)


class Capacity:
    """One deployment on one SKU: budget, capacity and the derived limits (exact integers)."""

    def __init__(self, deployment: Deployment, sku: SkuSpec, request: CapacityRequest) -> None:
        if request.batch < 1:
            raise KvplanError(f"--batch: {request.batch} must be at least 1 sequence")
        self.deployment, self.sku, self.request = deployment, sku, request
        self.context_tokens = request.context_tokens or deployment.model.max_context
        self.weights_bytes_per_gpu = deployment.weights().per_gpu_bytes
        self.budget = self._budget()
        # Distinct layer caches per stage with their layer counts: a handful of terms per
        # length instead of one per layer keeps whole-catalogue reports fast.
        self._stage_terms = _stage_terms(deployment, self._full_reservation)

    @property
    def _full_reservation(self) -> bool:
        return self.request.hybrid_allocator is False

    @property
    def is_vllm(self) -> bool:
        return self.deployment.engine.name == "vllm"

    def _budget(self) -> Budget:
        d, overrides = self.deployment, self.request.overrides
        if self.is_vllm:
            return vllm_budget(
                d.model,
                self.sku,
                self.weights_bytes_per_gpu,
                d.tp,
                self.request.vllm_version,
                overrides,
            )
        utilization = sglang_mem_fraction_static(d.tp) if d.engine.name == "sglang" else 1.0
        return simple_budget(self.sku, self.weights_bytes_per_gpu, utilization, overrides)

    # --- vLLM ----------------------------------------------------------------------------

    @cached_property
    def _vllm_layouts(self) -> tuple[StageLayout, ...]:
        d, request = self.deployment, self.request
        hybrid = request.hybrid_allocator
        if hybrid is None:
            # vLLM 0.11 config/__init__.py: chunked local attention turns the hybrid manager off
            # unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1; V0 has none at all.
            hybrid = "chunked" not in d.model.layer_kinds and request.vllm_version.era != "v0"
        return vllm_layouts(
            d.model,
            d.kv_dtype,
            d.tp,
            d.pp,
            d.options.tokens_per_block,
            hybrid,
            request.draft_layers,
            request.vllm_version,
        )

    def vllm_cache(self, max_model_len: int | None = None) -> VllmKvCache:
        """vLLM's startup numbers for this budget at `max_model_len` (default: the context)."""
        return kv_cache_for_budget(
            self._vllm_layouts,
            max(self.budget.kv_bytes, 0),
            max_model_len or self.context_tokens,
            self.budget.max_num_batched_tokens,
            self.request.vllm_version,
        )

    @cached_property
    def _vllm_pool(self) -> VllmKvCache:
        """The pool at the requested context; its block count does not depend on the length."""
        return self.vllm_cache()

    def vllm_estimated_max_model_len(self) -> int:
        """The startup check's "estimated maximum model length" for this budget."""
        return estimated_max_model_len(
            self._vllm_layouts,
            max(self.budget.kv_bytes, 0),
            self.context_tokens,
            self.budget.max_num_batched_tokens,
        )

    # --- engine-generic ------------------------------------------------------------------

    def seq_bytes_per_gpu(self, tokens: int) -> int:
        """Peak bytes one sequence growing to `tokens` holds on the binding GPU (this engine)."""
        d = self.deployment
        options = d.options_for(True if self._full_reservation else None)
        return max(
            sum(
                count * d.engine.peak_seq_bytes(d.model, (cache,), tokens, options)
                for cache, count in terms.items()
            )
            for terms in self._stage_terms
        )

    def concurrency(self, tokens: int) -> float:
        """Requests of `tokens` tokens that fit at once (vLLM: its own concurrency figure)."""
        if self.budget.kv_bytes <= 0:
            return 0.0
        if self.is_vllm:
            return self._vllm_pool.concurrency_at(tokens)
        per_seq = self.seq_bytes_per_gpu(tokens)
        return float("inf") if per_seq == 0 else self.budget.kv_bytes / per_seq

    def max_concurrency(self, tokens: int | None = None) -> int:
        """Whole requests of `tokens` (default: the requested context) that fit at once."""
        value = self.concurrency(tokens or self.context_tokens)
        return int(value) if value != float("inf") else self.request.overrides.max_num_seqs or 2**31

    @cached_property
    def kv_capacity_tokens(self) -> int:
        """KV tokens the budget holds (vLLM: "GPU KV cache size"; else budget / per-token bytes)."""
        if self.budget.kv_bytes <= 0:
            return 0
        if self.is_vllm:
            return self.vllm_cache().gpu_kv_cache_tokens
        per_token = max(
            sum(count * cache.token_bytes for cache, count in terms.items())
            for terms in self._stage_terms
        )
        return self.budget.kv_bytes // per_token if per_token else 0

    @cached_property
    def max_context_tokens(self) -> int:
        """Longest context every one of `batch` sequences can have, capped at the native limit."""
        batch, native = self.request.batch, self.deployment.model.max_context
        if self.budget.kv_bytes <= 0:
            return 0
        if self.is_vllm:
            pool = self._vllm_pool
            return largest_fitting(lambda n: n > 0 and pool.concurrency_at(n) >= batch, native)
        return largest_fitting(
            lambda n: batch * self.seq_bytes_per_gpu(n) <= self.budget.kv_bytes, native
        )

    @property
    def native_limit_binds(self) -> bool:
        return self.max_context_tokens == self.deployment.model.max_context

    @property
    def verdict(self) -> str:
        """'fits', "weights don't fit", or 'KV too small for one request'."""
        if not self.budget.weights_fit or (self.budget.kv_bytes <= 0 and not self.budget.fixed):
            return "weights don't fit"
        if self.concurrency(self.context_tokens) < 1:
            return "KV too small for one request"
        return "fits"

    def decode(self) -> DecodeEstimate:
        """Roofline decode step for `batch` sequences at the requested context."""
        lengths = [self.context_tokens] * self.request.batch
        return decode_step(self.deployment, lengths, self.sku, self.request.efficiency)


def tp_degrees(deployment_heads: int, sku: SkuSpec, requested: tuple[int, ...] | None) -> list[int]:
    """TP degrees to report: those requested, else 1, 2, 4, 8 that fit the node and divide heads."""
    if requested:
        return list(requested)
    return [t for t in (1, 2, 4, 8) if t <= sku.max_gpus_per_node and deployment_heads % t == 0]


def capacity_grid(
    deployments: list[Deployment],
    skus: list[SkuSpec],
    request: CapacityRequest,
    tps: tuple[int, ...] | None = None,
) -> list[Capacity]:
    """Capacity of every deployment (one per model) × SKU × TP degree."""
    rows = []
    for base in deployments:
        for sku in skus:
            for tp in tp_degrees(base.model.attention.num_heads, sku, tps):
                deployment = Deployment(
                    model=base.model,
                    engine=base.engine,
                    kv_dtype=base.kv_dtype,
                    weight_dtype=base.weight_dtype,
                    tp=tp,
                    pp=base.pp,
                    options=base.options,
                    exact_weights_bytes=base.exact_weights_bytes,
                )
                rows.append(Capacity(deployment, sku, request))
    return rows
