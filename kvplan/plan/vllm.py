"""vLLM's KV-cache startup arithmetic, version by version.

See ../shared/reference/vllm_kv_accounting.md.

Given the bytes one rank has for KV ("Available KV cache memory"), reproduce what vLLM
prints: the number of blocks, "GPU KV cache size: N tokens", "Maximum concurrency for
L tokens per request: X", and the startup check's "estimated maximum model length".
Page sizes and grouping follow vLLM 0.11 `v1/kv_cache_interface.py` and
`v1/core/kv_cache_utils.py`; later versions differ where `VllmVersion` says so.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from kvplan.errors import KvplanError
from kvplan.kvmath import ChunkedCache, FullCache, SlidingCache, StateCache, ceil_div, layer_caches
from kvplan.specs import DtypeInfo, ModelSpec

BLOCK_TOKENS = 16  # platforms/cuda.py default
MLA_BLOCK_TOKENS = 64  # FlashMLA, the Hopper default for MLA models


@dataclass(frozen=True)
class VllmVersion:
    """Version-specific behaviour of the startup accounting."""

    text: str
    major_minor: tuple[int, int]

    @property
    def era(self) -> str:
        """'v0' (block manager, ≤ 0.7 default), 'v1' (0.8–0.21 log lines) or 'v1-new' (≥ 0.22)."""
        if self.major_minor < (0, 8):
            return "v0"
        return "v1" if self.major_minor < (0, 22) else "v1-new"

    @property
    def default_utilization(self) -> float:
        # config/cache.py: 0.9 through 0.18, 0.92 from 0.20.0.
        return 0.92 if self.major_minor >= (0, 20) else 0.9

    @property
    def subtracts_cudagraph_estimate(self) -> bool:
        # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to "1" from 0.20.0.
        return self.major_minor >= (0, 20)

    @property
    def group_size_prefers_max(self) -> bool:
        # 0.33 kv_cache_utils: group_size = max(layers per type) when max < 1.5 · min.
        return self.major_minor >= (0, 22)


def parse_version(text: str) -> VllmVersion:
    """A version such as '0.11', '0.10.1.1' or '0.22.0'."""
    match = re.fullmatch(r"\s*v?(\d+)\.(\d+)(?:\.[0-9A-Za-z.+-]*)?\s*", text)
    if not match:
        raise KvplanError(f"--vllm-version: {text!r} is not a version like 0.11 or 0.10.1")
    return VllmVersion(text.strip(), (int(match.group(1)), int(match.group(2))))


DEFAULT_VERSION = parse_version("0.11.0")


@dataclass(frozen=True)
class PageSpec:
    """One layer's KV spec in vLLM terms (one rank): its page and per-request reservation."""

    kind: str  # full, sliding, chunked, mla, state
    page_bytes: int  # one block of this layer
    block_tokens: int
    window_tokens: int = 0  # sliding window, or chunk size for chunked

    def max_memory_usage_bytes(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        """Bytes one request of `max_model_len` may need (vLLM's `max_memory_usage_bytes`)."""
        return self.blocks_per_request(max_model_len, max_num_batched_tokens) * self.page_bytes

    def blocks_per_request(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        """Blocks vLLM charges one request in the concurrency figure.

        SlidingWindowSpec keeps w − 1 old tokens plus up to one batch of new ones, and one
        extra block because a window rarely starts on a block boundary: a 6-token window
        over 4-token blocks can straddle 3 blocks.
        """
        block = self.block_tokens
        if self.kind == "state":
            return 1
        if self.kind == "sliding":
            kept = min(self.window_tokens - 1 + max_num_batched_tokens, max_model_len)
            return ceil_div(kept, block) + 1
        if self.kind == "chunked":
            return ceil_div(min(self.window_tokens + max_num_batched_tokens, max_model_len), block)
        return ceil_div(max_model_len, block)


@dataclass(frozen=True)
class KvGroup:
    """A KV cache group: layers of one spec sharing block ids; padded groups have fewer."""

    spec: PageSpec
    layers: int


def page_specs(
    model: ModelSpec,
    kv_dtype: DtypeInfo,
    tp: int,
    layers: range,
    block_tokens: int | None = None,
    hybrid_allocator: bool = True,
) -> list[PageSpec]:
    """vLLM's spec for each of `layers` on one rank.

    Without the hybrid allocator (`unify_hybrid_kv_cache_specs`) windowed layers become
    full ones. Attention + Mamba hybrids raise the attention block so one attention page
    is at least one state (models/config.py HybridAttentionMambaModelConfig), and the state
    page is padded up to it.
    """
    caches = layer_caches(model, kv_dtype, tp, full_reservation=not hybrid_allocator)
    block = block_tokens or (MLA_BLOCK_TOKENS if model.mla is not None else BLOCK_TOKENS)
    states = [c for c in caches if isinstance(c, StateCache) and c.kind == "state"]
    attention = [c for c in caches if not isinstance(c, StateCache)]
    if states and attention and block_tokens is None:
        per_token = attention[0].token_bytes
        state_bytes = max(c.state_bytes for c in states)
        block = 16 * ceil_div(state_bytes, 16 * per_token)
    attention_page = block * attention[0].token_bytes if attention else 0
    specs = []
    for i in layers:
        cache = caches[i]
        if isinstance(cache, StateCache):
            if cache.kind == "state":
                specs.append(PageSpec("state", max(cache.state_bytes, attention_page), block))
            continue  # shared layers own no KV
        window = 0
        if isinstance(cache, SlidingCache):
            window = cache.window_tokens
        elif isinstance(cache, ChunkedCache):
            window = cache.chunk_tokens
        assert isinstance(cache, FullCache)
        specs.append(PageSpec(cache.kind, block * cache.token_bytes, block, window))
    return specs


def group_layers(specs: list[PageSpec], version: VllmVersion) -> tuple[list[KvGroup], int]:
    """KV cache groups and the group size (layers sharing one block id).

    One spec for every layer: one group of all layers. Several specs with one page size
    (hybrids): each spec's layers are cut into groups of `group_size` (the smallest layer
    count of a spec; ≥ 0.22 the largest when it is under 1.5× the smallest); short groups
    are padded (vLLM warns "Add k padding layers").
    """
    counts = Counter(specs)
    if len(counts) == 1:
        spec, layers = next(iter(counts.items()))
        return [KvGroup(spec, layers)], layers
    sizes = counts.values()
    group_size = min(sizes)
    if version.group_size_prefers_max and max(sizes) < 1.5 * min(sizes):
        group_size = max(sizes)
    groups = []
    for spec, layers in counts.items():
        for g in range(ceil_div(layers, group_size)):
            groups.append(KvGroup(spec, len(range(g, layers, ceil_div(layers, group_size)))))
    return groups, group_size


@dataclass(frozen=True)
class StageLayout:
    """One pipeline stage's specs, grouped once; independent of the memory budget."""

    spec_counts: tuple[tuple[PageSpec, int], ...]  # each distinct spec and its layer count
    groups: tuple[KvGroup, ...]
    group_size: int
    bytes_per_block: int  # one block id across the layers that share it
    padding: tuple[tuple[int, int], ...]  # per spec with padded groups: (padding layers, layers)

    @property
    def padding_layers(self) -> int:
        return sum(pad for pad, _ in self.padding)

    def needed_bytes(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        """The startup check's Σ_layers max_memory_usage_bytes(max_model_len)."""
        return sum(
            count * spec.max_memory_usage_bytes(max_model_len, max_num_batched_tokens)
            for spec, count in self.spec_counts
        )


def stage_layout(specs: list[PageSpec], version: VllmVersion) -> StageLayout:
    """Group one stage's specs the way `version` does and price one block id.

    One group (or V0): get_num_blocks divides by Σ pages of all layers. Hybrids share
    one pool: a block id costs one page in each of the group_size layers of a group.
    """
    groups, group_size = group_layers(specs, version)
    counts = tuple(Counter(specs).items())
    if version.era == "v0" or len(groups) == 1:
        per_block = sum(g.spec.page_bytes * g.layers for g in groups)
        padding: tuple[tuple[int, int], ...] = ()
    else:
        per_block = groups[0].spec.page_bytes * group_size
        # vLLM warns per spec: "Add k padding layers, may waste at most k / layers of that spec".
        padding = tuple(
            (ceil_div(layers, group_size) * group_size - layers, layers)
            for _, layers in counts
            if layers % group_size
        )
    return StageLayout(counts, tuple(groups), group_size, per_block, padding)


@dataclass(frozen=True)
class VllmKvCache:
    """What vLLM logs at startup for one rank's KV budget."""

    available_bytes: int
    max_model_len: int
    max_num_batched_tokens: int
    layout: StageLayout  # the binding stage's
    num_blocks: int
    version: VllmVersion

    @property
    def groups(self) -> tuple[KvGroup, ...]:
        return self.layout.groups

    @property
    def padding_layers(self) -> int:
        return self.layout.padding_layers

    @property
    def needed_bytes(self) -> int:
        return self.layout.needed_bytes(self.max_model_len, self.max_num_batched_tokens)

    @property
    def block_tokens(self) -> int:
        return min(g.spec.block_tokens for g in self.groups)

    @property
    def blocks_per_request(self) -> int:
        """Σ over groups of the blocks one max_model_len request is charged."""
        return sum(
            g.spec.blocks_per_request(self.max_model_len, self.max_num_batched_tokens)
            for g in self.groups
        )

    @property
    def max_concurrency(self) -> float:
        """ "Maximum concurrency for L tokens per request: X" (V1; V0: N·B/L)."""
        return self.concurrency_at(self.max_model_len)

    def concurrency_at(self, tokens: int) -> float:
        """The concurrency figure this pool would print for requests of `tokens` tokens."""
        if self.version.era == "v0":
            return self.num_blocks * self.block_tokens / tokens
        mnbt = self.max_num_batched_tokens
        return self.num_blocks / sum(g.spec.blocks_per_request(tokens, mnbt) for g in self.groups)

    @property
    def gpu_kv_cache_tokens(self) -> int:
        """ "GPU KV cache size: N tokens" as this version defines it.

        0.8–0.21: the pool of one group, (num_blocks // groups) · block tokens;
        ≥ 0.22: tokens of context at peak concurrency, int(X · max_model_len).
        """
        if self.version.era == "v1-new":
            return int(self.max_concurrency * self.max_model_len)
        return self.num_blocks // len(self.groups) * self.block_tokens

    @property
    def fits_one_request(self) -> bool:
        return self.needed_bytes <= self.available_bytes


def kv_cache_for_budget(
    layouts: tuple[StageLayout, ...],
    available_bytes: int,
    max_model_len: int,
    max_num_batched_tokens: int,
    version: VllmVersion = DEFAULT_VERSION,
) -> VllmKvCache:
    """vLLM's KV cache on the binding rank: every rank takes the minimum number of blocks."""
    if available_bytes < 0:
        raise KvplanError(f"available KV memory is negative ({available_bytes:,} bytes)")
    binding = min(layouts, key=lambda layout: available_bytes // layout.bytes_per_block)
    return VllmKvCache(
        available_bytes,
        max_model_len,
        max_num_batched_tokens,
        binding,
        available_bytes // binding.bytes_per_block,
        version,
    )


def estimated_max_model_len(
    layouts: tuple[StageLayout, ...],
    available_bytes: int,
    max_model_len: int,
    max_num_batched_tokens: int,
) -> int:
    """The startup check's estimate: the longest length whose reservation fits (binary search)."""
    low, high = 0, max_model_len
    while low < high:
        mid = (low + high + 1) // 2
        needed = max(layout.needed_bytes(mid, max_num_batched_tokens) for layout in layouts)
        if needed <= available_bytes:
            low = mid
        else:
            high = mid - 1
    return low
