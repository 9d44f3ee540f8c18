"""The rates a step model divides by: constants resolved for one deployment × SKU, once.

Bandwidths and FLOP/s here are achieved figures (datasheet × the constants' fractions); the
shape-dependent part of a GEMM's or an attention kernel's efficiency is applied per step
(kvplan.perf.operations). A step model looks nothing up per step.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from kvplan.engine.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.kvmath import LayerCache
from kvplan.perf.constants import PerfConstants
from kvplan.specs import SkuSpec, is_gguf_weight_dtype, weight_dtype_info

# Tensor-core peak each weight dtype computes at (first one the SKU lists wins).
# fp8 / fp8_block checkpoints run fp8 GEMMs (vLLM fp8 W8A8, DeepGEMM block fp8); int8 is
# taken as W8A8. int4 (GPTQ/AWQ, group 128) is weight-only: Marlin/Machete dequantise to
# 16-bit and run bf16 MMAs, and Hopper/Blackwell have no int4 tensor cores. nvfp4/mxfp4
# use fp4 MMAs where the SKU has them, else the fp8 peak (W4A8 kernels), else bf16: the
# optimistic reading, in keeping with prefill time as a floor (W4A16 kernels such as
# Marlin run at the bf16 peak; pass dtype="bf16" for those). mxfp4 (gpt-oss) has no W4A8 path
# on Hopper: vLLM and TensorRT-LLM run its experts through triton_kernels' matmul_ogs with
# bf16 activations there (TensorRT-LLM's gpt-oss guide: "Hopper: use TRITON" MoE backend), so
# without fp4 tensor cores it computes at the bf16 peak.
COMPUTE_DTYPES: dict[str, tuple[str, ...]] = {
    "fp32": ("fp32",),
    "bf16": ("bf16",),
    "fp16": ("fp16",),
    "fp8": ("fp8",),
    "fp8_block": ("fp8",),
    "int8": ("int8",),
    "int4": ("bf16",),
    # AWQ and GPTQ int4 kernels (AutoAWQ GEMM, Marlin, ExLlama) dequantise to fp16 and multiply
    # on fp16 tensor cores (vLLM's awq and gptq configs: get_supported_act_dtypes is half).
    "awq": ("fp16", "bf16"),
    "gptq": ("fp16", "bf16"),
    "nvfp4": ("fp4", "fp8", "bf16"),
    "mxfp4": ("fp4", "bf16"),
}
# GGUF file types (Q4_K_M, …): llama.cpp's CUDA backend multiplies quantised weights by q8_1
# activations with int8 tensor-core MMQ kernels on Turing and later (ggml-cuda/mmq.cu
# ggml_cuda_should_use_mmq), else dequantises to f16.
GGUF_COMPUTE_DTYPES = ("int8", "fp16", "bf16")


NO_COMPUTE = "none"  # the dtype of a SKU timed without a compute peak (compute_optional)


@dataclass(frozen=True)
class ResolvedRates:
    """One replica's achieved rates and shape constants (one GPU per stage)."""

    constants: PerfConstants
    cuda_graphs: bool
    dtype: str  # the SKU peak_flop_per_s key GEMMs compute at
    peak_flop_per_s: float  # one GPU, dense, that dtype
    gemm_bytes_per_s: float
    gemm_fraction: float
    gemm_half_tokens: float
    grouped_bytes_per_s: float
    grouped_fraction: float
    grouped_half_tokens: float
    attention_bytes_per_s: float
    attention_fixed_tokens: float
    prefill_attention_fraction: float
    attention_peak_flop_per_s: float  # the 16-bit peak attention kernels compute at
    prefill_attention_half_tokens: float
    elementwise_bytes_per_s: float
    link_bytes_per_s: float  # achieved GPU-to-GPU bandwidth, one direction
    link_latency_s: float  # one small collective
    kv_token_bytes: float  # KV bytes per context token summed over one GPU of each stage


