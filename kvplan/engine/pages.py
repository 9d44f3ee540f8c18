"""What one request is charged in one KV cache group: one frozen class per kind of page.

A pool counts pages of one unit, and the unit is part of each class:

- `TokenPages`: pages of `tokens_per_page` tokens of every layer of the group (SGLang pages,
  TensorRT-LLM blocks); a request of L tokens holds ⌈L / P⌉ of them;
- `StatePages`: a recurrent state, counted as the token pages of equal bytes it displaces
  (SGLang counts Mamba-style state as token slots);
- `BytePages`: pages of one byte (the analytic profiles: exact, hf, naive), a request holding
  the bytes its layers keep at the longest length it passes through;
- `SlotBytes` / `Slots`: llama.cpp's slots, planned per request (bytes) or fixed by -c / -np
  (one slot each).

vLLM's pages (one spec per cache kind, after `v1/kv_cache_interface.py`) are in `vllm_pages`
and take the same shape: a group whose pages are vLLM blocks. Nothing here knows memory: a
pool (`pool.KvPool`) turns a budget into pages, and `pages_per_request(L)` into requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol

from kvplan.kvmath import LayerCache, ceil_div

# What one page of a pool is: a page of tokens, one byte, or one llama.cpp slot.
PageUnit = Literal["page", "byte", "slot"]
PAGE_UNITS: tuple[PageUnit, ...] = ("page", "byte", "slot")


class RequestCharge(Protocol):
    """One KV cache group: the pages (of `unit`) one request of `tokens` tokens is charged."""

    @property
    def unit(self) -> PageUnit: ...

    @property
    def kind(self) -> str: ...

    def blocks_per_request(self, tokens: int) -> int: ...


@dataclass(frozen=True)
class TokenPages:
    """Every layer of a rank in one pool: a request holds ⌈L / tokens_per_page⌉ pages."""

    tokens_per_page: int
    kind: str = "full"
    unit: ClassVar[PageUnit] = "page"

    def blocks_per_request(self, tokens: int) -> int:
        """Pages one request of `tokens` tokens holds: ⌈tokens / tokens_per_page⌉."""
        return ceil_div(tokens, self.tokens_per_page)


@dataclass(frozen=True)
class StatePages:
    """A request's recurrent state, as the `pages` token pages of equal bytes it displaces.

    A state is written once, at the first token, and never grows: 0 pages before it.
    """

    pages: int
    kind: str = "state"
    unit: ClassVar[PageUnit] = "page"

    def blocks_per_request(self, tokens: int) -> int:
        """`pages` once the request holds a token, else 0."""
        return self.pages if tokens > 0 else 0


def peak_bytes_per_seq(cache: LayerCache, tokens: int) -> int:
    """The most one layer holds for a sequence growing to `tokens` tokens, in bytes.

    Full, sliding and MLA layers only grow; a chunked layer holds a whole chunk at L = C and
    one token at L = C + 1, so its peak up to L is at min(L, C).
    """
    return max(cache.bytes_per_seq(tokens), cache.bytes_per_seq(cache.peak_length(tokens)))


@dataclass(frozen=True)
class BytePages:
    """`layers` layers of one cache, charged in bytes: a page is one byte."""

    cache: LayerCache
    layers: int
    unit: ClassVar[PageUnit] = "byte"

    @property
    def kind(self) -> str:
        return self.cache.kind

    def blocks_per_request(self, tokens: int) -> int:
        """Bytes the layers hold at the longest point of a request growing to `tokens`."""
        return self.layers * peak_bytes_per_seq(self.cache, tokens)


class SlotPlan(Protocol):
    """What a slot charge asks of a llama.cpp launch plan."""

    def slot_bytes(self, tokens: int, device: str) -> int: ...


@dataclass(frozen=True)
class SlotBytes:
    """A request is one slot sized for it (-c L -np 1): the bytes of its cells on `device`."""

    plan: SlotPlan
    device: str
    kind: str = "full"
    unit: ClassVar[PageUnit] = "byte"

    def blocks_per_request(self, tokens: int) -> int:
        """Bytes one slot of `tokens` cells takes on the device (cells padded by the build)."""
        return self.plan.slot_bytes(tokens, self.device)


@dataclass(frozen=True)
class Slots:
    """A request takes one of the slots a fixed launch (-c N -np S) allocated up front."""

    kind: str = "full"
    unit: ClassVar[PageUnit] = "slot"

    def blocks_per_request(self, tokens: int) -> int:
        """One slot, whatever the length (the pool refuses a request longer than a slot)."""
        return 1
