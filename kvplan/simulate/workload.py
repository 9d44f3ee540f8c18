"""Workloads: requests with an arrival time, a prompt and an output length.

A workload is generated once (Poisson arrivals with token distributions, from one seed) or
read from a trace, and then handed unchanged to every configuration that is compared, so
`--vs` and `pools` judge their options on the very same requests. The three kinds people
benchmark with:

- rate: Poisson arrivals (`vllm bench serve --request-rate`) or a trace's own times;
- offline: every request at t = 0 (`trtllm-bench throughput`);
- closed loop: N clients, each sending its next request when its previous one returns
  (`vllm bench serve --max-concurrency N`, genai-perf and AIPerf `--concurrency N`).

A closed loop is a cap on the requests in flight (`max_concurrency`): request i is sent at
its scheduled arrival or when one of the N in flight returns, whichever is later, in order,
as vllm bench serve's semaphore does (its requests are scheduled at t = 0 when no rate is
given). The send times therefore come out of the run (`simulate/cluster.py`), not the
workload.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

import kvplan.limits as limits
from kvplan.errors import KvplanError
from kvplan.simulate.distributions import TokenDistribution

# The stated maximum (kvplan.limits.SIMULATED_REQUESTS): what simulates in about 20 s.
MAX_REQUESTS = limits.SIMULATED_REQUESTS.maximum
KINDS = ("rate", "trace", "offline", "closed-loop")


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
    kind: str = "rate"  # one of KINDS
    # Most requests in flight at once (a closed loop of this many clients); None: no cap.
    max_concurrency: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"workload kind {self.kind!r} is not one of {KINDS}")
        if self.max_concurrency is not None and not 1 <= self.max_concurrency <= MAX_REQUESTS:
            raise KvplanError(
                f"--concurrency: {self.max_concurrency} must be between 1 and {MAX_REQUESTS:,}"
            )

    @property
    def arrival_window_s(self) -> float | None:
        """Seconds from the start of the run to the last scheduled arrival, over which an
        offered rate is measured; None when every request is scheduled at t = 0 (offline, or
        a closed loop with no rate): such a run measures throughput, not a rate it keeps up
        with."""
        window = self.duration_s
        return window if window > 0 else None

    @property
    def offered_requests_per_s(self) -> float | None:
        """Requests ÷ the arrival window (None: no window)."""
        window = self.arrival_window_s
        return None if window is None else len(self.requests) / window

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
        return replace(self, requests=requests, description=label)

    def at_rate(self, requests_per_s: float) -> Workload:
        """The same requests, their arrival times scaled so that they are offered at
        `requests_per_s` over the arrival window (a Poisson workload stays Poisson).

        Raises:
            KvplanError: a workload without an arrival window (offline, a closed loop).
        """
        offered = self.offered_requests_per_s
        if offered is None or self.max_concurrency is not None:
            raise KvplanError(
                "--goodput: searches a rate, so the workload needs arrival times (give --rate "
                "or --trace)"
            )
        factor = offered / requests_per_s
        requests = tuple(replace(r, arrival_s=r.arrival_s * factor) for r in self.requests)
        label = f"{self.description}; arrivals at {requests_per_s:,.4g} req/s"
        return replace(self, requests=requests, description=label)

    def capped(self, max_concurrency: int) -> Workload:
        """The same arrivals with at most `max_concurrency` requests in flight: a request
        waits for its scheduled time and for a free place (vllm bench serve given both
        --request-rate and --max-concurrency)."""
        description = f"{self.description}, at most {max_concurrency:,} in flight"
        return replace(self, description=description, max_concurrency=max_concurrency)


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


def offline_workload(
    prompt: TokenDistribution,
    output: TokenDistribution,
    *,
    requests: int,
    seed: int = 0,
    max_concurrency: int | None = None,
) -> Workload:
    """`requests` requests all scheduled at t = 0, lengths drawn as `poisson_workload` draws
    them (prompt, output per request from one `random.Random(seed)`).

    Alone, every request arrives at once (offline, as `trtllm-bench throughput`); with
    `max_concurrency` N, they go N at a time, each next one when one returns (a closed loop).
    """
    if not 1 <= requests <= MAX_REQUESTS:
        raise KvplanError(f"--requests: {requests} must be between 1 and {MAX_REQUESTS:,}")
    rng = random.Random(seed)
    made = tuple(RequestSpec(0.0, prompt.sample(rng), output.sample(rng)) for _ in range(requests))
    noun = "request" if requests == 1 else "requests"
    lengths = f"prompt {prompt.text}, output {output.text}, seed {seed}"
    workload = Workload(made, f"offline, {requests:,} {noun} at t = 0, {lengths}", kind="offline")
    if max_concurrency is None:
        return workload
    return replace(
        workload,
        description=f"closed loop, {max_concurrency:,} clients, {requests:,} {noun}, {lengths}",
        kind="closed-loop",
        max_concurrency=max_concurrency,
    )
