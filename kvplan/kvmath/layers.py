"""Which cache each layer holds, and the KV bytes per token and per sequence they add up to."""

from __future__ import annotations

from functools import lru_cache

from kvplan.errors import KvplanError
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
from kvplan.specs import WINDOWED_KINDS, DtypeInfo, ModelSpec, kv_dtype_info


def num_kv_heads_per_gpu(num_kv_heads: int, tp: int) -> int:
    """KV heads one TP rank holds: ⌈kv_heads / tp⌉, or 1 replicated head when tp > kv_heads."""
    return ceil_div(num_kv_heads, tp) if tp <= num_kv_heads else 1


def state_dtype_name(model: ModelSpec) -> str:
    """Dtype of recurrent state: the activation dtype (vLLM mamba_cache_dtype 'auto')."""
    return model.weight_dtype if model.weight_dtype in ("fp32", "fp16") else "bf16"


# DeepSeek-V3.2's indexer keys: fp8 e4m3 plus one fp32 scale per 128 values, whatever the KV
# dtype (DeepSeek inference/model.py Indexer k_cache/k_scale_cache; vLLM deepseek_v2.py
# DeepseekV32IndexerCache: head_dim + head_dim // 128 * 4 bytes of uint8 per token).
INDEXER_KEY_DTYPE = DtypeInfo("fp8_e4m3", 8, 128, 32, "fp8 + one fp32 scale per 128 values")


@lru_cache(maxsize=4096)  # specs and dtypes are frozen: reports reuse one tuple per SKU row
def layer_caches(
    model: ModelSpec,
    kv_dtype: DtypeInfo,
    tp: int = 1,
    full_reservation: bool = False,
    v_dtype: DtypeInfo | None = None,
) -> tuple[LayerCache, ...]:
    """One cache object per layer for one TP rank.

    `full_reservation` turns sliding and chunked layers into full ones: what an
    engine without a hybrid allocator reserves (compute is still windowed). `v_dtype` stores
    V in another type than K (llama.cpp -ctv); None: the K type. An MLA latent is K's.
    """
    kinds = model.layer_kinds
    v_dtype = v_dtype or kv_dtype
    per_kind = {
        k: _layer_cache(model, k, (kv_dtype, v_dtype), tp, full_reservation) for k in set(kinds)
    }
    return tuple(per_kind[kind] for kind in kinds)


def _layer_cache(
    model: ModelSpec,
    kind: str,
    kv_dtypes: tuple[DtypeInfo, DtypeInfo],
    tp: int,
    full_reservation: bool,
) -> LayerCache:
    """The cache of one layer of `kind` (every layer of a kind holds the same); `kv_dtypes`
    are the K and V types."""
    plan = model.layers
    if full_reservation and kind in WINDOWED_KINDS:
        kind = "full"
    k_dtype, v_dtype = kv_dtypes
    match kind:
        case "full":
            return FullCache(attention_token_bytes(model, k_dtype, tp, v_dtype))
        case "sliding":
            token_bytes = attention_token_bytes(model, k_dtype, tp, v_dtype)
            return SlidingCache(token_bytes, window_tokens=plan.sliding_window or 0)
        case "chunked":
            token_bytes = attention_token_bytes(model, k_dtype, tp, v_dtype)
            return ChunkedCache(token_bytes, chunk_tokens=plan.chunk_size or 0)
        case "mla":
            return _mla_cache(model, k_dtype)
        case "state":
            return StateCache(state_bytes_per_seq(model, tp))
        case "parallel":
            token_bytes = attention_token_bytes(model, k_dtype, tp, v_dtype)
            return ParallelCache(token_bytes, state_bytes=state_bytes_per_seq(model, tp))
        case "cross":
            vision = model.vision
            assert vision is not None  # guaranteed by ModelSpec validation
            encoder_tokens = vision.tokens_per_image * vision.images_per_request
            token_bytes = attention_token_bytes(model, k_dtype, tp, v_dtype)
            return CrossCache(token_bytes, encoder_tokens=encoder_tokens)
        case "shared":
            return SharedCache()
        case _:
            return EmptyCache()


