"""`kvplan pools`: the fewest prefill and decode instances that meet both SLOs, vs colocated.

Disaggregated serving (DistServe, OSDI 2024; Splitwise, ISCA 2024) runs prompts on a prefill
pool and generation on a decode pool. Here the prefill pool serves each request's prompt and
samples its first token (so TTFT is the prefill pool's), then the prompt's KV crosses the
link to a decode instance, which generates the rest (so the copy delays the second token and
counts in TPOT). Each pool is simulated with its own instance count behind a least-loaded
router, the smallest count meeting its target at the SLO percentile is found by doubling
and bisection, and the colocated count meeting both targets is found the same way.

A target is met at percentile p when at least p % of the workload's requests meet it, as
`simulate` counts goodput: a request a pool rejects (longer than max_model_len, or needing
more KV than one instance holds), or that never reaches it, is a miss. Rejections do not
depend on the instance count, so when they alone exceed the misses allowed, the search stops.
A pool whose instances cannot hold some request of the workload is no candidate at that
degree, however few such requests there are: the pool would drop them every time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from kvplan.engine.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.simulate.config import SimConfig, Slo
from kvplan.simulate.engine_view import instance_model, kv_refusal
from kvplan.simulate.instance import TOO_LARGE
from kvplan.simulate.pools.choice import PREFILL_REJECTED, PoolChoice
from kvplan.simulate.pools.goodput import LayoutGoodput, layout_goodputs
from kvplan.simulate.pools.search import PoolSearch, at_tp
from kvplan.simulate.results import percentile_of
from kvplan.simulate.workload import Workload
from kvplan.specs import SkuSpec

__all__ = [
    "DEFAULT_MAX_INSTANCES",
    "PREFILL_REJECTED",
    "LayoutGoodput",
    "PoolChoice",
    "PoolsResult",
    "size_pools",
]

DEFAULT_MAX_INSTANCES = 64


@dataclass(frozen=True)
class PoolsResult:
    """Disaggregated pools against colocated instances for one workload."""

    workload: Workload
    slo: Slo
    percentile: int
    link_bytes_per_s: float
    transfer_mean_s: float
    transfer_percentile_s: float
    served: int  # requests both disaggregated pools chosen (or largest tried) return
    rejected: int  # the others: rejected by the prefill or the decode pool
    colocated_served: int  # requests the colocated pool chosen (or largest tried) returns
    prefill: PoolChoice
    decode: PoolChoice
    colocated: PoolChoice
    notes: tuple[str, ...]
    # With `goodput`: (colocated, disaggregated), the highest rate each layout chosen serves
    # at the SLO attainment (pools/goodput.py); else empty.
    goodput: tuple[LayoutGoodput, ...] = ()

    @property
    def offered_requests_per_s(self) -> float:
        """Requests/s the disaggregated pools return, over the workload's duration."""
        return self._per_s(self.served)

    @property
    def colocated_requests_per_s(self) -> float:
        """Requests/s the colocated pool returns: its own, not what every pool returned."""
        return self._per_s(self.colocated_served)

    def _per_s(self, requests: int) -> float:
        duration = self.workload.duration_s
        return requests / duration if duration > 0 else 0.0

    @property
    def disaggregated_gpus(self) -> int | None:
        p, d = self.prefill.gpus, self.decode.gpus
        return None if p is None or d is None else p + d

    @property
    def ratio(self) -> str | None:
        """'2P1D' for two prefill and one decode instance."""
        p, d = self.prefill.instances, self.decode.instances
        return None if p is None or d is None else f"{p}P{d}D"


