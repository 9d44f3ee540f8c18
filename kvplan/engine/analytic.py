"""Profiles without pages: exact (the physics), hf (transformers caches), naive (textbook MHA).

Their pools are fungible bytes: a page is one byte (`pages.BytePages`), a request is charged
the bytes its layers hold at the longest length it passes through, and a budget of N bytes
holds N // request_bytes(L) requests. The budget is total · utilization − weights (no engine
reserve; utilization 1.0 unless the user sets it).
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from typing import TYPE_CHECKING

from kvplan.engine.base import EngineProfile
from kvplan.engine.budget import Budget, device_memory, subtract_terms
from kvplan.engine.pages import BytePages
from kvplan.engine.pool import KvLayout, StageLayout
from kvplan.kvmath import FullCache, LayerCache, ceil_div
from kvplan.specs import DtypeInfo, ModelSpec, kv_dtype_info

if TYPE_CHECKING:
    from kvplan.engine.deployment import Deployment
    from kvplan.specs import SkuSpec


def byte_layout(caches: tuple[LayerCache, ...], stages: tuple[range, ...]) -> KvLayout:
    """A byte-granular layout: per stage, one charge per distinct cache with its layer count."""
    layouts = []
    per_token = 0
    for layers in stages:
        counts = Counter(caches[i] for i in layers)
        charges = tuple(BytePages(cache, count) for cache, count in counts.items())
        layouts.append(StageLayout(1, charges))
        per_token = max(per_token, sum(c.context_token_bytes * n for c, n in counts.items()))
    return KvLayout(tuple(layouts), tokens_per_block=1, kv_bytes_per_token=per_token, unit="byte")


class AnalyticProfile(EngineProfile[KvLayout]):
    """total · utilization − weights, bytes exactly as the caches hold them."""

    name = "exact"
    summary = "the physics: exactly the bytes the tokens need, no engine reserve"
    separate_v_dtype = True  # the physics of K and V in their own types (--v-dtype)

    def layout(self, deployment: Deployment, sku: SkuSpec | None) -> KvLayout:
        return _cached_layout(self, deployment)

    def default_utilization(self, deployment: Deployment) -> float:
        return 1.0

    def budget(
        self, deployment: Deployment, sku: SkuSpec, max_model_len: int | None = None
    ) -> Budget:
        total, basis = device_memory(sku)
        utilization = deployment.settings.utilization or self.default_utilization(deployment)
        return subtract_terms(
            total_bytes=total,
            total_basis=basis,
            utilization=utilization,
            weights_bytes=deployment.weights().per_gpu_bytes,
            settings=deployment.settings,
        )


@lru_cache(maxsize=4096)  # reports ask for one layout per (model, tp, ...) on every SKU
def _cached_layout(profile: AnalyticProfile, deployment: Deployment) -> KvLayout:
    full_reservation = deployment.settings.hybrid_allocator is False
    caches = profile.stored_caches(deployment, full_reservation)
    return byte_layout(caches, deployment.stage_ranges())


class HfProfile(AnalyticProfile):
    name = "hf"
    summary = "transformers caches: contiguous per layer, window honoured, MLA decompressed"

    def stored_caches(
        self, deployment: Deployment, full_reservation: bool = False
    ) -> tuple[LayerCache, ...]:
        """MLA stored decompressed: per head, K of qk_nope + qk_rope and V of v_head_dim."""
        caches = super().stored_caches(deployment, full_reservation)
        dtype = kv_dtype_info(deployment.kv_dtype)
        return _decompressed_mla(deployment.model, dtype, caches, deployment.tp)


def _decompressed_mla(
    model: ModelSpec, kv_dtype: DtypeInfo, caches: tuple[LayerCache, ...], tp: int
) -> tuple[LayerCache, ...]:
    mla = model.mla
    if mla is None:
        return caches
    heads = ceil_div(model.attention.num_heads, tp)
    per_token = heads * (
        kv_dtype.row_bytes(mla.qk_nope_head_dim + mla.qk_rope_head_dim)
        + kv_dtype.row_bytes(mla.v_head_dim)
    )
    return tuple(FullCache(per_token) if c.is_latent else c for c in caches)


class NaiveProfile(AnalyticProfile):
    name = "naive"
    summary = "textbook MHA formula 2·layers·hidden·L·e (ignores GQA/MQA/MLA/windows)"
    separate_v_dtype = False  # one e for K and V in the formula

    def stored_caches(
        self, deployment: Deployment, full_reservation: bool = False
    ) -> tuple[LayerCache, ...]:
        """Every layer MHA at full length: 2 · hidden · e per token, split over tp."""
        model, dtype = deployment.model, kv_dtype_info(deployment.kv_dtype)
        per_token = ceil_div(2 * dtype.row_bytes(model.hidden_size), deployment.tp)
        return tuple(FullCache(per_token) for _ in range(model.num_layers))


EXACT = AnalyticProfile()
HF = HfProfile()
NAIVE = NaiveProfile()
