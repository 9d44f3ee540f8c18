"""vLLM's memory profile: the terms it subtracts before the KV cache, estimated per GPU.

vLLM V1 (0.8 – 0.20, `v1/worker/gpu_worker.py` `determine_available_memory`):

    available = total · gpu_memory_utilization − weights − torch peak increase of the
                profile run − non-torch increase [− CUDA-graph estimate, ≥ 0.20]

`total` is what the CUDA runtime reports (`torch.cuda.mem_get_info()`), not the datasheet.
The weights are kvplan's exact bytes; the other terms are estimates and carry a band.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.plan.engines.base import Scheduler
from kvplan.units import GIB

if TYPE_CHECKING:
    from kvplan.plan.deployment import Deployment
    from kvplan.specs import SkuSpec

# llm-d's H100 measurements (vLLM 0.10, TP 1): "non_torch_memory takes 0.13GiB".
NON_TORCH_BYTES = round(0.13 * GIB)
# vLLM's profile run samples max_num_seqs dummy requests over the whole vocabulary; its torch
# peak is dominated by fp32 logits and the sampler's copies of them (sort, softmax, indices).
# 38.7 bytes per logit reproduces llm-d's H100 peaks: Llama-3.1-8B (vocab 128,256) 4.76 GiB
# and gpt-oss-20b (vocab 201,088) 7.38 GiB at max_num_seqs 1024.
SAMPLER_BYTES_PER_LOGIT = 38.7
# arg_utils.py (0.11): `vllm serve` takes the large defaults on GPUs with ≥ 70 GiB that are
# not A100s (device total memory as the runtime reports it).
LARGE_GPU_BYTES = 70 * GIB
# The estimate's band: the spread of its error on public logs (docs/engines.md).
ESTIMATE_BAND_BYTES = round(0.5 * GIB)


def scheduler_defaults(sku: SkuSpec | None) -> Scheduler:
    """`vllm serve` defaults (0.11 arg_utils.py): max_num_batched_tokens and max_num_seqs.

    8192 / 1024 on GPUs with ≥ 70 GiB that are not A100s, else 2048 / 256; without a SKU the
    smaller pair (the one most GPUs get).
    """
    if sku is None:
        return Scheduler(2048, 256)
    memory = sku.runtime_memory_bytes or sku.memory_bytes
    large = memory >= LARGE_GPU_BYTES and sku.family != "a100"
    return Scheduler(8192, 1024) if large else Scheduler(2048, 256)


def activation_bytes(deployment: Deployment, scheduler: Scheduler) -> int:
    """Estimated torch peak of vLLM's profile run: the larger of sampler and forward pass.

    Sampler: max_num_seqs × vocab logits at SAMPLER_BYTES_PER_LOGIT. Forward: per batched
    token, 2-byte activations of width 4·hidden + (q, k, v) + 3·intermediate/tp.
    """
    model, tp = deployment.model, deployment.tp
    sampler = int(SAMPLER_BYTES_PER_LOGIT * scheduler.max_num_seqs * model.vocab_size)
    a = model.attention
    width = 4 * model.hidden_size + (a.num_heads + 2 * a.num_kv_heads) * a.head_dim // tp
    width += 3 * model.intermediate_size // tp
    return max(sampler, 2 * scheduler.max_num_batched_tokens * width)


def non_torch_bytes(deployment: Deployment) -> int:
    """CUDA memory outside torch's allocator that grows during profiling (cuBLAS, NCCL)."""
    return NON_TORCH_BYTES


def cudagraph_bytes(deployment: Deployment, subtracted: bool) -> int:
    """CUDA-graph memory vLLM ≥ 0.20 subtracts; assumed 0 (said in the report's notes)."""
    return 0
