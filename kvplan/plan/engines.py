"""Engine profiles: how each serving engine turns a model's KV into allocated bytes.

Each profile is data plus two small functions (which caches, bytes per sequence),
kept in a registry; adding an engine never changes `kvmath`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass

from kvplan.errors import KvplanError
from kvplan.kvmath import (
    FullCache,
    LayerCache,
    StateCache,
    ceil_div,
    kv_bytes_per_seq,
    layer_caches,
)
from kvplan.specs import DtypeInfo, ModelSpec

# vLLM platforms/cuda.py: 16 tokens per block; FlashMLA (Hopper default for MLA) needs 64.
VLLM_BLOCK_TOKENS = 16
VLLM_MLA_BLOCK_TOKENS = 64


@dataclass(frozen=True)
class EngineOptions:
    """Knobs shared by the profiles; None means the engine's own default."""

    tokens_per_block: int | None = None
    full_reservation: bool = False  # no hybrid allocator: windowed layers reserve full length


CachesFn = Callable[[ModelSpec, DtypeInfo, int, EngineOptions], tuple[LayerCache, ...]]
SeqBytesFn = Callable[[ModelSpec, tuple[LayerCache, ...], int, EngineOptions], int]


@dataclass(frozen=True)
class Engine:
    """A serving engine's KV accounting."""

    name: str
    summary: str
    caches: CachesFn
    seq_bytes: SeqBytesFn  # bytes one sequence of L tokens holds on one GPU
    paged: bool = False

    def peak_seq_bytes(
        self, model: ModelSpec, caches: tuple[LayerCache, ...], tokens: int, options: EngineOptions
    ) -> int:
        """The most one sequence holds at any length up to `tokens` (what admission must allow).

        Chunked layers peak at a full chunk; paged sliding layers hold one block more or
        less as the window crosses block boundaries, so the last block's worth is scanned.
        """
        block = self.tokens_per_block(model, options)
        total = 0
        for cache in caches:
            candidates = {tokens, cache.peak_length(tokens)}
            if block > 1 and cache.kind == "sliding":
                candidates |= set(range(max(1, tokens - block + 1), tokens + 1))
            total += max(self.seq_bytes(model, (cache,), n, options) for n in candidates)
        return total

    def tokens_per_block(self, model: ModelSpec, options: EngineOptions) -> int:
        """Tokens per KV block (1 for token-granular engines)."""
        if not self.paged:
            return 1
        if options.tokens_per_block:
            return options.tokens_per_block
        return VLLM_MLA_BLOCK_TOKENS if model.mla is not None else VLLM_BLOCK_TOKENS


def _exact_caches(
    model: ModelSpec, kv_dtype: DtypeInfo, tp: int, options: EngineOptions
) -> tuple[LayerCache, ...]:
    return layer_caches(model, kv_dtype, tp, options.full_reservation)


def _exact_seq_bytes(
    model: ModelSpec, caches: tuple[LayerCache, ...], tokens: int, options: EngineOptions
) -> int:
    return kv_bytes_per_seq(caches, tokens)


def blocks_held(cache: LayerCache, tokens: int, tokens_per_block: int) -> int:
    """Blocks one layer holds for a sequence: those covering its kept tokens.

    vLLM frees whole blocks that fell out of the window (SlidingWindowManager), so a
    6-token window over 4-token blocks at L = 10 keeps tokens 4..9 in blocks 1 and 2.
    """
    if isinstance(cache, StateCache) or tokens == 0:
        return 0
    return ceil_div(tokens, tokens_per_block) - cache.first_kept_token(tokens) // tokens_per_block


def _vllm_seq_bytes(
    model: ModelSpec, caches: tuple[LayerCache, ...], tokens: int, options: EngineOptions
) -> int:
    block = VLLM.tokens_per_block(model, options)
    total = 0
    for cache in caches:
        if isinstance(cache, StateCache):
            total += cache.bytes_per_seq(tokens)  # one state slot per request
        else:
            total += blocks_held(cache, tokens, block) * block * cache.token_bytes
    return total


def _hf_caches(
    model: ModelSpec, kv_dtype: DtypeInfo, tp: int, options: EngineOptions
) -> tuple[LayerCache, ...]:
    """transformers caches: MLA is stored decompressed, per head K (nope+rope) and V."""
    caches = layer_caches(model, kv_dtype, tp, options.full_reservation)
    if model.mla is None:
        return caches
    mla = model.mla
    heads = ceil_div(model.attention.num_heads, tp)
    per_token = heads * (
        kv_dtype.row_bytes(mla.qk_nope_head_dim + mla.qk_rope_head_dim)
        + kv_dtype.row_bytes(mla.v_head_dim)
    )
    return tuple(FullCache(per_token) if c.kind == "mla" else c for c in caches)


def _naive_caches(
    model: ModelSpec, kv_dtype: DtypeInfo, tp: int, options: EngineOptions
) -> tuple[LayerCache, ...]:
    """The textbook 2 · layers · hidden · e: every layer MHA, full length."""
    return tuple(
        FullCache(ceil_div(2 * kv_dtype.row_bytes(model.hidden_size), tp))
        for _ in range(model.num_layers)
    )


EXACT = Engine(
    "exact", "the physics: exactly the bytes the tokens need", _exact_caches, _exact_seq_bytes
)
VLLM = Engine(
    "vllm",
    "paged blocks per layer (16 tokens; MLA 64), window-aware, one state slot per request",
    _exact_caches,
    _vllm_seq_bytes,
    paged=True,
)
HF = Engine(
    "hf",
    "transformers caches: contiguous per layer, window honoured, MLA decompressed per head",
    _hf_caches,
    _exact_seq_bytes,
)
NAIVE = Engine(
    "naive",
    "textbook MHA formula 2·layers·hidden·L·e (ignores GQA/MQA/MLA/windows)",
    _naive_caches,
    _exact_seq_bytes,
)
SGLANG = Engine(
    "sglang",
    "token-granular pool (page 1): exactly the tokens' bytes, MLA latent",
    _exact_caches,
    _exact_seq_bytes,
)

ENGINES: dict[str, Engine] = {e.name: e for e in (EXACT, VLLM, SGLANG, HF, NAIVE)}


def engine(name: str) -> Engine:
    """The engine profile called `name`."""
    found = ENGINES.get(name.lower())
    if found is not None:
        return found
    close = difflib.get_close_matches(name.lower(), list(ENGINES), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise KvplanError(f"--engine: unknown engine {name!r}{hint} (allowed: {', '.join(ENGINES)})")
