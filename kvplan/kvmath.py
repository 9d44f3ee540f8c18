"""Exact integer KV-cache and weight arithmetic (DESIGN §3). No I/O, no rounding.

One small frozen class per cache kind owns its arithmetic (the vLLM
`kv_cache_interface` pattern): `token_bytes` is one token of one layer on one
GPU, `tokens_kept(L)` how many of a sequence's L tokens the layer holds.
Engines (kvplan.plan.engines) decide how those tokens become allocated bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from kvplan.errors import KvplanError
from kvplan.specs import DtypeInfo, ModelSpec, kv_dtype_info


def ceil_div(numerator: int, denominator: int) -> int:
    """⌈numerator / denominator⌉ for non-negative integers."""
    return -(-numerator // denominator)


# --- per-layer caches ---------------------------------------------------------


@dataclass(frozen=True)
class FullCache:
    """K and V for every token: 2 · kv_heads_per_gpu · row_bytes(head_dim) per token."""

    token_bytes: int
    kind: str = "full"

    def first_kept_token(self, tokens: int) -> int:
        """Index of the oldest token this layer still holds for a sequence of `tokens`."""
        return 0

    def tokens_kept(self, tokens: int) -> int:
        """Tokens of a sequence of `tokens` that this layer holds."""
        return tokens - self.first_kept_token(tokens)

    def peak_length(self, tokens: int) -> int:
        """The length ≤ `tokens` at which this layer holds the most (the request passes it)."""
        return tokens

    def bytes_per_seq(self, tokens: int) -> int:
        """Bytes this layer holds for one sequence of `tokens` tokens, one GPU."""
        return self.token_bytes * self.tokens_kept(tokens)


@dataclass(frozen=True)
class SlidingCache(FullCache):
    """Only the last `window_tokens` tokens (Mistral v0.1, Gemma 2/3 local, GPT-OSS)."""

    window_tokens: int = 0
    kind: str = "sliding"

    def first_kept_token(self, tokens: int) -> int:
        return max(0, tokens - self.window_tokens)


@dataclass(frozen=True)
class ChunkedCache(FullCache):
    """Only the tokens of the current chunk (Llama 4 local layers): ((L − 1) mod C) + 1."""

    chunk_tokens: int = 0
    kind: str = "chunked"

    def first_kept_token(self, tokens: int) -> int:
        return (tokens - 1) // self.chunk_tokens * self.chunk_tokens if tokens > 0 else 0

    def peak_length(self, tokens: int) -> int:
        # Not monotone: at L = C the layer holds C tokens, at L = C + 1 only one.
        return min(tokens, self.chunk_tokens)


@dataclass(frozen=True)
class MlaCache(FullCache):
    """One latent (kv_lora_rank + qk_rope_head_dim) per token: no ×2, no heads, whole per rank."""

    kind: str = "mla"


@dataclass(frozen=True)
class StateCache:
    """A constant recurrent state per sequence (Mamba, gated delta net), independent of L."""

    state_bytes: int
    kind: str = "state"
    token_bytes: int = 0

    def first_kept_token(self, tokens: int) -> int:
        return tokens

    def tokens_kept(self, tokens: int) -> int:
        return 0

    def peak_length(self, tokens: int) -> int:
        return tokens

    def bytes_per_seq(self, tokens: int) -> int:
        return self.state_bytes if tokens > 0 else 0


@dataclass(frozen=True)
class SharedCache(StateCache):
    """Reuses another layer's KV: holds nothing of its own."""

    state_bytes: int = 0
    kind: str = "shared"


LayerCache = FullCache | StateCache


def num_kv_heads_per_gpu(num_kv_heads: int, tp: int) -> int:
    """KV heads one TP rank holds: ⌈kv_heads / tp⌉, or 1 replicated head when tp > kv_heads."""
    return ceil_div(num_kv_heads, tp) if tp <= num_kv_heads else 1


def state_dtype_name(model: ModelSpec) -> str:
    """Dtype of recurrent state: the activation dtype (vLLM mamba_cache_dtype 'auto')."""
    return model.weight_dtype if model.weight_dtype in ("fp32", "fp16") else "bf16"


