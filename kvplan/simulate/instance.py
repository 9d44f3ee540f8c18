"""One serving instance as a discrete-event simulation over the engine model.

State: the waiting queue (FCFS; preempted requests go back to its front), the requests being
prefilled, the requests decoding (a `Lockstep` of sums: they all gain a token per step), and
the allocator. Time moves one scheduler step at a time while a step's make-up changes
(prefill chunks, admissions, preemptions), and jumps over runs of identical decode steps
otherwise: to the next completion, the next segment change of a request's charge, the step
the pool runs out of blocks, or the next arrival, whichever is first.

Scheduling follows vLLM V1 (`v1/core/sched/scheduler.py`): decoding requests first, one
token each, then ongoing chunked prefills, then waiting requests in arrival order while the
step's token budget (max_num_batched_tokens), max_num_seqs and free blocks allow; a waiting
request that does not fit stops admission (no overtaking). When decoding requests need
blocks that are not free, the newest running request is preempted, by recompute (its KV is
dropped and its prompt and output so far are prefilled again) or by swap (its blocks are
copied to host memory over the SKU's host link and copied back before it resumes).
"""

from __future__ import annotations

import heapq
from collections import deque

from kvplan.simulate.allocators import ContiguousAllocator, PagedAllocator
from kvplan.simulate.engine_view import InstanceModel
from kvplan.simulate.growth import Lockstep
from kvplan.simulate.metrics import Metrics
from kvplan.simulate.requests import Req
from kvplan.simulate.scheduling import Scheduling
from kvplan.simulate.step_cost import itl_samples, run_s, steps_starting_before
from kvplan.simulate.workload import RequestSpec

CHARGE, TOKENS, READS = 0, 1, 2  # the three growth profiles, in InstanceModel order
TOO_LONG = "prompt + output longer than max_model_len"
TOO_LARGE = "needs more KV than the whole pool"


