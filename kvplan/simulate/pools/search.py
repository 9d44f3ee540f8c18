"""The simulations behind one `size_pools` call: each pool's count, by doubling and bisection.

Every count is judged over all of the workload's requests with `slo_met_count`, the count
`simulate` makes its goodput from, so a request a pool rejects, or that never reaches it, is
a miss, and `pools` never calls a target met that `simulate` would not. A pool that rejects a
request for needing more KV than one instance holds meets no target at any count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

from kvplan.engine.deployment import Deployment
from kvplan.engine.pool import largest_fitting
from kvplan.simulate import simulate
from kvplan.simulate.config import SimConfig, Slo
from kvplan.simulate.engine_view import InstanceModel, instance_model
from kvplan.simulate.instance import TOO_LARGE
from kvplan.simulate.pools.choice import PREFILL_REJECTED, PoolChoice
from kvplan.simulate.results import (
    RequestRecord,
    SimulationResult,
    meets_percentile,
    percentile_of,
    slo_met_count,
)
from kvplan.simulate.workload import RequestSpec, Workload
from kvplan.specs import SkuSpec


def at_tp(deployment: Deployment, tp: int) -> Deployment:
    """`deployment` at tensor-parallel degree `tp` (itself when it already is)."""
    return deployment if tp == deployment.tp else deployment.replace(tp=tp)


class Outcome(NamedTuple):
    """One simulated count: whether it met the target, and what the choice reports."""

    met: bool
    hopeless: bool  # the rejections alone miss the target: more instances cannot help
    ttft_s: float | None
    tpot_s: float | None
    met_fraction: float
    rejected: dict[str, int]


class PoolSearch:
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
        self.runs: dict[tuple[str, int, int], SimulationResult] = {}  # (role, tp, instances)
        self.decode_served: dict[tuple[int, int], set[int]] = {}  # orders, by (tp, instances)
        self.views: dict[int, InstanceModel] = {}

    def _run(self, role: str, tp: int, instances: int, workload: Workload) -> SimulationResult:
        config = replace(self.config, instances=instances)
        result = simulate(at_tp(self.deployment, tp), self.sku, workload, config)
        self.runs[(role, tp, instances)] = result
        return result

    def _outcome(
        self,
        records: list[RequestRecord],
        target: Slo,
        rejected: dict[str, int],
        ttft: bool,
        tpot: bool,
    ) -> Outcome:
        """Judge returned `records` against `target` over every request of the workload:
        a request not among them (rejected here or before this pool) is a miss."""
        offered = len(self.workload.requests)
        met = slo_met_count(records, target)
        tpots = [t for r in records if (t := r.tpot_s) is not None]
        # A pool that cannot hold a request of the workload is no candidate, whatever share
        # it meets: each of its instances is as small, so more of them reject the same ones.
        holds_all = TOO_LARGE not in rejected
        return Outcome(
            met=holds_all and meets_percentile(met, offered, self.percentile),
            hopeless=not holds_all
            or not meets_percentile(offered - sum(rejected.values()), offered, self.percentile),
            ttft_s=self._at([r.ttft_s for r in records]) if ttft else None,
            tpot_s=(self._at(tpots) if tpots else 0.0) if tpot else None,
            met_fraction=met / offered,
            rejected=rejected,
        )

    def run_prefill(self, tp: int, count: int) -> SimulationResult:
        """The prefill pool of `count` instances at `tp` serving the workload's prompts."""
        # A request longer than max_model_len keeps its length, so the prefill pool rejects
        # it on arrival as the engine does (it checks prompt + max_tokens).
        limit = self.config.max_model_len or self.deployment.model.max_context
        only_prompts = replace(
            self.workload,
            requests=tuple(
                r if r.prompt_tokens + r.output_tokens > limit else replace(r, output_tokens=1)
                for r in self.workload.requests
            ),
        )
        return self._run("prefill", tp, count, only_prompts)

    def prefill(self, tp: int) -> PoolChoice:
        target = Slo(ttft_s=self.slo.ttft_s)

        def judge(count: int) -> Outcome:
            result = self.run_prefill(tp, count)
            return self._outcome(list(result.requests), target, result.rejected, True, False)

        return self._smallest("prefill", tp, judge)

    def first_tokens(self, prefill: PoolChoice) -> dict[int, float]:
        """When each request the prefill pool returned had its first token, by order."""
        return self.first_tokens_of(prefill.tp, prefill.reported_instances)

    def first_tokens_of(self, tp: int, count: int) -> dict[int, float]:
        """When each request the prefill pool of `count` at `tp` returned had its first token."""
        run = self.runs[("prefill", tp, count)]
        return {r.order: r.first_token_s for r in run.requests}

    def decode(self, tp: int, prefill: PoolChoice) -> PoolChoice:
        first = self.first_tokens(prefill)
        handed, done = self.handed_workload(first, prefill.tp, tp)
        target = Slo(tpot_s=self.slo.tpot_s)

        def judge(instances: int) -> Outcome:
            records, rejected = self.decode_records(tp, instances, first, handed, done)
            return self._outcome(records, target, rejected, False, True)

        if not handed.requests:  # every request is one token long: no decode pool needed
            return PoolChoice("decode", tp, self.deployment.pp, 0, None, None, ())
        return self._smallest("decode", tp, judge)

    def decode_records(
        self,
        tp: int,
        instances: int,
        first: dict[int, float],
        handed: Workload,
        done: list[RequestRecord],
    ) -> tuple[list[RequestRecord], dict[str, int]]:
        """(every request both pools returned, each with its arrival, the prefill pool's first
        token and the decode pool's last; the rejections, the prefill pool's included) for the
        decode pool of `instances` at `tp` serving `handed` (`handed_workload`)."""
        requests = self.workload.requests
        result = self._run("decode", tp, instances, handed) if handed.requests else None
        # TPOT from the prefill pool's first token: the KV copy delays the second token.
        records = [
            r._replace(arrival_s=requests[r.order].arrival_s, first_token_s=first[r.order])
            for r in (result.requests if result else ())
        ]
        self.decode_served[(tp, instances)] = {r.order for r in records} | {r.order for r in done}
        rejected = dict(result.rejected) if result else {}
        # The prefill pool's rejections are misses here too: they never reach this pool.
        if len(requests) > len(first):
            rejected[PREFILL_REJECTED] = len(requests) - len(first)
        return records + done, rejected

    def handed_workload(
        self, first: dict[int, float], prefill_tp: int, tp: int
    ) -> tuple[Workload, list[RequestRecord]]:
        """(the decode pool's workload: each request the prefill pool returned, arriving when
        its first token and KV copy are done; the one-token requests, ended in the prefill
        pool, whose TPOT target is met there)."""
        requests = self.workload.requests
        handed = sorted(
            (
                RequestSpec(
                    first[order] + self.transfer_s(requests[order], prefill_tp, tp),
                    requests[order].prompt_tokens,
                    requests[order].output_tokens,
                    prefilled=True,
                    order=order,
                )
                for order in first
                if requests[order].output_tokens > 1
            ),
            key=lambda r: r.arrival_s,
        )
        # Arrivals come from the prefill pool's first tokens: a trace of its own.
        decode_workload = Workload(tuple(handed), self.workload.description, kind="trace")
        done = [
            _record(requests[o], first[o], order=o) for o in first if requests[o].output_tokens == 1
        ]
        return decode_workload, done

    def colocated(self, tp: int) -> PoolChoice:
        def judge(count: int) -> Outcome:
            result = self._run("colocated", tp, count, self.workload)
            return self._outcome(list(result.requests), self.slo, result.rejected, True, True)

        return self._smallest("colocated", tp, judge)

    def served(self, prefill: PoolChoice, decode: PoolChoice) -> int:
        """Requests both chosen disaggregated pools (or their largest counts tried) return."""
        orders = set(self.first_tokens(prefill))
        if decode.tried:
            orders &= self.decode_served[(decode.tp, decode.reported_instances)]
        return len(orders)

    def colocated_served(self, colocated: PoolChoice) -> int:
        """Requests the chosen colocated pool (or its largest count tried) returns."""
        return len(self.runs[("colocated", colocated.tp, colocated.reported_instances)].requests)

    def _at(self, values: list[float]) -> float:
        return percentile_of(sorted(values), self.percentile) if values else float("inf")

    def _smallest(self, role: str, tp: int, judge: Callable[[int], Outcome]) -> PoolChoice:
        """Double the count until the target is met, then bisect (the search assumes more
        instances never make the share meeting it smaller)."""
        tried: list[tuple[int, int, bool]] = []
        outcomes: dict[int, Outcome] = {}

        def check(count: int) -> Outcome:
            outcomes[count] = judge(count)
            tried.append((tp, count, outcomes[count].met))
            return outcomes[count]

        def choice(count: int | None, outcome: Outcome) -> PoolChoice:
            return PoolChoice(
                role,
                tp,
                self.deployment.pp,
                count,
                outcome.ttft_s,
                outcome.tpot_s,
                tuple(tried),
                outcome.met_fraction,
                outcome.rejected,
            )

        low, high = 0, 1  # low fails (0 always does), high is the next to try
        while not (outcome := check(high)).met:
            if outcome.hopeless or high >= self.limit:
                return choice(None, outcome)
            low, high = high, min(high * 2, self.limit)
        # The smallest count meeting the target in (low, high]: one past the largest missing it.
        found = largest_fitting(lambda n: not check(n).met, high - 1, lower=low) + 1
        return choice(found, outcomes[found])

    def transfer_s(self, request: RequestSpec, prefill_tp: int, decode_tp: int) -> float:
        """Seconds to copy a prompt's KV from a prefill replica to a decode replica."""
        view = self.views.get(prefill_tp)
        if view is None:
            deployment = at_tp(self.deployment, prefill_tp)
            view = self.views[prefill_tp] = instance_model(deployment, self.sku, self.config)
        per_gpu = view.read_bytes.value(request.prompt_tokens) * self.config.kv_bytes_factor
        links = min(prefill_tp, decode_tp) * self.deployment.pp
        return per_gpu * prefill_tp / (links * self.link)


def _record(request: RequestSpec, first_token_s: float, order: int) -> RequestRecord:
    """A one-token request as the prefill pool returned it (its only token is the first)."""
    return RequestRecord(
        request.arrival_s,
        first_token_s,
        first_token_s,
        first_token_s,
        request.prompt_tokens,
        request.output_tokens,
        0,
        order,
    )
