"""What the device says an allocation took: the driver's view and the caching allocator's.

Every figure here is read from the device or from PyTorch's allocator, never computed from
shapes:

- driver: ``torch.cuda.mem_get_info`` (cudaMemGetInfo) free bytes before − after;
- allocator counters: ``torch.cuda.memory_stats`` ``requested_bytes.all.current`` (sizes the
  tensors asked for), ``allocated_bytes.all.current`` (= ``memory_allocated``: block sizes
  handed out), ``reserved_bytes.all.current`` (= ``memory_reserved``: segments cudaMalloc'd),
  ``num_alloc_retries`` (a retry frees cached blocks mid-way, which the replay does not model);
- segments and blocks: ``torch.cuda.memory_snapshot`` (each segment's blocks with size,
  requested size and state); the free ('inactive') blocks before the allocation seed the rule
  replay (``kvplan.validate.allocator_rules``), and the blocks found at each new tensor's
  address give its measured block size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from kvplan.validate.allocator_rules import LARGE, SMALL, FreeBlock

T = TypeVar("T")
DEFAULT_POOL_ID = (0, 0)  # memory_snapshot's segment_pool_id of the ordinary pools
STAT_KEYS = {
    "requested": "requested_bytes.all.current",
    "allocated": "allocated_bytes.all.current",
    "reserved": "reserved_bytes.all.current",
    "retries": "num_alloc_retries",
}


@dataclass(frozen=True)
class DeviceMeasurement:
    """Deltas across one allocation step, in bytes, as the device and allocator report them."""

    requested_bytes: int | None
    """``requested_bytes`` delta (None where this torch does not keep the counter)."""
    allocated_bytes: int
    reserved_bytes: int
    driver_bytes: int
    """cudaMemGetInfo free before − free after."""
    new_segments: tuple[int, ...]
    """sizes of segments present after and not before (memory_snapshot)."""
    block_bytes: tuple[int, ...]
    """the block each new tensor sits in (memory_snapshot, matched by address)."""
    free_blocks_before: dict[str, list[FreeBlock]]
    """cached free blocks per pool before the step: the replay's starting state."""
    alloc_retries: int
    free_after_bytes: int
    total_bytes: int

    def as_record(self) -> dict[str, Any]:
        return {
            "requested_bytes": self.requested_bytes,
            "allocated_bytes": self.allocated_bytes,
            "reserved_bytes": self.reserved_bytes,
            "driver_bytes": self.driver_bytes,
            "new_segments": len(self.new_segments),
            "new_segment_bytes": sum(self.new_segments),
            "cached_free_blocks_before": {
                pool: len(blocks) for pool, blocks in self.free_blocks_before.items()
            },
            "alloc_retries": self.alloc_retries,
            "free_after_bytes": self.free_after_bytes,
            "total_bytes": self.total_bytes,
        }


def _stats(device: torch.device) -> dict[str, int | None]:
    stats = torch.cuda.memory_stats(device)
    return {name: stats.get(key) for name, key in STAT_KEYS.items()}


def _segments(device: torch.device) -> list[dict[str, Any]]:
    index = device.index if device.index is not None else torch.cuda.current_device()
    return [s for s in torch.cuda.memory_snapshot() if s.get("device", index) == index]


def free_blocks(segments: list[dict[str, Any]], stream: int) -> dict[str, list[FreeBlock]]:
    """Cached free blocks per pool on `stream`, from memory_snapshot segments."""
    pools: dict[str, list[FreeBlock]] = {SMALL: [], LARGE: []}
    for segment in segments:
        # Other streams' blocks and CUDA graphs' private pools (pool id ≠ (0, 0)) are never
        # handed to an allocation on this stream outside a capture.
        private = tuple(segment.get("segment_pool_id", DEFAULT_POOL_ID)) != DEFAULT_POOL_ID
        if segment.get("stream", 0) != stream or private:
            continue
        pool = SMALL if segment.get("segment_type") == "small" else LARGE
        for block in segment["blocks"]:
            if block["state"] == "inactive":
                pools[pool].append(FreeBlock(int(block["size"]), int(block["address"])))
    return pools


def _block_sizes_at(segments: list[dict[str, Any]], addresses: list[int]) -> tuple[int, ...]:
    by_address = {
        int(block["address"]): int(block["size"])
        for segment in segments
        for block in segment["blocks"]
    }
    return tuple(by_address.get(address, 0) for address in addresses)


def measure(
    device: torch.device, allocate: Callable[[], T], addresses: Callable[[T], list[int]]
) -> tuple[T, DeviceMeasurement]:
    """Run `allocate` and measure what it took on `device`.

    Cached blocks are released first (``empty_cache``), so the step starts from the fewest
    free blocks; those that remain (inside segments still in use) are recorded for the
    replay.

    Args:
        device: a CUDA device.
        allocate: makes the tensors; nothing else should allocate meanwhile.
        addresses: the data pointers of the allocations to look up, from `allocate`'s result.
    """
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    stream = torch.cuda.current_stream(device).cuda_stream
    segments_before = _segments(device)
    stats_before = _stats(device)
    free_before, total = torch.cuda.mem_get_info(device)
    result = allocate()
    torch.cuda.synchronize(device)
    free_after, _ = torch.cuda.mem_get_info(device)
    stats_after = _stats(device)
    segments_after = _segments(device)
    old = {int(s["address"]) for s in segments_before}

    def delta(name: str) -> int | None:
        after, before = stats_after[name], stats_before[name]
        return None if after is None or before is None else int(after) - int(before)

    measurement = DeviceMeasurement(
        requested_bytes=delta("requested"),
        allocated_bytes=delta("allocated") or 0,
        reserved_bytes=delta("reserved") or 0,
        driver_bytes=int(free_before) - int(free_after),
        new_segments=tuple(
            int(s["total_size"]) for s in segments_after if int(s["address"]) not in old
        ),
        block_bytes=_block_sizes_at(segments_after, addresses(result)),
        free_blocks_before=free_blocks(segments_before, stream),
        alloc_retries=delta("retries") or 0,
        free_after_bytes=int(free_after),
        total_bytes=int(total),
    )
    return result, measurement
