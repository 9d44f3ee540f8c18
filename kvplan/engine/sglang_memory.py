"""SGLang's memory defaults by release: mem_fraction_static, chunked prefill, CUDA-graph batch.

Read from sgl-project/sglang `python/sglang/srt/server_args.py`:

- ≤ 0.4.7: by tensor-parallel size alone (0.88 at TP 1 … 0.79 at TP ≥ 16; TP ≥ 8 was 0.83
  before 0.3.5, 0.81 after);
- 0.4.8 – 0.5.2 (PR #7054, 2025-06-10): a reserve in GiB by GPU memory tier, `parallel = tp × pp`;
- ≥ 0.5.3 (PR #10975, 2025-09-27): a reserve in MiB from chunked_prefill_size and
  cuda_graph_max_bs, each chosen by GPU memory tier (`_handle_gpu_memory_settings`).

`gpu_mem` is what `get_nvgpu_memory_capacity()` reads from nvidia-smi, in MiB (the catalogue's
`memory_bytes`); the fraction is `round((gpu_mem − reserved) / gpu_mem, 3)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kvplan.engine.release import Release
from kvplan.errors import SettingError
from kvplan.specs import SkuSpec
from kvplan.units import GIB, MIB

# model_runner.py measures free memory after torch.distributed init: the CUDA context and,
# at TP > 1, NCCL's buffers are gone by then. One public log pins both: PR #11716's H200 TP 8
# run prints "Init torch distributed ends. mem usage=1.96 GB" (NCCL) and a lowest "Load weight
# begin. avail mem=137.29 GB" against the H200's 139.57 GiB runtime total: 0.32 GiB context.
CUDA_CONTEXT_BYTES = int(0.32 * GIB)
NCCL_INIT_BYTES = int(1.96 * GIB)
INIT_BAND_BYTES = int(0.25 * GIB)  # ranks of that log differ by 0.23 GiB


def init_bytes(tp: int, pp: int) -> int:
    """Memory gone before weights load (CUDA context, NCCL at TP × PP > 1), in bytes."""
    return CUDA_CONTEXT_BYTES + (NCCL_INIT_BYTES if tp * pp > 1 else 0)


def load_overhead_bytes(tp: int, pp: int) -> int:
    """Memory the weight loader keeps beyond the weights' own bytes, in bytes."""
    return 0


class ReadingSettings(Protocol):
    """The settings the readings come from (EngineSettings has them), bytes or None."""

    @property
    def avail_mem_before_load_bytes(self) -> int | None: ...

    @property
    def avail_mem_after_load_bytes(self) -> int | None: ...

    @property
    def non_torch_bytes(self) -> int | None: ...


@dataclass(frozen=True)
class Readings:
    """The two free-memory readings SGLang logs around weight loading, and the budget terms
    they make, bytes per GPU (given by the log, else estimated)."""

    before_load_bytes: int  # "Load weight begin. avail mem=X GB"
    after_load_bytes: int  # "Load weight end. … avail mem=Y GB"
    weights_bytes: int  # the model's weights on this rank
    non_torch_bytes: int  # total − Y − weights: context, NCCL, the loader's overhead
    band_bytes: int  # ± on the estimated readings (0 when both are given)


def readings(
    given: ReadingSettings, total_bytes: int, weights_bytes: int, tp: int, pp: int
) -> Readings:
    """The readings as the settings give them, the rest estimated, for one rank of `tp` × `pp`
    (with DP attention: every GPU of the replica set) holding `weights_bytes` of weights.

    Raises:
        SettingError: a reading above the device's memory, or after-load above before-load.
    """
    settings, weights, band = given, weights_bytes, 0
    before = settings.avail_mem_before_load_bytes
    if before is None:
        init = settings.non_torch_bytes
        if init is None:
            init, band = init_bytes(tp, pp), INIT_BAND_BYTES
        before = total_bytes - init
    elif before > total_bytes:
        raise SettingError(
            "avail_mem_before_load_bytes",
            f"{before:,} bytes is more than the GPU's {total_bytes:,} bytes",
        )
    after = settings.avail_mem_after_load_bytes
    if after is None:
        after = before - weights - load_overhead_bytes(tp, pp)
    elif after > before:
        raise SettingError(
            "avail_mem_after_load_bytes",
            f"{after:,} bytes is more than the memory free before loading ({before:,} bytes)",
        )
    else:
        band = 0 if settings.avail_mem_before_load_bytes is not None else band
    return Readings(before, after, weights, total_bytes - after - weights, band)


