"""The TensorRT-LLM profile: blocks from a fraction of the memory free after the engine loads.

Read from NVIDIA/TensorRT-LLM:

- TensorRT-engine path (C++ executor, Triton `tensorrtllm_backend`, < 1.0):
  `cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp` `calculateMaxNumBlocks`:
  max_tokens = int(free_gpu_memory_fraction · free / bytes_per_token), free measured after the
  engine, its execution context, runtime buffers and decoder are allocated;
  `min(max_tokens, kv_cache_config.max_tokens)`; blocks = ⌈max_tokens / tokens_per_block⌉ (the
  pool can exceed the fraction by less than a block).
- PyTorch backend (`trtllm-serve`, ≥ 1.0): `_torch/pyexecutor/_util.py` `KvCacheCreator` runs a
  dummy batch, takes its peak (weights + activations + NCCL/CUDA graphs), and gives the KV
  cache fraction · (total − peak): the same shape, with 32 tokens per block
  (`llm_args.py` KvCacheConfig.tokens_per_block).

bytes_per_token = kv_factor (2; 1 for MLA) · Σ layers of this pipeline rank · KV heads per TP
rank · head size · element bytes (`calculateCacheSizePerToken`): kvmath's caches. Windowed
layers keep the full attention window (max_attention_window) here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from kvplan.engine.base import EngineProfile, Scheduler, model_reference
from kvplan.engine.budget import Budget, device_memory, fraction_of_free
from kvplan.engine.pages import TokenPages
from kvplan.engine.pool import UNLIMITED_REQUESTS, KvLayout, KvPool, StageLayout
from kvplan.engine.release import Release, parse_release
from kvplan.engine.resolved import resolve
from kvplan.errors import SettingError
from kvplan.kvmath import ceil_div
from kvplan.units import GIB, MIB

if TYPE_CHECKING:
    from kvplan.engine.deployment import Deployment
    from kvplan.specs import SkuSpec

OLDEST, NEWEST = (0, 5, 0), (1, 9, 99)
DEFAULT_RELEASE_TEXT = "1.0.0"
# KvCacheConfig.dtype: auto (the model's dtype), fp8 and nvfp4 (E2M1 with one fp8 scale per
# 16 values; a ModelOpt checkpoint) (nvidia.github.io/TensorRT-LLM/features/quantization.html
# "FP8 KV Cache", "NVFP4 KV Cache"). Not offered: the TensorRT path's int8 KV cache, which has
# per-tensor scales where kvplan's int8 counts one fp32 scale per token per head.
KV_DTYPES = ("fp32", "bf16", "fp16", "fp8_e4m3", "nvfp4")
# One public log states every term (docs/source/reference/memory.md, a 7B FP8 engine on an
# H100, max_num_tokens 8192): execution context (activations) 1134.01 MiB; runtime buffers
# 43.29 MB + decoder 180.30 MB + 776 MiB the log leaves to CUDA context and cuBLAS
# (total 79.10 − engine 6695 MiB − the rest − available 70.48 GiB). Activations are scaled by
# max_num_tokens · hidden_size from there; both are estimates with a ±1 GiB band.
ACTIVATION_BYTES_PER_TOKEN_HIDDEN = 1134.01 * MIB / (8192 * 4096)
NON_TORCH_BYTES = int((43.29 + 180.30 + 776) * MIB)
ESTIMATE_BAND_BYTES = GIB
MAX_NUM_TOKENS = 8192  # trtllm-build --max_num_tokens and LLM API default


def release_of(deployment: Deployment) -> Release:
    """The TensorRT-LLM release whose rules apply, parsed once (kvplan.engine.resolved)."""
    return resolve(deployment).release  # type: ignore[no-any-return]


def parse_trtllm_release(deployment: Deployment) -> Release:
    """The version setting parsed, else the default release."""
    return parse_release(
        deployment.settings.version or DEFAULT_RELEASE_TEXT, "TensorRT-LLM", OLDEST, NEWEST
    )


def default_utilization(release: Release) -> float:
    """kv_cache_free_gpu_mem_fraction default: 0.85 in the first batch manager (≈ 0.5 – 0.6,
    docs/source/memory.md "85%"), 0.9 from ≈ 0.7 (executor.h kDefaultGpuMemFraction)."""
    return 0.85 if release < (0, 7, 0) else 0.9


def default_tokens_per_block(release: Release) -> int:
    """trtllm-build --tokens_per_block 64 (< 1.0); PyTorch backend KvCacheConfig 32."""
    return 32 if release >= (1, 0, 0) else 64


def logged_available(available_bytes: int, total_bytes: int) -> int:
    """The logged "available" memory, checked against the device's total.

    Raises:
        SettingError: more available than the device has.
    """
    if available_bytes > total_bytes:
        raise SettingError(
            "available_memory_bytes",
            f"{available_bytes:,} bytes is more than the GPU's {total_bytes:,} bytes",
        )
    return available_bytes


@dataclass(frozen=True)
class TrtLayout(KvLayout):
    """Blocks of every layer, with the release whose log wording applies and the token cap."""

    release: Release
    max_tokens: int | None  # KvCacheConfig.max_tokens; None: no cap


@lru_cache(maxsize=4096)
def _layout(deployment: Deployment, tokens_per_block: int) -> TrtLayout:
    caches = deployment.exact_caches(full_reservation=True)
    stages = []
    per_token = 0
    for layers in deployment.stage_ranges():
        token_bytes = sum(caches[i].token_bytes for i in layers)
        per_token = max(per_token, token_bytes)
        stages.append(
            StageLayout(max(token_bytes * tokens_per_block, 1), (TokenPages(tokens_per_block),))
        )
    return TrtLayout(
        tuple(stages),
        tokens_per_block,
        per_token,
        release_of(deployment),
        deployment.settings.max_kv_tokens,
    )


class TrtllmProfile(EngineProfile[TrtLayout]):
    name = "trtllm"
    summary = (
        "blocks of 64 tokens (32 on the PyTorch backend) from free_gpu_memory_fraction (0.9) "
        "of the memory free after the engine loads"
    )
    default_utilization_text = "0.9 of free memory (0.85 before 0.7)"
    kv_dtypes = KV_DTYPES
    kv_dtype_setting = "KvCacheConfig.dtype"

    def parsed_release(self, deployment: Deployment) -> Release:
        return parse_trtllm_release(deployment)

    token_cap_setting = "kv_cache_config.max_tokens"

    def check(self, deployment: Deployment) -> None:
        release_of(deployment)
        super().check(deployment)

    def decode_kv_reads(self, deployment: Deployment) -> int:
        """Before 0.8 the masked-MHA decode kernel runs each query head on its own, so a GQA
        group's KV head is read once per query head. 0.8 brought the XQA kernel, which reads it
        once for the group (TensorRT-LLM blog "New XQA-kernel provides 2.4x more Llama-70B
        throughput within the same latency budget": 1,227 -> 2,941 tok/s/GPU, H200, v0.8a)."""
        if release_of(deployment) >= (0, 8, 0):
            return 1
        attention, tp = deployment.model.attention, deployment.tp
        kv_heads = max(-(-attention.num_kv_heads // tp), 1)
        return max(-(-attention.num_heads // tp) // kv_heads, 1)

    def scheduler(
        self, deployment: Deployment, sku: SkuSpec | None, max_model_len: int | None = None
    ) -> Scheduler:
        settings = deployment.settings
        return Scheduler(
            settings.max_num_batched_tokens or MAX_NUM_TOKENS,
            settings.max_num_seqs or UNLIMITED_REQUESTS,
        )

    def layout(self, deployment: Deployment, sku: SkuSpec | None) -> TrtLayout:
        tokens = deployment.settings.tokens_per_block
        return _layout(deployment, tokens or default_tokens_per_block(release_of(deployment)))

    def budget(
        self, deployment: Deployment, sku: SkuSpec, max_model_len: int | None = None
    ) -> Budget:
        """utilization · (total − weights − activations − runtime buffers and context), or of
        the "available" memory the log states (then the terms are what it leaves out)."""
        settings = deployment.settings
        total, basis = device_memory(sku, settings.total_gpu_memory_bytes)
        tokens = resolve(deployment, sku).scheduler().max_num_batched_tokens
        activation = settings.activation_bytes
        if activation is None:
            hidden = deployment.model.hidden_size
            activation = int(ACTIVATION_BYTES_PER_TOKEN_HIDDEN * tokens * hidden)
        non_torch = (
            NON_TORCH_BYTES if settings.non_torch_bytes is None else settings.non_torch_bytes
        )
        weights = deployment.weights().per_gpu_bytes
        utilization = settings.utilization or default_utilization(release_of(deployment))
        free = total - weights - activation - non_torch
        band = ESTIMATE_BAND_BYTES if settings.activation_bytes is None else 0
        if settings.available_memory_bytes is not None:
            free, band = logged_available(settings.available_memory_bytes, total), 0
            outside = total - free - weights  # engine context, runtime buffers, activations
            activation = min(activation, max(outside, 0))
            non_torch = outside - activation
        return fraction_of_free(
            total_bytes=total,
            total_basis=basis,
            utilization=utilization,
            weights_bytes=weights,
            free_bytes=free,
            settings=settings,
            activation_bytes=activation,
            non_torch_bytes=non_torch,
            uncertainty_bytes=int(band * utilization),
        )

    def pool(self, layout: TrtLayout, budget: Budget) -> KvPool[TrtLayout]:
        """⌈min(int(kv / bytes_per_token), max_tokens) / tokens_per_block⌉ blocks, the least
        over pipeline ranks."""
        if budget.kv_bytes <= 0:
            return KvPool(layout, 0)
        blocks = UNLIMITED_REQUESTS
        cap = layout.max_tokens
        for stage in layout.stages:
            per_token = stage.bytes_per_block // layout.tokens_per_block
            tokens = budget.kv_bytes // per_token if per_token else UNLIMITED_REQUESTS
            if cap is not None:
                tokens = min(tokens, cap)
            blocks = min(blocks, ceil_div(tokens, layout.tokens_per_block))
        return KvPool(layout, blocks)

    def capacity_tokens(self, pool: KvPool[TrtLayout], max_model_len: int) -> int:
        """Tokens of the primary pool: blocks × tokens per block."""
        return pool.block_capacity_tokens

    def log_lines(
        self,
        budget: Budget,
        pool: KvPool[TrtLayout],
        max_model_len: int,
        sku: SkuSpec | None = None,
    ) -> list[str]:
        return startup_lines(budget, pool, max_model_len)

    def startup_figures(
        self, budget: Budget, pool: KvPool, max_model_len: int, sku: SkuSpec | None = None
    ) -> dict[str, Any]:
        return startup_record(budget, pool, max_model_len)

    def notes(self, deployment: Deployment, sku: SkuSpec | None) -> list[str]:
        notes = super().notes(deployment, sku)
        if deployment.model.has_windowed_layers:
            notes.append(
                "TensorRT-LLM sizes every layer for the full attention window here (variable "
                "windows per layer are not modelled): an upper bound for windowed models"
            )
        if sku is not None and deployment.settings.kv_memory_bytes is None:
            notes.append(
                "activations (scaled from 1.11 GiB at 8192 tokens × hidden 4096) and runtime "
                "buffers + CUDA context (0.98 GiB) are estimates from TensorRT-LLM's memory.md "
                "log; `activation_bytes` and `non_torch_bytes` set them"
            )
        return notes

    def launch_command(
        self, deployment: Deployment, sku: SkuSpec | None, context_tokens: int
    ) -> str:
        """`trtllm-serve` (≥ 1.0) or `trtllm-build` (TensorRT engines) with this plan's flags."""
        settings, release = deployment.settings, release_of(deployment)
        utilization = settings.utilization or default_utilization(release)
        config = {}
        if settings.tokens_per_block:
            config["tokens_per_block"] = settings.tokens_per_block
        if deployment.kv_dtype in ("fp8_e4m3", "nvfp4"):
            config["dtype"] = "fp8" if deployment.kv_dtype == "fp8_e4m3" else "nvfp4"
        if settings.max_kv_tokens:
            config["max_tokens"] = settings.max_kv_tokens
        parallel = f"--tp_size {deployment.tp} --pp_size {deployment.pp}"
        if deployment.ep:
            parallel += f" --ep_size {deployment.tp}"
        limits = ""
        if settings.max_num_batched_tokens:
            limits += f" --max_num_tokens {settings.max_num_batched_tokens}"
        if settings.max_num_seqs:
            limits += f" --max_batch_size {settings.max_num_seqs}"
        if release >= (1, 0, 0):
            command = (
                f"trtllm-serve {model_reference(deployment.model)} {parallel} "
                f"--max_seq_len {context_tokens} "
                f"--kv_cache_free_gpu_memory_fraction {utilization:g}" + limits
            )
            options = []
            if config:
                options.append(
                    "kv_cache_config: {" + ", ".join(f"{k}: {v}" for k, v in config.items()) + "}"
                )
            if settings.cuda_graphs is False:  # TorchLlmArgs: None turns CUDA graphs off
                options.append("cuda_graph_config: null")
            if options:
                command += f" --extra_llm_api_options kv.yaml  # kv.yaml: {'; '.join(options)}"
            return command
        tokens = settings.tokens_per_block or default_tokens_per_block(release)
        return (
            f"trtllm-build --checkpoint_dir CHECKPOINT --output_dir ENGINE {parallel} "
            f"--max_seq_len {context_tokens} --tokens_per_block {tokens}{limits}  "
            f"# then kv_cache_free_gpu_mem_fraction={utilization:g} in the executor or Triton "
            "config"
        )


# --- startup log -------------------------------------------------------------------------

PREFIX = "[TensorRT-LLM][INFO] "
# The warning when max_seq_len is cut to what the pool holds (`max_sequence_len`).
_CUT = (
    "maxAttentionWindow and maxSequenceLen are too large for at least one sequence to fit in "
    "kvCache."
)


def max_sequence_len(pool: KvPool[TrtLayout], max_model_len: int) -> int:
    """max_seq_len after TensorRT-LLM fits one sequence in the pool: `max_model_len`, or the
    pool's tokens when one sequence of that length would not fit.

    Read from NVIDIA/TensorRT-LLM: the PyTorch backend's KVCacheManager
    (`_torch/pyexecutor/resource_manager.py` `get_max_atten_window_upper_bound`: blocks ×
    tokens per block, less the sink bubble; beam 1, no sink tokens here) and the C++ executor's
    `trtGptModelInflightBatching.cpp` with `KVCacheManager::getMaxAttentionWindowUpperBound`,
    which then warn "maxAttentionWindow and maxSequenceLen are too large for at least one
    sequence to fit in kvCache" and set both to that bound. (Later C++ builds credit the
    output tokens' last partial block through `calculateMaxAttentionWindow`, which needs
    max_input_len; kvplan takes the shared bound.)
    """
    bound = pool.num_blocks * pool.layout.tokens_per_block
    return min(max_model_len, bound) if bound > 0 else max_model_len


def startup_record(budget: Budget, pool: KvPool[TrtLayout], max_model_len: int) -> dict[str, Any]:
    """The numbers of TensorRT-LLM's KV cache lines, exact: blocks, tokens per block, the
    tokens and bytes of the primary pool, blocks per sequence; 0.5's token count before the
    rounding to blocks; the memory the fraction applies to when it is taken from free memory."""
    layout = pool.layout
    if budget.kv_bytes <= 0:
        return {}
    tokens = pool.block_capacity_tokens
    unrounded_tokens = budget.kv_bytes // layout.kv_bytes_per_token
    if layout.max_tokens is not None:
        unrounded_tokens = min(unrounded_tokens, layout.max_tokens)
    window = max_sequence_len(pool, max_model_len)
    record: dict[str, Any] = {
        "primary_blocks": pool.num_blocks,
        "secondary_blocks": 0,
        "tokens_per_block": layout.tokens_per_block,
        "max_tokens": tokens,
        "max_tokens_before_block_rounding": unrounded_tokens,
        "allocated_bytes": tokens * layout.kv_bytes_per_token,
        "max_blocks_per_sequence": ceil_div(window, layout.tokens_per_block),
        "max_model_len": max_model_len,
        "max_seq_len": window,
    }
    if not budget.fixed and budget.fraction_of_bytes is not None:
        record |= {"total_bytes": budget.total_bytes, "available_bytes": budget.fraction_of_bytes}
    return record


def startup_lines(budget: Budget, pool: KvPool[TrtLayout], max_model_len: int) -> list[str]:
    """The KV cache lines TensorRT-LLM prints, in that release's wording."""
    layout = pool.layout
    if budget.kv_bytes <= 0:
        return []
    record = startup_record(budget, pool, max_model_len)
    tpb, blocks, tokens = layout.tokens_per_block, pool.num_blocks, record["max_tokens"]
    pool_bytes = record["allocated_bytes"]
    release = layout.release
    if release < (0, 8, 0):  # 0.5.0 logged max_tokens before rounding to blocks
        return [
            f"{PREFIX}Using {record['max_tokens_before_block_rounding']} tokens in paged KV cache."
        ]
    if release < (0, 9, 0):
        return [
            f"{PREFIX}Allocate {pool_bytes} bytes for k/v cache.",
            f"{PREFIX}Using {tokens} tokens in paged KV cache.",
        ]
    allocated = (
        f"{PREFIX}[MemUsageChange] Allocated {pool_bytes / GIB:.2f} GiB for max tokens in paged "
        f"KV cache ({tokens})."
    )
    per_sequence, window = record["max_blocks_per_sequence"], record["max_seq_len"]
    cut = window < max_model_len
    if release >= (1, 0, 0):
        return [
            *([f"[TRT-LLM] [W] {_CUT} They are reduced to {window}"] if cut else []),
            f"{PREFIX}Max KV cache blocks per sequence: {per_sequence} "
            f"[window size={window}], tokens per block={tpb}, primary blocks={blocks}, "
            "secondary blocks=0",
            f"{PREFIX}Number of tokens per block: {tpb}.",
            allocated,
        ]
    lines = []
    if not budget.fixed and budget.fraction_of_bytes is not None:
        lines.append(
            f"{PREFIX}Memory usage when calculating max tokens in paged kv cache: total: "
            f"{budget.total_bytes / GIB:.2f} GiB, available: "
            f"{budget.fraction_of_bytes / GIB:.2f} GiB"
        )
    return [
        *lines,
        f"{PREFIX}Number of blocks in KV cache primary pool: {blocks}",
        f"{PREFIX}Number of blocks in KV cache secondary pool: 0, onboard blocks to primary "
        "memory before reuse: true",
        *([f"[TensorRT-LLM][WARNING] {_CUT} they are reduced to {window}"] if cut else []),
        f"{PREFIX}Max KV cache pages per sequence: {per_sequence}",
        f"{PREFIX}Number of tokens per block: {tpb}.",
        allocated,
    ]


TRTLLM = TrtllmProfile()
