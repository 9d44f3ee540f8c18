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

from kvplan.simulate.instance_state import CHARGE, READS
from kvplan.simulate.requests import Req
from kvplan.simulate.scheduling import Scheduling
from kvplan.simulate.step_cost import itl_samples, run_s, steps_starting_before
from kvplan.simulate.workload import RequestSpec

TOO_LONG = "prompt + output longer than max_model_len"
TOO_LARGE = "needs more KV than the whole pool"
PROMPT_TOO_LONG = "prompt longer than max_num_batched_tokens without chunked prefill"


class Instance(Scheduling):
    """One replica running continuous or static batching (see the module docstring).

    Built as `Instance(view, metrics)`: the state and the lockstep are `InstanceState`'s
    (instance_state.py), the scheduler steps `Scheduling`'s (scheduling.py); this class
    queues arrivals and decides between a step and a jump.
    """

    # --- arrivals -------------------------------------------------------------------

    def submit(self, spec: RequestSpec, order: int) -> bool:
        """Queue a request that arrived at `spec.arrival_s` (the clock may be past it);
        False when it is rejected on arrival."""
        view = self.view
        if spec.prompt_tokens + spec.output_tokens > view.max_model_len:
            self.metrics.rejected[TOO_LONG] += 1
            return False
        if view.prompt_limit_tokens is not None and spec.prompt_tokens > view.prompt_limit_tokens:
            self.metrics.rejected[PROMPT_TOO_LONG] += 1
            return False
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
            return False
        if self.t < spec.arrival_s:
            self._advance(spec.arrival_s - self.t, self._memory())
        else:  # it waited while the step in progress ran
            late_s = self.t - spec.arrival_s
            self.metrics.in_system_s += late_s
            self.metrics.queue_s += late_s
        req = Req(spec.order if spec.order is not None else order, spec, reservation)
        req.final_blocks = final_blocks
        if spec.prefilled:  # its KV came over the network: admitted straight into decoding
            req.swapped_tokens, req.generated = spec.prompt_tokens, 1
            req.first_s = req.last_s = spec.arrival_s
        self.waiting.append(req)
        self.metrics.queue_peak = max(self.metrics.queue_peak, len(self.waiting))
        return True

    def run_until(self, limit_s: float) -> None:
        """Run every step that starts before `limit_s` (all of them for infinity)."""
        while self.in_system and self.t < limit_s:
            self._take_steps(limit_s)

    def run_to_return(self, limit_s: float) -> None:
        """Take at least one step, then those starting before `limit_s`, stopping after the
        first step that returns a request (a closed loop sends its next one then)."""
        returned = len(self.metrics.finish_s)
        self._take_steps(limit_s)
        while self.in_system and self.t < limit_s and len(self.metrics.finish_s) == returned:
            self._take_steps(limit_s)

    def _take_steps(self, limit_s: float) -> None:
        """A run of identical decode steps ending before `limit_s`, or else one step."""
        if not self._jump(limit_s):
            if self.static:
                self._static_step()
            else:
                self._continuous_step()

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
        if self.waiting and self.policy.jump_limit is not None:
            steps = min(steps, self.policy.jump_limit)
        if steps < 1:
            return False
        sequences = decoding + len(self.padded)
        reads, frozen = self.sums[READS], self.frozen
        kv_tokens = self.kv_offset + decoding * self.step + frozen[3]
        pieces = self.view.cost.decode_pieces(
            sequences, reads.total + frozen[2], reads.rate_sum, kv_tokens, decoding
        )
        steps = steps_starting_before(pieces, steps, limit_s - self.t)
        if steps < 1:  # the limit is now: the caller takes a single step if it must
            return False
        before = self._memory()
        self._grow(steps)
        metrics = self.metrics
        metrics.record_steps(steps, sequences)
        metrics.decode_tokens += decoding * steps
        metrics.padded_decode_tokens += len(self.padded) * steps
        metrics.itl += itl_samples(pieces, steps, decoding)
        self.policy.decoded(steps)
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
        elif view.config.chunked_prefill or head.target > view.max_num_batched_tokens:
            blocks = view.charge.value(min(head.target, budget))
        elif head.target <= budget:
            blocks = view.charge.value(head.target)
        else:
            return False
        if not head.swapped_tokens and not self.policy.admits(self, head):
            return False
        if not self.paged:
            return self.alloc.can_place(head.reservation)
        return blocks <= self.alloc.free_blocks - self.sums[CHARGE].need(self.step, 1)
