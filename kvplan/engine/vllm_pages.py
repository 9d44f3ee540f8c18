"""vLLM's pages and KV cache groups: what one block costs and what one request is charged.

Page sizes follow vLLM 0.11 `v1/kv_cache_interface.py` (one frozen spec per cache kind,
each owning `page_size_bytes` and `max_memory_usage_bytes`); grouping follows
`v1/core/kv_cache_utils.py` (`get_kv_cache_groups`, `get_num_blocks`,
`_get_kv_cache_groups_uniform_page_size`); later versions differ where `VllmVersion` says.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import ClassVar

from kvplan.engine.pages import PageUnit
from kvplan.engine.pool import StageLayout, largest_fitting
from kvplan.engine.vllm_version import VllmVersion
from kvplan.kvmath import (
    ChunkedCache,
    CrossCache,
    LayerCache,
    SlidingCache,
    StateCache,
    ceil_div,
)


@dataclass(frozen=True)
class PageSpec:
    """One full-attention layer's KV spec in vLLM terms (one rank): FullAttentionSpec.

    A request of `max_model_len` holds ⌈max_model_len / block_tokens⌉ blocks. Other kinds
    are subclasses that override `blocks_per_request` only, as vLLM's specs override
    `max_memory_usage_bytes`.
    """

    page_bytes: int  # one block of this layer
    block_tokens: int  # tokens in one block
    kind: ClassVar[str] = "full"
    # Whether a request keeps every one of its tokens here (a speculative draft layer joins
    # such a group: it attends to the whole context).
    keeps_every_token: ClassVar[bool] = True

    def blocks_per_request(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        """Blocks vLLM reserves for one request of `max_model_len` (max_memory_usage_bytes)."""
        return ceil_div(max_model_len, self.block_tokens)

    def max_memory_usage_bytes(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        """Bytes one request of `max_model_len` may need in this layer."""
        return self.blocks_per_request(max_model_len, max_num_batched_tokens) * self.page_bytes


@dataclass(frozen=True)
class MlaPageSpec(PageSpec):
    """MLAAttentionSpec: one latent per token (its page bytes say so), full length."""

    kind: ClassVar[str] = "mla"


@dataclass(frozen=True)
class SlidingPageSpec(PageSpec):
    """SlidingWindowSpec: w − 1 old tokens plus up to one batch of new ones, and one extra
    block because a window rarely starts on a block boundary: a 6-token window over 4-token
    blocks can straddle 3 blocks."""

    window_tokens: int = 0
    kind: ClassVar[str] = "sliding"
    keeps_every_token: ClassVar[bool] = False

    def blocks_per_request(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        kept = min(self.window_tokens - 1 + max_num_batched_tokens, max_model_len)
        return ceil_div(kept, self.block_tokens) + 1


@dataclass(frozen=True)
class ChunkedPageSpec(PageSpec):
    """ChunkedLocalAttentionSpec: the current chunk plus one batch of new tokens."""

    chunk_tokens: int = 0
    kind: ClassVar[str] = "chunked"
    keeps_every_token: ClassVar[bool] = False

    def blocks_per_request(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        kept = min(self.chunk_tokens + max_num_batched_tokens, max_model_len)
        return ceil_div(kept, self.block_tokens)


@dataclass(frozen=True)
class CrossPageSpec(PageSpec):
    """CrossAttentionSpec: the request's encoder tokens, whatever its text length."""

    encoder_tokens: int = 0
    kind: ClassVar[str] = "cross"
    keeps_every_token: ClassVar[bool] = False

    def blocks_per_request(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        return ceil_div(self.encoder_tokens, self.block_tokens)


@dataclass(frozen=True)
class StatePageSpec(PageSpec):
    """MambaSpec: one state block per request (its page padded to the attention page)."""

    kind: ClassVar[str] = "state"
    keeps_every_token: ClassVar[bool] = False

    def blocks_per_request(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        return 1


def attention_page_spec(cache: LayerCache, block_tokens: int) -> PageSpec:
    """The vLLM spec of a layer's attention part: its kind's class, one block of its bytes."""
    page = block_tokens * cache.token_bytes
    if isinstance(cache, SlidingCache):
        return SlidingPageSpec(page, block_tokens, cache.window_tokens)
    if isinstance(cache, ChunkedCache):
        return ChunkedPageSpec(page, block_tokens, cache.chunk_tokens)
    if isinstance(cache, CrossCache):
        return CrossPageSpec(page, block_tokens, cache.encoder_tokens)
    if cache.is_latent:
        return MlaPageSpec(page, block_tokens)
    return PageSpec(page, block_tokens)  # full attention, and a Falcon-H1 layer's attention


@dataclass(frozen=True)
class VllmGroup:
    """A KV cache group: `layers` layers of one spec sharing block ids."""

    spec: PageSpec
    layers: int
    max_num_batched_tokens: int
    unit: ClassVar[PageUnit] = "page"

    @property
    def kind(self) -> str:
        return self.spec.kind

    def blocks_per_request(self, tokens: int) -> int:
        return self.spec.blocks_per_request(tokens, self.max_num_batched_tokens)


@dataclass(frozen=True)
class VllmStage(StageLayout):
    """One stage's groups, grouped the way a vLLM version does, and the price of a block."""

    spec_counts: tuple[tuple[PageSpec, int], ...] = ()  # each distinct spec, its layer count
    group_size: int = 1
    padding: tuple[tuple[int, int], ...] = ()  # per padded spec: (padding layers, layers)
    max_num_batched_tokens: int = 0

    @property
    def padding_layers(self) -> int:
        return sum(pad for pad, _ in self.padding)

    @property
    def block_tokens(self) -> int:
        return min(spec.block_tokens for spec, _ in self.spec_counts)

    def needed_bytes(self, max_model_len: int) -> int:
        """The startup check's Σ_layers max_memory_usage_bytes(max_model_len)."""
        return sum(
            count * spec.max_memory_usage_bytes(max_model_len, self.max_num_batched_tokens)
            for spec, count in self.spec_counts
        )


def _attention_token_bytes(cache: LayerCache) -> int:
    """Bytes per token of a layer's attention pages (0 for state-only and empty layers)."""
    return 0 if isinstance(cache, StateCache) else cache.token_bytes


def page_specs(
    caches: tuple[LayerCache, ...],
    layers: range,
    block_tokens: int,
    mamba_aligned: bool,
) -> list[PageSpec]:
    """vLLM's specs for `layers` on one rank: one per attention part, one per state part.

    A Falcon-H1 layer registers both an attention spec and a Mamba spec; shared and empty
    (MLP-only) layers register none. Attention + Mamba hybrids (`mamba_aligned`) raise the
    attention block so one attention page holds at least one state (models/config.py
    HybridAttentionMambaModelConfig: 16 · ⌈state / (16 · attention bytes per token)⌉ tokens)
    and pad the state page to it. Cross-attention layers (mllama) keep the request's encoder
    tokens (CrossAttentionSpec: ⌈encoder tokens / B⌉ pages).
    """
    # The recurrent state a layer keeps per request (Mamba, GDN, KDA; Falcon-H1's mixer).
    state_bytes = max((c.state_bytes_per_seq for c in caches), default=0)
    per_token = next((b for b in map(_attention_token_bytes, caches) if b), 0)
    if state_bytes and per_token and mamba_aligned:
        block_tokens = 16 * ceil_div(state_bytes, 16 * per_token)
    attention_page = block_tokens * per_token
    specs = []
    for i in layers:
        cache = caches[i]
        if _attention_token_bytes(cache):
            specs.append(attention_page_spec(cache, block_tokens))
        if cache.state_bytes_per_seq:
            specs.append(
                StatePageSpec(max(cache.state_bytes_per_seq, attention_page), block_tokens)
            )
    return specs


def group_layers(
    specs: list[PageSpec], version: VllmVersion
) -> tuple[list[tuple[PageSpec, int]], int]:
    """KV cache groups as (spec, layers) and the group size (layers sharing one block id).

    One spec for every layer: one group of all layers. Several specs with one page size
    (hybrids): each spec's layers are cut into groups of `group_size` (the smallest layer
    count of a spec; ≥ 0.22 the largest when it is under 1.5× the smallest); short groups
    are padded (vLLM warns "Add k padding layers").
    """
    counts = Counter(specs)
    if len(counts) == 1:
        spec, layers = next(iter(counts.items()))
        return [(spec, layers)], layers
    sizes = counts.values()
    group_size = min(sizes)
    if version.group_size_prefers_max and max(sizes) < 1.5 * min(sizes):
        group_size = max(sizes)
    groups = []
    for spec, layers in counts.items():
        num_groups = ceil_div(layers, group_size)
        groups += [(spec, len(range(g, layers, num_groups))) for g in range(num_groups)]
    return groups, group_size


def stage_layout(
    specs: list[PageSpec], version: VllmVersion, max_num_batched_tokens: int
) -> VllmStage:
    """Group one stage's specs the way `version` does and price one block id.

    One group (or V0): get_num_blocks divides by Σ pages of all layers. Hybrids share one
    pool: a block id costs one page in each of the group_size layers of a group.
    """
    groups, group_size = group_layers(specs, version)
    counts = tuple(Counter(specs).items())
    padding: tuple[tuple[int, int], ...] = ()
    if version.era == "v0" or len(groups) == 1:
        per_block = sum(spec.page_bytes * layers for spec, layers in groups)
        # V0's block spans every layer: a request is charged ⌈L / B⌉ of them, once.
        groups = groups[:1]
    else:
        per_block = groups[0][0].page_bytes * group_size
        # vLLM warns per spec: "Add k padding layers, may waste at most k / layers of that spec".
        padding = tuple(
            (ceil_div(layers, group_size) * group_size - layers, layers)
            for _, layers in counts
            if layers % group_size
        )
    charges = tuple(VllmGroup(spec, layers, max_num_batched_tokens) for spec, layers in groups)
    return VllmStage(
        bytes_per_block=per_block,
        groups=charges,
        spec_counts=counts,
        group_size=group_size,
        padding=padding,
        max_num_batched_tokens=max_num_batched_tokens,
    )


def estimated_max_model_len(stages: tuple[VllmStage, ...], available_bytes: int, upper: int) -> int:
    """The startup check's estimate: the longest length whose reservation fits (binary search)."""
    return largest_fitting(
        lambda length: max(stage.needed_bytes(length) for stage in stages) <= available_bytes,
        upper,
    )
