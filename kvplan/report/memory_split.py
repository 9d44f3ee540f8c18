"""One GPU's memory for a batch: weights, KV, what is left or missing; and its text bar.

The `report` table's bar column, `size`'s bar note, the HTML page's stacked bars and the
--plot panel all draw these same figures.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.api.results import CapacityRow
from kvplan.report.render import bar


@dataclass(frozen=True)
class MemorySplit:
    """One GPU's memory for the requested batch: weights, KV, and what is left or missing.

    KV is the engine's charge for the whole requested batch (one replica's share), never
    clipped: the part the KV budget does not hold is overflow. The budget binds before the
    memory does (the engine keeps a reserve beside the weights and the KV pool); the memory
    binds when the budget would reach past it (a --kv-memory larger than the weights leave).
    """

    memory_bytes: int
    weights_bytes: int
    kv_bytes: int
    kv_budget_bytes: int  # the engine's KV pool per GPU; negative when the weights overrun it

    @classmethod
    def of(
        cls, memory_bytes: int, weights_bytes: int, kv_bytes: int, kv_budget_bytes: int
    ) -> MemorySplit:
        """The split of `kv_bytes` of a batch beside the weights, against the KV budget."""
        if weights_bytes + kv_budget_bytes > memory_bytes:
            # Only a fixed KV budget (--kv-memory) reaches past the memory: the engine
            # allocates that pool whole at startup, so the pool, not the batch, overruns.
            kv_bytes = max(kv_bytes, kv_budget_bytes)
        return cls(memory_bytes, weights_bytes, kv_bytes, kv_budget_bytes)

    @property
    def kv_room_bytes(self) -> int:
        """KV the GPU holds: the budget, within the memory the weights leave (negative when
        the weights and the engine's reserve alone overrun the memory)."""
        return min(self.kv_budget_bytes, self.memory_bytes - self.weights_bytes)

    @property
    def kv_inside_bytes(self) -> int:
        """The part of the batch's KV that the budget holds."""
        return max(0, min(self.kv_bytes, self.kv_room_bytes))

    @property
    def kv_beyond_bytes(self) -> int:
        """The batch's KV that the budget does not hold."""
        return self.kv_bytes - self.kv_inside_bytes

    @property
    def free_bytes(self) -> int:
        """Memory neither weights nor KV take (engine reserve and headroom included)."""
        return max(self.memory_bytes - self.weights_bytes - self.kv_bytes, 0)

    @property
    def overflow_bytes(self) -> int:
        """What the batch needs beyond the KV budget, per GPU: its KV less the room for KV
        (more than the KV when the budget is negative): the memory the batch lacks."""
        return max(self.kv_bytes - self.kv_room_bytes, 0)

    @property
    def drawn_bytes(self) -> int:
        """The length of the bar: the memory, or weights + KV when they run past it."""
        return max(self.memory_bytes, self.weights_bytes + self.kv_bytes)


def memory_split(row: CapacityRow) -> MemorySplit:
    """The table's bar, the plot's and the HTML page's stacked bars: the same figures."""
    per_replica = -(-row.batch // row.dp)
    return MemorySplit.of(
        row.memory_bytes,
        row.weights_bytes_per_gpu,
        per_replica * row.kv_bytes_per_request_per_gpu,
        row.kv_budget_bytes_per_gpu,
    )


def memory_bar(split: MemorySplit, width: int) -> str:
    """One GPU's memory as `width` text cells: █ weights ▒ KV ! KV beyond the budget
    ░ free (the overflow's size is `split.overflow_bytes`)."""
    return bar(
        [
            (split.weights_bytes, "█"),
            (split.kv_inside_bytes, "▒"),
            # Past the budget the batch eats the engine's reserve, then runs past the memory.
            (split.kv_beyond_bytes, "!"),
            (split.free_bytes, "░"),
        ],
        split.drawn_bytes,
        width=width,
        always="!",
    )
