"""Parameters of one sequence mixer of each kind: attention, MLA, recurrences, the vision tower.

Each function counts every matrix, bias and norm of one layer's mixer from the spec, the way
the reference implementation (transformers / vLLM, named per function) builds it.
"""

from __future__ import annotations

from collections.abc import Callable

from kvplan.specs import ModelSpec, StateSpec, VisionSpec


def attention_params(model: ModelSpec) -> int:
    """q, k, v, o projections, their biases, q/k norms, output gate and sinks."""
    a, hidden = model.attention, model.hidden_size
    q_width, kv_width = a.num_heads * a.head_dim, a.num_kv_heads * a.head_dim
    params = hidden * q_width * (2 if a.output_gate else 1) + 2 * hidden * kv_width
    params += q_width * hidden
    params += (q_width + 2 * kv_width) if a.qkv_bias else 0
    params += hidden if a.o_bias else 0
    params += 2 * a.head_dim if a.qk_norm else 0
    params += a.num_heads if a.sinks else 0
    return params


def cross_attention_params(model: ModelSpec) -> int:
    """A Llama-3.2-Vision cross-attention block (transformers MllamaTextCrossAttention).

    The self-attention projections, plus per-head q/k RMSNorms (always present in the cross
    block) and the two tanh gates of the layer (cross_attn_attn_gate, cross_attn_mlp_gate).
    """
    qk_norms = 0 if model.attention.qk_norm else 2 * model.attention.head_dim
    return attention_params(model) + qk_norms + 2


def mla_params(model: ModelSpec) -> int:
    """MLA projections and norms, plus DeepSeek-V3.2's indexer when there is one."""
    mla, heads, hidden = model.mla, model.attention.num_heads, model.hidden_size
    assert mla is not None  # only called for mla layers, which validation ties to a section
    qk_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    if mla.q_lora_rank:
        q = hidden * mla.q_lora_rank + mla.q_lora_rank + mla.q_lora_rank * heads * qk_head
    else:
        q = hidden * heads * qk_head
    kv = hidden * (mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank
    kv += mla.kv_lora_rank * heads * (mla.qk_nope_head_dim + mla.v_head_dim)
    return q + kv + heads * mla.v_head_dim * hidden + _indexer_params(model)


def _indexer_params(model: ModelSpec) -> int:
    """DeepSeek-V3.2 Indexer (inference/model.py): wq_b from the q latent, wk, k_norm
    (LayerNorm, weight + bias) and weights_proj (one weight per indexer head)."""
    mla = model.mla
    if mla is None or mla.indexer is None or mla.q_lora_rank is None:
        return 0
    heads, head_dim = mla.indexer.num_heads, mla.indexer.head_dim
    hidden = model.hidden_size
    return mla.q_lora_rank * heads * head_dim + hidden * head_dim + 2 * head_dim + hidden * heads


def _mamba1_params(s: StateSpec, hidden: int) -> int:
    inner, n = s.inner_size, s.ssm_state_size
    return (
        hidden * 2 * inner
        + inner * s.conv_kernel
        + inner
        + inner * (s.dt_rank + 2 * n)
        + s.dt_rank * inner
        + inner
        + inner * n
        + inner
        + inner * hidden
    )


def _mamba2_params(s: StateSpec, hidden: int) -> int:
    """in_proj (z, x, B, C, dt), conv with bias, dt_bias/A_log/D, gated norm, out_proj."""
    inner, heads = s.inner_size, s.ssm_heads
    return (
        hidden * (s.conv_channels + inner + heads)
        + s.conv_channels * s.conv_kernel
        + s.conv_channels
        + 3 * heads
        + (inner if s.gated_norm else 0)
        + inner * hidden
    )


def _gated_delta_net_params(s: StateSpec, hidden: int) -> int:
    """Qwen3-Next GDN: q, k, v, z and beta, alpha projections, conv, dt/A, norm, out."""
    key_width = s.num_key_heads * s.key_head_dim
    return (
        hidden * (2 * key_width + 2 * s.inner_size)
        + hidden * 2 * s.ssm_heads
        + s.conv_channels * s.conv_kernel
        + 2 * s.ssm_heads
        + s.ssm_state_size
        + s.inner_size * hidden
    )


def _kda_params(s: StateSpec, hidden: int) -> int:
    """Kimi Delta Attention (vLLM layers/kda.py KimiDeltaAttention).

    q, k, v projections (P = heads × head_dim each); the forget gate f_a (hidden → head_dim)
    and f_b (head_dim → P) with dt_bias (P) and A_log (heads); beta b_proj (hidden → heads);
    three bias-free short convs; the output gate g_a/g_b; o_norm (head_dim); o_proj.
    """
    width, head_dim, heads = s.inner_size, s.key_head_dim, s.ssm_heads
    low_rank_gate = hidden * head_dim + head_dim * width
    return (
        hidden * s.conv_channels
        + 2 * low_rank_gate
        + width
        + heads
        + hidden * heads
        + s.conv_channels * s.conv_kernel
        + head_dim
        + width * hidden
    )


_STATE_PARAMS: dict[str, Callable[[StateSpec, int], int]] = {
    "mamba1": _mamba1_params,
    "mamba2": _mamba2_params,
    "gated_delta_net": _gated_delta_net_params,
    "kda": _kda_params,
}


def state_params(model: ModelSpec) -> int:
    """The recurrent mixer of a state layer (Mamba-1/2, gated delta net, KDA)."""
    assert model.state is not None  # only called for state/parallel layers
    return _STATE_PARAMS[model.state.kind](model.state, model.hidden_size)


def parallel_params(model: ModelSpec) -> int:
    """Falcon-H1: an attention block and a Mamba-2 block side by side in one layer."""
    return attention_params(model) + state_params(model)


MIXER_PARAMS: dict[str, Callable[[ModelSpec], int]] = {
    "full": attention_params,
    "sliding": attention_params,
    "chunked": attention_params,
    "shared": attention_params,  # reuses another layer's K/V, keeps its own q and o
    "mla": mla_params,
    "state": state_params,
    "parallel": parallel_params,
    "cross": cross_attention_params,
    "mlp": lambda model: 0,
}


def vision_params(vision: VisionSpec, text_hidden: int) -> int:
    """The mllama vision tower, its projector and the 8 image-token embedding rows.

    transformers MllamaVisionModel: bias-free patch conv, class embedding, gated position
    embedding with a per-aspect-ratio tile table, gated pre/post tile embeddings, two
    LayerNorms, `num_layers` local layers and `num_global_layers` gated ones (q/k/v/o without
    bias, fc1/fc2 with bias, two LayerNorms each); MllamaMultiModalProjector (output_dim →
    text hidden, with bias); MllamaTextModel's embedding has vocab_size + 8 rows.
    """
    h, inner = vision.hidden_size, vision.intermediate_size
    patches = (vision.image_size // vision.patch_size) ** 2 + 1
    ratios, tiles = vision.num_aspect_ratios + 1, vision.max_num_tiles
    embeddings = (
        vision.num_channels * vision.patch_size**2 * h
        + h
        + 1
        + patches * h
        + ratios * tiles * patches * h
        + 2 * (ratios * tiles * h + 1)
        + 2 * 2 * h
    )
    layer = 4 * h * h + (h * inner + inner) + (inner * h + h) + 2 * 2 * h
    encoder = vision.num_layers * layer + vision.num_global_layers * (layer + 2)
    projector = vision.output_dim * text_hidden + text_hidden
    return embeddings + encoder + projector + 8 * text_hidden
