"""What `kvplan verify` checks, built from the model and the planner: ``build_plan``.

Pure Python over kvplan's formula (no torch): the predicted pool is what kvplan's engine
profile says the batch holds on one GPU for the verified layers, plus the one reserved
"null" page per layer (``kvplan.validate.verify_plan``). The planner's numbers come from the
two functions at the end of this module, ``engine_kv_prediction`` and
``capacity_prediction``: the only places verify calls into ``kvplan.plan``. Dimension names
(B, Hq, Hkv, D, P, S) are those of ``kvplan.kernels``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.errors import KvplanError
from kvplan.kvmath import LayerCache, layer_caches, num_kv_heads_per_gpu
from kvplan.specs import DtypeInfo, ModelSpec, SkuSpec, kv_dtype_info
from kvplan.validate.verify_plan import NULL_PAGES_PER_LAYER, VerifyPlan

# KV dtypes the Triton kernel reads (kvplan.kernels.decode): the q dtype, or fp8 with
# per-tensor scales. int8/int4/nvfp4/mxfp4 carry per-group scales the kernel does not apply.
KERNEL_KV_DTYPES = ("fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2")
# Engines whose pool is paged (vllm) or token-granular (sglang, exact: pages of 1 token);
# hf keeps contiguous per-layer tensors (MLA decompressed) and naive is not an allocator.
VERIFIABLE_ENGINES = ("vllm", "sglang", "exact")
DEVICES = ("cuda", "cpu")
# Layer kinds the kernel runs over a paged pool with block ids shared by all layers.
VERIFIABLE_KINDS = ("full", "mla")
DEFAULT_CPU_LAYERS = 2  # the interpreter runs ~10 ms per 32-token tile: keep CPU runs short


def check_device(device: str | None) -> None:
    """Refuse a --device verify does not know (None: pick one); pure Python, so the CLI
    calls it before torch loads (seconds)."""
    if device is not None and device not in DEVICES:
        raise KvplanError(f"--device: unknown device {device!r} (allowed: {', '.join(DEVICES)})")


def check_engine(engine: str) -> None:
    """Refuse an --engine whose KV pool verify cannot allocate; pure Python, as check_device."""
    if engine.lower() not in VERIFIABLE_ENGINES:
        raise KvplanError(
            f"--engine: verify allocates a paged pool, so it checks "
            f"{', '.join(VERIFIABLE_ENGINES)}; got {engine!r}"
        )


def q_dtype_for(kv_dtype: str) -> str:
    """The activation dtype that goes with a KV dtype: bf16 unless the KV is fp16 or fp32."""
    return kv_dtype if kv_dtype in ("fp32", "fp16") else "bf16"


def default_layers(model: ModelSpec, device_type: str) -> int:
    """All layers on a GPU (the fit check may then suggest fewer); a small number on CPU."""
    return model.num_layers if device_type == "cuda" else min(DEFAULT_CPU_LAYERS, model.num_layers)


def build_plan(
    model: ModelSpec,
    *,
    lengths: list[int],
    kv_dtype: str = "bf16",
    engine: str = "vllm",
    tp: int = 1,
    tokens_per_block: int | None = None,
    layers: int,
    sku: SkuSpec | None = None,
) -> VerifyPlan:
    """The verify plan for `model` on one TP rank, with every predicted byte count.

    Args:
        model: the catalogue spec.
        lengths: tokens of each sequence (uniform --batch × --context, or --lengths).
        kv_dtype: KV element type (kvplan name or alias); the kernel reads fp32, bf16,
            fp16, fp8_e4m3 and fp8_e5m2.
        engine: the KV accounting to check: vllm (paged), sglang or exact (page of 1 token).
        tp: tensor-parallel degree; one GPU holds ⌈Hkv / tp⌉ KV heads (MLA: the whole latent).
        tokens_per_block: --block-size, or None for the engine's default.
        layers: how many layers to verify (1 … num_layers).
        sku: the GPU the plan is for (--sku, or detected): the engine's page size can depend
            on it (vLLM's MLA backends); None: the engine's reading without a GPU, said in
            `page_note`.

    Raises:
        KvplanError: an option the kernel or the allocator cannot honour; the message names it.
    """
    dtype = kv_dtype_info(kv_dtype)
    kind = _check_options(model, dtype, engine, tp, tokens_per_block, layers)
    cache = layer_caches(model, dtype, tp)[0]  # every layer is one kind: one cache stands for all
    engine_kv = engine_kv_prediction(
        model, dtype, engine, tp, tokens_per_block, cache, lengths, sku
    )
    block = engine_kv.tokens_per_block
    heads = _head_geometry(model, kind, tp)
    return VerifyPlan(
        model=model,
        engine=engine_kv.engine,
        kv_dtype=dtype.name,
        q_dtype=q_dtype_for(dtype.name),
        tp=tp,
        lengths=tuple(lengths),
        tokens_per_block=block,
        layers_verified=layers,
        kind=kind,
        **heads,
        element_bytes=dtype.bits // 8,
        token_bytes_per_layer=cache.token_bytes,
        predicted_blocks_per_layer=engine_kv.blocks_per_layer + NULL_PAGES_PER_LAYER,
        predicted_kv_bytes=layers * engine_kv.kv_bytes_per_layer,
        predicted_null_page_bytes=layers * NULL_PAGES_PER_LAYER * block * cache.token_bytes,
        plan_kv_bytes_per_gpu=engine_kv.plan_kv_bytes_per_gpu,
        page_note=engine_kv.page_note,
    )


def _check_options(
    model: ModelSpec,
    dtype: DtypeInfo,
    engine: str,
    tp: int,
    tokens_per_block: int | None,
    layers: int,
) -> str:
    """The model's one layer kind, once every option is one the kernel and allocator take."""
    if dtype.name not in KERNEL_KV_DTYPES:
        raise KvplanError(
            f"--kv-dtype: verify runs the decode kernel, which reads "
            f"{', '.join(KERNEL_KV_DTYPES)}; got {dtype.name}"
        )
    check_engine(engine)
    if tp < 1:
        raise KvplanError(f"--tp: {tp} must be at least 1")
    if tokens_per_block is not None and tokens_per_block < 1:
        raise KvplanError(f"--block-size: {tokens_per_block} must be at least 1 token")
    if layers < 1:
        raise KvplanError(f"--layers: {layers} must be at least 1")
    if layers > model.num_layers:
        raise KvplanError(f"--layers: {layers} exceeds {model.name}'s {model.num_layers} layers")
    kinds = set(model.layer_kinds)
    if not kinds <= set(VERIFIABLE_KINDS) or len(kinds) != 1:
        raise KvplanError(
            f"verify supports models whose layers are all full attention or all MLA; "
            f"{model.name} has {', '.join(sorted(kinds))} layers"
        )
    return kinds.pop()


def _head_geometry(model: ModelSpec, kind: str, tp: int) -> dict[str, int | float]:
    """Heads per GPU, K and V widths, rope columns and the softmax scale of one TP rank."""
    attention = model.attention
    if attention.num_heads % tp:
        raise KvplanError(
            f"--tp: {tp} does not divide {model.name}'s {attention.num_heads} query heads"
        )
    num_heads = attention.num_heads // tp
    if kind == "mla":
        mla = model.mla
        assert mla is not None  # ModelSpec validation ties mla layers to an mla section
        return {
            "num_heads_per_gpu": num_heads,
            "num_kv_heads_per_gpu": 1,  # the latent is not split by heads
            "head_dim_k": mla.kv_lora_rank + mla.qk_rope_head_dim,
            "head_dim_v": mla.kv_lora_rank,
            "rope_dim": mla.qk_rope_head_dim,
            # The model's softmax scale, over the q·k width before absorption (not Dk).
            "sm_scale": 1 / math.sqrt(mla.qk_nope_head_dim + mla.qk_rope_head_dim),
        }
    num_kv_heads = num_kv_heads_per_gpu(attention.num_kv_heads, tp)
    if num_heads % num_kv_heads:
        raise KvplanError(
            f"--tp: {tp} leaves {num_heads} query heads over {num_kv_heads} KV heads per "
            "GPU, not a whole group; choose a tp that divides the KV heads"
        )
    return {
        "num_heads_per_gpu": num_heads,
        "num_kv_heads_per_gpu": num_kv_heads,
        "head_dim_k": attention.head_dim,
        "head_dim_v": attention.head_dim,
        "rope_dim": 0,
        "sm_scale": 1 / math.sqrt(attention.head_dim),
    }


def max_layers_within(plan: VerifyPlan, budget_bytes: int) -> int:
    """The most layers whose pool fits in `budget_bytes` (0 if not even one)."""
    per_layer = plan.predicted_pool_bytes_per_layer
    return max(0, min(plan.model_layers, budget_bytes // per_layer))


# --- the planner's numbers -------------------------------------------------------------------
# Every call into kvplan.plan (the engine model) is in the two functions below, so that a
# change of the engine model's API is a change here and nowhere else in verify.


@dataclass(frozen=True)
class EngineKv:
    """What the engine profile says one GPU holds for the batch, in one layer."""

    engine: str
    """the profile's canonical name."""
    tokens_per_block: int
    """P: the engine's page (vLLM 16, MLA 64, --block-size; 1 for token-granular engines)."""
    kv_bytes_per_layer: int
    """Σ_b the engine's bytes for sequence b in one layer."""
    blocks_per_layer: int
    """Σ_b the blocks the engine holds for sequence b in one layer (no null page)."""
    plan_kv_bytes_per_gpu: int
    """the engine's bytes for the batch over every layer (kvplan size's kv_bytes_per_gpu)."""
    page_note: str | None = None
    """which page the engine takes on this GPU and why, where the GPU decides it."""


def engine_kv_prediction(
    model: ModelSpec,
    dtype: DtypeInfo,
    engine: str,
    tp: int,
    tokens_per_block: int | None,
    cache: LayerCache,
    lengths: list[int],
    sku: SkuSpec | None = None,
) -> EngineKv:
    """The engine profile's page size, bytes and blocks for the batch (one layer, one GPU of
    `sku`; None: no GPU known).

    The bytes are the engine's charge for the batch on one GPU (``KvLayout.request_bytes``);
    verify's models have one layer kind, so each layer holds an equal share, whole pages.
    """
    from kvplan.engine import ENGINES, EngineSettings
    from kvplan.engine.batch import Batch
    from kvplan.engine.deployment import Deployment

    batch = Batch.of(lengths)
    profile = ENGINES[engine.lower()]
    deployment = Deployment(
        model=model,
        engine=profile,
        kv_dtype=dtype.name,
        tp=tp,
        settings=EngineSettings(tokens_per_block=tokens_per_block),
    )
    layout = profile.layout(deployment, sku)
    block = layout.tokens_per_block
    plan_bytes = sum(count * layout.request_bytes(tokens) for tokens, count in batch)
    per_layer, rest = divmod(plan_bytes, model.num_layers)
    blocks, partial = divmod(per_layer, block * cache.token_bytes)
    if rest or partial:
        raise RuntimeError(
            f"{profile.name} charges {plan_bytes:,} B for the batch, not whole pages of "
            f"{block} tokens in each of {model.num_layers} layers"
        )
    return EngineKv(
        engine=profile.name,
        tokens_per_block=block,
        kv_bytes_per_layer=per_layer,
        blocks_per_layer=blocks,
        plan_kv_bytes_per_gpu=plan_bytes,
        page_note=profile.page_note(deployment, sku),
    )


@dataclass(frozen=True)
class CapacityPrediction:
    """The planner's vLLM budget for one GPU of a deployment on a SKU: what --capacity tests."""

    sku: str
    total_bytes: int
    """device memory the budget starts from."""
    total_basis: str
    """where total_bytes comes from (runtime-visible memory, or the datasheet)."""
    gpu_memory_utilization: float
    """vLLM's fraction of total memory the engine may use."""
    weights_bytes_per_gpu: int
    activation_bytes: int
    """the profile run's torch peak estimate (activations, sampler, workspaces)."""
    non_torch_bytes: int
    """CUDA context, NCCL, cuBLAS workspaces: the estimate the budget subtracts."""
    cudagraph_bytes: int
    kv_budget_bytes: int
    """"Available KV cache memory": ⌊total × utilization⌋ − the four terms above."""
    uncertainty_bytes: int
    """the band the estimated terms carry: the budget is good to ± this many bytes."""
    tokens_per_block: int
    page_bytes_per_block: int
    """one block id over every layer on this GPU."""
    num_blocks: int
    """"# GPU blocks": ⌊kv_budget_bytes / page_bytes_per_block⌋."""
    context_tokens: int
    max_concurrency: float
    """vLLM's "Maximum concurrency for context_tokens tokens per request"."""

    @property
    def ceiling_bytes(self) -> int:
        """⌊total × utilization⌋: what the engine lets itself use on the device."""
        return int(self.total_bytes * self.gpu_memory_utilization)


def capacity_prediction(
    model: ModelSpec,
    sku: SkuSpec,
    *,
    kv_dtype: str,
    tp: int,
    context_tokens: int,
    tokens_per_block: int | None,
    utilization: float | None,
) -> CapacityPrediction:
    """The planner's vLLM budget and block count for `model` on one GPU of `sku`.

    Raises:
        KvplanError: the weights leave no KV budget (the message gives the terms).
    """
    from kvplan.engine import ENGINES, EngineSettings
    from kvplan.engine.deployment import Deployment
    from kvplan.plan.capacity import Capacity

    deployment = Deployment(
        model=model,
        engine=ENGINES["vllm"],
        kv_dtype=kv_dtype_info(kv_dtype).name,
        tp=tp,
        settings=EngineSettings(tokens_per_block=tokens_per_block, utilization=utilization),
    )
    capacity = Capacity(deployment, sku, context_tokens=context_tokens)
    budget, layout, pool = capacity.budget, capacity.layout, capacity.pool
    if not capacity.kv_usable:
        raise KvplanError(
            f"--capacity: the planner leaves no KV memory for {model.name} on {sku.name}: "
            f"{budget.total_bytes:,} B × {budget.utilization} − weights "
            f"{budget.weights_bytes:,} − activation {budget.activation_bytes:,} − non-torch "
            f"{budget.non_torch_bytes:,} = {budget.kv_bytes:,} B"
        )
    (stage,) = layout.stages  # verify plans one pipeline stage
    return CapacityPrediction(
        sku=sku.name,
        total_bytes=budget.total_bytes,
        total_basis=budget.total_basis,
        gpu_memory_utilization=budget.utilization,
        weights_bytes_per_gpu=budget.weights_bytes,
        activation_bytes=budget.activation_bytes,
        non_torch_bytes=budget.non_torch_bytes,
        cudagraph_bytes=budget.cudagraph_bytes,
        kv_budget_bytes=budget.kv_bytes,
        uncertainty_bytes=budget.uncertainty_bytes,
        tokens_per_block=layout.tokens_per_block,
        page_bytes_per_block=stage.bytes_per_block,
        num_blocks=pool.num_blocks,
        context_tokens=capacity.context_tokens,
        max_concurrency=pool.concurrency_at(capacity.context_tokens),
    )
