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
# at TP > 1, the communicators' buffers are gone by then. PR #11716's H200 TP 8 run prints
# "Init torch distributed ends. mem usage=1.96 GB" and a lowest "Load weight begin. avail
# mem=137.29 GB" against the H200's 139.57 GiB runtime total: 0.32 GiB context.
CUDA_CONTEXT_BYTES = int(0.32 * GIB)
INIT_BAND_BYTES = int(0.25 * GIB)  # ranks of that log differ by 0.23 GiB
# What init takes depends on the links between the GPUs. SGLang turns NCCL's NVLink SHARP
# off (entrypoints/engine.py `_set_envs_and_config`: NCCL_NVLS_ENABLE = --enable-nccl-nvls,
# default off) and builds its custom all-reduce (24 MiB of IPC buffers) only on fully
# NVLinked GPUs or two GPUs (distributed/device_communicators/custom_all_reduce.py, "not
# supported on more than two PCIe-only GPUs"); NCCL's own channel buffers grow with the
# channels a topology gets, many over an NVLink switch, few over PCIe. Two public logs:
# fully NVLinked (H200 TP 8, PR #11716): 1.96 GB; PCIe only (TP ≥ 3, sglang issue #7212,
# "Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs"
# then "Init torch distributed ends. mem usage=0.19 GB"): 0.19 GB.
NCCL_INIT_BYTES_NVLINK = int(1.96 * GIB)
NCCL_INIT_BYTES_PCIE = int(0.19 * GIB)


def fully_linked(sku: SkuSpec | None) -> bool:
    """Whether every GPU of a board reaches every other over NVLink (an NVSwitch board or a
    fully connected xGMI platform), not PCIe or NVLink bridges between pairs."""
    link = (sku.interconnect or "") if sku is not None else "NVLink"
    if "bridge" in link:
        return False
    return link.startswith("NVLink") or "fully connected" in link


def init_bytes(tp: int, pp: int, sku: SkuSpec | None = None) -> int:
    """Memory gone before weights load (CUDA context; the communicators at TP × PP > 1, by
    the GPUs' links), in bytes."""
    if tp * pp == 1:
        return CUDA_CONTEXT_BYTES
    nccl = NCCL_INIT_BYTES_NVLINK if fully_linked(sku) else NCCL_INIT_BYTES_PCIE
    return CUDA_CONTEXT_BYTES + nccl


def load_overhead_bytes(tp: int, pp: int) -> int:
    """Memory the weight loader keeps beyond the weights' own bytes, in bytes: none counted
    (no public log states it apart from the weights)."""
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
    given: ReadingSettings,
    total_bytes: int,
    weights_bytes: int,
    tp: int,
    pp: int,
    sku: SkuSpec | None = None,
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
            init, band = init_bytes(tp, pp, sku), INIT_BAND_BYTES
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


# Multimodal checkpoints (an hf vision_config): SGLang lowers the fraction for the image encoder.
# Through 0.4.6 model_runner.py `ModelRunner.__init__` multiplies whatever fraction it gets,
# default or --mem-fraction-static, by 0.95 ("Automatically reduce --mem-fraction-static ...
# because this is a multimodal model"); PR #4826's Gemma-3-4B log on an H200 shows it:
# 139.21 GB before loading, 131.08 GB after, 834,615 tokens of 139,264 B = 108.25 GiB of rest
# = 131.08 − 139.21 · (1 − 0.88 · 0.95). From 0.4.7 (PR #6881, June 2025) server_args.py
# `adjust_mem_fraction_for_vlm` scales only the default, by 0.95 times a factor from the ViT's
# size against ViT-L/14 (24 layers × 1024²): 1 − 0.1 · (ratio − 1), clamped to [0.8, 1.05].
VLM_BASE_FACTOR = 0.95
VLM_FACTOR_BY_VIT_FROM = (0, 4, 7)
BASELINE_VIT_LAYERS, BASELINE_VIT_HIDDEN = 24, 1024


def scales_given_fraction(release: Release) -> bool:
    """Whether SGLang lowers a --mem-fraction-static the user gave for a multimodal model
    (model_runner.py through 0.4.6), not only its own default."""
    return release < VLM_FACTOR_BY_VIT_FROM


def vlm_fraction_factor(release: Release, vit: tuple[int, int] | None) -> float:
    """The factor SGLang applies to mem_fraction_static for a multimodal model whose vision
    encoder has `vit` = (layers, hidden size); None: geometry not read, ViT-L/14 taken."""
    if release < VLM_FACTOR_BY_VIT_FROM:
        return VLM_BASE_FACTOR
    layers, hidden = vit or (BASELINE_VIT_LAYERS, BASELINE_VIT_HIDDEN)
    ratio = layers * hidden**2 / (BASELINE_VIT_LAYERS * BASELINE_VIT_HIDDEN**2)
    return VLM_BASE_FACTOR * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


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
