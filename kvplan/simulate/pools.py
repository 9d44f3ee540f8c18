"""`kvplan pools`: the fewest prefill and decode instances that meet both SLOs, vs colocated.

Disaggregated serving (DistServe, OSDI 2024; Splitwise, ISCA 2024) runs prompts on a prefill
pool and generation on a decode pool. Here the prefill pool serves each request's prompt and
samples its first token (so TTFT is the prefill pool's), then the prompt's KV crosses the
link to a decode instance, which generates the rest (so the copy delays the second token and
counts in TPOT). Each pool is simulated with its own instance count behind a least-loaded
router, the smallest count meeting its target at the SLO percentile is found by doubling
and bisection, and the colocated count meeting both targets is found the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from kvplan.errors import KvplanError
from kvplan.plan.deployment import Deployment
from kvplan.simulate import simulate
from kvplan.simulate.config import SimConfig, Slo
from kvplan.simulate.engine_view import InstanceModel, instance_model
from kvplan.simulate.results import SimulationResult, percentile_of
from kvplan.simulate.workload import RequestSpec, Workload
from kvplan.specs import SkuSpec

DEFAULT_MAX_INSTANCES = 64


@dataclass(frozen=True)
class PoolChoice:
    """One pool's answer: the fewest instances of `tp` GPUs meeting its target (None: none)."""

    role: str  # prefill, decode or colocated
    tp: int
    pp: int
    instances: int | None
    ttft_s: float | None  # at the SLO percentile, for the count found (or the largest tried)
    tpot_s: float | None
    tried: tuple[tuple[int, int, bool], ...]  # (tp, instances, met) in the order simulated

    @property
    def gpus(self) -> int | None:
        return None if self.instances is None else self.instances * self.tp * self.pp


@dataclass(frozen=True)
class PoolsResult:
    """Disaggregated pools against colocated instances for one workload."""

    workload: Workload
    slo: Slo
    percentile: int
    link_bytes_per_s: float
    transfer_mean_s: float
    transfer_percentile_s: float
    served: int  # requests every configuration serves
    rejected: int  # prompt + output longer than max_model_len
    prefill: PoolChoice
    decode: PoolChoice
    colocated: PoolChoice
    notes: tuple[str, ...]

    @property
    def offered_requests_per_s(self) -> float:
        duration = self.workload.duration_s
        return self.served / duration if duration > 0 else 0.0

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
) -> PoolsResult:
    """Size prefill, decode and colocated pools for `workload` under `slo` at `percentile`.

    `tps` are the tensor-parallel degrees each pool may use (default: the deployment's); the
    one needing the fewest GPUs wins per pool. The KV copy runs at `link_bytes_per_s` (default:
    the SKU's interconnect, one direction) over min(prefill tp, decode tp) × pp links.

    Raises:
        KvplanError: no SLO, a bad percentile, no link bandwidth, or no servable request.
    """
    link = _checked(sku, slo, percentile, max_instances, link_bytes_per_s)
    base = replace(config or SimConfig(), router="least-loaded", slo=slo, instances=1)
    limit = base.max_model_len or deployment.model.max_context
    served = [r for r in workload.requests if r.prompt_tokens + r.output_tokens <= limit]
    if not served:
        raise KvplanError(f"no request of the workload fits max_model_len {limit:,} tokens")
    servable = Workload(tuple(served), workload.description, workload.notes)
    search = _Search(deployment, sku, servable, base, percentile, slo, link, max_instances)
    degrees = tps or (deployment.tp,)
    prefill = _best(degrees, search.prefill)
    decode = _best(degrees, lambda tp: search.decode(tp, prefill))
    colocated = _best(degrees, search.colocated)
    transfers = sorted(search.transfer_s(r, prefill.tp, decode.tp) for r in served)
    return PoolsResult(
        workload=workload,
        slo=slo,
        percentile=percentile,
        link_bytes_per_s=link,
        transfer_mean_s=sum(transfers) / len(transfers),
        transfer_percentile_s=percentile_of(transfers, percentile),
        served=len(served),
        rejected=len(workload.requests) - len(served),
        prefill=prefill,
        decode=decode,
        colocated=colocated,
        notes=(
            "prefill instances free a prompt's KV when its first token is out; the copy to the "
            "decode pool is counted in TPOT, not in memory",
            "KV copy: the prompt's KV bytes on every GPU of the prefill replica over "
            "min(prefill tp, decode tp) × pp links, each at the link bandwidth",
            *instance_model(deployment, sku, base).notes,
        ),
    )


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


def _best(degrees: tuple[int, ...], choose: Callable[[int], PoolChoice]) -> PoolChoice:
    """The choice with the fewest GPUs over the TP degrees (a smaller TP on a tie)."""
    choices = [choose(tp) for tp in degrees]
    found = [c for c in choices if c.gpus is not None]
    if not found:
        return choices[0]
    return min(found, key=lambda c: (c.gpus, c.tp))


