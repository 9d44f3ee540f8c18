"""The vLLM profile: paged blocks per KV cache group, vLLM's budget, and its startup log lines.

Version-specific rules live in `vllm_version`, pages and groups in `vllm_pages`, the memory
terms in `vllm_memory`; this module puts them together behind `EngineProfile`.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from kvplan.engine import sparse_mla, vllm_memory
from kvplan.engine.base import EngineProfile, Scheduler, model_reference
from kvplan.engine.budget import Budget, device_memory, subtract_terms
from kvplan.engine.choices import SearchChoices, released_in_16_bit
from kvplan.engine.pool import KvLayout, KvPool
from kvplan.engine.resolved import resolve
from kvplan.engine.settings import EngineSettings
from kvplan.engine.vllm_free import FREE_AT_START, free_memory_refusal
from kvplan.engine.vllm_mla import fp8_mla_refusal, pre_mla_caches
from kvplan.engine.vllm_pages import (
    PageSpec,
    VllmStage,
    estimated_max_model_len,
    page_specs,
    stage_layout,
)
from kvplan.engine.vllm_version import DEFAULT_VERSION, VllmVersion, parse_version
from kvplan.errors import KvplanError, SettingError
from kvplan.kvmath import LayerCache
from kvplan.units import GIB

if TYPE_CHECKING:
    from kvplan.engine.deployment import Deployment
    from kvplan.specs import ModelSpec, RopeScalingSpec, SkuSpec

# platforms/cuda.py (0.11): 16 tokens per block; MLA backends need their own page size:
# FlashMLA (the default on Hopper, compute capability 9.0) 64, CUTLASS MLA (Blackwell
# SM100) 128; other GPUs run Triton MLA with the default 16.
BLOCK_TOKENS = 16
MLA_BLOCK_TOKENS_BY_CAPABILITY = {"9.0": 64, "10.0": 128, "10.3": 128}
MLA_BLOCK_TOKENS_UNKNOWN_GPU = 64


# Block sizes a search tries for plain attention: vLLM's FlashAttention backend needs a
# multiple of 16 (v1/attention/backends/flash_attn.py: "Block size must be a multiple of
# 16") and CacheConfig allows at most 32 on CUDA ("On CUDA devices, only block sizes up to 32
# are supported"). MLA backends and attention + Mamba hybrids keep the size vLLM picks.
SEARCHED_BLOCK_TOKENS = (16, 32)
# gpu_memory_utilization values a search tries above the version's default. vLLM leaves
# 1 − utilization of the GPU for what it allocates outside its budget: CUDA graphs before 0.20
# ("CUDA graphs can take additional 1~3 GiB memory per GPU", V0's capture log, vllm#7593),
# NCCL buffers, other processes. Close to 1 that share no longer holds them: capture runs out
# of memory at 0.98 (vllm#57475, vllm#19186). kvplan stops at 0.95: 4 GiB of an 80 GiB GPU.
SEARCHED_UTILIZATIONS = (0.92, 0.95)
# --kv-cache-dtype choices (config/cache.py CacheDType; docs.vllm.ai/en/v0.9.0/api/vllm/
# config.html: auto, fp8, fp8_e4m3, fp8_e5m2, as in 0.5.3's engine_args; 0.10 adds fp8_inc
# (Gaudi), 0.11 bfloat16 and fp8_ds_mla). "auto" stores the model's dtype (--dtype: fp32,
# bf16 or fp16), "fp8" is E4M3 on CUDA. int8_per_token_head (int8 plus one fp32 scale per
# token per head: kvplan's int8) came with vllm#38378 and is in 0.26's Triton backend
# (docs.vllm.ai/en/v0.26.0/api/vllm/v1/attention/backends/triton_attn/); kvplan takes it from
# 0.26. Not offered: int4_per_token_head (a per-row scale, not kvplan's group-64 int4), nvfp4
# (listed on main, commit 002f10e0, in no release kvplan has read) and mxfp4 (none).
KV_DTYPES = ("fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2")
INT8_PER_TOKEN_HEAD_FROM = (0, 26)
# --kv-cache-dtype for kvplan's KV dtypes. Sparse MLA (DeepSeek-V3.2) is the exception: its
# "auto" is fp8 (fp8_ds_mla), and 16 bits must be asked for as "bfloat16".
KV_CACHE_DTYPE_FLAGS = {
    "bf16": "auto",
    "fp16": "auto",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8_e5m2",
    "int8": "int8_per_token_head",
}
SPARSE_MLA_KV_CACHE_DTYPE_FLAGS = {"bf16": "bfloat16", "fp8_e4m3": "auto"}
# Layer kinds whose block size a search may set: plain attention. MLA backends have their
# own page, and attention + Mamba hybrids let vLLM size the attention block to the state.
SEARCHED_BLOCK_KINDS = frozenset({"full", "sliding", "chunked", "cross", "shared", "mlp"})


def version_of(deployment: Deployment) -> VllmVersion:
    """The vLLM version whose rules apply (the setting, else kvplan's default), parsed once
    per deployment (kvplan.engine.resolved)."""
    return resolve(deployment).release  # type: ignore[no-any-return]


def block_tokens(deployment: Deployment, sku: SkuSpec | None) -> int:
    """Tokens per block: --block-size, else 16, or the MLA backend's page on this GPU."""
    if deployment.settings.tokens_per_block:
        return deployment.settings.tokens_per_block
    if deployment.model.mla is None or not version_of(deployment).stores_mla_latent:
        return BLOCK_TOKENS
    if sku is None or sku.compute_capability is None:
        return MLA_BLOCK_TOKENS_UNKNOWN_GPU
    return MLA_BLOCK_TOKENS_BY_CAPABILITY.get(sku.compute_capability, BLOCK_TOKENS)


def uses_hybrid_allocator(deployment: Deployment) -> bool:
    """Whether windowed layers keep only their window (the hybrid KV-cache manager).

    Off when the user says so (--disable-hybrid-kv-cache-manager), in V0 (no hybrid
    manager), and for chunked local attention before its env default flipped (0.11
    config/__init__.py turns it off unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1).
    """
    if deployment.settings.hybrid_allocator is not None:
        return deployment.settings.hybrid_allocator
    version = version_of(deployment)
    if version.era == "v0":
        return False
    return (
        "chunked" not in deployment.model.layer_kinds or version.chunked_local_keeps_hybrid_manager
    )


@dataclass(frozen=True)
class VllmLayout(KvLayout):
    """vLLM's grouped stages, and the version whose rules and log wording they follow."""

    stages: tuple[VllmStage, ...]
    version: VllmVersion


class VllmProfile(EngineProfile[VllmLayout]):
    name = "vllm"
    summary = (
        "paged blocks per KV cache group (16 tokens; MLA 64 on Hopper, 128 on Blackwell), "
        "window-aware, one state block per request; budget from vLLM's memory profile"
    )
    default_utilization_text = "0.9 (0.92 from vLLM 0.20)"
    kv_dtypes = KV_DTYPES
    kv_dtype_setting = "--kv-cache-dtype"

    def accepted_kv_dtypes(self, deployment: Deployment | None = None) -> tuple[str, ...]:
        """auto (the model's dtype), fp8 E4M3 and E5M2; int8 per token-head from 0.26."""
        if deployment is None or version_of(deployment).major_minor >= INT8_PER_TOKEN_HEAD_FROM:
            return (*KV_DTYPES, "int8")
        return KV_DTYPES

    def version_label(self, deployment: Deployment) -> str:
        return f" {version_of(deployment).text}"

    def check(self, deployment: Deployment) -> None:
        version_of(deployment)  # a bad --vllm-version fails here, before anything is sized
        super().check(deployment)

    def stored_caches(
        self, deployment: Deployment, full_reservation: bool = False
    ) -> tuple[LayerCache, ...]:
        """The physics caches, with sparse MLA's fp8 latent in vLLM's fp8_ds_mla layout, and
        MLA layers as plain attention before vLLM stored the latent (`pre_mla_caches`)."""
        caches = deployment.exact_caches(full_reservation)
        if deployment.model.mla is not None and not version_of(deployment).stores_mla_latent:
            resolved = resolve(deployment)
            return pre_mla_caches(
                caches, deployment.model, deployment.tp, resolved.release, resolved.k_dtype
            )
        return sparse_mla.stored_caches(caches, resolve(deployment).k_dtype)

    def tp_refusal(self, model: ModelSpec, tp: int) -> str | None:
        """Why vLLM refuses `tp` for `model` (config/model.py, QKVParallelLinear), or None;
        the refusal lists the degrees up to 64 that vLLM accepts."""
        reason = _tp_rule(model, tp)
        if reason is None:
            return None
        accepted = ", ".join(str(t) for t in range(1, 65) if _tp_rule(model, t) is None)
        return f"vLLM refuses tp {tp} for {model.name}: {reason}; use one of {accepted}"

    def scheduler_reads_length(self, deployment: Deployment) -> bool:
        """Only V0 sizes its step by the model length (it batches whole prompts)."""
        return version_of(deployment).era == "v0"

    def parsed_release(self, deployment: Deployment) -> VllmVersion:
        """The version setting parsed (kvplan.engine.resolved keeps it): else 0.11."""
        text = deployment.settings.version
        return parse_version(text) if text else DEFAULT_VERSION

    def scheduler(
        self, deployment: Deployment, sku: SkuSpec | None, max_model_len: int | None = None
    ) -> Scheduler:
        defaults = vllm_memory.scheduler_defaults(sku, version_of(deployment), max_model_len)
        settings = deployment.settings
        return Scheduler(
            settings.max_num_batched_tokens or defaults.max_num_batched_tokens,
            settings.max_num_seqs or defaults.max_num_seqs,
        )

    def layout(self, deployment: Deployment, sku: SkuSpec | None) -> VllmLayout:
        return _layout(
            _layout_key(deployment),
            block_tokens(deployment, sku),
            resolve(deployment, sku).scheduler().max_num_batched_tokens,
        )

    def budget(
        self, deployment: Deployment, sku: SkuSpec, max_model_len: int | None = None
    ) -> Budget:
        """vLLM's "Available KV cache memory" on one rank (the V0 profile depends on the
        length: it batches whole prompts)."""
        version = version_of(deployment)
        refusal = fp8_mla_refusal(deployment.model, version, resolve(deployment).k_dtype, sku)
        if refusal:
            raise KvplanError(f"--kv-dtype: {refusal}")
        total, basis = device_memory(sku, deployment.settings.total_gpu_memory_bytes)
        scheduler = resolve(deployment, sku).scheduler(max_model_len)
        across_nodes = vllm_memory.spans_nodes(deployment, sku)
        utilization = deployment.settings.utilization or version.default_utilization
        free = deployment.settings.free_memory_at_start_bytes
        refusal = free_memory_refusal(free, total, utilization, version)
        if refusal:
            raise SettingError(FREE_AT_START, refusal)
        weights = vllm_memory.weights_bytes(deployment, sku, version)
        return subtract_terms(
            total_bytes=total,
            total_basis=basis,
            utilization=utilization,
            weights_bytes=weights,
            settings=deployment.settings,
            estimate=lambda: _reserve_terms(deployment, scheduler, across_nodes),
        )

    def search_choices(self, model: ModelSpec, sku: SkuSpec) -> SearchChoices:
        choices = super().search_choices(model, sku)
        if model.mla is None and set(model.layer_kinds) <= SEARCHED_BLOCK_KINDS:
            return replace(choices, tokens_per_block=SEARCHED_BLOCK_TOKENS)
        return choices

    def utilizations(self, deployment: Deployment, sku: SkuSpec) -> tuple[float | None, ...]:
        """The version's default, then 0.92 and 0.95 where the rest of the GPU holds the CUDA
        graphs that versions before 0.20 capture outside the budget."""
        version = version_of(deployment)
        total, _ = device_memory(sku, deployment.settings.total_gpu_memory_bytes)
        outside = 0
        if not version.subtracts_cudagraph_estimate:
            outside = vllm_memory.cudagraph_estimate_bytes(deployment)
        higher = tuple(
            u
            for u in SEARCHED_UTILIZATIONS
            if u > version.default_utilization and total - int(total * u) >= outside
        )
        return (version.default_utilization, *higher)

    def capacity_tokens(self, pool: KvPool[VllmLayout], max_model_len: int) -> int:
        """ "GPU KV cache size: N tokens" as the version defines it.

        0.8–0.21 (and V0's blocks × block size): the pool of one group,
        (num_blocks // groups) · block tokens; ≥ 0.22: tokens of context at peak concurrency,
        int(X · max_model_len).
        """
        stage = _binding_stage(pool)
        if pool.layout.version.era == "v1-new":
            return int(pool.concurrency_at(max_model_len) * max_model_len)
        return pool.num_blocks // len(stage.groups) * stage.block_tokens

    def log_lines(
        self,
        budget: Budget,
        pool: KvPool[VllmLayout],
        max_model_len: int,
        sku: SkuSpec | None = None,
    ) -> list[str]:
        return startup_lines(budget, pool, max_model_len)

    def startup_figures(
        self, budget: Budget, pool: KvPool, max_model_len: int, sku: SkuSpec | None = None
    ) -> dict[str, Any]:
        figures = startup(budget, pool, max_model_len)
        return {} if figures is None else figures.record()

    def launch_command(
        self, deployment: Deployment, sku: SkuSpec | None, context_tokens: int
    ) -> str | None:
        """`vllm serve` with the flags that differ from vLLM's defaults or set the KV cache;
        None for a KV dtype or weights `vllm serve` cannot be told to use."""
        kv_flag = _kv_cache_dtype_flag(deployment)
        weights = deployment.weight_dtype
        quantize = weights not in (None, deployment.model.weight_dtype)
        if kv_flag is None or (quantize and not _quantizes_at_load(deployment)):
            return None
        settings = deployment.settings
        parts = ["vllm serve", model_reference(deployment.model)]
        for flag, value, default in (
            ("--tensor-parallel-size", deployment.tp, 1),
            ("--pipeline-parallel-size", deployment.pp, 1),
            ("--data-parallel-size", deployment.dp, 1),
        ):
            if value != default:
                parts.append(f"{flag} {value}")
        if deployment.ep:
            parts.append("--enable-expert-parallel")
        parts.append(f"--max-model-len {context_tokens}")
        if settings.utilization:
            parts.append(f"--gpu-memory-utilization {settings.utilization:g}")
        if settings.kv_memory_bytes is not None:
            parts.append(f"--kv-cache-memory-bytes {settings.kv_memory_bytes}")
        if kv_flag != "auto":
            parts.append(f"--kv-cache-dtype {kv_flag}")
        for flag, value in (
            ("--max-num-seqs", settings.max_num_seqs),
            ("--block-size", settings.tokens_per_block),
            ("--max-num-batched-tokens", settings.max_num_batched_tokens),
        ):
            if value:
                parts.append(f"{flag} {value}")
        if quantize:
            parts.append(f"--quantization {weights}")
        if settings.hybrid_allocator is False:
            parts.append("--disable-hybrid-kv-cache-manager")
        if settings.cuda_graphs is False:
            parts.append("--enforce-eager")
        scaling = deployment.model.rope_scaling
        if scaling is not None and context_tokens > deployment.model.max_context:
            # Past max_position_embeddings vLLM needs the scaling in the config; a declared
            # one (the model card's advice) goes in as an override, as Qwen's cards show.
            override = json.dumps({"rope_scaling": _rope(scaling)})
            parts.append(f"--hf-overrides {shlex.quote(override)}")
        return " ".join(parts)

    def page_note(self, deployment: Deployment, sku: SkuSpec | None) -> str | None:
        """MLA backends page by GPU (`block_tokens`): say which page and from what."""
        if deployment.model.mla is None or deployment.settings.tokens_per_block:
            return None
        if sku is not None and sku.compute_capability:
            where = f"{sku.name}, compute capability {sku.compute_capability}"
        elif sku is not None:
            where = f"{sku.name} has no compute capability in the catalogue: FlashMLA's page"
        else:
            where = "no GPU given: FlashMLA's Hopper page assumed"
        return f"MLA blocks of {block_tokens(deployment, sku)} tokens ({where})"

    def notes(self, deployment: Deployment, sku: SkuSpec | None) -> list[str]:
        notes = super().notes(deployment, sku)
        model, settings = deployment.model, deployment.settings
        windowed, hybrid, cross = _note_facts(deployment)
        if windowed and hybrid:
            tokens = resolve(deployment, sku).scheduler().max_num_batched_tokens
            basis = (
                "set"
                if settings.max_num_batched_tokens
                else (
                    "vllm serve's default for this GPU" if sku else "vllm serve's default, no --sku"
                )
            )
            notes.append(
                f"vLLM charges each windowed layer the window − 1 + max_num_batched_tokens "
                f"({tokens:,}, {basis}) tokens plus one block per request"
            )
        elif windowed:
            notes.append(
                "vLLM's hybrid KV-cache manager is off (chunked local attention or "
                "`hybrid_allocator`): windowed layers reserve the full length"
            )
        if cross:
            notes.append(
                "vLLM serves cross-attention (mllama) models only up to 0.10.2 (the V0 engine); "
                "sized here as its V1 accounting would be"
            )
        page = self.page_note(deployment, sku)
        if page:
            notes.append(page)
        version = version_of(deployment)
        if sku is not None and version.subtracts_cudagraph_estimate:
            notes.append(
                f"vLLM {version.text} subtracts its CUDA-graph estimate from the budget; kvplan "
                "estimates it from the layers captured (`cudagraph_bytes` to set it)"
            )
        if sku is not None and settings.kv_memory_bytes is None and model.vision is not None:
            scheduler = resolve(deployment, sku).scheduler()
            images, peak = vllm_memory.vision_profile(deployment, version, scheduler)
            why = (
                "one per request up to max_num_seqs, V0's encoder-decoder profile run"
                if version.major_minor <= vllm_memory.LAST_V0_ENCODER_DECODER
                else "as many as V1's encoder budget of max_num_batched_tokens holds"
            )
            notes.append(
                f"the profile run's vision encoder peak ({peak / GIB:.2f} GiB: {images} dummy "
                f"image{'' if images == 1 else 's'} of {model.vision.max_num_tiles} tiles, "
                f"{why}) is read from vLLM's mllama source, not fitted on logs; it errs towards "
                "less KV and widens the band by a quarter of it"
            )
        if sku is not None and vllm_memory.spans_nodes(deployment, sku):
            extra = vllm_memory.CROSS_NODE_NON_TORCH_BYTES / GIB
            notes.append(
                f"TP across nodes: vLLM runs without custom all-reduce and NCCL's network "
                f"buffers grow; kvplan adds {extra:.2f} GiB of non-torch memory per GPU "
                "(one public two-node log)"
            )
        if sku is not None and settings.kv_memory_bytes is None:
            band = vllm_memory.band_for(version)
            notes.append(
                f"activation peak and non-torch memory are estimates fitted on {band.basis}; "
                "the budget carries their band"
            )
        return notes


@lru_cache(maxsize=16_384)  # a report's SKUs share a few schedulers: one per deployment each
def _reserve_terms(
    deployment: Deployment, scheduler: Scheduler, across_nodes: bool
) -> tuple[int, int, int, int]:
    """The profile run's estimated (activation, non-torch, CUDA-graph, band) bytes: they read
    the deployment, its release and the scheduler limits, and of the SKU only whether the TP
    group spans its nodes."""
    version = version_of(deployment)
    _, vision = vllm_memory.vision_profile(deployment, version, scheduler)
    return (
        vllm_memory.activation_bytes(deployment, version, scheduler, vision),
        vllm_memory.non_torch_bytes(deployment, version, across_nodes),
        vllm_memory.cudagraph_bytes(deployment, version),
        vllm_memory.estimate_band_bytes(vision),
    )


@lru_cache(maxsize=4096)  # one per deployment; a report asks once per SKU row
def _note_facts(deployment: Deployment) -> tuple[bool, bool, bool]:
    """What a plan's notes read of its deployment alone: (windowed layers, the hybrid
    allocator keeps them to their window, cross-attention layers past 0.10)."""
    model = deployment.model
    windowed = model.has_windowed_layers
    cross = "cross" in model.layer_kinds and version_of(deployment).major_minor > (0, 10)
    return windowed, windowed and uses_hybrid_allocator(deployment), cross


def _rope(scaling: RopeScalingSpec) -> dict[str, Any]:
    """The config.json rope_scaling object for `scaling`."""
    fields: dict[str, Any] = {"rope_type": scaling.rope_type, "factor": scaling.factor}
    if scaling.original_max_context is not None:
        fields["original_max_position_embeddings"] = scaling.original_max_context
    return fields


def _quantizes_at_load(deployment: Deployment) -> bool:
    """fp8 weights from a 16-bit checkpoint: `--quantization fp8` quantises them at load."""
    return deployment.weight_dtype == "fp8" and released_in_16_bit(deployment.model)


def _kv_cache_dtype_flag(deployment: Deployment) -> str | None:
    """--kv-cache-dtype for the deployment's KV dtype ("auto": vLLM's default), or None."""
    mla = deployment.model.mla
    sparse = mla is not None and mla.indexer is not None
    flags = SPARSE_MLA_KV_CACHE_DTYPE_FLAGS if sparse else KV_CACHE_DTYPE_FLAGS
    return flags.get(deployment.kv_dtype)


def _tp_rule(model: ModelSpec, tp: int) -> str | None:
    """The rule `tp` breaks for `model`, or None: query heads must divide by tp; KV heads must
    divide by tp, or tp by the KV heads when tp is larger (each head is then replicated
    tp / kv_heads times)."""
    heads, kv_heads = model.attention.num_heads, model.attention.num_kv_heads
    if heads % tp:
        return (
            f"total number of attention heads ({heads}) must be divisible by tensor parallel "
            f"size ({tp})"
        )
    uses_kv_heads = model.mla is None and model.has_kv_head_layers
    if uses_kv_heads and (kv_heads % tp if tp <= kv_heads else tp % kv_heads):
        return (
            f"its {kv_heads} KV heads must divide by tp, or tp by them (heads are replicated "
            f"when tp > {kv_heads})"
        )
    return None


@lru_cache(maxsize=4096)  # asked once per row of a report; one answer per deployment
def _layout_key(deployment: Deployment) -> Deployment:
    """The deployment stripped to what its layout depends on (model, KV dtype, tp, pp, the
    version and cache settings), so plans that differ only in memory settings, weights or
    replicas share one cached layout."""
    s = deployment.settings
    kept = EngineSettings(
        version=s.version,
        tokens_per_block=s.tokens_per_block,
        hybrid_allocator=s.hybrid_allocator,
        draft_layers=s.draft_layers,
    )
    plain = deployment.dp == 1 and not deployment.ep and deployment.weight_dtype is None
    checkpoint = deployment.exact_weights_bytes, deployment.checkpoint
    if kept == s and plain and checkpoint == (None, None):
        return deployment
    return deployment.replace(
        settings=kept,
        weight_dtype=None,
        dp=1,
        ep=False,
        exact_weights_bytes=None,
        checkpoint=None,
    )


@lru_cache(maxsize=4096)  # one layout per (model, tp, ...) serves every SKU of a report
def _layout(deployment: Deployment, block: int, max_num_batched_tokens: int) -> VllmLayout:
    """vLLM's grouped page specs for every pipeline stage (speculative draft layers added)."""
    version = version_of(deployment)
    caches, stage_specs = _stage_specs(deployment, block)
    # Stages holding the same caches get the same layout (pp 64 of a uniform model: two).
    built: dict[int, VllmStage] = {}
    stages = []
    for specs in stage_specs:
        if id(specs) not in built:
            built[id(specs)] = stage_layout(list(specs), version, max_num_batched_tokens)
        stages.append(built[id(specs)])
    ranges = deployment.stage_ranges()
    per_token = max(sum(caches[i].context_token_bytes for i in r) for r in ranges)
    shown_block = min(stage.block_tokens for stage in stages)
    return VllmLayout(tuple(stages), shown_block, per_token, version=version)


@lru_cache(maxsize=4096)  # the GPU classes' token budgets share one set of page specs
def _stage_specs(
    deployment: Deployment, block: int
) -> tuple[tuple[LayerCache, ...], tuple[tuple[PageSpec, ...], ...]]:
    """The stored caches, and each stage's page specs (one tuple per distinct stage)."""
    hybrid = uses_hybrid_allocator(deployment)
    caches = VLLM.stored_caches(deployment, full_reservation=not hybrid)
    mamba_aligned = deployment.settings.tokens_per_block is None
    built: dict[tuple[LayerCache, ...], tuple[PageSpec, ...]] = {}
    stages = []
    for layers in deployment.stage_ranges():
        held = tuple(caches[i] for i in layers)
        if held not in built:
            specs = page_specs(caches, layers, block, mamba_aligned)
            if deployment.settings.draft_layers and specs:
                # EAGLE's draft layer joins the target's cache group (vllm#19996: 32 + 1).
                draft = next((s for s in specs if s.keeps_every_token), specs[0])
                specs = specs + [draft] * deployment.settings.draft_layers
            built[held] = tuple(specs)
        stages.append(built[held])
    return caches, tuple(stages)


def _binding_stage(pool: KvPool[VllmLayout]) -> VllmStage:
    """The stage whose blocks are dearest: it sets the block count every rank takes."""
    return max(pool.layout.stages, key=lambda s: s.bytes_per_block)


@dataclass(frozen=True)
class VllmStartup:
    """The figures vLLM logs at startup for one plan (one rank: the binding one)."""

    version: VllmVersion
    available_bytes: int  # "Available KV cache memory"
    max_model_len: int
    num_blocks: int
    block_tokens: int
    gpu_kv_cache_tokens: int  # "GPU KV cache size: N tokens" (V0: blocks × block size)
    max_concurrency: float  # "Maximum concurrency for L tokens per request: X"
    needed_bytes: int  # the startup check's KV for one request of max_model_len
    estimated_max_model_len: int | None  # the startup error's estimate; None: it fits
    padding: tuple[tuple[int, int], ...]  # hybrid groups: (padding layers, layers) per spec
    kv_cache_groups: int  # the binding stage's KV cache groups

    @property
    def padding_layers(self) -> int:
        return sum(pad for pad, _ in self.padding)

    def record(self) -> dict[str, Any]:
        """The figures by the names docs/vllm-log-lines.md gives them, exact (the log rounds
        GiB and the concurrency to two decimals)."""
        return {
            "available_kv_bytes": self.available_bytes,
            "num_gpu_blocks": self.num_blocks,
            "tokens_per_block": self.block_tokens,
            "kv_cache_groups": self.kv_cache_groups,
            "padding_layers": self.padding_layers,
            "padding": [{"padding_layers": pad, "layers": layers} for pad, layers in self.padding],
            "gpu_kv_cache_tokens": self.gpu_kv_cache_tokens,
            "max_model_len": self.max_model_len,
            "max_concurrency": self.max_concurrency,
            "needed_bytes": self.needed_bytes,
            "estimated_max_model_len": self.estimated_max_model_len,
        }


# The last plan's figures: its log lines and its JSON figures are asked one after the other.
_last_startup: tuple[Budget, KvPool, int, VllmStartup | None] | None = None


def startup(budget: Budget, pool: KvPool[VllmLayout], max_model_len: int) -> VllmStartup | None:
    """What vLLM prints for a pool at `max_model_len`; None when no memory is left.

    Worked out once per plan: the budget and pool are frozen, so the same two objects at the
    same length have the same figures."""
    global _last_startup
    last = _last_startup
    if last is not None and last[0] is budget and last[1] is pool and last[2] == max_model_len:
        return last[3]
    figures = _startup(budget, pool, max_model_len)
    _last_startup = (budget, pool, max_model_len, figures)
    return figures


def _startup(budget: Budget, pool: KvPool[VllmLayout], max_model_len: int) -> VllmStartup | None:
    if budget.kv_bytes <= 0:
        return None
    layout = pool.layout
    stage = _binding_stage(pool)
    version = layout.version
    if version.era == "v0":
        concurrency = pool.num_blocks * stage.block_tokens / max_model_len
    else:
        concurrency = pool.concurrency_at(max_model_len)
    stages = layout.stages
    needed = max(s.needed_bytes(max_model_len) for s in stages)
    estimate = None
    if needed > budget.kv_bytes:
        estimate = estimated_max_model_len(stages, budget.kv_bytes, max_model_len)
    return VllmStartup(
        version=version,
        available_bytes=budget.kv_bytes,
        max_model_len=max_model_len,
        num_blocks=pool.num_blocks,
        block_tokens=stage.block_tokens,
        gpu_kv_cache_tokens=VLLM.capacity_tokens(pool, max_model_len),
        max_concurrency=concurrency,
        needed_bytes=needed,
        estimated_max_model_len=estimate,
        padding=stage.padding,
        kv_cache_groups=len(stage.groups),
    )


def startup_lines(budget: Budget, pool: KvPool[VllmLayout], max_model_len: int) -> list[str]:
    """The startup lines vLLM prints for this plan, in that version's wording."""
    lines = [f"Available KV cache memory: {budget.kv_bytes / GIB:.2f} GiB"]
    figures = startup(budget, pool, max_model_len)
    if figures is None:
        return [*lines, "No available memory for the cache blocks."]
    for padding, layers in figures.padding:
        if padding / layers > 0.05:  # vLLM only warns above 5 %
            lines.append(
                f"Add {padding} padding layers, may waste at most {padding / layers:.2%} "
                "KV cache memory"
            )
    concurrency = (
        f"Maximum concurrency for {max_model_len:,} tokens per request: "
        f"{figures.max_concurrency:.2f}x"
    )
    tokens = f"GPU KV cache size: {figures.gpu_kv_cache_tokens:,} tokens"
    era = figures.version.era
    if era == "v0":
        lines += [f"# GPU blocks: {figures.num_blocks}", concurrency]
    elif era == "v1":
        lines += [tokens, concurrency]
    else:
        lines.append(f"{tokens}, {concurrency}")
    if figures.estimated_max_model_len is not None:
        lines.append(
            f"To serve at least one request with the models's max seq len ({max_model_len}), "
            f"({figures.needed_bytes / GIB:.2f} GiB KV cache is needed, which is larger than the "
            f"available KV cache memory ({figures.available_bytes / GIB:.2f} GiB). Based on the "
            f"available memory, the estimated maximum model length is "
            f"{figures.estimated_max_model_len}."
        )
    return lines


VLLM = VllmProfile()
