"""KV allocators: paged blocks, or one contiguous reservation per request placed first-fit.

Both count in the engine layout's blocks (a byte for the analytic engines), so the pool is
the one the engine model buys. `paged` takes blocks as a request grows and runs out only
when the pool does (then the scheduler preempts); a contiguous allocator reserves a request's
whole span at admission (Orca's baselines as the PagedAttention paper runs them, SOSP 2023
§6.1: Max reserves the model's context, Pow2 the prompt plus the output rounded up to a power
of two, Oracle the prompt plus the true output) in one run of the address space, so holes
between live reservations (external fragmentation) appear by themselves.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable


class PagedAllocator:
    """A pool of `num_blocks` interchangeable blocks."""

    growth_limited = True  # growing requests draw on the pool as they cross block boundaries

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self.used_blocks = 0

    @property
    def free_blocks(self) -> int:
        return self.num_blocks - self.used_blocks

    @property
    def allocated_blocks(self) -> int:
        return self.used_blocks

    @property
    def fragmentation_blocks(self) -> int:
        return 0  # any free block serves any request

    def fits_ever(self, final_blocks: int, reservation_blocks: int) -> bool:
        """Whether a request charged `final_blocks` at its longest fits an empty pool."""
        return final_blocks <= self.num_blocks

    def admit(self, blocks: int, reservation_blocks: int) -> int | None:
        """Take `blocks` for a request's first tokens; a handle, or None if they are not free."""
        if blocks > self.free_blocks:
            return None
        self.used_blocks += blocks
        return 0

    def grow(self, blocks: int) -> None:
        """Take `blocks` more (the caller checked `free_blocks`)."""
        self.used_blocks += blocks

    def release(self, handle: int, held_blocks: int, reservation_blocks: int) -> None:
        self.used_blocks -= held_blocks


class ContiguousAllocator:
    """First-fit contiguous reservations in an address space of `num_blocks` blocks."""

    growth_limited = False  # a request grows inside its reservation

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self.holes: list[list[int]] = [[0, num_blocks]] if num_blocks > 0 else []  # [start, size]
        self.reserved_blocks = 0
        self.largest_hole = num_blocks

    @property
    def free_blocks(self) -> int:
        return self.num_blocks - self.reserved_blocks

    @property
    def allocated_blocks(self) -> int:
        return self.reserved_blocks

    @property
    def fragmentation_blocks(self) -> int:
        """Free blocks outside the largest hole: free memory a large request cannot use."""
        return self.free_blocks - self.largest_hole

    def fits_ever(self, final_blocks: int, reservation_blocks: int) -> bool:
        return reservation_blocks <= self.num_blocks

    def admit(self, blocks: int, reservation_blocks: int) -> int | None:
        """Place a reservation in the first hole that holds it; its start, or None."""
        for index, (start, size) in enumerate(self.holes):
            if size >= reservation_blocks:
                if size == reservation_blocks:
                    del self.holes[index]
                else:
                    self.holes[index] = [start + reservation_blocks, size - reservation_blocks]
                self.reserved_blocks += reservation_blocks
                self._measure()
                return start
        return None

    def grow(self, blocks: int) -> None:
        """Nothing to take: the reservation already covers the request's growth."""

    def release(self, handle: int, held_blocks: int, reservation_blocks: int) -> None:
        """Return a reservation, merging it with the holes on either side."""
        index = bisect_left(self.holes, [handle, 0])
        start, size = handle, reservation_blocks
        if index < len(self.holes) and self.holes[index][0] == start + size:
            size += self.holes.pop(index)[1]
        if index > 0 and sum(self.holes[index - 1]) == start:
            self.holes[index - 1][1] += size
        else:
            self.holes.insert(index, [start, size])
        self.reserved_blocks -= reservation_blocks
        self._measure()

    def _measure(self) -> None:
        self.largest_hole = max((size for _, size in self.holes), default=0)


def reservation_tokens(policy: str, max_model_len: int) -> Callable[[int, int], int]:
    """Tokens a contiguous policy reserves for a request of (prompt, output) tokens.

    reserve-max: the model's context; reserve-pow2: the prompt plus the output rounded up to
    a power of two ("if the true output length is 25, it reserves 32 positions"); reserve-
    exact: the prompt plus the true output. Never more than the context.
    """
    if policy == "reserve-max":
        return lambda prompt, output: max_model_len
    if policy == "reserve-pow2":
        return lambda prompt, output: min(prompt + (1 << (output - 1).bit_length()), max_model_len)
    return lambda prompt, output: min(prompt + output, max_model_len)
