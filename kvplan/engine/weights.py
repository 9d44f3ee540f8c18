"""Weight bytes of a model, whole and per GPU under tensor and pipeline parallelism."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from kvplan.catalog.checkpoint import FIRST, LAST, CheckpointWeights
from kvplan.errors import KvplanError
from kvplan.kvmath import (
    LayerParams,
    ParamCounts,
    ceil_div,
    layer_params,
    param_counts,
    stage_layer_ranges,
    tensor_bytes,
)
from kvplan.specs import DtypeInfo, ModelSpec, is_gguf_weight_dtype, weight_dtype_info

# Checkpoints keep embeddings, lm_head and norms unquantised (AWQ/GPTQ/FP8/MXFP4 releases).
_UNQUANTISED = ("fp32", "fp16", "bf16")


@dataclass(frozen=True)
class StageWeights:
    """Weight bytes of one pipeline stage, split by how TP and MoE routing treat them."""

    sharded_bytes: int  # split over TP ranks: matrices, embedding, lm_head, shared experts
    routed_expert_bytes: int  # split over TP ranks too; a decode step reads only touched ones
    replicated_bytes: int  # on every rank: norms

    def per_gpu_bytes(
        self, tp: int, routed_fraction: float = 1.0, expert_shards: int | None = None
    ) -> int:
        """Bytes on (or, with a fraction of routed experts, read by) one TP rank.

        Routed experts are split over `expert_shards` GPUs (tp, or tp · dp under expert
        parallelism); everything else sharded over tp.
        """
        routed = round(self.routed_expert_bytes * routed_fraction)
        shards = expert_shards or tp
        return ceil_div(self.sharded_bytes, tp) + ceil_div(routed, shards) + self.replicated_bytes


@dataclass(frozen=True)
class WeightBytes:
    """Weight bytes of the deployment; per GPU is the largest (binding) rank."""

    params: ParamCounts
    weight_dtype: str
    total_bytes: int
    per_gpu_bytes: int
    active_bytes: int  # what one token reads at batch 1 (MoE: only routed-to experts)
    stages: tuple[StageWeights, ...]
    scale: float = 1.0  # exact checkpoint bytes / computed bytes (1 unless imported from HF)
    vision_bytes: int = 0  # vision tower and projector, in total_bytes (split over TP)
    checkpoint: CheckpointWeights | None = None  # the safetensors headers they came from


def _base_dtype(linear: DtypeInfo) -> DtypeInfo:
    return linear if linear.name in _UNQUANTISED else weight_dtype_info("bf16")


@lru_cache(maxsize=64)  # every (dtype, tp, pp) of a model sums the same layers
def _layer_params(model: ModelSpec) -> tuple[LayerParams, ...]:
    return tuple(layer_params(model, layer) for layer in range(model.num_layers))


_param_counts = lru_cache(maxsize=64)(param_counts)


@lru_cache(maxsize=4096)  # reports ask for the same (model, dtype, tp, pp) once per SKU
def weight_bytes(
    model: ModelSpec,
    weight_dtype: str | None = None,
    tp: int = 1,
    pp: int = 1,
    exact_total_bytes: int | None = None,
    expert_shards: int | None = None,
) -> WeightBytes:
    """Weight bytes whole and on the binding GPU.

    Linear layers use `weight_dtype` (default: the model's), routed experts the model's
    expert dtype unless a dtype is forced; embeddings, lm_head and norms stay 16-bit.
    TP shards every matrix and the vocabulary (norms replicate); PP gives each stage its
    layers, the embedding (and an image encoder) to the first stage and lm_head (a copy when
    tied) to the last.
    `exact_total_bytes` (safetensors metadata) rescales the computed figures to match.
    `expert_shards` (default tp) is how many GPUs share the routed experts (expert parallel).
    A vision tower (model.vision) stays 16-bit and is split over TP on the first stage.
    A GGUF file type (Q4_K_M, …) is summed tensor by tensor over llama-quantize's mix
    (`engine.gguf_quantised`).
    """
    if is_gguf_weight_dtype(weight_dtype):
        from kvplan.engine.gguf_quantised import quantised_checkpoint  # llama-quantize's mix

        file_type = weight_dtype_info(weight_dtype or "").name
        checkpoint = quantised_checkpoint(model, file_type)
        return checkpoint_weight_bytes(model, checkpoint, tp, pp, expert_shards)
    linear = weight_dtype_info(weight_dtype or model.weight_dtype)
    expert_name = weight_dtype or (model.moe.expert_weight_dtype if model.moe else None)
    expert = weight_dtype_info(expert_name) if expert_name else linear
    base = _base_dtype(linear)
    counts = _param_counts(model)
    hidden = model.hidden_size
    embedding_bytes = tensor_bytes(counts.embedding, base)
    lm_head_bytes = tensor_bytes(model.vocab_size * hidden, base)
    final_norm_bytes = tensor_bytes(hidden * (1 if model.norm == "rms" else 2), base)
    tower = model.vision_tower.params if model.vision_tower else 0
    vision_bytes = tensor_bytes(tower, base) + tensor_bytes(counts.vision, base)

    stages = []
    per_layer = _layer_params(model)
    for stage, layers in enumerate(stage_layer_ranges(model.num_layers, pp)):
        sharded = routed = replicated = 0
        for layer in layers:
            p = per_layer[layer]
            sharded += tensor_bytes(p.mixer + p.dense_ffn + p.shared, linear)
            routed += tensor_bytes(p.routed_experts, expert)
            replicated += tensor_bytes(p.norms, base)
        if stage == 0:
            # Image encoders run before the first layer; vLLM shards their linear layers over
            # TP like the text model's (mllama; --mm-encoder-tp-mode weights, the default).
            sharded += embedding_bytes + vision_bytes
        if stage == pp - 1:
            replicated += final_norm_bytes
            if not model.tie_word_embeddings or pp > 1:
                sharded += lm_head_bytes
        stages.append(StageWeights(sharded, routed, replicated))

    total = sum(s.sharded_bytes + s.routed_expert_bytes + s.replicated_bytes for s in stages)
    if model.tie_word_embeddings and pp > 1:
        total -= lm_head_bytes  # the last stage's copy is not a parameter of its own
    per_gpu = max(s.per_gpu_bytes(tp, expert_shards=expert_shards) for s in stages)
    active = total - vision_bytes - tensor_bytes(counts.routed_experts, expert)
    active += tensor_bytes(counts.active_routed_experts, expert)
    scale = 1.0
    if exact_total_bytes is not None:
        scale = exact_total_bytes / total
        per_gpu = per_gpu * exact_total_bytes // total
        active = active * exact_total_bytes // total
        vision_bytes = vision_bytes * exact_total_bytes // total
        total = exact_total_bytes
    return WeightBytes(
        counts, linear.name, total, per_gpu, active, tuple(stages), scale, vision_bytes
    )


def _place_stage(place: int, ranges: tuple[range, ...]) -> int:
    if place == FIRST:
        return 0
    if place == LAST:
        return len(ranges) - 1
    return next(i for i, layers in enumerate(ranges) if place in layers)


@lru_cache(maxsize=1024)
def checkpoint_weight_bytes(
    model: ModelSpec,
    checkpoint: CheckpointWeights,
    tp: int = 1,
    pp: int = 1,
    expert_shards: int | None = None,
) -> WeightBytes:
    """Weight bytes from a checkpoint's safetensors headers: exact per tensor, held on tp
    ranks the way `catalog.checkpoint` classifies each tensor (split, kv, expert, replicated,
    vision); layers past num_layers are not loaded. A tied embedding under pp > 1 is copied
    to the last stage as lm_head.
    """
    ranges = stage_layer_ranges(model.num_layers, pp)
    sharded, routed, replicated = [0] * pp, [0] * pp, [0] * pp
    kv_heads = model.attention.num_kv_heads
    for role, place, size in checkpoint.groups:
        if role == "unloaded":
            continue
        stage = _place_stage(place, ranges)
        if role == "expert":
            routed[stage] += size
        elif role == "replicated":
            replicated[stage] += size
        elif role == "kv" and tp > kv_heads:
            replicated[stage] += ceil_div(size, kv_heads)  # one whole KV head per rank
        else:
            sharded[stage] += size
    if (
        model.tie_word_embeddings
        and pp > 1
        and not any(place == LAST and role == "split" for role, place, _ in checkpoint.groups)
    ):
        sharded[-1] += sum(
            size for role, place, size in checkpoint.groups if place == FIRST and role == "split"
        )
    stages = tuple(StageWeights(*parts) for parts in zip(sharded, routed, replicated, strict=True))
    counts = _param_counts(model)
    loaded = checkpoint.total_bytes - checkpoint.role_bytes("unloaded")
    routed_total = sum(routed)
    active = loaded - checkpoint.role_bytes("vision") - routed_total
    if counts.routed_experts:
        active += routed_total * counts.active_routed_experts // counts.routed_experts
    return WeightBytes(
        params=counts,
        weight_dtype=checkpoint.weight_dtype or model.weight_dtype,
        total_bytes=loaded,
        per_gpu_bytes=max(s.per_gpu_bytes(tp, expert_shards=expert_shards) for s in stages),
        active_bytes=active,
        stages=stages,
        vision_bytes=checkpoint.role_bytes("vision"),
        checkpoint=checkpoint,
    )


# A checkpoint's stated total is taken when it is within this factor of the computed weights
# either way: an fp32 copy of a bf16 config is 2×, an int4 checkpoint whose config omits its
# quantisation ~0.3×; a total of 1 B or 10^30 B is a broken index, not a checkpoint.
PLAUSIBLE_TOTAL_FACTOR = 4


def check_checkpoint_total(model: ModelSpec, total_bytes: int) -> None:
    """Refuse a checkpoint total (a safetensors index's metadata.total_size) that cannot be
    the weights of `model`'s computed parameters.

    Raises:
        KvplanError: `total_bytes` below a quarter or above four times the computed bytes,
            naming both figures.
    """
    computed = weight_bytes(model)
    low, high = (
        computed.total_bytes // PLAUSIBLE_TOTAL_FACTOR,
        computed.total_bytes * PLAUSIBLE_TOTAL_FACTOR,
    )
    if low <= total_bytes <= high:
        return
    raise KvplanError(
        f"{model.name}: the checkpoint index's metadata.total_size is {total_bytes:,} B, but "
        f"the {computed.params.total / 1e9:,.2f} billion parameters in {computed.weight_dtype} are "
        f"{computed.total_bytes:,} B; a total between {low:,} and {high:,} B is taken as the "
        "weights: fix or remove model.safetensors.index.json"
    )
