"""The scheduler's steps for `Instance`: continuous and static batching, preemption, returns.

Above `instance_state.py` (state and lockstep), below `instance.py` (arrivals and jumps);
`Instance` inherits these. Every method here runs whole scheduler steps: compose the batch,
charge its blocks, time it with the instance's step cost, then move tokens and requests along.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from kvplan.simulate.instance_state import InstanceState

if TYPE_CHECKING:
    from kvplan.simulate.requests import Req


class Scheduling(InstanceState):
    """The scheduler steps over an instance's state; `Instance` adds arrivals and jumps."""

    # --- continuous (iteration-level) batching ---------------------------------------

    def _continuous_step(self) -> None:
        view, metrics = self.view, self.metrics
        self.step_extra_s = 0.0
        self._make_room()
        # SGLang (no mixed chunk) and vLLM V0 (no chunked prefill) run a prefill batch as a
        # step of its own whenever one can start; the decodes wait for the next step.
        prefill_first = view.separate_prefill and bool(self.prefilling or self._admissible())
        budget = view.max_num_batched_tokens - (0 if prefill_first else len(self.decoding))
        chunks: list[tuple[Req, int]] = []
        for req in sorted(self.prefilling, key=lambda r: r.order):
            if budget <= 0:
                break
            if req.handle is None:  # preempted to make room for an older chunk
                continue
            tokens = min(req.target - req.done, budget)
            if self._charge_chunk(req, tokens):
                chunks.append((req, tokens))
                budget -= tokens
        resumed = self._admit(budget, chunks)
        decodes = not (prefill_first and chunks)
        decoding = len(self.decoding) if decodes else 0
        if not (decoding or chunks or resumed):
            raise RuntimeError("a scheduler step with nothing to run")  # admission guarantees
        self._run_step(decoding, chunks, decodes)
        metrics.record_steps(1, decoding + len(chunks))
        self._end_prefills(chunks)
        for req in resumed:  # the pause since its last token counts as one gap
            if req.preemptions:
                metrics.itl.append((self.t - req.last_s, 1))
                req.last_s = self.t
            self._join(req, req.swapped_tokens)
            req.swapped_tokens = 0
        self._settle()

    def _admit(self, budget: int, chunks: list[tuple[Req, int]]) -> list[Req]:
        """Admit waiting requests in arrival order while they fit; the swapped-in ones."""
        view, waiting, resumed = self.view, self.waiting, []
        chunked = view.config.chunked_prefill
        while waiting and budget > 0:
            running = len(self.decoding) + len(self.prefilling) + len(resumed)
            if running >= view.max_num_seqs:
                break
            head = waiting[0]
            if head.swapped_tokens:
                if not self._take(head, view.charge.value(head.swapped_tokens)):
                    break
                self._swap_in(head)
                resumed.append(waiting.popleft())
                budget -= 1
                continue
            # Unchunked, a prompt comes whole; a recompute longer than any step (a paused
            # TensorRT-LLM request's prompt and output so far) is the one that is chunked.
            whole = not chunked and head.target <= view.max_num_batched_tokens
            tokens = head.target if whole else min(head.target, budget)
            if tokens > budget or not self._take(head, view.charge.value(tokens)):
                break
            waiting.popleft()
            self.prefilling.append(head)
            self.prefill_blocks += head.blocks
            chunks.append((head, tokens))
            budget -= tokens
        return resumed

    def _take(self, req: Req, blocks: int) -> bool:
        """Give a waiting request its first blocks, leaving this step's growth its room."""
        if self.paged and blocks > self.alloc.free_blocks - self._growth():
            return False
        if not self.static and not self.policy.admits(self, req):
            return False
        handle = self.alloc.admit(blocks, req.reservation, req.final_blocks)
        if handle is None:
            return False
        req.handle, req.blocks, req.done = handle, blocks, 0
        self.policy.started(req)
        return True

    def _charge_chunk(self, req: Req, tokens: int) -> bool:
        """Charge a prefilling request's next chunk, preempting newer requests if needed."""
        extra = self.view.charge.value(req.done + tokens) - req.blocks
        if self.paged:
            while extra > self.alloc.free_blocks - self._growth():
                if self._preempt_newest() is req:
                    return False
        self.alloc.grow(extra)
        req.blocks += extra
        self.prefill_blocks += extra
        return True

    def _growth(self) -> int:
        """Blocks the decoding requests take on this step."""
        return self.sums[0].need(self.step, 1)

    def _make_room(self) -> None:
        """Preempt the newest running requests until this step's growth fits (paged)."""
        if self.paged:
            while self._growth() > self.alloc.free_blocks:
                self._preempt_newest()

    def _run_step(self, decoding: int, chunks: list[tuple[Req, int]], decodes: bool = True) -> None:
        """Time one step, charge the decoders' growth, and move the clock (a prefill-only
        step, `decodes` False, leaves the decoders where they are)."""
        view, reads, frozen = self.view, self.sums[2], self.frozen
        read_value = view.read_bytes.value
        sequences = decoding + len(self.padded)
        seconds = self.step_extra_s  # swap copies; alone when the step only copies KV in
        if sequences or chunks:
            seconds += view.cost.step_s(
                sequences,
                reads.total + frozen[2] if decodes else 0,
                self.kv_offset + decoding * self.step + frozen[3] if decodes else 0,
                [(req.done, tokens) for req, tokens in chunks],
                sum(read_value(req.done) for req, _ in chunks if req.done),
            )
        for req, tokens in chunks:  # this step writes the chunks' KV: it counts as held
            req.done += tokens
        before = self._memory()
        if decodes:
            self._grow(1)
        metrics = self.metrics
        metrics.decode_tokens += decoding
        metrics.padded_decode_tokens += len(self.padded)
        metrics.prefill_tokens += sum(tokens for _, tokens in chunks)
        metrics.busy_s += seconds
        if decoding:
            metrics.itl.append((seconds, decoding))
            self.policy.decoded(1)
        self._advance(seconds, before)

    def _end_prefills(self, chunks: list[tuple[Req, int]]) -> None:
        """Chunks are done: a finished prefill samples a token and starts decoding."""
        for req, _ in chunks:
            if req.done < req.target:
                continue
            self.prefilling.remove(req)
            self.prefill_blocks -= req.blocks
            self._sample(req)
            if req.generated >= req.output:
                self.alloc.release(req.handle, req.blocks, req.reservation)
                self._record(req, self.t)
            else:
                self._to_lockstep(req)

    def _to_lockstep(self, req: Req) -> None:
        """Hand a prefilled request's blocks to the lockstep sums (the allocator keeps them)."""
        blocks = req.blocks
        req.blocks = 0
        self._join(req, req.target)
        if self.view.charge.value(req.target) != blocks:
            raise RuntimeError("a prefilled request's blocks differ from its charge")

    def _sample(self, req: Req) -> None:
        """The request's next token comes out now."""
        if req.first_s < 0:
            req.first_s = self.t
        else:  # after a recompute: the gap since its last token
            self.metrics.itl.append((self.t - req.last_s, 1))
            self.metrics.recompute_tokens_sampled += 1
        req.last_s = self.t
        req.generated += 1

    # --- leaving ----------------------------------------------------------------------

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

    def _finish_decoding(self, req: Req) -> None:
        """Its last token came out on this step: return it (static: keep it as padding)."""
        blocks, token_bytes, read_bytes, tokens = self._leave(req)
        req.generated = req.output
        req.last_s = self.t
        if self.static:
            req.blocks = blocks
            for index, value in enumerate((blocks, token_bytes, read_bytes, tokens)):
                self.frozen[index] += value
            self.padded.append(req)
            return
        self.alloc.release(req.handle, blocks, req.reservation)
        self._record(req, self.t)

    def _record(self, req: Req, finish_s: float) -> None:
        if not self.static:
            self.policy.stopped(req)
        self.metrics.record_request(
            req.arrival_s,
            req.first_s,
            req.last_s,
            finish_s,
            req.output,
            req.prompt,
            req.preemptions,
            req.order,
        )

    def _preempt_newest(self) -> Req:
        """Preempt the newest running request (recompute, or swap when asked and room)."""
        victim = self.policy.victim(self)
        self.policy.stopped(victim)
        metrics = self.metrics
        if victim.order in self.decoding:
            blocks, _, _, tokens = self._leave(victim)
            victim.generated = victim.output - (victim.fin_step - self.step)
            victim.last_s = self.t  # its last decode step ended now
            swap_bytes = blocks * self.view.bytes_per_block
            if self.swap and self.swap_used_bytes + swap_bytes <= self.view.config.swap_space_bytes:
                self._swap_out(victim, tokens, swap_bytes)
            else:
                metrics.recomputed_tokens += tokens
                victim.target, victim.done = victim.prompt + victim.generated, 0
        else:
            self.prefilling.remove(victim)
            blocks = victim.blocks
            self.prefill_blocks -= blocks
            metrics.recomputed_tokens += victim.done
            victim.done = 0
        self.alloc.release(victim.handle, blocks, victim.reservation)
        victim.handle, victim.blocks = None, 0
        victim.preemptions += 1
        metrics.preemptions["swap" if victim.swapped_tokens else "recompute"] += 1
        self.waiting.appendleft(victim)
        self.policy.preempted(self)
        return victim

    def _swap_out(self, req: Req, tokens: int, swap_bytes: float) -> None:
        req.swapped_tokens, req.in_host = tokens, True
        self.swap_used_bytes += swap_bytes
        self.step_extra_s += swap_bytes / self.view.host_link_bytes_per_s
        self.metrics.swapped_bytes += swap_bytes

    def _swap_in(self, req: Req) -> None:
        if req.in_host:  # (a prefilled arrival's KV is already on the GPU)
            swap_bytes = req.blocks * self.view.bytes_per_block
            self.swap_used_bytes -= swap_bytes
            self.step_extra_s += swap_bytes / self.view.host_link_bytes_per_s
            self.metrics.swapped_bytes += swap_bytes
            req.in_host = False
        req.blocks = 0  # the lockstep sums hold them once it joins

    # --- static (request-level) batching ----------------------------------------------

    def _static_step(self) -> None:
        self.step_extra_s = 0.0
        if self.decoding:
            self._make_room()
            decoding = len(self.decoding)
            self._run_step(decoding, [])
            self.metrics.record_steps(1, decoding + len(self.padded))
            self._settle()
        elif self.padded:
            self._return_batch()
        else:
            self._start_batch()

    def _start_batch(self) -> None:
        """Admit a batch in arrival order and prefill it, every prompt padded to the longest."""
        view, batch = self.view, []
        while self.waiting and len(batch) < view.max_num_seqs:
            head = self.waiting[0]
            if not self._take(head, view.charge.value(head.target)):
                break
            batch.append(self.waiting.popleft())
        if not batch:
            raise RuntimeError("an empty static batch")  # admission guarantees one
        longest = max(req.target for req in batch)
        seconds = view.cost.step_s(0, 0, 0, [(0, longest)] * len(batch), 0)
        self.prefilling, self.prefill_blocks = batch, sum(req.blocks for req in batch)
        for req in batch:  # the step writes the prompts' KV: it counts as held
            req.done = req.target
        before = self._memory()
        self.step += 1
        metrics = self.metrics
        metrics.prefill_tokens += sum(req.target for req in batch)
        metrics.padded_prompt_tokens += sum(longest - req.target for req in batch)
        metrics.record_steps(1, len(batch))
        metrics.busy_s += seconds
        self._advance(seconds, before)
        self.prefilling, self.prefill_blocks = [], 0
        for req in batch:
            self._sample(req)
            if req.generated >= req.output:
                req.last_s = self.t
                tokens = req.target
                values = (req.blocks, view.token_bytes.value(tokens), view.read_bytes.value(tokens))
                for index, value in enumerate((*values, tokens)):
                    self.frozen[index] += value
                self.padded.append(req)
            else:
                self._to_lockstep(req)

    def _return_batch(self) -> None:
        """Every slot is done: the whole batch returns now and frees its memory."""
        for req in self.padded:
            self.alloc.release(req.handle, req.blocks, req.reservation)
            self._record(req, self.t)
        self.padded.clear()
        self.frozen = [0, 0, 0, 0]
