"""vLLM's MLA by release: what a DeepSeek layer caches before vLLM stored the latent, and
where vLLM refuses an fp8 KV cache with MLA.

Read from the PyPI wheels of vllm-project/vllm (0.6.4.post1, 0.6.6.post1, 0.7.0, 0.7.1, 0.8.5,
0.9.0, 0.10.0, 0.10.1, 0.11.0); the functions say which file.
"""

from __future__ import annotations

from kvplan.engine.vllm_version import VllmVersion
from kvplan.kvmath import FullCache, LayerCache, MlaCache, num_kv_heads_per_gpu
from kvplan.specs import DtypeInfo, ModelSpec, SkuSpec

# The MLA decode backend by compute capability (vllm.py's block sizes follow the same
# table): FlashMLA on Hopper, CUTLASS MLA on Blackwell; other GPUs run Triton MLA.
MLA_BACKEND_BY_CAPABILITY = {"9.0": "FlashMLA", "10.0": "CutlassMLA", "10.3": "CutlassMLA"}


def pre_mla_caches(
    caches: tuple[LayerCache, ...],
    model: ModelSpec,
    tp: int,
    version: VllmVersion,
    k_dtype: DtypeInfo,
) -> tuple[LayerCache, ...]:
    """MLA layers as vLLM < 0.7.1 cached them: a K and a V row per local head.

    `model_executor/models/deepseek_v2.py` DeepseekV2Attention: through 0.6.6.post1
    `Attention(num_local_heads, 256, …)` with q, k and v padded to 256 ("TODO, support
    head_size 192"); 0.7.0 `Attention(num_local_heads, qk_head_dim, …)` with v padded to
    qk_head_dim (nope + rope = 192 for DeepSeek). Heads are split by TP.
    """
    mla = model.mla
    assert mla is not None  # the caller checks
    qk_head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    head = 256 if version.release < (0, 7, 0) else qk_head_dim
    heads = num_kv_heads_per_gpu(model.attention.num_heads, tp)
    token_bytes = 2 * heads * k_dtype.row_bytes(head)
    return tuple(FullCache(token_bytes) if isinstance(c, MlaCache) else c for c in caches)


def fp8_mla_refusal(
    model: ModelSpec, version: VllmVersion, k_dtype: DtypeInfo, sku: SkuSpec
) -> str | None:
    """Why vLLM refuses an fp8 KV cache for a (dense) MLA model on `sku`, or None.

    From the PyPI wheels' `v1/attention/backends/mla/*.py`: 0.8 – 0.10.x run fp8 KV on V1
    where FlashAttention 3 takes fp8 (`engine/arg_utils.py` `_is_v1_supported_oracle`: Hopper;
    elsewhere they fall back to V0, which accepts it), and V1's FlashMLA raises "FlashMLA V1
    with FP8 KV cache not yet supported" (vllm#18888, 0.8.5 on an H100). 0.11 (V1 only)
    accepts it in FlashMLA (Hopper) and CUTLASS MLA (Blackwell); Triton MLA, the backend of
    other GPUs, raises "TritonMLA V1 with FP8 KV cache not yet supported".
    """
    mla = model.mla
    if mla is None or mla.indexer is not None or k_dtype.bits != 8:
        return None
    capability = sku.compute_capability
    if (0, 8) <= version.major_minor < (0, 11) and capability == "9.0":
        backend = "FlashMLA"
    elif version.major_minor >= (0, 11) and capability not in MLA_BACKEND_BY_CAPABILITY:
        backend = "TritonMLA"
    else:
        return None
    return (
        f"vLLM {version.text} refuses an fp8 KV cache for {model.name}'s MLA on "
        f'{sku.name} ("{backend} V1 with FP8 KV cache not yet supported"); use the '
        "model's dtype"
    )
