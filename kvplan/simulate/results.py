"""A run's figures: throughput, latency percentiles, goodput, batches, queue, memory."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kvplan.simulate.config import Slo
from kvplan.simulate.engine_view import InstanceModel
from kvplan.simulate.metrics import MemorySplit, Metrics
from kvplan.simulate.saturation import Saturation, saturation
from kvplan.simulate.workload import Workload

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Latency:
    """One latency's distribution, seconds (None: no sample)."""

    mean_s: float | None
    p50_s: float | None
    p90_s: float | None
    p99_s: float | None

    def percentile_s(self, percentile: int) -> float | None:
        return {50: self.p50_s, 90: self.p90_s, 99: self.p99_s}.get(percentile)


class RequestRecord(NamedTuple):
    """One returned request's times (seconds from the start) and lengths."""

    arrival_s: float
    first_token_s: float
    last_token_s: float
    finish_s: float
    prompt_tokens: int
    output_tokens: int
    preemptions: int
    order: int  # its place in the workload

    @property
    def ttft_s(self) -> float:
        return self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first (None for one-token outputs)."""
        if self.output_tokens < 2:
            return None
        return (self.last_token_s - self.first_token_s) / (self.output_tokens - 1)

    @property
    def e2e_s(self) -> float:
        return self.finish_s - self.arrival_s


@dataclass(frozen=True)
class SimulationResult:
    """Everything one configuration's run measured (the JSON record is `report`'s job)."""

    label: str
    view: InstanceModel = field(repr=False)
    workload: Workload = field(repr=False)
    instances: int
    requests: tuple[RequestRecord, ...] = field(repr=False)
    rejected: dict[str, int]
    makespan_s: float  # first arrival (0) to the last return
    ttft: Latency
    tpot: Latency
    itl: Latency
    e2e: Latency
    slo_met_requests: int | None  # requests meeting both targets (None: no SLO)
    batch_mean: float
    batch_peak: int
    steps: int
    preemptions: dict[str, int]
    recomputed_tokens: int
    swapped_bytes: float
    padded_prompt_tokens: int
    padded_decode_tokens: int
    prefill_tokens: int
    decode_tokens: int
    recompute_tokens_sampled: int  # output tokens sampled by re-prefills after a recompute
    queue_mean: float
    queue_peak: int
    requests_in_system_mean: float  # ∫ requests in the system dt / makespan, per instance summed
    # ∫ requests running (prefilling or decoding) dt / makespan, summed: the requests served at
    # once, as vLLM logs "Running: N reqs" and the PagedAttention paper counts batched requests.
    running_mean: float
    memory_mean: MemorySplit  # time-averaged, per instance
    timeline: tuple[tuple[float, int, int, tuple[float, ...]], ...] = field(repr=False)
    notes: tuple[str, ...]
    # The arrival window and whether the deployment kept up with it (saturation.py).
    saturation: Saturation

    @property
    def completed(self) -> int:
        return len(self.requests)

    @property
    def throughput_requests_per_s(self) -> float:
        return self.completed / self.makespan_s if self.makespan_s > 0 else 0.0

    @property
    def output_tokens(self) -> int:
        return sum(r.output_tokens for r in self.requests)

    @property
    def output_tokens_per_s(self) -> float:
        return self.output_tokens / self.makespan_s if self.makespan_s > 0 else 0.0

    @property
    def slo_met_fraction(self) -> float | None:
        """Share of all requests (rejected ones fail) meeting both targets (None: no SLO)."""
        if self.slo_met_requests is None:
            return None
        return self.slo_met_requests / self.offered if self.offered else 0.0

    @property
    def goodput_requests_per_s(self) -> float | None:
        """Requests/s meeting both targets, over the arrival window (None: no SLO).

        The share of the workload meeting them × the rate the window was served at (the
        offered rate, or the sustainable one when overloaded), so a drain after the last
        arrival neither lowers it nor an unbounded queue raises it; a workload with no
        window (offline, a closed loop) counts them over the makespan.
        """
        if self.slo_met_requests is None:
            return None
        served = self.saturation.served_requests_per_s
        if served is None:
            return self.slo_met_requests * (1 / self.makespan_s if self.makespan_s else 0.0)
        return self.slo_met_requests / self.offered * served if self.offered else 0.0

    @property
    def offered(self) -> int:
        """Requests of the workload: returned and rejected."""
        return len(self.workload.requests)

    def meets_slo(self, percentile: float) -> bool | None:
        """Whether at least `percentile` % of the workload's requests met both targets;
        rejected requests count as misses (None: the run had no SLO)."""
        if self.slo_met_requests is None:
            return None
        return meets_percentile(self.slo_met_requests, self.offered, percentile)

    @property
    def kv_utilization_fraction(self) -> float | None:
        """Time-averaged share of the KV memory taken from the pool that holds tokens."""
        memory = self.memory_mean
        taken = memory.token_bytes + memory.partial_block_bytes + memory.reserved_unused_bytes
        taken += memory.fragmentation_bytes
        return memory.token_bytes / taken if taken > 0 else None


# Counters every instance keeps, added up across instances under the same name.
SUMMED = (
    "steps",
    "recomputed_tokens",
    "swapped_bytes",
    "padded_prompt_tokens",
    "padded_decode_tokens",
    "prefill_tokens",
    "decode_tokens",
    "recompute_tokens_sampled",
)


def summarize(
    label: str, view: InstanceModel, workload: Workload, runs: list[Metrics]
) -> SimulationResult:
    """Merge the instances' metrics into one result."""
    requests = _records(runs)
    makespan = max((r.finish_s for r in requests), default=0.0)
    slo = view.config.slo
    met = None
    if slo.ttft_s is not None or slo.tpot_s is not None:
        met = slo_met_count(requests, slo)
    summed = {name: sum(getattr(run, name) for run in runs) for name in SUMMED}
    steps = summed["steps"]
    per_makespan = 1 / makespan if makespan else 0.0
    verdict = _saturation(workload, requests)
    overload = verdict.note()
    return SimulationResult(
        label=label,
        view=view,
        workload=workload,
        instances=len(runs),
        requests=requests,
        rejected=dict(sum((Counter(run.rejected) for run in runs), Counter())),
        makespan_s=makespan,
        ttft=_latency([r.ttft_s for r in requests]),
        tpot=_latency([t for r in requests if (t := r.tpot_s) is not None]),
        itl=_weighted_latency([sample for run in runs for sample in run.itl]),
        e2e=_latency([r.e2e_s for r in requests]),
        slo_met_requests=met,
        batch_mean=sum(run.batch_step_sum for run in runs) / steps if steps else 0.0,
        batch_peak=max(run.batch_peak for run in runs),
        preemptions=dict(sum((Counter(run.preemptions) for run in runs), Counter())),
        queue_mean=sum(run.queue_s for run in runs) * per_makespan,
        queue_peak=max(run.queue_peak for run in runs),
        requests_in_system_mean=sum(run.in_system_s for run in runs) * per_makespan,
        running_mean=sum(run.running_s for run in runs) * per_makespan,
        memory_mean=_memory_mean(runs, makespan),
        timeline=tuple(runs[0].timeline),
        notes=(() if overload is None else (overload,))
        + view.notes
        + workload.notes
        + _instance_notes(len(runs)),
        saturation=verdict,
        **summed,
    )


