"""The shapes a step multiplies through: each pipeline stage's layers, grouped, per GPU.

Layers with the same parameters and the same cache are one group with a count, so a
128-layer model of one layer kind costs one group's arithmetic, not 128. Weight bytes per
parameter come from the deployment's own weight figures (`Deployment.weights()`: checkpoint
headers, GGUF mixes and group scales included), so the operations of a stage read exactly the
bytes its GPU holds, embedding table aside: a lookup gathers a few rows of it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from kvplan.engine.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.kvmath import LayerParams, has_ffn, layer_params, tensor_bytes
from kvplan.specs import ModelSpec, weight_dtype_info

# Softmax-attention layer kinds, whose output projection is num_heads · head_dim × hidden.
_SOFTMAX_KINDS = frozenset({"full", "sliding", "chunked", "shared", "cross"})
_UNQUANTISED = ("fp32", "fp16", "bf16")  # embeddings and lm_head stay in these (weights.py)
ACTIVATION_BYTES = 2  # bf16/fp16 activations between kernels (fp8 GEMMs quantise inside)


@dataclass(frozen=True)
class LayerGroup:
    """`count` identical decoder layers of one stage; parameters are one GPU's share."""

    count: int
    qkv_params: float  # mixer input projections (q, k, v; MLA down/up; recurrent in-proj)
    out_params: float  # attention output projection
    dense_ffn_params: float
    shared_params: float  # shared experts, router, gate
    routed_params: float  # this GPU's share of all routed experts (E · P_e / expert shards)
    num_experts: int  # routed experts of the layer (0: a dense layer)
    experts_per_token: int
    activation_width: float  # FFN width one token's activation passes through, this GPU
    has_ffn: bool
    elementwise_bytes_per_token: float  # norms, residual adds, rotary, activation, this GPU
    linear_bytes_per_param: float
    expert_bytes_per_param: float
    kernels: int = 0  # kernels the layer launches a step (`layer_kernels`)


@dataclass(frozen=True)
class StageShape:
    """One pipeline stage as one of its GPUs sees it."""

    groups: tuple[LayerGroup, ...]
    layers: int
    lm_head_bytes: float  # last stage only: the vocabulary projection on this GPU
    lm_head_params: float


def _split_mixer(model: ModelSpec, kind: str, mixer: int) -> tuple[int, int]:
    """(input projections, output projection) parameters of a `kind` layer's mixer."""
    attention, mla = model.attention, model.mla
    if kind == "mla" and mla is not None:
        out = attention.num_heads * mla.v_head_dim * model.hidden_size
    elif kind in _SOFTMAX_KINDS:
        out = attention.num_heads * attention.head_dim * model.hidden_size
    else:
        out = 0
    out = min(out, mixer)
    return mixer - out, out


def layer_kernels(model: ModelSpec, kind: str, ffn: bool, moe: bool) -> int:
    """Kernels one layer of `kind` launches a step, collectives apart (each has a fixed cost:
    launch, ramp-up and drain, whatever its size).

    Softmax attention: input norm, fused QKV GEMM, rotary, KV write, attention, output GEMM (6).
    MLA in the absorbed form: input norm, q down GEMM, its norm, q up GEMM, KV down GEMM, its
    norm, rotary, latent write, the W_UK batched GEMM, attention, the W_UV batched GEMM,
    output GEMM (12; 10 without a q low-rank projection). Recurrent mixers: norm, input GEMM,
    convolution, scan, gated norm, output GEMM (6). A dense FFN: norm, gate-up GEMM,
    activation, down GEMM (4). A routed MoE: norm, router GEMM, top-k, token sort, the two
    grouped GEMMs, activation, weighted combine (8), and each shared expert's gate-up,
    activation and down (3).
    """
    mla = model.mla if kind == "mla" else None
    mixer = 6 if mla is None else 12 if mla.q_lora_rank else 10
    if not ffn:
        return mixer
    if not moe or model.moe is None:
        return mixer + 4
    return mixer + 8 + 3 * model.moe.num_shared_experts


def _elementwise_bytes_per_token(model: ModelSpec, tp: int, activation_width: float) -> float:
    """Bytes one token moves through a layer's elementwise kernels, one GPU, 16-bit.

    Each norm reads and writes the hidden state (2h), each of two residual adds reads two and
    writes one (3h), rotary reads and writes q and k ((Hq + Hkv) · D each way), a gated
    activation reads gate and up and writes one (3 · I); plain: reads and writes I (2 · I).
    """
    hidden, attention = model.hidden_size, model.attention
    rope = 2 * (attention.num_heads + attention.num_kv_heads) * attention.head_dim / tp
    act = (3 if model.mlp == "gated" else 2) * activation_width
    return ACTIVATION_BYTES * (model.norms_per_layer * 2 * hidden + 2 * 3 * hidden + rope + act)


def _activation_width(model: ModelSpec, p: LayerParams) -> float:
    """FFN intermediate width a token passes through: dense, or its routed plus shared experts."""
    matrices = 3 if model.mlp == "gated" else 2
    return (p.dense_ffn + p.active_routed_experts + p.shared) / (matrices * model.hidden_size)


@lru_cache(maxsize=256)  # every (tp, pp, dtype) of a model sums the same layers
def _layer_params(model: ModelSpec) -> tuple[LayerParams, ...]:
    return tuple(layer_params(model, i) for i in range(model.num_layers))


