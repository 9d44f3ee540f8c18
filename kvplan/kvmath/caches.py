"""Per-layer cache classes: one small frozen class per cache kind owns its arithmetic.

The vLLM `kv_cache_interface` pattern: `token_bytes` is one token of one layer on one GPU,
`tokens_kept(L)` how many of a sequence's L tokens the layer holds, `bytes_per_seq(L)` the
exact bytes. A layer holding two caches (MLA latent + indexer key; attention K/V + a Mamba
state side by side) is one object whose class names both parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


def ceil_div(numerator: int, denominator: int) -> int:
    """⌈numerator / denominator⌉ for non-negative integers."""
    return -(-numerator // denominator)


# --- per-layer caches ---------------------------------------------------------


@dataclass(frozen=True)
class FullCache:
    """K and V for every token: 2 · kv_heads_per_gpu · row_bytes(head_dim) per token."""

    token_bytes: int
    kind: str = "full"
    # One latent per token instead of a K and a V row (MLA): engines size and read it whole.
    is_latent: ClassVar[bool] = False

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

    @property
    def context_token_bytes(self) -> int:
        """Bytes the layer adds per token of the request's own context (cross layers: 0)."""
        return self.token_bytes

    @property
    def state_bytes_per_seq(self) -> int:
        """Bytes of recurrent state the layer keeps per sequence, whatever its length."""
        return 0


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
    is_latent: ClassVar[bool] = True


@dataclass(frozen=True)
class MlaIndexerCache(MlaCache):
    """MLA latent plus the sparse-attention indexer's key, both per token (DeepSeek-V3.2).

    `token_bytes` is the sum, so every generic formula counts both;
    `indexer_token_bytes` is the indexer's share (fp8 key + fp32 scales), which does not
    follow the KV dtype: 61 layers × (576 × 2 + 128 + 4) B = 78,324 B per token in bf16.
    """

    indexer_token_bytes: int = 0

    @property
    def latent_token_bytes(self) -> int:
        """Bytes of the MLA latent alone, per token."""
        return self.token_bytes - self.indexer_token_bytes


@dataclass(frozen=True)
class CrossCache(FullCache):
    """K and V of a request's encoder tokens (image tiles), fixed per request (mllama).

    The text never adds to it: at L = 1 or L = 100,000 a cross layer keeps the same
    `encoder_tokens` (images × tiles × (patches + 1)), written once when the images are
    encoded. `token_bytes` is one encoder token: 2 · kv_heads_per_gpu · row(head_dim).
    """

    encoder_tokens: int = 0
    kind: str = "cross"

    def tokens_kept(self, tokens: int) -> int:
        return self.encoder_tokens if tokens > 0 else 0

    @property
    def context_token_bytes(self) -> int:
        return 0


@dataclass(frozen=True)
class ParallelCache(FullCache):
    """Attention K/V per token and a recurrent state per sequence, in one layer (Falcon-H1).

    Falcon-H1 runs attention heads and Mamba-2 heads side by side on every layer's input,
    so each layer holds both: `token_bytes` · L + `state_bytes`.
    """

    state_bytes: int = 0
    kind: str = "parallel"

    def bytes_per_seq(self, tokens: int) -> int:
        if tokens == 0:
            return 0
        return self.token_bytes * self.tokens_kept(tokens) + self.state_bytes

    @property
    def state_bytes_per_seq(self) -> int:
        return self.state_bytes


@dataclass(frozen=True)
class StateCache:
    """A constant recurrent state per sequence (Mamba, gated delta net), independent of L."""

    state_bytes: int
    kind: str = "state"
    token_bytes: int = 0
    is_latent: ClassVar[bool] = False

    def first_kept_token(self, tokens: int) -> int:
        return tokens

    def tokens_kept(self, tokens: int) -> int:
        return 0

    def peak_length(self, tokens: int) -> int:
        return tokens

    def bytes_per_seq(self, tokens: int) -> int:
        return self.state_bytes if tokens > 0 else 0

    @property
    def context_token_bytes(self) -> int:
        return 0

    @property
    def state_bytes_per_seq(self) -> int:
        return self.state_bytes


@dataclass(frozen=True)
class EmptyCache(StateCache):
    """A layer without a sequence mixer: an FFN-only block (Nemotron-H `-`) caches nothing."""

    state_bytes: int = 0
    kind: str = "mlp"


@dataclass(frozen=True)
class SharedCache(EmptyCache):
    """Reuses another layer's KV: holds nothing of its own."""

    kind: str = "shared"


LayerCache = FullCache | StateCache
