"""What a run measures while it runs: per-request times, step statistics, memory over time.

The instance calls these hooks; `summary()` in `results.py` turns them into the figures the
report prints. Memory is kept in the engine's blocks and converted to bytes once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True)
class MemorySplit:
    """The KV pool of one instance at one moment, in bytes on the binding GPU."""

    token_bytes: float  # bytes the tokens' KV (and states) hold
    partial_block_bytes: float  # charged beyond that: partly filled last blocks, window slack
    reserved_unused_bytes: float  # reserved for tokens not generated yet (contiguous only)
    fragmentation_bytes: float  # free, but outside the largest hole (contiguous only)
    free_bytes: float  # the rest of the pool
    # The part of reserved_unused_bytes its requests will never use (beyond their final
    # length, and a buddy run's rounding): with partial_block_bytes, internal fragmentation.
    reserved_never_used_bytes: float = 0.0

    @property
    def reserved_later_used_bytes(self) -> float:
        """Reserved for tokens a request has still to generate (the paper's "reserved")."""
        return self.reserved_unused_bytes - self.reserved_never_used_bytes

    @property
    def internal_fragmentation_bytes(self) -> float:
        """Taken and never to hold a token: partial last blocks and never-used reservation."""
        return self.partial_block_bytes + self.reserved_never_used_bytes

    def values(self) -> tuple[float, ...]:
        return (
            self.token_bytes,
            self.partial_block_bytes,
            self.reserved_unused_bytes,
            self.fragmentation_bytes,
            self.free_bytes,
        )


class Metrics:
    """Counters and samples of one instance (merged across instances by `merge`)."""

    def __init__(self, timeline_interval_s: float) -> None:
        self.arrival_s: list[float] = []
        self.first_s: list[float] = []
        self.last_s: list[float] = []
        self.finish_s: list[float] = []
        self.output_tokens: list[int] = []
        self.prompt_tokens: list[int] = []
        self.preempted: list[int] = []
        self.order: list[int] = []
        self.rejected: Counter[str] = Counter()
        self.itl: list[tuple[float, float]] = []  # (seconds, tokens with that gap)
        self.steps = 0
        self.batch_step_sum = 0  # Σ sequences per step
        self.batch_peak = 0
        self.padded_decode_tokens = 0  # static: slots decoded for requests already done
        self.padded_prompt_tokens = 0  # static: prompt positions padded to the longest
        self.prefill_tokens = 0  # prompt tokens computed, recomputation included
        self.recomputed_tokens = 0
        self.decode_tokens = 0  # tokens sampled by decode steps
        self.recompute_tokens_sampled = 0  # tokens sampled by prefills after a recompute
        self.preemptions = Counter[str]()
        self.swapped_bytes = 0.0
        self.in_system_s = 0.0  # ∫ requests in the system dt
        self.queue_s = 0.0  # ∫ requests waiting dt
        self.running_s = 0.0  # ∫ requests running (holding KV: prefilling or decoding) dt
        self.queue_peak = 0
        self.memory_s = [0.0] * 6  # ∫ split dt, in MemorySplit's order
        self.busy_s = 0.0  # time with a step running
        # (t, queue, running, the split's five values)
        self.timeline: list[tuple[float, int, int, tuple[float, ...]]] = []
        self.timeline_interval_s = timeline_interval_s
        self._next_sample_s = 0.0

    def record_request(
        self,
        arrival_s: float,
        first_s: float,
        last_s: float,
        finish_s: float,
        output_tokens: int,
        prompt_tokens: int,
        preemptions: int,
        order: int,
    ) -> None:
        self.order.append(order)
        self.arrival_s.append(arrival_s)
        self.first_s.append(first_s)
        self.last_s.append(last_s)
        self.finish_s.append(finish_s)
        self.output_tokens.append(output_tokens)
        self.prompt_tokens.append(prompt_tokens)
        self.preempted.append(preemptions)

    def record_steps(self, steps: int, sequences: int) -> None:
        self.steps += steps
        self.batch_step_sum += steps * sequences
        self.batch_peak = max(self.batch_peak, sequences)

    def integrate(
        self,
        start_s: float,
        seconds: float,
        in_system: int,
        queue: int,
        before: tuple[float, ...],
        after: tuple[float, ...],
        running: int,
    ) -> None:
        """Account `seconds` from `start_s` with these counts.

        Memory moves evenly from `before` to `after` (each a MemorySplit's five values), so
        the trapezoid integrates it exactly.
        """
        self.in_system_s += in_system * seconds
        self.queue_s += queue * seconds
        self.running_s += running * seconds
        if queue > self.queue_peak:
            self.queue_peak = queue
        half = seconds / 2
        memory = self.memory_s
        for i in range(6):
            memory[i] += (before[i] + after[i]) * half
        end = start_s + seconds
        if end >= self._next_sample_s:
            self.timeline.append((end, queue, running, after[:5]))
            self._next_sample_s = end + self.timeline_interval_s