@lru_cache(maxsize=4096)  # one per deployment; a report asks once per row
def stage_shapes(deployment: Deployment) -> tuple[StageShape, ...]:
    """Every stage's layer groups with one GPU's parameters and bytes per parameter."""
    model, tp = deployment.model, deployment.tp
    weights = deployment.weights()
    shards = deployment.expert_shards
    try:
        linear = weight_dtype_info(weights.weight_dtype)
    except KvplanError:  # a GGUF file's own type name (F16): its tensor table gave the bytes
        linear = weight_dtype_info("bf16")
    head_bits = linear.bits if linear.name in _UNQUANTISED else 16
    lm_params = model.vocab_size * model.hidden_size
    lm_bytes = tensor_bytes(lm_params, weight_dtype_info("bf16")) * head_bits / 16 * weights.scale
    stages = []
    ranges = deployment.stage_ranges()
    for index, (layers, stage) in enumerate(zip(ranges, weights.stages, strict=True)):
        every = _layer_params(model)
        params = [every[i] for i in layers]
        dense = sum(p.mixer + p.dense_ffn + p.shared for p in params)
        routed = sum(p.routed_experts for p in params)
        last = index == len(ranges) - 1
        # What the stage holds besides its layers: lm_head (last), embedding and vision (first).
        extras = lm_bytes if last and has_own_lm_head(model, deployment.pp) else 0.0
        if index == 0:
            embedding_rows = model.vocab_size + model.learned_positions
            extras += weights.vision_bytes + lm_bytes * embedding_rows / model.vocab_size
        layer_bytes = max(stage.sharded_bytes - extras, 0.0)
        linear_bpp = layer_bytes / dense if dense else linear.bits / 8
        expert_bpp = stage.routed_expert_bytes / routed if routed else linear_bpp
        # Layers alike in parameters, kind and FFN are one group: count first, build once.
        kinds = model.layer_kinds
        counted: Counter[tuple[LayerParams, str, bool]] = Counter(
            (p, kinds[i], has_ffn(model, i)) for i, p in zip(layers, params, strict=True)
        )
        shapes: Counter[LayerGroup] = Counter()
        for (p, kind, ffn), count in counted.items():
            qkv, out = _split_mixer(model, kind, p.mixer)
            moe = model.moe if p.routed_experts else None
            width = _activation_width(model, p) / tp
            group = LayerGroup(
                count=1,
                qkv_params=qkv / tp,
                out_params=out / tp,
                dense_ffn_params=p.dense_ffn / tp,
                shared_params=p.shared / tp,
                routed_params=p.routed_experts / shards,
                num_experts=moe.num_experts if moe else 0,
                experts_per_token=moe.experts_per_token if moe else 0,
                activation_width=width,
                has_ffn=ffn,
                elementwise_bytes_per_token=_elementwise_bytes_per_token(model, tp, width),
                linear_bytes_per_param=linear_bpp,
                expert_bytes_per_param=expert_bpp,
                kernels=layer_kernels(model, kind, ffn, moe is not None),
            )
            shapes[group] += count
        groups = tuple(_with_count(g, n) for g, n in shapes.items())
        head_bytes, head_params = (lm_bytes / tp, lm_params / tp) if last else (0.0, 0.0)
        stages.append(StageShape(groups, len(layers), head_bytes, head_params))
    return tuple(stages)


def has_own_lm_head(model: ModelSpec, pp: int) -> bool:
    """Whether the last stage holds an lm_head of its own (untied, or a tied copy under pp)."""
    return not model.tie_word_embeddings or pp > 1


def _with_count(group: LayerGroup, count: int) -> LayerGroup:
    fields = dict(group.__dict__)
    fields["count"] = count
    return LayerGroup(**fields)


@dataclass(frozen=True)
class StageTotals:
    """One stage's layers summed where the arithmetic allows it, for quick step times.

    Every dense GEMM of a stage reads the same bytes per parameter and runs at the same M, so
    Σ max(P_i · bpp / bw, 2 · M · P_i / F) = (Σ P_i) · max(bpp / bw, 2 · M / F): one term.
    """

    dense_params: float  # qkv + out + MLP + shared experts, all layers, this GPU
    linear_bytes_per_param: float
    routed: tuple[tuple[int, float, float, int, int], ...]  # (count, params, bpp, E, k)
    elementwise_bytes_per_token: float  # all layers, KV write excluded
    all_reduces: int  # two per layer with an FFN, one without (tp > 1)
    moe_layers: int
    kernels: int  # kernels the stage's layers launch a step
    lm_head_bytes: float
    lm_head_params: float


@lru_cache(maxsize=4096)
def stage_totals(deployment: Deployment) -> tuple[StageTotals, ...]:
    """`stage_shapes` summed per stage (see StageTotals)."""
    totals = []
    for stage in stage_shapes(deployment):
        groups = stage.groups
        totals.append(
            StageTotals(
                dense_params=sum(
                    g.count * (g.qkv_params + g.out_params + g.dense_ffn_params + g.shared_params)
                    for g in groups
                ),
                linear_bytes_per_param=groups[0].linear_bytes_per_param if groups else 0.0,
                routed=tuple(
                    (
                        g.count,
                        g.routed_params,
                        g.expert_bytes_per_param,
                        g.num_experts,
                        g.experts_per_token,
                    )
                    for g in groups
                    if g.num_experts
                ),
                elementwise_bytes_per_token=sum(
                    g.count * g.elementwise_bytes_per_token for g in groups
                ),
                all_reduces=sum(g.count * (1 + g.has_ffn) for g in groups),
                moe_layers=sum(g.count for g in groups if g.num_experts),
                kernels=sum(g.count * g.kernels for g in groups),
                lm_head_bytes=stage.lm_head_bytes,
                lm_head_params=stage.lm_head_params,
            )
        )
    return tuple(totals)
