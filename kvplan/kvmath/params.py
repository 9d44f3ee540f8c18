"""Parameter counts from the architecture, layer by layer, and the bytes they take."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.kvmath.caches import ceil_div
from kvplan.kvmath.mixers import MIXER_PARAMS, vision_params
from kvplan.specs import DtypeInfo, ModelSpec


@dataclass(frozen=True)
class ParamCounts:
    """Parameters by where they live; `total` is what a checkpoint stores (MTP excluded)."""

    embedding: int  # input embedding + learned positions
    lm_head: int  # 0 when tied
    attention: int  # attention / MLA / recurrent mixers incl. their biases and norms
    dense_ffn: int  # non-MoE feed-forward layers
    routed_experts: int  # all routed experts of all MoE layers
    shared_experts: int  # shared experts + routers + gates of MoE layers
    norms: int  # per-layer and final norms
    active_routed_experts: int  # routed expert params one token touches
    vision: int = 0  # image encoder + projector (+ its extra text embedding rows)

    @property
    def total(self) -> int:
        return (
            self.embedding
            + self.lm_head
            + self.attention
            + self.dense_ffn
            + self.routed_experts
            + self.shared_experts
            + self.norms
            + self.vision
        )

    @property
    def active(self) -> int:
        """Parameters one token reads: everything except the experts it is not routed to."""
        return self.total - self.routed_experts + self.active_routed_experts


def _ffn_params(hidden: int, intermediate: int, gated: bool, bias: bool) -> int:
    matrices = 3 if gated else 2
    biases = (2 * intermediate if gated else intermediate) + hidden if bias else 0
    return matrices * hidden * intermediate + biases


def is_moe_layer(model: ModelSpec, layer: int) -> bool:
    """Whether layer `layer` (0-based) has a routed-expert FFN."""
    moe = model.moe
    if moe is None or layer < max(moe.dense_layers, moe.layer_offset):
        return False
    return (layer - moe.layer_offset) % moe.layer_step == 0


def has_ffn(model: ModelSpec, layer: int) -> bool:
    """Whether layer `layer` carries an FFN (Nemotron-H: only its mlp layers do)."""
    return model.ffn_per_mixer_layer or model.layer_kinds[layer] == "mlp"


@dataclass(frozen=True)
class LayerParams:
    """Parameters of one decoder layer, split by what TP shards and which dtype applies."""

    mixer: int  # attention, MLA or recurrent block
    dense_ffn: int
    routed_experts: int
    shared: int  # shared experts, router, gate
    active_routed_experts: int
    norms: int

    @property
    def total(self) -> int:
        return self.mixer + self.dense_ffn + self.routed_experts + self.shared + self.norms


def layer_params(model: ModelSpec, layer: int) -> LayerParams:
    """Parameters of decoder layer `layer` (0-based): every matrix, bias and norm."""
    hidden = model.hidden_size
    gated = model.mlp == "gated"
    mixer = MIXER_PARAMS[model.layer_kinds[layer]](model)
    norms = model.norms_per_layer * _norm_size(model)
    moe = model.moe
    if not has_ffn(model, layer):
        return LayerParams(mixer, 0, 0, 0, 0, norms)
    if moe is None or not is_moe_layer(model, layer):
        width = (moe.dense_intermediate_size if moe else None) or model.intermediate_size
        dense = _ffn_params(hidden, width, gated, model.mlp_bias)
        return LayerParams(mixer, dense, 0, 0, 0, norms)
    expert = _ffn_params(hidden, moe.expert_intermediate_size, gated, moe.expert_bias)
    shared_width = moe.shared_expert_intermediate_size or moe.expert_intermediate_size
    shared = moe.num_shared_experts * _ffn_params(hidden, shared_width, gated, False)
    shared += hidden * moe.num_experts + (moe.num_experts if moe.router_bias else 0)
    shared += hidden if moe.shared_expert_gate else 0
    return LayerParams(
        mixer, 0, moe.num_experts * expert, shared, moe.experts_per_token * expert, norms
    )


def _norm_size(model: ModelSpec) -> int:
    return model.hidden_size * (1 if model.norm == "rms" else 2)


def param_counts(model: ModelSpec) -> ParamCounts:
    """Parameters computed from the architecture, summed over layers plus embeddings."""
    layers = [layer_params(model, i) for i in range(model.num_layers)]
    hidden = model.hidden_size
    return ParamCounts(
        embedding=model.vocab_size * hidden + model.learned_positions * hidden,
        lm_head=0 if model.tie_word_embeddings else model.vocab_size * hidden,
        attention=sum(p.mixer for p in layers),
        dense_ffn=sum(p.dense_ffn for p in layers),
        routed_experts=sum(p.routed_experts for p in layers),
        shared_experts=sum(p.shared for p in layers),
        norms=sum(p.norms for p in layers) + _norm_size(model),
        active_routed_experts=sum(p.active_routed_experts for p in layers),
        vision=vision_params(model.vision, hidden) if model.vision else 0,
    )


def tensor_bytes(params: int, dtype: DtypeInfo) -> int:
    """Bytes of `params` weights in `dtype`, group-quantisation scales included."""
    data_bits = params * dtype.bits
    if dtype.group_elements and dtype.metadata_bits:
        data_bits += ceil_div(params, dtype.group_elements) * dtype.metadata_bits
    return ceil_div(data_bits, 8)
