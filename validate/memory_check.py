"""The memory verdict: planned bytes, replayed through the allocator's rules, against the device.

Each term compares one measured number (``kvplan.validate.device_memory``) with what the plan
implies for it: the requested bytes must equal the plan's bytes; memory_allocated, memory
reserved and the driver's used memory must equal the caching-allocator replay of the plan's
request sizes (``kvplan.validate.allocator_rules``). Nothing passes by tolerance: a pool one
block short or over changes the requested bytes, and any byte the rules do not explain fails.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from kvplan.validate.allocator_rules import Replay, replay
from kvplan.validate.device_memory import DeviceMeasurement

SOURCES = {
    "requested": "torch.cuda.memory_stats()['requested_bytes.all.current'] after − before",
    "allocated": "torch.cuda.memory_stats()['allocated_bytes.all.current'] (memory_allocated) "
    "after − before",
    "reserved": "torch.cuda.memory_stats()['reserved_bytes.all.current'] (memory_reserved) "
    "after − before",
    "driver": "torch.cuda.mem_get_info() free before − free after (cudaMemGetInfo)",
    "blocks": "torch.cuda.memory_snapshot(): size of the block at each pool tensor's address",
}
RULES = {
    "requested": "the plan's bytes: the tensors ask for exactly what kvplan predicts",
    "allocated": "replay of the caching allocator's rules over the planned request sizes",
    "reserved": "replay: the segments the allocator cudaMallocs for the planned requests",
    "driver": "replay: cudaMalloc takes each new segment's bytes (multiples of 2 MiB)",
    "blocks": "replay: each request's block (rounded to 512 B, whole when not split)",
}


@dataclass(frozen=True)
class Term:
    """One measured quantity against the number the plan and the rules give for it."""

    name: str
    expected_bytes: int
    measured_bytes: int | None
    """None: this torch does not report it (not counted against the verdict)."""

    @property
    def passed(self) -> bool:
        return self.measured_bytes is None or self.measured_bytes == self.expected_bytes

    def as_record(self, planned_bytes: int) -> dict[str, Any]:
        return {
            "expected_bytes": self.expected_bytes,
            "measured_bytes": self.measured_bytes,
            "measured_minus_planned_bytes": None
            if self.measured_bytes is None
            else self.measured_bytes - planned_bytes,
            "expected_minus_planned_bytes": self.expected_bytes - planned_bytes,
            "passed": self.passed,
            "source": SOURCES[self.name],
            "expected_from": RULES[self.name],
        }


@dataclass(frozen=True)
class DeviceMemoryCheck:
    """The planned pool against the device's account of it."""

    planned_bytes: tuple[int, ...]
    """the size of each planned allocation, in allocation order."""
    replay: Replay
    measurement: DeviceMeasurement
    terms: tuple[Term, ...]
    blocks_match: bool
    """the measured block sizes are, as a multiset, the replayed ones."""

    @property
    def passed(self) -> bool:
        return (
            all(t.passed for t in self.terms)
            and self.blocks_match
            and self.measurement.alloc_retries == 0
        )

    @property
    def failed_terms(self) -> list[str]:
        names = [t.name for t in self.terms if not t.passed]
        if not self.blocks_match:
            names.append("blocks")
        if self.measurement.alloc_retries:
            names.append("alloc_retries")
        return names

    def as_record(self) -> dict[str, Any]:
        planned = sum(self.planned_bytes)
        return {
            "planned_allocations": len(self.planned_bytes),
            "planned_bytes": planned,
            "terms": {t.name: t.as_record(planned) for t in self.terms},
            "blocks_match": self.blocks_match,
            "explanation": self.replay.explanation(),
            "measurement": self.measurement.as_record(),
            "failed_terms": self.failed_terms,
            "passed": self.passed,
        }


def check_device_memory(
    planned_bytes: list[int] | tuple[int, ...], measurement: DeviceMeasurement
) -> DeviceMemoryCheck:
    """Replay the planned requests from the measured starting state and compare every term.

    Args:
        planned_bytes: the bytes kvplan predicts for each allocation (one per layer), in the
            order they are made.
        measurement: what the device and allocator reported around those allocations.
    """
    expected = replay(planned_bytes, measurement.free_blocks_before)
    terms = (
        Term("requested", expected.requested_bytes, measurement.requested_bytes),
        Term("allocated", expected.allocated_bytes, measurement.allocated_bytes),
        Term("reserved", expected.reserved_bytes, measurement.reserved_bytes),
        Term("driver", expected.reserved_bytes, measurement.driver_bytes),
    )
    blocks_match = Counter(a.block_bytes for a in expected.allocations) == Counter(
        measurement.block_bytes
    )
    return DeviceMemoryCheck(tuple(planned_bytes), expected, measurement, terms, blocks_match)