@lru_cache(maxsize=4096)  # specs and dtypes are frozen: reports reuse one tuple per SKU row
def layer_caches(
    model: ModelSpec, kv_dtype: DtypeInfo, tp: int = 1, full_reservation: bool = False
) -> tuple[LayerCache, ...]:
    """One cache object per layer for one TP rank.

    `full_reservation` turns sliding and chunked layers into full ones: what an
    engine without a hybrid allocator reserves (compute is still windowed).
    """
    attention = model.attention
    heads = num_kv_heads_per_gpu(attention.num_kv_heads, tp)
    attention_token_bytes = 2 * heads * kv_dtype.row_bytes(attention.head_dim)
    plan = model.layers
    caches: list[LayerCache] = []
    for kind in model.layer_kinds:
        if kind == "full" or (full_reservation and kind in ("sliding", "chunked")):
            caches.append(FullCache(attention_token_bytes))
        elif kind == "sliding":
            caches.append(
                SlidingCache(attention_token_bytes, window_tokens=plan.sliding_window or 0)
            )
        elif kind == "chunked":
            caches.append(ChunkedCache(attention_token_bytes, chunk_tokens=plan.chunk_size or 0))
        elif kind == "mla":
            mla = model.mla
            assert mla is not None  # guaranteed by ModelSpec validation
            caches.append(MlaCache(kv_dtype.row_bytes(mla.kv_lora_rank + mla.qk_rope_head_dim)))
        elif kind == "state":
            state = model.state
            assert state is not None  # guaranteed by ModelSpec validation
            element_bits = kv_dtype_info(state_dtype_name(model)).bits
            caches.append(StateCache(state.elements_per_seq(tp) * element_bits // 8))
        else:
            caches.append(SharedCache())
    return tuple(caches)


@lru_cache(maxsize=1024)  # asked once per deployment built; a search builds thousands
def stage_layer_ranges(num_layers: int, pp: int) -> tuple[range, ...]:
    """Layers of each pipeline stage, split the way vLLM's `get_pp_indices` splits them.

    Equal shares, the remainder added from the second-to-last stage backwards:
    27 layers over 2 stages -> 14 + 13 (vLLM PR #20665's DeepSeek-V2-Lite log).
    """
    if pp > num_layers:
        raise KvplanError(f"--pp {pp} exceeds the model's {num_layers} layers")
    sizes = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        sizes[-i] += 1
    starts = [sum(sizes[:s]) for s in range(pp)]
    return tuple(range(start, start + size) for start, size in zip(starts, sizes, strict=True))


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str = "bf16", tp: int = 1) -> int:
    """KV bytes per token, whole model, one TP rank, for a context within every window.

    Full, sliding and chunked layers each hold 2 · kv_heads_per_gpu · head_dim · e,
    MLA layers (kv_lora_rank + qk_rope_head_dim) · e; state and shared layers 0.
    """
    return sum(cache.token_bytes for cache in layer_caches(model, kv_dtype_info(kv_dtype), tp))


def kv_bytes_per_seq(caches: tuple[LayerCache, ...], tokens: int) -> int:
    """Exact bytes the layers hold for one sequence of `tokens` tokens."""
    return sum(cache.bytes_per_seq(tokens) for cache in caches)


def naive_kv_bytes_per_token(model: ModelSpec, kv_dtype: str = "bf16") -> int:
    """The textbook MHA formula, 2 · layers · hidden · e, that ignores GQA/MQA/MLA/windows."""
    return 2 * model.num_layers * kv_dtype_info(kv_dtype).row_bytes(model.hidden_size)


# --- parameters -------------------------------------------------------------------


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
        )

    @property
    def active(self) -> int:
        """Parameters one token reads: everything except the experts it is not routed to."""
        return self.total - self.routed_experts + self.active_routed_experts


def _ffn_params(hidden: int, intermediate: int, gated: bool, bias: bool) -> int:
    matrices = 3 if gated else 2
    biases = (2 * intermediate if gated else intermediate) + hidden if bias else 0
    return matrices * hidden * intermediate + biases


def _attention_params(model: ModelSpec) -> int:
    a, hidden = model.attention, model.hidden_size
    q_width, kv_width = a.num_heads * a.head_dim, a.num_kv_heads * a.head_dim
    params = hidden * q_width * (2 if a.output_gate else 1) + 2 * hidden * kv_width
    params += q_width * hidden
    params += (q_width + 2 * kv_width) if a.qkv_bias else 0
    params += hidden if a.o_bias else 0
    params += 2 * a.head_dim if a.qk_norm else 0
    params += a.num_heads if a.sinks else 0
    return params


def _mla_params(model: ModelSpec) -> int:
    mla, heads, hidden = model.mla, model.attention.num_heads, model.hidden_size
    assert mla is not None  # only called for mla layers, which validation ties to a section
    qk_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    if mla.q_lora_rank:
        q = hidden * mla.q_lora_rank + mla.q_lora_rank + mla.q_lora_rank * heads * qk_head
    else:
        q = hidden * heads * qk_head
    kv = hidden * (mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank
    kv += mla.kv_lora_rank * heads * (mla.qk_nope_head_dim + mla.v_head_dim)
    return q + kv + heads * mla.v_head_dim * hidden


def _state_params(model: ModelSpec) -> int:
    s, hidden = model.state, model.hidden_size
    assert s is not None  # only called for state layers
    inner = s.inner_size
    if s.kind == "mamba1":
        n = s.ssm_state_size
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
    if s.kind == "mamba2":
        heads, n = s.ssm_heads, s.ssm_state_size
        conv = inner + 2 * s.num_groups * n
        return (
            hidden * (2 * inner + 2 * s.num_groups * n + heads)
            + conv * s.conv_kernel
            + conv
            + 3 * heads
            + inner
            + inner * hidden
        )
    # gated delta net (Qwen3-Next): q,k,v,z and beta,alpha projections, conv, dt/A, norm, out.
    key_width = s.num_key_heads * s.key_head_dim
    return (
        hidden * (2 * key_width + 2 * inner)
        + hidden * 2 * s.ssm_heads
        + s.conv_channels * s.conv_kernel
        + 2 * s.ssm_heads
        + s.ssm_state_size
        + inner * hidden
    )


def is_moe_layer(model: ModelSpec, layer: int) -> bool:
    """Whether layer `layer` (0-based) has a routed-expert FFN."""
    moe = model.moe
    if moe is None or layer < max(moe.dense_layers, moe.layer_offset):
        return False
    return (layer - moe.layer_offset) % moe.layer_step == 0


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
    kind = model.layer_kinds[layer]
    mixer = {"mla": _mla_params, "state": _state_params}.get(kind, _attention_params)(model)
    norms = model.norms_per_layer * _norm_size(model)
    moe = model.moe
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
    )


def tensor_bytes(params: int, dtype: DtypeInfo) -> int:
    """Bytes of `params` weights in `dtype`, group-quantisation scales included."""
    data_bits = params * dtype.bits
    if dtype.group_elements and dtype.metadata_bits:
        data_bits += ceil_div(params, dtype.group_elements) * dtype.metadata_bits
    return ceil_div(data_bits, 8)