def size_pools(
    deployment: Deployment,
    sku: SkuSpec,
    workload: Workload,
    slo: Slo,
    *,
    config: SimConfig | None = None,
    percentile: int = 90,
    tps: tuple[int, ...] = (),
    link_bytes_per_s: float | None = None,
    max_instances: int = DEFAULT_MAX_INSTANCES,
    goodput: bool = False,
) -> PoolsResult:
    """Size prefill, decode and colocated pools for `workload` under `slo` at `percentile`;
    with `goodput`, also the highest rate each chosen layout serves (`PoolsResult.goodput`).

    `tps` are the tensor-parallel degrees each pool may use (default: the deployment's); the
    one needing the fewest GPUs wins per pool, and a degree whose weights leave no KV memory
    is skipped with a note. The KV copy runs at `link_bytes_per_s` (default: the SKU's
    interconnect, one direction) over min(prefill tp, decode tp) × pp links.

    Raises:
        KvplanError: no SLO, a bad percentile, no link bandwidth, no servable request, or no
            degree that leaves KV memory.
    """
    link = _checked(sku, slo, percentile, max_instances, link_bytes_per_s)
    _check_workload(workload, goodput)
    base = replace(config or SimConfig(), router="least-loaded", slo=slo, instances=1)
    limit = base.max_model_len or deployment.model.max_context
    if all(r.prompt_tokens + r.output_tokens > limit for r in workload.requests):
        raise KvplanError(f"no request of the workload fits max_model_len {limit:,} tokens")
    degrees, skipped = _usable_degrees(deployment, sku, base, tps or (deployment.tp,))
    search = PoolSearch(deployment, sku, workload, base, percentile, slo, link, max_instances)
    prefill, prefill_notes = _best(degrees, search.prefill)
    decode, decode_notes = _best(degrees, lambda tp: search.decode(tp, prefill))
    colocated, colocated_notes = _best(degrees, search.colocated)
    served = search.served(prefill, decode)
    first = search.first_tokens(prefill)
    transfers = sorted(
        search.transfer_s(workload.requests[order], prefill.tp, decode.tp) for order in first
    ) or [0.0]
    return PoolsResult(
        workload=workload,
        slo=slo,
        percentile=percentile,
        link_bytes_per_s=link,
        transfer_mean_s=sum(transfers) / len(transfers),
        transfer_percentile_s=percentile_of(transfers, percentile),
        served=served,
        rejected=len(workload.requests) - served,
        colocated_served=search.colocated_served(colocated),
        prefill=prefill,
        decode=decode,
        colocated=colocated,
        goodput=layout_goodputs(search, prefill, decode, colocated) if goodput else (),
        notes=(
            "prefill instances free a prompt's KV when its first token is out; the copy to the "
            "decode pool is counted in TPOT, not in memory",
            "KV copy: the prompt's KV bytes on every GPU of the prefill replica over "
            "min(prefill tp, decode tp) × pp links, each at the link bandwidth",
            *skipped,
            *prefill_notes,
            *decode_notes,
            *colocated_notes,
            *instance_model(at_tp(deployment, degrees[0]), sku, base).notes,
        ),
    )


def _check_workload(workload: Workload, goodput: bool) -> None:
    """Refuse a workload pools cannot size, before any run."""
    if workload.max_concurrency is not None:
        # Its next request waits on the decode pool's returns, so the two pools' runs would
        # have to advance together; each pool is simulated on its own here.
        raise KvplanError(
            "--concurrency: pools sizes pools for arrival times (--rate, --trace or "
            "--offline); a closed loop couples the prefill and decode pools, which pools does "
            "not simulate"
        )
    if goodput:
        workload.at_rate(1.0)  # raises for a workload without arrival times


def _checked(
    sku: SkuSpec, slo: Slo, percentile: int, max_instances: int, link: float | None
) -> float:
    """The link bandwidth to use, after refusing options `size_pools` cannot work with."""
    if slo.ttft_s is None or slo.tpot_s is None:
        raise KvplanError("pools needs both --slo-ttft and --slo-tpot")
    if not 1 <= percentile <= 99:
        raise KvplanError(f"--slo-percentile: {percentile} must be between 1 and 99")
    if not 1 <= max_instances <= 4096:
        raise KvplanError(f"--max-instances: {max_instances} must be between 1 and 4096")
    link = link or sku.interconnect_bytes_per_s
    if not link:
        raise KvplanError(
            f"{sku.name} has no interconnect_bytes_per_s in the catalogue; give --link-bandwidth "
            "(bytes/s in one direction, e.g. 50GB for 400 Gb/s InfiniBand)"
        )
    return link


def _usable_degrees(
    deployment: Deployment, sku: SkuSpec, config: SimConfig, degrees: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """(the degrees whose weights leave KV memory, a note for each one skipped).

    Raises:
        KvplanError: no degree leaves KV memory.
    """
    usable: list[int] = []
    refusals: list[str] = []
    for tp in degrees:
        refusal = kv_refusal(at_tp(deployment, tp), sku, config)
        if refusal is None:
            usable.append(tp)
        else:
            refusals.append(refusal)
    if not usable:
        tried = ", ".join(f"{tp}" for tp in degrees)
        raise KvplanError(
            f"{refusals[-1]}; nothing to simulate at tp {tried} "
            "(try a larger --tp, --search-tp or another --sku)"
        )
    return tuple(usable), tuple(f"skipped {refusal}" for refusal in refusals)


def _best(
    degrees: tuple[int, ...], choose: Callable[[int], PoolChoice]
) -> tuple[PoolChoice, tuple[str, ...]]:
    """(the choice with the fewest GPUs over the TP degrees, a smaller TP on a tie; a note for
    each degree that cannot hold a request of the workload, so is no candidate)."""
    choices = [choose(tp) for tp in degrees]
    notes = tuple(
        f"{c.role} at tp {c.tp} is no candidate: {c.rejected[TOO_LARGE]:,} of the requests "
        "need more KV than one instance holds"
        for c in choices
        if TOO_LARGE in c.rejected
    )
    found = [c for c in choices if c.gpus is not None]
    if not found:
        # Nothing meets: show the degree that holds the most requests, the smaller on a tie.
        return min(choices, key=lambda c: (c.rejected.get(TOO_LARGE, 0), c.tp)), notes
    return min(found, key=lambda c: (c.gpus, c.tp)), notes