@dataclass(frozen=True)
class GpuDefaults:
    """chunked_prefill_size (tokens) and cuda_graph_max_bs (requests) on one GPU tier."""

    chunked_prefill_tokens: int
    cuda_graph_max_bs: int


def gpu_defaults(gpu_mib: float | None, tp: int) -> GpuDefaults:
    """server_args.py ≥ 0.5.3 `_handle_gpu_memory_settings` tiers (CUDA GPUs)."""
    if gpu_mib is None:
        return GpuDefaults(4096, 160)
    small_tp = tp < 4
    if gpu_mib < 20 * 1024:  # T4, RTX 4080
        return GpuDefaults(2048, 8)
    if gpu_mib < 35 * 1024:  # A10, RTX 4090/5090
        return GpuDefaults(2048, 24 if small_tp else 80)
    if gpu_mib < 60 * 1024:  # A100 40GB, L40S
        return GpuDefaults(4096, 32 if small_tp else 160)
    if gpu_mib < 160 * 1024:  # H100, A100 80GB, H20, H200
        return GpuDefaults(8192, 256 if small_tp else 512)
    return GpuDefaults(16384, 512)  # B200, MI300X


def mem_fraction_static(
    release: Release, sku: SkuSpec | None, tp: int, pp: int, dp_attention_ranks: int
) -> float:
    """SGLang's default mem_fraction_static for `release` on `sku`.

    `tp` is SGLang's --tp (with DP attention: every GPU of the replica set), and
    `dp_attention_ranks` its --dp when --enable-dp-attention is on, else 0.
    """
    parallel = tp * pp
    gpu_mib = sku.memory_bytes / MIB if sku is not None else None
    if release < (0, 4, 8) or gpu_mib is None:
        return _by_tp(release, parallel)
    if release < (0, 5, 3):
        return _by_tier_gib(gpu_mib, parallel, dp_attention_ranks > 0)
    defaults = gpu_defaults(gpu_mib, tp)
    reserved = 512 + max(defaults.chunked_prefill_tokens, 2048) * 1.5
    reserved += defaults.cuda_graph_max_bs * 2 + parallel / 8 * 1024
    if dp_attention_ranks:
        reserved += defaults.cuda_graph_max_bs * dp_attention_ranks * 3
        if defaults.cuda_graph_max_bs > 300:
            reserved += defaults.cuda_graph_max_bs * dp_attention_ranks * 1.5
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mib - reserved) / gpu_mib, 3)


def _by_tp(release: Release, parallel: int) -> float:
    """≤ 0.4.7: by TP size (0.3.5 lowered TP ≥ 8 from 0.83 to 0.81)."""
    eight = 0.81 if release >= (0, 3, 5) else 0.83
    for threshold, fraction in ((16, 0.79), (8, eight), (4, 0.85), (2, 0.87)):
        if parallel >= threshold:
            return fraction
    return 0.88


def _by_tier_gib(gpu_mib: float, parallel: int, dp_attention: bool) -> float:
    """0.4.8 – 0.5.2 (PR #7054): a reserve in GiB by memory tier, +4 GiB with DP attention."""
    if gpu_mib < 35 * 1024:
        reserved_gib = 2.8 + parallel / 10
    elif gpu_mib < 90 * 1024:
        reserved_gib = 9.5 + parallel / 2
    elif gpu_mib < 160 * 1024:
        reserved_gib = 12 + parallel / 2
    else:
        reserved_gib = 32
    if dp_attention:
        reserved_gib += 4
    return round((gpu_mib - reserved_gib * 1024) / gpu_mib, 3)


def max_running_requests(pool_tokens: int, context_tokens: int) -> int:
    """Scheduler default (model_runner): min(max(int(tokens / context · 512), 2048), 4096)."""
    return min(max(int(pool_tokens / context_tokens * 512), 2048), 4096)


def req_to_token_bytes(max_running_requests: int, context_tokens: int) -> int:
    """The request-to-token map allocated before the KV pool (memory_pool.py ReqToTokenPool):
    (requests + 1) rows of context_len + 4 int32 slots."""
    return (max_running_requests + 1) * (context_tokens + 4) * 4