def _saturation(workload: Workload, requests: tuple[RequestRecord, ...]) -> Saturation:
    """Overload over the workload's scheduled arrivals: a capped workload's requests were
    sent later than scheduled, and that wait is backlog too."""
    specs = workload.requests
    if workload.max_concurrency is None:
        returns = [(r.arrival_s, r.finish_s) for r in requests]
    else:  # the cluster numbers a capped workload's requests by their index
        returns = [(specs[r.order].arrival_s, r.finish_s) for r in requests]
    return saturation([spec.arrival_s for spec in specs], returns)


def slo_met_count(records: Iterable[RequestRecord], slo: Slo) -> int:
    """Returned requests whose TTFT and TPOT meet every target of `slo`.

    A rejected request never returns, so it is never counted: divided by the requests
    offered, this is the SLO attainment in which rejections are misses (DistServe, OSDI 2024:
    goodput is the rate served at a target attainment such as 90 %).
    """
    return sum(slo.met(r.ttft_s, r.tpot_s) for r in records)


def meets_percentile(met_requests: int, offered_requests: int, percentile: float) -> bool:
    """Whether `met_requests` of `offered_requests` is at least `percentile` % of them.

    Compared as 100 · met ≥ percentile · offered, so 270 of 300 meets 90 exactly.
    """
    return 100 * met_requests >= percentile * offered_requests


def _records(runs: list[Metrics]) -> tuple[RequestRecord, ...]:
    return tuple(
        RequestRecord._make(fields)
        for run in runs
        for fields in zip(
            run.arrival_s,
            run.first_s,
            run.last_s,
            run.finish_s,
            run.prompt_tokens,
            run.output_tokens,
            run.preempted,
            run.order,
            strict=True,
        )
    )


def _memory_mean(runs: list[Metrics], makespan: float) -> MemorySplit:
    """The pool split averaged over the makespan and over the instances."""
    totals = [sum(run.memory_s[i] for run in runs) for i in range(6)]
    share = 1 / (makespan * len(runs)) if makespan else 0.0
    return MemorySplit(*(value * share for value in totals))


def _instance_notes(count: int) -> tuple[str, ...]:
    if count == 1:
        return ()
    return (f"memory split and timeline: per instance (timeline of instance 1 of {count})",)


def _latency(values: list[float]) -> Latency:
    if not values:
        return Latency(None, None, None, None)
    ordered = sorted(values)
    mean = sum(ordered) / len(ordered)
    p50, p90, p99 = (percentile_of(ordered, p) for p in PERCENTILES)
    return Latency(mean, p50, p90, p99)


def percentile_of(ordered: list[float], percentile: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    position = (len(ordered) - 1) * percentile / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _weighted_latency(samples: list[tuple[float, float]]) -> Latency:
    """Percentiles of values that stand for `weight` tokens each (inter-token gaps)."""
    if not samples:
        return Latency(None, None, None, None)
    samples.sort()
    total = math.fsum(weight for _, weight in samples)
    mean = math.fsum(value * weight for value, weight in samples) / total
    found: dict[int, float] = {}
    cumulative, wanted = 0.0, list(PERCENTILES)
    for value, weight in samples:
        cumulative += weight
        while wanted and cumulative >= wanted[0] / 100 * total:
            found[wanted.pop(0)] = value
    for percentile in wanted:
        found[percentile] = samples[-1][0]
    return Latency(mean, found[50], found[90], found[99])


def result_fields(result: SimulationResult) -> dict[str, Any]:
    """The deployment's and the run's options, for reports."""
    view, deployment = result.view, result.view.deployment
    config = view.config
    return {
        "model": deployment.model.name,
        "sku": view.sku.name,
        "engine": deployment.engine.name,
        "kv_dtype": deployment.kv_dtype,
        "tp": deployment.tp,
        "pp": deployment.pp,
        "instances": result.instances,
        "scheduler": config.scheduler,
        "allocator": config.allocator,
        "placement": config.placement,
        "chunked_prefill": config.chunked_prefill,
        "preemption": config.preemption,
    }
