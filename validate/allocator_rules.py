"""PyTorch's CUDA caching allocator, replayed in Python: what a list of requests takes.

`kvplan verify` measures the pool on the device through the allocator's own counters
(``torch.cuda.memory_stats``), its segments (``torch.cuda.memory_snapshot``) and the driver
(``torch.cuda.mem_get_info``). Those numbers differ from the planned bytes by the allocator's
rounding; this module predicts that rounding from the planned request sizes, so that every
byte of the difference is explained by a rule and nothing is waved through by a tolerance.

The rules, from ``c10/cuda/CUDACachingAllocator.cpp`` (pytorch/pytorch, read at commit
001074d25084fdb87a799823e395a50f5ec044d3), with the default settings
(``PYTORCH_CUDA_ALLOC_CONF`` unset: no max_split_size, no power-of-two rounding, no
expandable segments):

- ``round_size``: a request is rounded up to a multiple of ``kMinBlockSize`` = 512 B.
- ``get_pool``: rounded sizes ≤ ``kSmallSize`` = 1 MiB live in the small pool, larger ones in
  the large pool; the pools never lend to each other.
- ``get_free_block``: the smallest cached free block (same stream) at least as large as the
  rounded size is taken (best fit; equal sizes by lowest address).
- ``get_allocation_size``: with no fitting free block, a new segment is cudaMalloc'd: 2 MiB
  (``kSmallBuffer``) for the small pool; 20 MiB (``kLargeBuffer``) for large requests under
  ``kMinLargeAlloc`` = 10 MiB; else the request rounded up to 2 MiB (``kRoundLarge``).
- ``should_split``: the block handed out is cut to the rounded size only if the remainder is
  ≥ 512 B (small pool) or > 1 MiB (large pool); otherwise the whole block is handed out and
  ``memory_allocated`` counts all of it. The cut-off remainder stays cached as a free block.

Example (Llama-3.1-8B, bf16, one layer's K and V for 3000 × 8 tokens in 16-token blocks):
1505 blocks × 32,768 B = 49,315,840 B is one large request; its segment is rounded up to
48 MiB = 50,331,648 B; the 1,015,808 B remainder is ≤ 1 MiB, so the block is not split and
the allocator reports 50,331,648 B allocated for it.

Pure Python: no torch, so the rules are unit-tested on any machine.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

MIB = 2**20
MIN_BLOCK_BYTES = 512  # kMinBlockSize
SMALL_SIZE_BYTES = 1 * MIB  # kSmallSize: largest request of the small pool
SMALL_BUFFER_BYTES = 2 * MIB  # kSmallBuffer: a small-pool segment
LARGE_BUFFER_BYTES = 20 * MIB  # kLargeBuffer: the segment of a 1-10 MiB request
MIN_LARGE_ALLOC_BYTES = 10 * MIB  # kMinLargeAlloc: from here, one segment per request
ROUND_LARGE_BYTES = 2 * MIB  # kRoundLarge: large segments are multiples of 2 MiB
SMALL, LARGE = "small", "large"


def round_size(size_bytes: int) -> int:
    """The allocator's block size for a request: up to a multiple of 512 B (at least 512)."""
    if size_bytes < MIN_BLOCK_BYTES:
        return MIN_BLOCK_BYTES
    return -(-size_bytes // MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES


def pool_of(rounded_bytes: int) -> str:
    """'small' for rounded sizes ≤ 1 MiB, else 'large'."""
    return SMALL if rounded_bytes <= SMALL_SIZE_BYTES else LARGE


def segment_bytes_for(rounded_bytes: int) -> int:
    """Bytes cudaMalloc'd when no cached block fits (``get_allocation_size``)."""
    if rounded_bytes <= SMALL_SIZE_BYTES:
        return SMALL_BUFFER_BYTES
    if rounded_bytes < MIN_LARGE_ALLOC_BYTES:
        return LARGE_BUFFER_BYTES
    return -(-rounded_bytes // ROUND_LARGE_BYTES) * ROUND_LARGE_BYTES


def splits(block_bytes: int, rounded_bytes: int, pool: str) -> bool:
    """Whether a free block is cut to the request (``should_split``)."""
    remaining = block_bytes - rounded_bytes
    if pool == SMALL:
        return remaining >= MIN_BLOCK_BYTES
    return remaining > SMALL_SIZE_BYTES


@dataclass(frozen=True)
class FreeBlock:
    """A cached, unallocated block: its size and address (addresses only break ties)."""

    size_bytes: int
    address: int


@dataclass(frozen=True)
class Allocation:
    """What one request took under the rules."""

    requested_bytes: int
    rounded_bytes: int
    """round_size(requested): a multiple of 512."""
    block_bytes: int
    """what memory_allocated counts for it: rounded, or the whole unsplit block."""
    new_segment_bytes: int
    """bytes cudaMalloc'd for it (0 when a cached block was reused)."""
    pool: str

    @property
    def unsplit_bytes(self) -> int:
        """Bytes of the block beyond the rounded size, kept because it was not split."""
        return self.block_bytes - self.rounded_bytes

    @property
    def rule(self) -> str:
        """The rule that sized the block, in words (for the record)."""
        where = "a new segment" if self.new_segment_bytes else "a cached free block"
        if self.unsplit_bytes == 0:
            return f"{self.pool} pool, cut from {where}"
        limit = "≥ 512 B" if self.pool == SMALL else "> 1 MiB"
        return (
            f"{self.pool} pool, {where} not split: the remainder of {self.unsplit_bytes:,} B "
            f"is not {limit}, so the whole block is allocated"
        )


@dataclass(frozen=True)
class Replay:
    """The requests' effect on the allocator's counters and the device."""

    allocations: tuple[Allocation, ...]
    requested_bytes: int
    """Σ requested: torch's ``requested_bytes`` grows by this."""
    allocated_bytes: int
    """Σ block sizes: ``allocated_bytes`` (``memory_allocated``) grows by this."""
    reserved_bytes: int
    """Σ new segments: ``reserved_bytes`` and the driver's used memory grow by this."""
    new_segments: tuple[int, ...]
    """sizes of the segments cudaMalloc'd, in order."""

    def explanation(self) -> list[str]:
        """One line per distinct (size, rule): what the allocator did with the requests."""
        groups = Counter((a.requested_bytes, a.block_bytes, a.rule) for a in self.allocations)
        lines = [
            f"{count} × {requested:,} B requested → {block:,} B allocated ({rule})"
            for (requested, block, rule), count in groups.items()
        ]
        cached = self.reserved_bytes - self.allocated_bytes
        if self.new_segments:
            lines.append(
                f"{len(self.new_segments)} new segment(s), {self.reserved_bytes:,} B reserved; "
                f"reserved − allocated = {cached:,} B"
                + (" (split-off remainders and segment tails, cached for reuse)" if cached else "")
            )
        return lines


@dataclass
class CachingAllocatorReplay:
    """The allocator's state as far as sizing goes: the cached free blocks of each pool."""

    free_blocks: dict[str, list[FreeBlock]] = field(default_factory=lambda: {SMALL: [], LARGE: []})
    _next_address: int = 1 << 48  # new segments land above every seeded block

    def malloc(self, size_bytes: int) -> Allocation:
        """Replay one request; the pool state changes as the allocator's would."""
        if size_bytes < 0:
            raise ValueError(f"size_bytes must be >= 0, got {size_bytes}")
        rounded = round_size(size_bytes)
        pool = pool_of(rounded)
        free = self.free_blocks[pool]
        fitting = [b for b in free if b.size_bytes >= rounded]
        new_segment = 0
        if fitting:
            block = min(fitting, key=lambda b: (b.size_bytes, b.address))
            free.remove(block)
        else:
            new_segment = segment_bytes_for(rounded)
            block = FreeBlock(new_segment, self._next_address)
            self._next_address += new_segment
        taken = block.size_bytes
        if splits(block.size_bytes, rounded, pool):
            free.append(FreeBlock(block.size_bytes - rounded, block.address + rounded))
            taken = rounded
        return Allocation(size_bytes, rounded, taken, new_segment, pool)


def replay(
    sizes_bytes: list[int] | tuple[int, ...],
    free_blocks: dict[str, list[FreeBlock]] | None = None,
) -> Replay:
    """Replay requests in order, starting from the given cached free blocks (default none).

    Args:
        sizes_bytes: each request's size in bytes (a tensor's nbytes), in allocation order.
        free_blocks: cached free blocks per pool ('small', 'large') before the first request,
            as ``torch.cuda.memory_snapshot`` shows them (state 'inactive', same stream).
    """
    seeded = {SMALL: [], LARGE: []}
    for pool, blocks in (free_blocks or {}).items():
        seeded[pool] = list(blocks)
    state = CachingAllocatorReplay(seeded)
    allocations = tuple(state.malloc(size) for size in sizes_bytes)
    return Replay(
        allocations=allocations,
        requested_bytes=sum(a.requested_bytes for a in allocations),
        allocated_bytes=sum(a.block_bytes for a in allocations),
        reserved_bytes=sum(a.new_segment_bytes for a in allocations),
        new_segments=tuple(a.new_segment_bytes for a in allocations if a.new_segment_bytes),
    )