def attention_token_bytes(
    model: ModelSpec, kv_dtype: DtypeInfo, tp: int, v_dtype: DtypeInfo | None = None
) -> int:
    """K and V of one token in one attention layer on one TP rank, in bytes:
    h · (row_K(head_dim) + row_V(head_dim)), 2 · h · row(head_dim) when V is stored as K."""
    heads = num_kv_heads_per_gpu(model.attention.num_kv_heads, tp)
    head_dim = model.attention.head_dim
    return heads * (kv_dtype.row_bytes(head_dim) + (v_dtype or kv_dtype).row_bytes(head_dim))


def _mla_cache(model: ModelSpec, kv_dtype: DtypeInfo) -> MlaCache:
    mla = model.mla
    assert mla is not None  # guaranteed by ModelSpec validation
    latent_bytes = kv_dtype.row_bytes(mla.kv_lora_rank + mla.qk_rope_head_dim)
    if mla.indexer is None:
        return MlaCache(latent_bytes)
    indexer_bytes = INDEXER_KEY_DTYPE.row_bytes(mla.indexer.head_dim)
    return MlaIndexerCache(latent_bytes + indexer_bytes, indexer_token_bytes=indexer_bytes)


def state_bytes_per_seq(model: ModelSpec, tp: int) -> int:
    """Recurrent state of one layer, one sequence, one TP rank: conv + ssm parts.

    The conv part is in the activation dtype; the ssm part too unless the recurrence keeps
    it in fp32 (KDA). Qwen3-Next GDN: (3 × 8,192 + 32 × 128 × 128) × 2 B = 1,097,728 B.
    """
    state = model.state
    assert state is not None  # guaranteed by ModelSpec validation
    activation_bits = kv_dtype_info(state_dtype_name(model)).bits
    ssm_bits = 32 if state.ssm_state_dtype == "fp32" else activation_bits
    bits = (
        state.conv_elements_per_seq(tp) * activation_bits
        + state.ssm_elements_per_seq(tp) * ssm_bits
    )
    return bits // 8


@lru_cache(maxsize=1024)  # asked once per deployment built; a search builds thousands
def stage_layer_ranges(num_layers: int, pp: int) -> tuple[range, ...]:
    """Layers of each pipeline stage, split the way vLLM's `get_pp_indices` splits them.

    Equal shares, the remainder added from the second-to-last stage backwards:
    27 layers over 2 stages -> 14 + 13 (vLLM PR #20665's DeepSeek-V2-Lite log).
    """
    if pp > num_layers:
        raise KvplanError(f"--pp {pp} exceeds the model's {num_layers} layers")
    sizes = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        sizes[-i] += 1
    starts = [sum(sizes[:s]) for s in range(pp)]
    return tuple(range(start, start + size) for start, size in zip(starts, sizes, strict=True))


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str = "bf16", tp: int = 1) -> int:
    """KV bytes per token, whole model, one TP rank, for a context within every window.

    Full, sliding, chunked and parallel layers each hold 2 · kv_heads_per_gpu · head_dim · e,
    MLA layers (kv_lora_rank + qk_rope_head_dim) · e plus the indexer key where there is one;
    state, shared, mlp and cross layers 0 (cross layers hold a fixed set of encoder tokens).
    """
    caches = layer_caches(model, kv_dtype_info(kv_dtype), tp)
    return sum(cache.context_token_bytes for cache in caches)


def kv_bytes_per_seq(caches: tuple[LayerCache, ...], tokens: int) -> int:
    """Exact bytes the layers hold for one sequence of `tokens` tokens."""
    return sum(cache.bytes_per_seq(tokens) for cache in caches)


def naive_kv_bytes_per_token(model: ModelSpec, kv_dtype: str = "bf16") -> int:
    """The textbook MHA formula, 2 · layers · hidden · e, that ignores GQA/MQA/MLA/windows."""
    return 2 * model.num_layers * kv_dtype_info(kv_dtype).row_bytes(model.hidden_size)


# --- parameters -------------------------------------------------------------------