class _Search:
    """The simulations one `size_pools` call runs, and their searches."""

    def __init__(
        self,
        deployment: Deployment,
        sku: SkuSpec,
        workload: Workload,
        config: SimConfig,
        percentile: int,
        slo: Slo,
        link: float,
        limit: int,
    ) -> None:
        self.deployment, self.sku, self.workload, self.config = deployment, sku, workload, config
        self.percentile, self.slo, self.link, self.limit = percentile, slo, link, limit
        self.prefill_runs: dict[tuple[int, int], SimulationResult] = {}
        self.views: dict[int, InstanceModel] = {}

    def _run(self, tp: int, instances: int, workload: Workload) -> SimulationResult:
        deployment = self.deployment if tp == self.deployment.tp else self.deployment.replace(tp=tp)
        return simulate(deployment, self.sku, workload, replace(self.config, instances=instances))

    def prefill(self, tp: int) -> PoolChoice:
        only_prompts = Workload(
            tuple(replace(r, output_tokens=1) for r in self.workload.requests),
            self.workload.description,
        )

        def meets(count: int) -> tuple[bool, float | None, float | None]:
            result = self._run(tp, count, only_prompts)
            self.prefill_runs[(tp, count)] = result
            ttft = self._at([r.ttft_s for r in result.requests])
            return ttft <= self.slo.ttft_s, ttft, None  # type: ignore[operator]

        return self._smallest("prefill", tp, meets)

    def decode(self, tp: int, prefill: PoolChoice) -> PoolChoice:
        count = prefill.instances or max(n for _, n, _ in prefill.tried)
        first = {r.order: r.first_token_s for r in self.prefill_runs[(prefill.tp, count)].requests}
        handed = sorted(
            (
                RequestSpec(
                    first[order] + self.transfer_s(r, prefill.tp, tp),
                    r.prompt_tokens,
                    r.output_tokens,
                    prefilled=True,
                    order=order,
                )
                for order, r in enumerate(self.workload.requests)
                if r.output_tokens > 1
            ),
            key=lambda r: r.arrival_s,
        )
        decode_workload = Workload(tuple(handed), self.workload.description)

        def meets(instances: int) -> tuple[bool, float | None, float | None]:
            result = self._run(tp, instances, decode_workload)
            tpot = self._at(
                [(r.last_token_s - first[r.order]) / (r.output_tokens - 1) for r in result.requests]
            )
            return tpot <= self.slo.tpot_s, None, tpot  # type: ignore[operator]

        if not handed:  # every request is one token long: no decode pool needed
            return PoolChoice("decode", tp, self.deployment.pp, 0, None, None, ())
        return self._smallest("decode", tp, meets)

    def colocated(self, tp: int) -> PoolChoice:
        def meets(count: int) -> tuple[bool, float | None, float | None]:
            result = self._run(tp, count, self.workload)
            ttft = self._at([r.ttft_s for r in result.requests])
            tpots = [t for r in result.requests if (t := r.tpot_s) is not None]
            tpot = self._at(tpots) if tpots else 0.0
            ok = ttft <= self.slo.ttft_s and tpot <= self.slo.tpot_s  # type: ignore[operator]
            return ok, ttft, tpot

        return self._smallest("colocated", tp, meets)

    def _at(self, values: list[float]) -> float:
        return percentile_of(sorted(values), self.percentile) if values else float("inf")

    def _smallest(
        self, role: str, tp: int, meets: Callable[[int], tuple[bool, float | None, float | None]]
    ) -> PoolChoice:
        """Double the count until the target is met, then bisect (the search assumes more
        instances never make the percentile worse)."""
        tried: list[tuple[int, int, bool]] = []
        outcomes: dict[int, tuple[bool, float | None, float | None]] = {}

        def check(count: int) -> bool:
            outcomes[count] = meets(count)
            tried.append((tp, count, outcomes[count][0]))
            return outcomes[count][0]

        low, high = 0, 1  # low fails (0 always does), high is the next to try
        while not check(high):
            if high >= self.limit:
                _, ttft, tpot = outcomes[high]
                return PoolChoice(role, tp, self.deployment.pp, None, ttft, tpot, tuple(tried))
            low, high = high, min(high * 2, self.limit)
        while high - low > 1:
            middle = (low + high) // 2
            if check(middle):
                high = middle
            else:
                low = middle
        _, ttft, tpot = outcomes[high]
        return PoolChoice(role, tp, self.deployment.pp, high, ttft, tpot, tuple(tried))

    def transfer_s(self, request: RequestSpec, prefill_tp: int, decode_tp: int) -> float:
        """Seconds to copy a prompt's KV from a prefill replica to a decode replica."""
        view = self.views.get(prefill_tp)
        if view is None:
            deployment = self.deployment.replace(tp=prefill_tp)
            view = self.views[prefill_tp] = instance_model(deployment, self.sku, self.config)
        per_gpu = view.read_bytes.value(request.prompt_tokens) * self.config.kv_bytes_factor
        links = min(prefill_tp, decode_tp) * self.deployment.pp
        return per_gpu * prefill_tp / (links * self.link)
