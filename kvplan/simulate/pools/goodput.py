"""Goodput per GPU of the two layouts `pools` compares: the highest rate each still serves.

DistServe (Zhong et al., OSDI 2024, §2) defines goodput as the highest request rate at which
the SLO attainment, the share of requests meeting both their TTFT and their TPOT target,
stays at or above the target share (90 %), and compares layouts by goodput per GPU. Here the
layouts are the ones `size_pools` chose at the workload's own rate: the colocated instances,
and the prefill and decode split. Each is kept, and the same requests are offered at other
rates (`Workload.at_rate`: the arrival times scaled). A request counts when its TTFT (the
prefill pool's) and its TPOT (the decode pool's, the KV copy included) both meet their
targets; a rejected request is a miss, as in `simulate`'s goodput.

The rate is bracketed by doubling (or halving) from the workload's own, up to
MAX_DOUBLINGS times, then found on a grid of RATE_STEPS rates inside the bracket with the
engine layer's one search (`largest_fitting`), which takes the attainment never to rise
with the rate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from kvplan.engine.pool import largest_fitting
from kvplan.simulate import simulate
from kvplan.simulate.pools.choice import PoolChoice
from kvplan.simulate.pools.search import PoolSearch, at_tp
from kvplan.simulate.results import meets_percentile, slo_met_count
from kvplan.simulate.workload import Workload

RATE_STEPS = 32  # the bracket [met, missed] is searched to 1/32 of its width
MAX_DOUBLINGS = 10  # the rates tried run from 1/1024 to 1024 × the workload's


@dataclass(frozen=True)
class LayoutGoodput:
    """The highest rate one layout serves meeting the SLO attainment, and per GPU."""

    layout: str  # colocated or disaggregated
    split: str  # "3 × tp 1" colocated, "2P1D" disaggregated
    gpus: int
    requests_per_s: float  # 0.0: not met even at the lowest rate tried
    slo_met_fraction: float  # the attainment at that rate (at the lowest tried when 0.0)
    capped: bool  # still met at the highest rate tried: a lower bound
    tried: tuple[tuple[float, float], ...]  # (rate, attainment), in the order simulated

    @property
    def requests_per_s_per_gpu(self) -> float:
        return self.requests_per_s / self.gpus


# The attainment of a layout on a workload: (requests meeting both targets, requests offered).
Attainment = Callable[[Workload], tuple[int, int]]


def colocated_attainment(search: PoolSearch, choice: PoolChoice) -> Attainment:
    """The colocated layout of `choice` (its count, or the largest tried) on a workload."""
    deployment = at_tp(search.deployment, choice.tp)
    config = replace(search.config, instances=choice.reported_instances)

    def attained(workload: Workload) -> tuple[int, int]:
        result = simulate(deployment, search.sku, workload, config)
        return slo_met_count(list(result.requests), search.slo), len(workload.requests)

    return attained


def disaggregated_attainment(
    search: PoolSearch, prefill: PoolChoice, decode: PoolChoice
) -> Attainment:
    """The prefill and decode split of the two choices on a workload, judged per request on
    both targets (DistServe's attainment), the KV copy included."""
    p_count, d_count = _count(prefill), _count(decode)

    def attained(workload: Workload) -> tuple[int, int]:
        at = PoolSearch(
            search.deployment,
            search.sku,
            workload,
            search.config,
            search.percentile,
            search.slo,
            search.link,
            search.limit,
        )
        at.run_prefill(prefill.tp, p_count)
        first = at.first_tokens_of(prefill.tp, p_count)
        handed, done = at.handed_workload(first, prefill.tp, decode.tp)
        records, _ = at.decode_records(decode.tp, d_count, first, handed, done)
        return slo_met_count(records, search.slo), len(workload.requests)

    return attained


def _count(choice: PoolChoice) -> int:
    """The instances a layout keeps: the count found, else the largest tried (a decode pool
    of 0 when every output is one token)."""
    return 0 if choice.instances == 0 else choice.reported_instances


def highest_rate(
    workload: Workload, attained: Attainment, percentile: int
) -> tuple[float, float, bool, tuple[tuple[float, float], ...]]:
    """(the highest rate meeting `percentile` % attainment, the attainment there, whether
    it was still met at the highest rate tried, every (rate, attainment) tried)."""
    base = workload.offered_requests_per_s or 0.0
    tried: dict[float, float] = {}

    def meets(rate: float) -> bool:
        met, offered = attained(workload.at_rate(rate))
        tried[rate] = met / offered
        return meets_percentile(met, offered, percentile)

    low, high = base, base
    if meets(base):
        for _ in range(MAX_DOUBLINGS):
            high *= 2
            if not meets(high):
                break
            low = high
        else:
            return low, tried[low], True, tuple(tried.items())
    else:
        for _ in range(MAX_DOUBLINGS):
            low /= 2
            if meets(low):
                break
            high = low
        else:
            return 0.0, tried[low], False, tuple(tried.items())

    def rate(step: int) -> float:
        return low + (high - low) * step / RATE_STEPS

    found = rate(largest_fitting(lambda step: meets(rate(step)), RATE_STEPS - 1))
    return found, tried[found], False, tuple(tried.items())


def layout_goodputs(
    search: PoolSearch, prefill: PoolChoice, decode: PoolChoice, colocated: PoolChoice
) -> tuple[LayoutGoodput, LayoutGoodput]:
    """(colocated, disaggregated) goodput of the layouts chosen (or largest tried)."""
    layouts = (
        (
            "colocated",
            f"{colocated.reported_instances} × tp {colocated.tp}",
            colocated.reported_instances * colocated.tp * colocated.pp,
            colocated_attainment(search, colocated),
        ),
        (
            "disaggregated",
            f"{_count(prefill)}P{_count(decode)}D",
            _count(prefill) * prefill.tp * prefill.pp + _count(decode) * decode.tp * decode.pp,
            disaggregated_attainment(search, prefill, decode),
        ),
    )
    found = []
    for layout, split, gpus, attained in layouts:
        rate, fraction, capped, tried = highest_rate(search.workload, attained, search.percentile)
        found.append(LayoutGoodput(layout, split, gpus, rate, fraction, capped, tried))
    return found[0], found[1]
