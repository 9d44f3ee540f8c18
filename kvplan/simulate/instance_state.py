"""An instance's state and the lockstep of its decoding requests, below the scheduler.

The waiting queue, the requests being prefilled and decoding, the allocator, the clock, and the
sums that let every decoding request gain a token per step in O(1): joining and leaving the
lockstep, a request's charge moving to its next segment, growing by some steps, and the pool's
memory split as time advances. `Scheduling` (scheduling.py) composes steps from these and
`Instance` (instance.py) runs them; neither module is imported here.
"""

from __future__ import annotations

import heapq
from collections import deque

from kvplan.simulate.allocators import (
    BuddyAllocator,
    ContiguousAllocator,
    PagedAllocator,
    allocator,
)
from kvplan.simulate.engine_view import InstanceModel
from kvplan.simulate.growth import Lockstep
from kvplan.simulate.metrics import Metrics
from kvplan.simulate.policies import policy
from kvplan.simulate.requests import Req

CHARGE, TOKENS, READS = 0, 1, 2  # the three growth profiles, in InstanceModel order


class InstanceState:
    """One replica's queues, allocator, clock and decoding lockstep (see the module docstring)."""

    def __init__(self, view: InstanceModel, metrics: Metrics) -> None:
        self.view = view
        config = view.config
        self.static = config.scheduler == "static"
        self.swap = config.preemption == "swap" and not self.static
        self.paged = config.allocator == "paged"
        self.alloc: PagedAllocator | ContiguousAllocator | BuddyAllocator = allocator(
            config.allocator, config.placement, view.num_blocks
        )
        self.metrics = metrics
        conservativeness = view.deployment.settings.schedule_conservativeness
        self.policy = policy(
            config.scheduler, view.num_blocks, view.charge.tokens_per_block, conservativeness
        )
        self.t = 0.0
        self.step = 0
        self.waiting: deque[Req] = deque()
        self.prefilling: list[Req] = []
        self.decoding: dict[int, Req] = {}
        self.padded: list[Req] = []  # static: done, held until the batch returns
        self.profiles = (view.charge, view.token_bytes, view.read_bytes)
        self.sums = tuple(Lockstep(profile) for profile in self.profiles)
        # Every profile flat (full attention, no window): one rate each, never an event.
        self.flat_rates = (
            [p.rates[0] if p.rates else 0 for p in self.profiles]
            if all(p.flat for p in self.profiles)
            else None
        )
        self.kv_offset = 0  # Σ (join_tokens − join_step) over decoding requests
        self.generated_offset = 0  # Σ (generated at join − join_step) over decoding requests
        self.prefill_blocks = 0  # Σ blocks of the requests being prefilled
        self.frozen = [0, 0, 0, 0]  # padded requests: blocks, token bytes, read bytes, tokens
        self.finishing: list[tuple[int, int, int, Req]] = []  # (step, order, version, req)
        self.segment_events: list[tuple[int, int, int, int, Req]] = []
        self.swap_used_bytes = 0.0
        self.step_extra_s = 0.0  # swap copies added to the step being built

    @property
    def in_system(self) -> int:
        """Requests that arrived and have not returned."""
        return len(self.waiting) + len(self.prefilling) + len(self.decoding) + len(self.padded)

    def decoders_generated(self) -> int:
        """Output tokens the decoding requests have generated so far, summed."""
        return self.generated_offset + len(self.decoding) * self.step

    def generated_now(self, req: Req) -> int:
        """Output tokens `req` has generated so far."""
        if req.order in self.decoding:
            return req.generated + self.step - req.join_step
        return req.generated

    # --- the lockstep of decoding requests -------------------------------------------

    def _join(self, req: Req, tokens: int) -> None:
        """Start decoding with `tokens` tokens in KV."""
        step = self.step
        req.join_step, req.join_tokens = step, tokens
        req.fin_step = step + req.output - req.generated
        final_tokens = tokens + req.output - req.generated
        self.kv_offset += tokens - step
        self.generated_offset += req.generated - step
        self.decoding[req.order] = req
        heapq.heappush(self.finishing, (req.fin_step, req.order, req.version, req))
        if self.flat_rates is not None:
            self._join_flat(req, tokens, step)
            return
        req.residues, req.rates, req.segments = [], [], []
        for index, (profile, sums) in enumerate(zip(self.profiles, self.sums, strict=True)):
            if profile.flat:  # the common case: no segment to change, no event
                segment = 0 if profile.rates else -1
                rate = profile.rates[0] if profile.rates else 0
            else:
                segment = profile.segment(tokens)
                rate = profile.rate(segment)
                start = profile.next_start(segment)
                if start is not None and start < final_tokens:
                    event = (step + start - tokens, req.order, req.version, index, req)
                    heapq.heappush(self.segment_events, event)
            req.residues.append(sums.add(tokens, step, rate))
            req.rates.append(rate)
            req.segments.append(segment)

    def _join_flat(self, req: Req, tokens: int, step: int) -> None:
        """`_join`'s sums when every profile is flat: the same arithmetic, unrolled."""
        rates = self.flat_rates
        charge, token_sums, read_sums = self.sums
        block = charge.profile.tokens_per_block
        residue = (tokens - step) % block
        charge.by_residue[residue] += rates[0]
        charge.rate_sum += rates[0]
        charge.total += charge.profile.value(tokens)
        for sums, rate in ((token_sums, rates[1]), (read_sums, rates[2])):
            sums.by_residue[0] += rate
            sums.rate_sum += rate
            sums.total += sums.profile.value(tokens)
        req.residues, req.rates = [residue, 0, 0], rates

    def _leave(self, req: Req) -> tuple[int, int, int, int]:
        """Stop decoding; (blocks, token bytes, read bytes, tokens) it holds now."""
        tokens = req.kv_tokens(self.step)
        self.kv_offset -= req.join_tokens - req.join_step
        self.generated_offset -= req.generated - req.join_step
        del self.decoding[req.order]
        req.version += 1
        sums, residues, rates = self.sums, req.residues, req.rates
        return (
            sums[CHARGE].remove(tokens, residues[CHARGE], rates[CHARGE]),
            sums[TOKENS].remove(tokens, residues[TOKENS], rates[TOKENS]),
            sums[READS].remove(tokens, residues[READS], rates[READS]),
            tokens,
        )

    def _next_segment(self, req: Req, index: int) -> None:
        """A request reached the next segment of one of its profiles: its rate changes."""
        profile, tokens = self.profiles[index], req.kv_tokens(self.step)
        segment = req.segments[index] + 1
        rate = profile.rate(segment)
        self.sums[index].change_rate(req.residues[index], req.rates[index], rate)
        req.rates[index], req.segments[index] = rate, segment
        start = profile.next_start(segment)
        if start is not None and start < tokens + req.fin_step - self.step:
            event = (self.step + start - tokens, req.order, req.version, index, req)
            heapq.heappush(self.segment_events, event)

    def _next_finish_step(self) -> int:
        finishing = self.finishing
        while finishing[0][2] != finishing[0][3].version:
            heapq.heappop(finishing)
        return finishing[0][0]

    def _next_event_step(self) -> int | None:
        events = self.segment_events
        while events and events[0][2] != events[0][4].version:
            heapq.heappop(events)
        return events[0][0] if events else None

    def _grow(self, steps: int) -> None:
        """Decoding requests gain `steps` tokens: charge their new blocks, move the clock's step."""
        growth = self.sums[CHARGE].need(self.step, steps)
        self.alloc.grow(growth)
        for sums in self.sums:
            sums.total += sums.need(self.step, steps)
        self.step += steps

    # --- time and memory ------------------------------------------------------------

    def _advance(self, seconds: float, before: tuple[float, ...]) -> None:
        running = len(self.prefilling) + len(self.decoding)
        self.metrics.integrate(
            self.t, seconds, self.in_system, len(self.waiting), before, self._memory(), running
        )
        self.t += seconds

    def _memory(self) -> tuple[float, ...]:
        """The pool now, as MemorySplit's five values in bytes, then the part of the
        reservations their requests will never use."""
        view, alloc, frozen = self.view, self.alloc, self.frozen
        charged = self.sums[CHARGE].total + self.prefill_blocks + frozen[0]
        token_value = view.token_bytes.value
        tokens = self.sums[TOKENS].total + frozen[1]
        if self.prefilling:
            tokens += sum(token_value(req.done) for req in self.prefilling if req.done)
        token_bytes = tokens * view.config.kv_bytes_factor
        per_block = view.bytes_per_block
        allocated, fragmented = alloc.allocated_blocks, alloc.fragmentation_blocks
        return (
            token_bytes,
            charged * per_block - token_bytes,
            (allocated - charged) * per_block,
            fragmented * per_block,
            (alloc.num_blocks - allocated - fragmented) * per_block,
            (allocated - max(alloc.final_blocks, charged)) * per_block,
        )
