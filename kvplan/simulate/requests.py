"""A request as the simulated engine holds it, from arrival to return."""

from __future__ import annotations

from kvplan.simulate.workload import RequestSpec


class Req:
    """One request's state inside an instance (slots: there may be millions).

    Token counts: `generated` output tokens so far (the prefill makes the first); the KV holds
    prompt + generated − 1 tokens while decoding, because a token's KV is written by the step
    after the one that sampled it. A prefill (first, or after a recompute preemption) runs
    `target` = prompt + generated tokens, of which `done` are computed.
    """

    __slots__ = (
        "arrival_s",
        "blocks",
        "done",
        "fin_step",
        "final_blocks",
        "first_s",
        "generated",
        "handle",
        "in_host",
        "join_step",
        "join_tokens",
        "last_s",
        "order",
        "output",
        "preemptions",
        "prompt",
        "rates",
        "reservation",
        "residues",
        "segments",
        "swapped_tokens",
        "target",
        "version",
    )

    def __init__(self, order: int, spec: RequestSpec, reservation: int) -> None:
        self.order = order  # arrival order: a larger number is a newer request
        self.arrival_s = spec.arrival_s
        self.prompt = spec.prompt_tokens
        self.output = spec.output_tokens
        self.generated = 0
        self.target = spec.prompt_tokens
        self.done = 0
        self.blocks = 0  # blocks charged while prefilling or padded (decoders: in Lockstep)
        self.handle: int | None = None  # the allocator's handle while memory is held
        self.reservation = reservation  # contiguous allocators: blocks reserved
        self.final_blocks = 0  # blocks it holds at its longest (set on arrival)
        self.first_s = -1.0
        self.last_s = -1.0
        self.preemptions = 0
        self.swapped_tokens = 0  # > 0: KV of this many tokens waits to be copied back in
        self.in_host = False  # that KV is in this instance's host memory (a swap-out)
        self.join_step = 0  # decoding: the step it joined the lockstep, at join_tokens tokens
        self.join_tokens = 0
        self.fin_step = 0
        self.residues: list[int] = []
        self.rates: list[int] = []
        self.segments: list[int] = []
        self.version = 0  # bumped when it leaves the lockstep: stale heap entries are skipped

    def kv_tokens(self, step: int) -> int:
        """Tokens in KV while decoding, on `step`."""
        return self.join_tokens + step - self.join_step