class Instance(Scheduling):
    """One replica running continuous or static batching (see the module docstring)."""

    def __init__(self, view: InstanceModel, metrics: Metrics) -> None:
        self.view = view
        config = view.config
        self.static = config.scheduler == "static"
        self.swap = config.preemption == "swap" and not self.static
        self.paged = config.allocator == "paged"
        allocator = PagedAllocator if self.paged else ContiguousAllocator
        self.alloc: PagedAllocator | ContiguousAllocator = allocator(view.num_blocks)
        self.metrics = metrics
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
        self.prefill_blocks = 0  # Σ blocks of the requests being prefilled
        self.frozen = [0, 0, 0, 0]  # padded requests: blocks, token bytes, read bytes, tokens
        self.finishing: list[tuple[int, int, int, Req]] = []  # (step, order, version, req)
        self.segment_events: list[tuple[int, int, int, int, Req]] = []
        self.swap_used_bytes = 0.0
        self.step_extra_s = 0.0  # swap copies added to the step being built

    # --- arrivals -------------------------------------------------------------------

    def submit(self, spec: RequestSpec, order: int) -> None:
        """Queue a request that arrived at `spec.arrival_s` (the clock may be past it)."""
        view = self.view
        if spec.prompt_tokens + spec.output_tokens > view.max_model_len:
            self.metrics.rejected[TOO_LONG] += 1
            return
        reservation = 0
        if view.reserve_tokens is not None:
            tokens = view.reserve_tokens(spec.prompt_tokens, spec.output_tokens)
            reservation = view.charge.value(tokens)
        final_tokens = spec.prompt_tokens + spec.output_tokens - 1
        final_blocks = view.charge.value(final_tokens)
        cap = view.config.kept_tokens_cap
        kept = final_tokens if cap is None else min(final_tokens, cap)
        # The pool's own limit (a llama.cpp slot) and, for reservations, the address space.
        if kept > view.request_limit_tokens or not self.alloc.fits_ever(final_blocks, reservation):
            self.metrics.rejected[TOO_LARGE] += 1
            return
        if self.t < spec.arrival_s:
            self._advance(spec.arrival_s - self.t, self._memory())
        else:  # it waited while the step in progress ran
            late_s = self.t - spec.arrival_s
            self.metrics.in_system_s += late_s
            self.metrics.queue_s += late_s
        req = Req(spec.order if spec.order is not None else order, spec, reservation)
        if spec.prefilled:  # its KV came over the network: admitted straight into decoding
            req.swapped_tokens, req.generated = spec.prompt_tokens, 1
            req.first_s = req.last_s = spec.arrival_s
        self.waiting.append(req)
        self.metrics.queue_peak = max(self.metrics.queue_peak, len(self.waiting))

    @property
    def in_system(self) -> int:
        """Requests that arrived and have not returned."""
        return len(self.waiting) + len(self.prefilling) + len(self.decoding) + len(self.padded)

    def run_until(self, limit_s: float) -> None:
        """Run every step that starts before `limit_s` (all of them for infinity)."""
        while self.in_system and self.t < limit_s:
            if not self._jump(limit_s):
                if self.static:
                    self._static_step()
                else:
                    self._continuous_step()

    # --- the lockstep of decoding requests -------------------------------------------

    def _join(self, req: Req, tokens: int) -> None:
        """Start decoding with `tokens` tokens in KV."""
        step = self.step
        req.join_step, req.join_tokens = step, tokens
        req.fin_step = step + req.output - req.generated
        final_tokens = tokens + req.output - req.generated
        self.kv_offset += tokens - step
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

    def _settle(self) -> None:
        """Requests that finished on this step leave; segment changes due now apply."""
        step, finishing, events = self.step, self.finishing, self.segment_events
        while finishing and finishing[0][0] <= step:
            _, _, version, req = heapq.heappop(finishing)
            if version == req.version:
                self._finish_decoding(req)
        while events and events[0][0] <= step:
            _, _, version, index, req = heapq.heappop(events)
            if version == req.version:
                self._next_segment(req, index)

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

    # --- jumps over identical decode steps ------------------------------------------

    def _jump(self, limit_s: float) -> bool:
        """Take a run of identical decode-only steps at once; False when none can be taken."""
        decoding = len(self.decoding)
        if not decoding or self.prefilling or (not self.static and self._admissible()):
            return False
        steps = self._next_finish_step() - self.step
        event = self._next_event_step()
        if event is not None:
            steps = min(steps, event - self.step)
        if self.paged:
            steps = self.sums[CHARGE].steps_within(self.step, self.alloc.free_blocks, steps)
        if steps < 1:
            return False
        sequences = decoding + len(self.padded)
        reads, frozen = self.sums[READS], self.frozen
        kv_tokens = self.kv_offset + decoding * self.step + frozen[3]
        pieces = self.view.cost.decode_pieces(
            sequences, reads.total + frozen[2], reads.rate_sum, kv_tokens, decoding
        )
        steps = steps_starting_before(pieces, steps, limit_s - self.t)
        before = self._memory()
        self._grow(steps)
        metrics = self.metrics
        metrics.record_steps(steps, sequences)
        metrics.decode_tokens += decoding * steps
        metrics.padded_decode_tokens += len(self.padded) * steps
        metrics.itl += itl_samples(pieces, steps, decoding)
        seconds = run_s(pieces, steps)
        metrics.busy_s += seconds
        self._advance(seconds, before)
        self._settle()
        return True

    def _admissible(self) -> bool:
        """Whether the next step would admit the head of the queue (continuous only)."""
        if not self.waiting:
            return False
        view, decoding = self.view, len(self.decoding)
        budget = view.max_num_batched_tokens - decoding
        if budget <= 0 or decoding + len(self.prefilling) >= view.max_num_seqs:
            return False
        head = self.waiting[0]
        if head.swapped_tokens:
            blocks = view.charge.value(head.swapped_tokens)
        elif view.config.chunked_prefill:
            blocks = view.charge.value(min(head.target, budget))
        elif head.target <= budget:
            blocks = view.charge.value(head.target)
        else:
            return False
        if not self.paged:
            return self.alloc.largest_hole >= head.reservation  # type: ignore[union-attr]
        return blocks <= self.alloc.free_blocks - self.sums[CHARGE].need(self.step, 1)

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
        """The pool now, as MemorySplit's five values in bytes."""
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
        )
