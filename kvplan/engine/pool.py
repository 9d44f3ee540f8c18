"""KV layouts and pools: pages of one declared unit, and the one search for "largest that fits".

A layout says how one GPU's KV cache is cut into pages and how many pages one request of L
tokens is charged (`pages`); a pool is a layout with the pages a budget bought. A page is a
vLLM block, a token page, one byte (the analytic profiles) or one llama.cpp slot: the layout
declares which (`unit`), so a count never travels without it. One request of L tokens is
charged `blocks_per_request(L)` pages, costing `request_bytes(L)` on one GPU, and a pool of N
pages holds `N // blocks_per_request(L)` such requests.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from kvplan.engine.pages import PAGE_UNITS, PageUnit, RequestCharge

if TYPE_CHECKING:
    from kvplan.engine.batch import Batch

# A request that is charged no page (a model whose every layer reuses another's KV) is
# limited by the scheduler, not by memory; this stands for "no memory limit" in counts.
UNLIMITED_REQUESTS = 2**31 - 1


def largest_fitting(fits: Callable[[int], bool], upper: int, *, lower: int = 0) -> int:
    """The largest n in [lower, upper] with fits(n), by binary search; `lower` if none.

    `fits` must be monotone (true up to some n, false after), and `lower` is taken to fit
    without asking (0 requests, 0 tokens, 0 pages always do). Lengths are searched, never
    divided out, because KV grows with length but not linearly (pages, windows, chunks).
    Asks ⌈log2(upper − lower + 1)⌉ questions at most, each midpoint rounded up so the
    search always moves.
    """
    low, high = lower, upper
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


@dataclass(frozen=True)
class StageLayout:
    """One GPU of one pipeline stage: its cache groups and the bytes of one page.

    All groups draw page ids from one pool; a page costs `bytes_per_block` on this GPU
    (vLLM: one page in each layer that shares the block id; a byte pool: 1).
    """

    bytes_per_block: int
    groups: tuple[RequestCharge, ...]

    def blocks_per_request(self, tokens: int) -> int:
        """Pages one request growing to `tokens` tokens is charged, over every group."""
        blocks = 0
        for group in self.groups:  # a plain loop: searches call this a few million times
            blocks += group.blocks_per_request(tokens)
        return blocks

    def request_bytes(self, tokens: int) -> int:
        """Bytes one request growing to `tokens` tokens is charged on this GPU."""
        return self.blocks_per_request(tokens) * self.bytes_per_block


@dataclass(frozen=True)
class KvLayout:
    """Every pipeline stage's layout (one GPU each); rules every rank applies alike.

    `unit` is what one page of the pool is ("page": `tokens_per_block` tokens of every layer
    of a group; "byte"; "slot": one llama.cpp slot); every group of every stage counts in it.
    """

    stages: tuple[StageLayout, ...]
    tokens_per_block: int  # tokens per page shown to users (1: token- or byte-granular)
    kv_bytes_per_token: int  # one token in every layer that keeps tokens, binding GPU
    unit: PageUnit = field(default="page", kw_only=True)

    def __post_init__(self) -> None:
        if self.unit not in PAGE_UNITS:
            raise ValueError(f"page unit {self.unit!r} is not one of {', '.join(PAGE_UNITS)}")
        for stage in self.stages:
            for group in stage.groups:
                if group.unit != self.unit:
                    # A pool that adds bytes to token pages would count nothing meaningful.
                    raise ValueError(
                        f"a {group.unit} charge ({type(group).__name__}) in a pool of {self.unit}s"
                    )

    @property
    def bytes_per_block(self) -> int:
        """Bytes of one page on the binding GPU (the dearest: it sets every rank's count)."""
        return max(stage.bytes_per_block for stage in self.stages)

    def request_bytes(self, tokens: int) -> int:
        """Bytes one request of `tokens` tokens is charged on the binding (largest) GPU."""
        return max(stage.request_bytes(tokens) for stage in self.stages)

    def request_bytes_all_stages(self, tokens: int) -> int:
        """Bytes one request of `tokens` tokens is charged, summed over one GPU per stage."""
        return sum(stage.request_bytes(tokens) for stage in self.stages)

    def blocks_for(self, kv_bytes: int) -> int:
        """Pages every rank gets from `kv_bytes` per GPU: ranks agree on the minimum."""
        if kv_bytes <= 0:
            return 0
        return min(kv_bytes // stage.bytes_per_block for stage in self.stages)


Layout = TypeVar("Layout", bound=KvLayout)


@dataclass(frozen=True)
class KvPool(Generic[Layout]):
    """A layout with the pages its budget bought (the same count on every rank).

    Generic in the engine's layout, so an engine reads its own facts from `pool.layout`
    (vLLM's version, SGLang's row bytes, llama.cpp's launch plan) with their types.
    """

    layout: Layout
    num_blocks: int  # pages of `layout.unit`

    @property
    def unit(self) -> PageUnit:
        """What `num_blocks` counts: token pages, bytes or slots."""
        return self.layout.unit

    @property
    def block_capacity_tokens(self) -> int:
        """Tokens the pages hold: pages × tokens per page (what paged pools report)."""
        return self.num_blocks * self.layout.tokens_per_block

    def requests_at(self, tokens: int) -> int:
        """Whole requests of `tokens` tokens that fit at once on every rank."""
        fits = UNLIMITED_REQUESTS
        for stage in self.layout.stages:
            blocks = stage.blocks_per_request(tokens)
            if blocks:
                fits = min(fits, self.num_blocks // blocks)
        return fits

    def holds(self, batch: Batch) -> bool:
        """Whether every sequence of `batch` is charged its pages at once, on every rank."""
        return all(
            sum(count * stage.blocks_per_request(tokens) for tokens, count in batch)
            <= self.num_blocks
            for stage in self.layout.stages
        )

    def concurrency_at(self, tokens: int) -> float:
        """Requests of `tokens` tokens that fit, as a fraction (what engines print)."""
        per_request = max(stage.blocks_per_request(tokens) for stage in self.layout.stages)
        return math.inf if per_request == 0 else self.num_blocks / per_request
