"""Paged KV cache, Triton paged-attention decode kernels and their PyTorch reference.

Dimension names used in every docstring and shape comment of this package:

- ``B``: sequences in the batch (one query token each: decode).
- ``Hq``: query heads; ``Hkv``: KV heads; ``G = Hq / Hkv``: query heads per KV head
  (``G = 1`` MHA, ``1 < G < Hq`` GQA, ``Hkv = 1`` MQA).
- ``D``: head_dim of K and V. For MLA, K is the latent of ``Dk = kv_lora_rank +
  qk_rope_head_dim`` columns and V is its first ``Dv = kv_lora_rank`` columns.
- ``P``: tokens per page (block); ``N``: pages in the pool; ``S``: KV splits (split-K).

Layout is NHD: a pool is ``[N, P, Hkv, D]`` (MLA: ``[N, P, 1, Dk]``), a block table is
``[B, max_blocks]`` int32 of page ids, ``seq_lens`` is ``[B]`` int32.

The package imports nothing from the rest of kvplan. Exports are loaded lazily so that
``kvplan.kernels.splits`` can be imported without torch or triton.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvplan.kernels.allocator import CacheStats, PagedKVCache, pool_bytes
    from kvplan.kernels.decode import paged_decode, paged_decode_mla
    from kvplan.kernels.errors import KernelError, OutOfBlocksError, UnknownSequenceError
    from kvplan.kernels.reference import paged_decode_reference
    from kvplan.kernels.splits import choose_num_splits

_EXPORTS = {
    "CacheStats": "allocator",
    "PagedKVCache": "allocator",
    "pool_bytes": "allocator",
    "paged_decode": "decode",
    "paged_decode_mla": "decode",
    "KernelError": "errors",
    "OutOfBlocksError": "errors",
    "UnknownSequenceError": "errors",
    "paged_decode_reference": "reference",
    "choose_num_splits": "splits",
}

__all__ = [
    "CacheStats",
    "KernelError",
    "OutOfBlocksError",
    "PagedKVCache",
    "UnknownSequenceError",
    "choose_num_splits",
    "paged_decode",
    "paged_decode_mla",
    "paged_decode_reference",
    "pool_bytes",
]


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module_name}"), name)
