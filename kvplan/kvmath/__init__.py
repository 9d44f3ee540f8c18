"""Exact integer KV-cache and weight arithmetic (DESIGN §3). No I/O, no rounding.

One small frozen class per cache kind owns its arithmetic (the vLLM
`kv_cache_interface` pattern): `token_bytes` is one token of one layer on one
GPU, `tokens_kept(L)` how many of a sequence's L tokens the layer holds.
Engines (kvplan.engine) decide how those tokens become allocated bytes.

One file per job:
    caches   the cache classes, one per layer kind
    layers   which cache each layer holds; KV bytes per token and per sequence; PP stages
    mixers   parameters of each kind of sequence mixer, and of the vision tower
    params   parameter counts per layer and for the model; bytes of weights in a dtype
"""

from kvplan.kvmath.caches import (
    ChunkedCache,
    CrossCache,
    EmptyCache,
    FullCache,
    LayerCache,
    MlaCache,
    MlaIndexerCache,
    ParallelCache,
    SharedCache,
    SlidingCache,
    StateCache,
    ceil_div,
)
from kvplan.kvmath.layers import (
    INDEXER_KEY_DTYPE,
    attention_token_bytes,
    kv_bytes_per_seq,
    kv_bytes_per_token,
    layer_caches,
    naive_kv_bytes_per_token,
    num_kv_heads_per_gpu,
    stage_layer_ranges,
    state_bytes_per_seq,
    state_dtype_name,
)
from kvplan.kvmath.params import (
    LayerParams,
    ParamCounts,
    has_ffn,
    is_moe_layer,
    layer_params,
    param_counts,
    tensor_bytes,
)

__all__ = [
    "INDEXER_KEY_DTYPE",
    "ChunkedCache",
    "CrossCache",
    "EmptyCache",
    "FullCache",
    "LayerCache",
    "LayerParams",
    "MlaCache",
    "MlaIndexerCache",
    "ParallelCache",
    "ParamCounts",
    "SharedCache",
    "SlidingCache",
    "StateCache",
    "attention_token_bytes",
    "ceil_div",
    "has_ffn",
    "is_moe_layer",
    "kv_bytes_per_seq",
    "kv_bytes_per_token",
    "layer_caches",
    "layer_params",
    "naive_kv_bytes_per_token",
    "num_kv_heads_per_gpu",
    "param_counts",
    "stage_layer_ranges",
    "state_bytes_per_seq",
    "state_dtype_name",
    "tensor_bytes",
]
