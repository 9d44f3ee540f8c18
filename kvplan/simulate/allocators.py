"""KV allocators: paged blocks, or one contiguous reservation per request, first-fit or buddy.

Both count in the engine layout's blocks (a byte for the analytic engines), so the pool is
the one the engine model buys. `paged` takes blocks as a request grows and runs out only
when the pool does (then the scheduler preempts); a contiguous allocator reserves a request's
whole span at admission (Orca's baselines as the PagedAttention paper runs them, SOSP 2023
§6.1: Max reserves the model's context, Pow2 the prompt plus the output rounded up to a power
of two, Oracle the prompt plus the true output) in one run of the address space, so holes
between live reservations (external fragmentation) appear by themselves.

Placement: first-fit takes the lowest hole that holds the reservation; buddy (Knuth, TAOCP
vol. 1 §2.5; the allocator the paper's Orca baselines assume, §3 "the buddy allocation
algorithm") rounds it up to a power-of-two run aligned to its size, splits larger free runs
in halves to make one, and merges a freed run with its free buddy. The rounding is memory
reserved and never used (internal fragmentation), as the paper counts it.

Each reservation also records the blocks its request will hold at its longest
(`final_blocks`), so the pool can be split as the paper's Fig. 2 does: token states,
reserved for tokens still to come, reserved and never used, and external fragmentation.
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

    @property
    def final_blocks(self) -> int:
        return self.used_blocks  # nothing is reserved ahead: what is held is what is used

    def fits_ever(self, final_blocks: int, reservation_blocks: int) -> bool:
        """Whether a request charged `final_blocks` at its longest fits an empty pool."""
        return final_blocks <= self.num_blocks

    def can_place(self, reservation_blocks: int) -> bool:
        return True  # paging has no reservation; free blocks are checked by the caller

    def admit(self, blocks: int, reservation_blocks: int, final_blocks: int = 0) -> int | None:
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
        self.final_blocks = 0  # Σ blocks the live reservations' requests hold at their longest
        self._finals: dict[int, int] = {}  # handle -> its request's final blocks

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

    def can_place(self, reservation_blocks: int) -> bool:
        return self.largest_hole >= reservation_blocks

    def admit(self, blocks: int, reservation_blocks: int, final_blocks: int = 0) -> int | None:
        """Place a reservation in the first hole that holds it; its start, or None."""
        for index, (start, size) in enumerate(self.holes):
            if size >= reservation_blocks:
                if size == reservation_blocks:
                    del self.holes[index]
                else:
                    self.holes[index] = [start + reservation_blocks, size - reservation_blocks]
                self.reserved_blocks += reservation_blocks
                self._measure()
                self._finals[start] = final_blocks
                self.final_blocks += final_blocks
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
        self.final_blocks -= self._finals.pop(handle)
        self._measure()

    def _measure(self) -> None:
        self.largest_hole = max((size for _, size in self.holes), default=0)


class BuddyAllocator:
    """Power-of-two reservations in an address space of `num_blocks` blocks (see the module
    docstring). A pool that is not a power of two is cut into its binary digits, largest
    first (26,290 = 16,384 + 8,192 + 1,024 + …), each run aligned to its size."""

    growth_limited = False  # a request grows inside its reservation

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self.free_runs: dict[int, set[int]] = {}  # order k -> starts of free runs of 2^k
        start = 0
        for order in range(num_blocks.bit_length() - 1, -1, -1):
            if num_blocks >> order & 1:
                self.free_runs.setdefault(order, set()).add(start)
                start += 1 << order
        self.reserved_blocks = 0  # Σ 2^k of the live runs
        self.final_blocks = 0
        self._live: dict[int, tuple[int, int]] = {}  # start -> (order, final blocks)

    @staticmethod
    def order_of(blocks: int) -> int:
        """The smallest k with 2^k ≥ blocks (a run holds at least one block)."""
        return max(blocks - 1, 0).bit_length()

    @property
    def free_blocks(self) -> int:
        return self.num_blocks - self.reserved_blocks

    @property
    def allocated_blocks(self) -> int:
        return self.reserved_blocks

    @property
    def largest_run(self) -> int:
        """Blocks of the largest free run (0 when none is free)."""
        orders = [order for order, starts in self.free_runs.items() if starts]
        return 1 << max(orders) if orders else 0

    @property
    def largest_hole(self) -> int:
        return self.largest_run

    @property
    def fragmentation_blocks(self) -> int:
        """Free blocks outside the largest free run."""
        return self.free_blocks - self.largest_run

    def fits_ever(self, final_blocks: int, reservation_blocks: int) -> bool:
        # The largest run an empty pool has is its top binary digit.
        return self.order_of(reservation_blocks) <= self.num_blocks.bit_length() - 1

    def can_place(self, reservation_blocks: int) -> bool:
        return self.largest_run >= 1 << self.order_of(reservation_blocks)

    def admit(self, blocks: int, reservation_blocks: int, final_blocks: int = 0) -> int | None:
        """Place a run of 2^⌈log2 reservation⌉ blocks; its start, or None when none is free."""
        want = self.order_of(reservation_blocks)
        order = next((k for k in sorted(self.free_runs) if k >= want and self.free_runs[k]), None)
        if order is None:
            return None
        start = min(self.free_runs[order])
        self.free_runs[order].discard(start)
        while order > want:  # split: keep the lower half, free the upper
            order -= 1
            self.free_runs.setdefault(order, set()).add(start + (1 << order))
        self._live[start] = (want, final_blocks)
        self.reserved_blocks += 1 << want
        self.final_blocks += final_blocks
        return start

    def grow(self, blocks: int) -> None:
        """Nothing to take: the run already covers the request's growth."""

    def release(self, handle: int, held_blocks: int, reservation_blocks: int) -> None:
        """Free a run, merging it with its buddy while the buddy is free."""
        order, final = self._live.pop(handle)
        self.reserved_blocks -= 1 << order
        self.final_blocks -= final
        start = handle
        while start ^ (1 << order) in self.free_runs.get(order, ()):
            self.free_runs[order].discard(start ^ (1 << order))
            start = min(start, start ^ (1 << order))
            order += 1
        self.free_runs.setdefault(order, set()).add(start)


def allocator(
    policy: str, placement: str, num_blocks: int
) -> PagedAllocator | ContiguousAllocator | BuddyAllocator:
    """The allocator of `policy` (paged, or a reserve-* policy) placed by `placement`."""
    if policy == "paged":
        return PagedAllocator(num_blocks)
    return BuddyAllocator(num_blocks) if placement == "buddy" else ContiguousAllocator(num_blocks)


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
