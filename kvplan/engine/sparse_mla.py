"""Sparse MLA's fp8 latent as the engines store it (DeepSeek-V3.2's DSA).

With an fp8 KV cache the sparse-attention kernels read the latent in one layout in vLLM and
SGLang alike: 512 fp8 values, one fp32 scale per 128 of them and the 64 rope values left in
bf16, 512 + 4 × 4 + 64 × 2 = 656 bytes per token per layer where dense fp8 MLA takes 576
(vLLM v1/kv_cache_interface.py MLAAttentionSpec "fp8_ds_mla"; SGLang
model_runner_kv_cache_mixin.py `calculate_mla_kv_cache_dim`, 0.5.15, and 0.5.4's
mem_cache/memory_pool.py `kv_cache_dim = 656`). The indexer key (132 B) is stored as it is.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.kvmath import LayerCache, MlaIndexerCache
from kvplan.specs import DtypeInfo

FP8_DS_MLA_TOKEN_BYTES = 656


def stored_caches(caches: tuple[LayerCache, ...], k_dtype: DtypeInfo) -> tuple[LayerCache, ...]:
    """`caches` with each sparse-MLA layer's fp8 latent in the 656-byte layout."""
    if k_dtype.bits != 8:
        return caches
    return tuple(
        replace(c, token_bytes=FP8_DS_MLA_TOKEN_BYTES + c.indexer_token_bytes)
        if isinstance(c, MlaIndexerCache)
        else c
        for c in caches
    )
