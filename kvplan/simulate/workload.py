"""Workloads: requests with an arrival time, a prompt and an output length.

A workload is generated once (Poisson arrivals with token distributions, from one seed) or
read from a trace, and then handed unchanged to every configuration that is compared, so
`--vs` and `pools` judge their options on the very same requests.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

import kvplan.limits as limits
from kvplan.errors import KvplanError
from kvplan.simulate.distributions import TokenDistribution

# The stated maximum (kvplan.limits.SIMULATED_REQUESTS): what simulates in about 20 s.
MAX_REQUESTS = limits.SIMULATED_REQUESTS.maximum


@dataclass(frozen=True)
class RequestSpec:
    """One request as the client sends it: when, how long a prompt, how many tokens back."""

    arrival_s: float  # seconds from the start of the run
    prompt_tokens: int
    output_tokens: int  # tokens generated, the first one by the prefill
    # Disaggregated decode: the prompt's KV and first token arrive from a prefill instance.
    prefilled: bool = False
    order: int | None = None  # the request's place in the original workload, if not this one


@dataclass(frozen=True)
class Workload:
    """The requests of one run, sorted by arrival, and how they were made."""

    requests: tuple[RequestSpec, ...]
    description: str  # e.g. "Poisson 10 req/s, prompt lognormal:mean=1000,sigma=1, seed 0"
    notes: tuple[str, ...] = ()

    @property
    def duration_s(self) -> float:
        """Arrival time of the last request (0 for an empty workload)."""
        return self.requests[-1].arrival_s if self.requests else 0.0

    def scaled(self, prompt_factor: float = 1.0, output_factor: float = 1.0) -> Workload:
        """The same arrivals with prompt and output lengths multiplied (at least 1 token)."""
        if prompt_factor == output_factor == 1.0:
            return self
        factors = (("--prompt-scale", prompt_factor), ("--output-scale", output_factor))
        for option, factor in factors:
            if not 0 < factor <= 1000:
                raise KvplanError(f"{option}: {factor} must be in (0, 1000]")
        requests = tuple(
            replace(
                r,
                prompt_tokens=max(1, round(r.prompt_tokens * prompt_factor)),
                output_tokens=max(1, round(r.output_tokens * output_factor)),
            )
            for r in self.requests
        )
        label = f"{self.description}; prompts ×{prompt_factor:g}, outputs ×{output_factor:g}"
        return Workload(requests, label, self.notes)


def poisson_workload(
    rate_per_s: float,
    prompt: TokenDistribution,
    output: TokenDistribution,
    *,
    requests: int | None = None,
    duration_s: float | None = None,
    seed: int = 0,
) -> Workload:
    """Poisson arrivals at `rate_per_s`, lengths drawn from `prompt` and `output`.

    Stops after `requests` requests, or at the last arrival before `duration_s` seconds
    (exactly one of the two). One `random.Random(seed)` draws everything in a fixed order
    (gap, prompt, output per request), so one seed always gives the same requests.
    """
    if not rate_per_s > 0 or rate_per_s == float("inf"):
        raise KvplanError(f"--rate: {rate_per_s} must be a positive number of requests per second")
    if (requests is None) == (duration_s is None):
        raise KvplanError("give exactly one of --requests and --duration")
    if requests is not None and not 1 <= requests <= MAX_REQUESTS:
        raise KvplanError(f"--requests: {requests} must be between 1 and {MAX_REQUESTS:,}")
    if duration_s is not None and rate_per_s * duration_s > MAX_REQUESTS:
        raise KvplanError(
            f"--duration: {duration_s:g} s at {rate_per_s:g} req/s is over "
            f"{MAX_REQUESTS:,} requests"
        )
    rng = random.Random(seed)
    made: list[RequestSpec] = []
    clock = 0.0
    while True:
        clock += rng.expovariate(rate_per_s)
        if duration_s is not None and clock >= duration_s:
            break
        made.append(RequestSpec(clock, prompt.sample(rng), output.sample(rng)))
        if requests is not None and len(made) == requests:
            break
    noun = "request" if len(made) == 1 else "requests"
    amount = f"{len(made):,} {noun}" if requests is not None else f"{duration_s:g} s"
    description = (
        f"Poisson {rate_per_s:g} req/s, {amount}, prompt {prompt.text}, output {output.text}, "
        f"seed {seed}"
    )
    return Workload(tuple(made), description)
