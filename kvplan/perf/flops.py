"""FLOPs of a model's operations: matmul parameters per token, causal attention, MoE routing.

Pure arithmetic over the ModelSpec (no SKU, no time): the step model (kvplan.perf.step_model)
turns these counts into seconds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import lru_cache

from kvplan.kvmath import (
    ChunkedCache,
    CrossCache,
    LayerCache,
    SharedCache,
    SlidingCache,
    StateCache,
    layer_caches,
    param_counts,
)
from kvplan.specs import ModelSpec, kv_dtype_info


def gemm_flops(m: int, n: int, k: int) -> int:
    """FLOPs of an (m × k) · (k × n) matrix product: 2 · m · n · k (a multiply and an add)."""
    return 2 * m * n * k


def expected_experts_touched(num_experts: int, experts_per_token: int, batch: int) -> float:
    """Expected distinct routed experts one MoE layer reads for `batch` tokens.

    With uniform, independent routing an expert is missed by one token with probability
    1 − k/E, so E · (1 − (1 − k/E)^b): exactly k at b = 1, tending to E as b grows.
    """
    return num_experts * (1 - (1 - experts_per_token / num_experts) ** batch)


@lru_cache(maxsize=1024)  # a simulation asks once per prefill chunk; specs are frozen
def matmul_params_per_token(model: ModelSpec) -> int:
    """Parameters one token multiplies through: active params, embedding out, lm_head in.

    The input embedding is a row gather (no FLOPs); lm_head is a matmul for every prompt
    token whether or not it is tied. MoE layers count experts_per_token experts. Norm
    weights and biases count like matrix weights (2 FLOP each; well under 0.1 %).
    """
    counts = param_counts(model)
    return counts.active - counts.embedding - counts.lm_head + model.vocab_size * model.hidden_size


def causal_attention_flops(model: ModelSpec, prompt_tokens: int) -> int:
    """FLOPs of QKᵀ and PV for one causal prompt, all layers and heads.

    Per layer 2 · num_heads · (qk width + v width) · Σ_{i=1..L} kept(i): head_dim for
    both widths in softmax attention; MLA prefill runs per head with qk_nope + qk_rope
    and v_head_dim. State layers have none beyond their params (counted as matmuls).
    """
    return sum(
        2 * width * layers * attended_tokens_sum(cache, prompt_tokens)
        for cache, width, layers in _attention_terms(model)
    )


@lru_cache(maxsize=1024)  # a simulation asks for every prefill chunk; specs are frozen
def _attention_terms(model: ModelSpec) -> tuple[tuple[LayerCache, int, int], ...]:
    """Each distinct layer cache with its qk + v width and its layer count."""
    heads, head_dim, mla = model.attention.num_heads, model.attention.head_dim, model.mla
    terms: Counter[tuple[LayerCache, int]] = Counter()
    # Cache objects only give each layer's kind and window; the KV dtype is irrelevant here.
    for cache in layer_caches(model, kv_dtype_info("bf16")):
        if cache.is_latent and mla is not None:
            width = heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim + mla.v_head_dim)
        else:
            width = heads * 2 * head_dim
        terms[(cache, width)] += 1
    return tuple((cache, width, layers) for (cache, width), layers in terms.items())


def attended_tokens_sum(cache: LayerCache, prompt_tokens: int) -> int:
    """Σ_{i=1..L} of the keys query position i attends to in this layer, closed form.

    full: L(L+1)/2. sliding W: positions up to W see all before them, later ones W.
    chunked C: L = q·C + r gives q complete chunks of C(C+1)/2 plus r(r+1)/2.
    state: 0 (no attention). shared: a shared-KV layer still attends with its own
    queries; its window is not recorded, so full length is assumed (an upper bound).
    cross: every position attends to all the request's encoder tokens, L · E.
    """
    length = prompt_tokens
    if isinstance(cache, CrossCache):
        return length * cache.encoder_tokens
    if isinstance(cache, SharedCache):
        return _triangle(length)
    if isinstance(cache, StateCache):
        return 0
    if isinstance(cache, SlidingCache):
        seen_all = min(length, cache.window_tokens)
        return _triangle(seen_all) + (length - seen_all) * cache.window_tokens
    if isinstance(cache, ChunkedCache):
        chunks, rest = divmod(length, cache.chunk_tokens)
        return chunks * _triangle(cache.chunk_tokens) + _triangle(rest)
    return _triangle(length)


def _triangle(n: int) -> int:
    return n * (n + 1) // 2


def prefill_chunk_flops(model: ModelSpec, done_tokens: int, chunk_tokens: int) -> int:
    """FLOPs to prefill `chunk_tokens` more tokens of a prompt whose first `done_tokens` are cached.

    2 · matmul params per token · chunk + attention(done + chunk) − attention(done): the chunks
    of one prompt add up to `prefill()`'s FLOPs for the whole prompt, whatever the chunking.
    """
    return chunk_flops_function(model)(done_tokens, chunk_tokens)


@lru_cache(maxsize=1024)
def chunk_flops_function(model: ModelSpec) -> Callable[[int, int], int]:
    """`prefill_chunk_flops` for one model as a function of (done, chunk) tokens.

    A simulator asks for every prefill chunk it runs; looking the model up once keeps each
    call to a few integer operations.
    """
    matmul_flops_per_token = 2 * matmul_params_per_token(model)
    terms = [(2 * width * layers, cache) for cache, width, layers in _attention_terms(model)]

    def flops(done_tokens: int, chunk_tokens: int) -> int:
        end = done_tokens + chunk_tokens
        attention = sum(
            factor * (attended_tokens_sum(cache, end) - attended_tokens_sum(cache, done_tokens))
            for factor, cache in terms
        )
        return matmul_flops_per_token * chunk_tokens + attention

    return flops


@lru_cache(maxsize=1024)
def attention_chunk_flops_function(model: ModelSpec) -> Callable[[int, int], int]:
    """FLOPs of QKᵀ and PV alone (no matmul weights) for (done, chunk) tokens of a prompt."""
    terms = [(2 * width * layers, cache) for cache, width, layers in _attention_terms(model)]

    def flops(done_tokens: int, chunk_tokens: int) -> int:
        end = done_tokens + chunk_tokens
        return sum(
            factor * (attended_tokens_sum(cache, end) - attended_tokens_sum(cache, done_tokens))
            for factor, cache in terms
        )

    return flops