def resolved_rates(
    deployment: Deployment,
    sku: SkuSpec,
    constants: PerfConstants,
    bandwidth_fraction: float | None = None,
    compute_fraction: float | None = None,
    dtype: str | None = None,
    cuda_graphs: bool = True,
    compute_optional: bool = False,
) -> ResolvedRates:
    """The rates of `deployment` on `sku` under `constants` (see `step_model`).

    A SKU whose file lists no peak for the compute dtype raises KvplanError, unless
    `compute_optional`: then compute never binds (dtype "none", an infinite peak) and steps
    are timed by their memory traffic alone, as a decode step nearly is.
    """
    c = constants.value
    weights_dtype = _weights_dtype(deployment)
    try:
        key = compute_dtype(sku, dtype, weights_dtype)
        peak = sku.peak_flop_per_s[key]
    except KvplanError:
        if not compute_optional:
            raise
        key, peak = NO_COMPUTE, math.inf
    bandwidth = sku.bandwidth_bytes_per_s

    def memory(name: str) -> float:
        return bandwidth * (bandwidth_fraction or c(name))

    def compute(name: str) -> float:
        return compute_fraction or c(name)

    # Decode attention reads each cached token once and multiplies it with every query head
    # of its group: bandwidth-bound for GQA (a few FLOPs a byte), compute-bound for MLA's
    # absorbed form (128 heads against one latent). The slower of the two sets its rate.
    kv_token_bytes, flops_per_token = _attention_terms(deployment)
    attention_flop_per_s = _attention_peak(sku) * (
        compute_fraction or c("attention_decode_compute_fraction")
    )
    flops_per_byte = flops_per_token / max(kv_token_bytes, 1)
    # An engine whose kernel reads a GQA group's KV once per query head reads it that often.
    attention_bytes_per_s = memory("attention_decode_bandwidth_fraction") / (
        deployment.engine.decode_kv_reads(deployment)
    )
    if flops_per_byte > 0:
        attention_bytes_per_s = min(attention_bytes_per_s, attention_flop_per_s / flops_per_byte)
    link = sku.interconnect_bytes_per_s or sku.host_link_bytes_per_s or bandwidth
    latency = sku.interconnect_latency_s or c("collective_latency_s")
    return ResolvedRates(
        constants=constants,
        cuda_graphs=cuda_graphs,
        dtype=key,
        peak_flop_per_s=peak,
        gemm_bytes_per_s=memory("gemm_bandwidth_fraction"),
        gemm_fraction=compute("gemm_compute_fraction"),
        gemm_half_tokens=c("gemm_half_efficiency_tokens"),
        grouped_bytes_per_s=memory("grouped_gemm_bandwidth_fraction"),
        grouped_fraction=compute("grouped_gemm_compute_fraction"),
        grouped_half_tokens=c("grouped_gemm_half_efficiency_tokens"),
        attention_bytes_per_s=attention_bytes_per_s,
        attention_fixed_tokens=c("attention_decode_fixed_tokens"),
        prefill_attention_fraction=compute("attention_prefill_compute_fraction"),
        attention_peak_flop_per_s=math.inf if key == NO_COMPUTE else _attention_peak(sku),
        prefill_attention_half_tokens=c("attention_prefill_half_efficiency_tokens"),
        elementwise_bytes_per_s=memory("elementwise_bandwidth_fraction"),
        link_bytes_per_s=link * c("collective_bandwidth_fraction"),
        link_latency_s=latency,
        kv_token_bytes=kv_token_bytes,
    )


@lru_cache(maxsize=4096)  # one per deployment: a report asks once per SKU row
def _weights_dtype(deployment: Deployment) -> str:
    """The name of the dtype the deployment's weights are stored in."""
    return weight_dtype_info(deployment.weight_dtype or deployment.model.weight_dtype).name


@lru_cache(maxsize=4096)  # one per deployment: a report asks once per SKU row
def _attention_terms(deployment: Deployment) -> tuple[int, float]:
    """(KV bytes per context token over one GPU of each stage, decode FLOPs per token)."""
    kv_token_bytes = sum(
        cache.context_token_bytes * n
        for stage in stage_cache_counts(deployment)
        for cache, n in stage.items()
    )
    return kv_token_bytes, decode_attention_flops_per_token(deployment)


def _attention_peak(sku: SkuSpec) -> float:
    """The peak attention kernels compute at: 16-bit MMAs (fp8 KV is dequantised first)."""
    for key in ("bf16", "fp16", "fp32"):
        if key in sku.peak_flop_per_s:
            return sku.peak_flop_per_s[key]
    return max(sku.peak_flop_per_s.values(), default=math.inf)


def decode_attention_flops_per_token(deployment: Deployment) -> float:
    """FLOPs one decode query spends per cached token, summed over one GPU of each stage.

    Softmax attention: QKᵀ and PV, 2 · 2 · head_dim per query head on the GPU. MLA in the
    absorbed form engines decode with (FlashMLA, FlashInfer MLA): each head's query meets the
    latent (kv_lora_rank + qk_rope_head_dim) and PV returns kv_lora_rank: 2 · (2 · kv_lora_rank
    + qk_rope_head_dim) per head. Heads split over TP; state layers have none.
    """
    model, tp = deployment.model, deployment.tp
    heads_per_gpu = -(-model.attention.num_heads // tp)
    mla = model.mla
    total = 0.0
    for stage in stage_cache_counts(deployment):
        for cache, layers in stage.items():
            if not cache.context_token_bytes:
                continue
            if cache.is_latent and mla is not None:
                width = 2 * mla.kv_lora_rank + mla.qk_rope_head_dim
            else:
                width = 2 * model.attention.head_dim
            total += layers * 2 * heads_per_gpu * width
    return total


@lru_cache(maxsize=4096)  # one per deployment; a report asks once per SKU row
def stage_cache_counts(deployment: Deployment) -> tuple[Counter[LayerCache], ...]:
    """Each stage's distinct caches as the engine stores them, with their layer counts.

    A handful of terms per stage instead of one per layer keeps whole-catalogue reports fast.
    """
    caches = deployment.engine.stored_caches(deployment)
    return tuple(Counter(caches[i] for i in r) for r in deployment.stage_ranges())


def compute_dtype(sku: SkuSpec, dtype: str | None, weight_dtype: str) -> str:
    if dtype:
        wanted: tuple[str, ...] = (dtype,)
    elif is_gguf_weight_dtype(weight_dtype):
        wanted = GGUF_COMPUTE_DTYPES
    else:
        wanted = COMPUTE_DTYPES[weight_dtype]
    for key in wanted:
        if key in sku.peak_flop_per_s:
            return key
    has = ", ".join(sorted(sku.peak_flop_per_s)) or "none"
    asked = " or ".join(repr(k) for k in wanted)
    raise KvplanError(
        f"compute dtype: SKU {sku.name!r} lists no peak FLOP/s for {asked} (it has: {has})"
    )
