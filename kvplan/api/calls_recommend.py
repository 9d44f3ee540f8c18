"""The recommend question of the Python API: the cheapest deployments that hold a target."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from kvplan.api.build_recommend import recommend_report
from kvplan.api.calls import ModelRef, SkuRef, _as_deployment, _catalog, _skus, _tokens
from kvplan.api.results_recommend import RecommendReport
from kvplan.catalog.store import Catalog
from kvplan.engine.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.limits import NUMBER_CHARS
from kvplan.plan.recommend import (
    DEFAULT_MAX_GPUS,
    DEFAULT_TOP,
    ConcurrencyTarget,
    Cost,
    GoodputTarget,
    GpuCount,
    Objective,
    PricePerHour,
)
from kvplan.plan.recommend import recommend as search
from kvplan.plan.recommend.space import named_space
from kvplan.specs import SkuSpec

if TYPE_CHECKING:
    from kvplan.simulate import SimConfig, Workload


def recommend(
    model: ModelRef | Deployment,
    *,
    context: int | str | None = None,
    concurrency: int = 1,
    skus: SkuRef | Iterable[SkuRef] | None = None,
    max_gpus: int = DEFAULT_MAX_GPUS,
    kv_dtypes: Iterable[str] | None = None,
    quantization: bool = True,
    weight_dtypes: Iterable[str] | None = None,
    tp: int | None = None,
    pp: int | None = None,
    dp: int | None = None,
    ep: bool | None = None,
    headroom: float | str | Fraction = "10%",
    prices: Mapping[str, float] | None = None,
    rank: str | None = None,
    top: int = DEFAULT_TOP,
    workload: Workload | None = None,
    simulation: SimConfig | Callable[[SkuSpec], SimConfig] | None = None,
    slo_attainment: float | str | Fraction = "90%",
    catalog: Catalog | None = None,
    **deployment_options: Any,
) -> RecommendReport:
    """The cheapest deployments of `model` that hold `concurrency` requests of `context`
    tokens (`kvplan recommend`), best first, with their launch commands; `.meets` is False
    (and `.closest_miss` set) when nothing in the searched space does.

    With a `workload` (kvplan.simulate.poisson_workload or read_trace) the target is
    throughput instead: at least `slo_attainment` ("90%", 0.9) of its requests must meet the
    SLOs of `simulation` (a SimConfig, or one per SKU; its `slo` needs a TTFT or TPOT
    target), served up to `context` tokens; candidates are scored by simulation.

    tp, pp, dp and ep fix a dimension (None searches it), and so does an engine setting given
    as a keyword (`utilization=0.9`); `kv_dtypes` and `weight_dtypes` (Q4_K_M, fp8, …; in
    place of what the engine offers) are the allowed sets. `prices` maps SKU names
    or families to the price of one GPU-hour; `rank` is "gpus" or "price" (default: price
    when prices are given). `headroom` is the share of each KV budget kept unused ("10%",
    0.1).
    """
    if top < 1:
        raise KvplanError(f"--top: {top} must be at least 1")
    known = _catalog(catalog)
    fixed = {"tp": tp or 1, "pp": pp or 1, "dp": dp or 1, "ep": bool(ep)}
    options = deployment_options if isinstance(model, Deployment) else deployment_options | fixed
    base = _as_deployment(model, known, options)
    chosen = tuple({s.name: s for s in _skus(skus, known)}.values())  # each SKU once
    limit = base.model.context_limit
    space = named_space(
        chosen,
        kv_dtypes,
        weight_dtypes,
        max_gpus=max_gpus,
        quantization=quantization,
        tp=tp,
        pp=pp,
        dp=dp,
        ep=ep,
    )
    context_tokens = _tokens(context, "--context") if context else limit
    target: Objective = ConcurrencyTarget(context_tokens, concurrency)
    if workload is not None:
        target = _goodput_target(base, workload, simulation, slo_attainment, context_tokens, chosen)
    elif simulation is not None:
        raise KvplanError("a simulation configuration needs a workload (--rate or --trace)")
    cost = _cost(rank, _prices(prices or {}, known), chosen)
    return recommend_report(search(base, target, space, cost, _share(headroom, "--headroom"), top))


def _goodput_target(
    base: Deployment,
    workload: Workload,
    simulation: SimConfig | Callable[[SkuSpec], SimConfig] | None,
    attainment: float | str | Fraction,
    context_tokens: int,
    skus: tuple[SkuSpec, ...],
) -> GoodputTarget:
    """The throughput target: `attainment` of `workload` within the SLOs, by simulation."""
    from kvplan.api.goodput import WorkloadSimulator

    profile = base.engine
    if profile.sized_for(base, 1, context_tokens) != base:
        # llama.cpp/ollama allocate -np slots at launch; the search does not try slot counts.
        raise KvplanError(
            f"--rate/--trace with --engine {profile.name}: give --ctx-size and --parallel (the "
            "slots it allocates at launch); recommend does not search them for a throughput "
            "target"
        )
    native = base.model.max_context
    if context_tokens > native:
        raise KvplanError(
            f"--context: {context_tokens:,} tokens: the simulator serves up to "
            f"{base.model.name}'s native context of {native:,} tokens"
        )
    from kvplan.simulate import SimConfig

    config_of = simulation if callable(simulation) else (lambda sku: simulation or SimConfig())
    simulator = WorkloadSimulator(workload, config_of, context_tokens)
    share = _share(attainment, "--slo-attainment", upper_included=True)
    if not workload.requests:
        raise KvplanError("the workload has no request to serve")
    slo = simulator.config(skus[0]).slo if skus else None
    if slo is None or (slo.ttft_s is None and slo.tpot_s is None):
        raise KvplanError("a throughput target needs --slo-ttft, --slo-tpot or both")
    duration_s = workload.duration_s
    return GoodputTarget(
        context_tokens,
        float(share),
        simulator,
        workload.description,
        len(workload.requests),
        len(workload.requests) / duration_s if duration_s > 0 else None,
        slo.ttft_s,
        slo.tpot_s,
    )


def _prices(prices: Mapping[str, float], catalog: Catalog) -> tuple[tuple[str, float], ...]:
    """(SKU name, price of one GPU-hour); a family prices each of its SKUs."""
    found: dict[str, float] = {}
    for name, price in prices.items():
        if not (isinstance(price, int | float) and math.isfinite(price) and price > 0):
            raise KvplanError(f"--price: {name}={price!r}: the price must be above 0")
        found |= {s.name: float(price) for s in catalog.skus_matching(name)}
    return tuple(found.items())


def _cost(rank: str | None, prices: tuple[tuple[str, float], ...], skus: tuple) -> Cost:
    chosen = rank if rank is not None else "price" if prices else "gpus"
    if chosen == "gpus":
        return GpuCount()
    if chosen != "price":
        raise KvplanError(f"--rank: unknown ranking {rank!r} (allowed: gpus, price)")
    cost = PricePerHour(prices)
    if all(cost.price(s) is None for s in skus):
        raise KvplanError(
            "--rank price: no searched SKU has a price; give --price SKU=PRICE/h or "
            "price_per_hour in a SKU file"
        )
    return cost


# ASCII digits only: \d would also read "٣%" as 3 %.
_SHARE = re.compile(r"\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<percent>%?)\s*", re.ASCII)


def _share(value: float | str | Fraction, option: str, upper_included: bool = False) -> Fraction:
    """A share from "10%", "0.1" or a number, exactly (decimal text, no binary rounding):
    at least 0 and below 1 for `option`, or above 0 and at most 1 with `upper_included`."""
    if isinstance(value, Fraction):
        share = value
    elif isinstance(value, int | float) and math.isfinite(value):
        share = Fraction(str(value))
    else:
        match = _SHARE.fullmatch(str(value)) if len(str(value)) <= NUMBER_CHARS else None
        if match is None:
            raise KvplanError(f"{option}: {value!r} is not a share; use a percentage (10%) or 0.1")
        share = Fraction(match["number"]) / (100 if match["percent"] else 1)
    if upper_included and not 0 < share <= 1:
        raise KvplanError(f"{option}: {value!r} must be above 0 and at most 100%")
    if not upper_included and not 0 <= share < 1:
        raise KvplanError(f"{option}: {value!r} must be at least 0 and below 100%")
    return share
