"""KV memory budget per GPU, the way each engine computes it; every term shown and overridable.

vLLM V1 (0.8–0.20, gpu_worker.py `determine_available_memory`):
    available = total · gpu_memory_utilization − weights − activation peak − non-torch
                [− CUDA-graph estimate, ≥ 0.20]
SGLang (kv_cache_configurator.py): budget = total · mem_fraction_static − weights.
exact: total · utilization − weights (no engine reserve).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.errors import KvplanError
from kvplan.plan.vllm import VllmVersion
from kvplan.specs import ModelSpec, SkuSpec
from kvplan.units import GIB

# llm-d's H100 measurements (reference §6): "non-torch" growth since init, TP 1.
VLLM_NON_TORCH_BYTES = round(0.13 * GIB)
# vLLM's profile run samples max_num_seqs dummy requests over the whole vocabulary; its torch
# peak is dominated by fp32 logits and the sampler's copies of them (sort, softmax, indices).
# 38.7 bytes per logit reproduces llm-d's H100 peaks: Llama-3.1-8B (vocab 128,256) 4.76 GiB and
# gpt-oss-20b (vocab 201,088) 7.38 GiB at max_num_seqs 1024, and predicts Qwen3-32B's 5.65 GiB.
SAMPLER_BYTES_PER_LOGIT = 38.7
# arg_utils.py (0.11): `vllm serve` defaults on GPUs with ≥ 70 GiB that are not A100s.
LARGE_GPU_BYTES = 70 * GIB


@dataclass(frozen=True)
class MemoryOverrides:
    """User overrides of the budget terms (None: the engine's default or estimate)."""

    utilization: float | None = None
    kv_memory_bytes: int | None = None  # a fixed KV budget per GPU (vLLM --kv-cache-memory)
    activation_bytes: int | None = None
    non_torch_bytes: int | None = None
    cudagraph_bytes: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None

    def __post_init__(self) -> None:
        if self.utilization is not None and not 0 < self.utilization <= 1:
            raise KvplanError(f"--utilization: {self.utilization} must be in (0, 1]")
        for name in ("kv_memory_bytes", "activation_bytes", "non_torch_bytes", "cudagraph_bytes"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise KvplanError(
                    f"--{name.replace('_bytes', '').replace('_', '-')}: must not be negative"
                )
        for name in ("max_num_batched_tokens", "max_num_seqs"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise KvplanError(f"--{name.replace('_', '-')}: {value} must be at least 1")


@dataclass(frozen=True)
class Budget:
    """The terms of one GPU's KV budget, in bytes; `kv_bytes` may be negative (does not fit)."""

    total_bytes: int
    utilization: float  # the engine's fraction (gpu_memory_utilization, mem_fraction_static)
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    fixed: bool  # a --kv-memory budget: the terms above are not used
    kv_bytes: int
    max_num_batched_tokens: int
    max_num_seqs: int

    @property
    def requested_bytes(self) -> int:
        return int(self.total_bytes * self.utilization)

    @property
    def weights_fit(self) -> bool:
        return self.fixed or self.weights_bytes <= self.requested_bytes


def vllm_scheduler_defaults(sku: SkuSpec) -> tuple[int, int]:
    """`vllm serve` defaults (0.11 arg_utils.py): (max_num_batched_tokens, max_num_seqs)."""
    large = sku.memory_bytes >= LARGE_GPU_BYTES and sku.family != "a100"
    return (8192, 1024) if large else (2048, 256)


def vllm_activation_bytes(
    model: ModelSpec, tp: int, max_num_batched_tokens: int, max_num_seqs: int
) -> int:
    """Estimated torch peak of vLLM's profile run: the larger of sampler and forward pass.

    Sampler: max_num_seqs × vocab logits at SAMPLER_BYTES_PER_LOGIT. Forward: per batched
    token, 2-byte activations of width 4·hidden + (q, k, v) + 3·intermediate/tp.
    """
    sampler = int(SAMPLER_BYTES_PER_LOGIT * max_num_seqs * model.vocab_size)
    a = model.attention
    width = 4 * model.hidden_size + (a.num_heads + 2 * a.num_kv_heads) * a.head_dim // tp
    width += 3 * model.intermediate_size // tp
    return max(sampler, 2 * max_num_batched_tokens * width)


def vllm_budget(
    model: ModelSpec,
    sku: SkuSpec,
    weights_bytes_per_gpu: int,
    tp: int,
    version: VllmVersion,
    overrides: MemoryOverrides,
) -> Budget:
    """vLLM's "Available KV cache memory" on one rank."""
    default_mnbt, default_seqs = vllm_scheduler_defaults(sku)
    mnbt = overrides.max_num_batched_tokens or default_mnbt
    seqs = overrides.max_num_seqs or default_seqs
    utilization = overrides.utilization or version.default_utilization
    activation = overrides.activation_bytes
    if activation is None:
        activation = vllm_activation_bytes(model, tp, mnbt, seqs)
    non_torch = (
        VLLM_NON_TORCH_BYTES if overrides.non_torch_bytes is None else overrides.non_torch_bytes
    )
    cudagraph = overrides.cudagraph_bytes or 0
    if not version.subtracts_cudagraph_estimate:
        cudagraph = 0
    if overrides.kv_memory_bytes is not None:
        return Budget(
            sku.memory_bytes,
            utilization,
            weights_bytes_per_gpu,
            0,
            0,
            0,
            True,
            overrides.kv_memory_bytes,
            mnbt,
            seqs,
        )
    kv = (
        int(sku.memory_bytes * utilization)
        - weights_bytes_per_gpu
        - activation
        - non_torch
        - cudagraph
    )
    return Budget(
        sku.memory_bytes,
        utilization,
        weights_bytes_per_gpu,
        activation,
        non_torch,
        cudagraph,
        False,
        kv,
        mnbt,
        seqs,
    )


def sglang_mem_fraction_static(tp: int) -> float:
    """SGLang server_args.py default mem_fraction_static, by tensor-parallel size."""
    for threshold, fraction in ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87)):
        if tp >= threshold:
            return fraction
    return 0.88


def simple_budget(
    sku: SkuSpec, weights_bytes_per_gpu: int, utilization: float, overrides: MemoryOverrides
) -> Budget:
    """total · utilization − weights (exact/hf/naive: 1; SGLang: mem_fraction_static)."""
    utilization = overrides.utilization or utilization
    fixed = overrides.kv_memory_bytes is not None
    kv = (
        overrides.kv_memory_bytes
        if overrides.kv_memory_bytes is not None
        else int(sku.memory_bytes * utilization) - weights_bytes_per_gpu
    )
    return Budget(sku.memory_bytes, utilization, weights_bytes_per_gpu, 0, 0, 0, fixed, kv, 0, 0)
