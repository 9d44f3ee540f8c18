"""The Python API: the questions the CLI answers, as functions returning typed results.

    >>> import kvplan
    >>> r = kvplan.size("llama-3.1-8b", context="128k", batch=8, sku="h100-sxm")
    >>> r.kv_bytes_per_request_per_gpu, r.verdict
    (17179869184, 'fits 3 of 8')

Every function takes a model as a catalogue name or alias, a Hugging Face id
(`org/name[@revision]`), a config.json / folder / .gguf path, or a ModelSpec; a SKU as a
name people type or a SkuSpec; the engine and its settings as keywords (`engine="sglang"`,
`utilization=0.95`, `max_num_seqs=512`: any keyword kvplan.engine.settings declares). Bad
input raises KvplanError with the one line the CLI would print, a setting named by its
keyword.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvplan.api.build import (
    capacity_row,
    check_report,
    claim_report,
    recommend_report,
    refused_row,
    size_report,
)
from kvplan.api.results import (
    CapacityRow,
    CheckReport,
    ClaimReport,
    RecommendReport,
    RefusedRow,
    SizeReport,
)
from kvplan.catalog.deployments import load_deployments
from kvplan.catalog.resolve import ResolvedModel, resolve_model
from kvplan.catalog.store import Catalog
from kvplan.engine import DEFAULT_ENGINE, EngineSettings
from kvplan.engine import engine as engine_profile
from kvplan.engine.batch import Batch
from kvplan.engine.deployment import Deployment
from kvplan.engine.settings import ENGINE_SETTINGS
from kvplan.errors import KvplanError
from kvplan.limits import NUMBER_CHARS
from kvplan.perf.roofline import DEFAULT_EFFICIENCY, Efficiency
from kvplan.plan.capacity import Capacity, Refusal, capacity_grid
from kvplan.plan.guardrail import DeploymentFile, check_products, claim_sheet
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
from kvplan.plan.sizing import size as size_plan
from kvplan.specs import ModelSpec, SkuSpec, kv_dtype_info, weight_dtype_info
from kvplan.units import parse_tokens

if TYPE_CHECKING:
    from kvplan.simulate import SimConfig, Workload

ModelRef = str | ModelSpec | ResolvedModel
SkuRef = str | SkuSpec


class KvplanWarning(UserWarning):
    """A reading kvplan took of an ambiguous config, or a fallback it used."""


def _catalog(catalog: Catalog | None) -> Catalog:
    return catalog if catalog is not None else Catalog()


def resolve(
    model: ModelRef, *, rope_scaling: str | None = None, catalog: Catalog | None = None
) -> ResolvedModel:
    """The model `model` names, with what is known of its checkpoint; readings as warnings."""
    if isinstance(model, ResolvedModel):
        return model
    if isinstance(model, ModelSpec):
        return ResolvedModel(model, "catalogue")
    resolved = resolve_model(_catalog(catalog), model, rope_scaling)
    for line in resolved.warnings:
        warnings.warn(line, KvplanWarning, stacklevel=3)
    return resolved


def load_model(
    name: str, *, rope_scaling: str | None = None, catalog: Catalog | None = None
) -> ModelSpec:
    """The architecture `name` names: a catalogue entry, a config.json, a GGUF header or a
    Hugging Face id (config and safetensors headers only; never the weights)."""
    return resolve(name, rope_scaling=rope_scaling, catalog=catalog).spec


def load_sku(name: SkuRef, *, catalog: Catalog | None = None) -> SkuSpec:
    """The GPU SKU `name` names ("h100-sxm", "NVIDIA H100 80GB HBM3", "H100 80GB", …)."""
    return name if isinstance(name, SkuSpec) else _catalog(catalog).sku(name)


def models(*, catalog: Catalog | None = None) -> list[ModelSpec]:
    """Every model of the catalogue, by name."""
    return _catalog(catalog).models()


def skus(*, catalog: Catalog | None = None) -> list[SkuSpec]:
    """Every GPU SKU of the catalogue, by name."""
    return _catalog(catalog).skus()


def deployment(
    model: ModelRef,
    *,
    engine: str = DEFAULT_ENGINE,
    kv_dtype: str | None = None,
    weight_dtype: str | None = None,
    tp: int = 1,
    pp: int = 1,
    dp: int = 1,
    ep: bool = False,
    rope_scaling: str | None = None,
    catalog: Catalog | None = None,
    settings: EngineSettings | None = None,
    **setting_fields: Any,
) -> Deployment:
    """A deployment of `model` under `engine` (vllm, sglang, trtllm, llama.cpp, …), with
    `settings` or EngineSettings fields given as keywords (`utilization=0.95`,
    `max_num_seqs=512`, …).

    A checkpoint's exact weight bytes (safetensors headers, GGUF tensor table) count unless
    `weight_dtype` asks for another dtype.
    """
    resolved = resolve(model, rope_scaling=rope_scaling, catalog=catalog)
    profile = engine_profile(engine)
    keywords = {s.keyword: s.name for s in ENGINE_SETTINGS}
    unknown = set(setting_fields) - set(keywords)
    if unknown:
        fields = ", ".join(sorted(keywords))
        raise KvplanError(f"unknown engine setting(s) {sorted(unknown)} (allowed: {fields})")
    setting_fields = {keywords[k]: v for k, v in setting_fields.items()}
    if settings is not None and setting_fields:
        settings = replace(settings, **setting_fields)
    exact = weight_dtype is None
    return Deployment(
        model=resolved.spec,
        engine=profile,
        kv_dtype=kv_dtype_info(kv_dtype or profile.default_kv_dtype).name,
        weight_dtype=weight_dtype_info(weight_dtype).name if weight_dtype else None,
        tp=tp,
        pp=pp,
        dp=dp,
        ep=ep,
        settings=settings if settings is not None else EngineSettings(**setting_fields),
        exact_weights_bytes=resolved.exact_weights_bytes if exact else None,
        checkpoint=resolved.checkpoint if exact else None,
    )


def _tokens(value: int | str, what: str) -> int:
    return parse_tokens(value if isinstance(value, str) else str(value), what)


def size(
    model: ModelRef | Deployment,
    *,
    context: int | str = "8k",
    batch: int | Batch = 1,
    lengths: Iterable[int | str] | None = None,
    sku: SkuRef | None = None,
    catalog: Catalog | None = None,
    **deployment_options: Any,
) -> SizeReport:
    """KV bytes per token, request and batch (exact and as the engine charges them), the
    weights, and — with `sku` — the engine's budget and verdict (what `kvplan size` prints).

    `lengths` gives a ragged batch (one length per sequence) instead of `batch` × `context`;
    a Batch (`(tokens, count)` pairs) may be given as `batch` directly.
    """
    planned = _as_deployment(model, catalog, deployment_options)
    if isinstance(batch, Batch):
        sequences = batch
    elif lengths is not None:
        sequences = Batch.of(_tokens(n, "--lengths") for n in lengths)
    else:
        sequences = Batch.uniform(_tokens(context, "--context"), batch)
    target = load_sku(sku, catalog=catalog) if sku is not None else None
    return size_report(size_plan(planned, sequences, target))


def report(
    models: ModelRef | Deployment | Iterable[ModelRef | Deployment],
    *,
    skus: SkuRef | Iterable[SkuRef] | None = None,
    tp: int | Iterable[int] | None = None,
    batch: int = 1,
    context: int | str | None = None,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
    catalog: Catalog | None = None,
    curves: bool = False,
    **deployment_options: Any,
) -> list[CapacityRow | RefusedRow]:
    """Per model × SKU × TP degree: the KV budget, longest context at `batch`, highest
    concurrency at `context` (default: each model's limit), decode tokens/s, the verdict.

    `skus` may name families ("h100": every H100); `tp` defaults to the powers of two up to a
    node that the engine accepts. Of several combinations, one whose TP degree the engine
    refuses is a RefusedRow (its reason, no figures); a single refused combination, or a
    report where every one is refused, raises KvplanError. With `curves`, each row that
    holds a request also carries `concurrency_by_context` (the deployment planned afresh at
    each power-of-two context up to the model's limit).
    """
    known = _catalog(catalog)
    single = isinstance(models, str | ModelSpec | ResolvedModel | Deployment)
    names = [models] if single else list(models)  # type: ignore[list-item, arg-type]
    planned = [_as_deployment(m, known, deployment_options) for m in names]
    chosen = _skus(skus, known)
    degrees = (tp,) if isinstance(tp, int) else (tuple(tp) if tp is not None else None)
    tokens = _tokens(context, "--context") if context is not None else None
    many = len(planned) * len(chosen) * len(degrees or ()) > 1
    rows = capacity_grid(planned, chosen, batch, tokens, degrees, efficiency, keep_refusals=many)
    refusals = [row for row in rows if isinstance(row, Refusal)]
    if refusals and len(refusals) == len(rows):
        raise KvplanError(f"--tp: every combination is refused; {refusals[0].reason}")
    return [refused_row(r) if isinstance(r, Refusal) else capacity_row(r, curves) for r in rows]


def capacity(
    model: ModelRef | Deployment,
    sku: SkuRef,
    *,
    batch: int = 1,
    context: int | str | None = None,
    catalog: Catalog | None = None,
    **deployment_options: Any,
) -> CapacityRow:
    """One row of `report`: `model` on `sku` as given (tp, engine, settings)."""
    planned = _as_deployment(model, catalog, deployment_options)
    tokens = _tokens(context, "--context") if context is not None else None
    return capacity_row(Capacity(planned, load_sku(sku, catalog=catalog), batch, tokens))


def check(path: str | Path, *, catalog: Catalog | None = None, curves: bool = False) -> CheckReport:
    """Every product of a deployment file against its SKU (`kvplan check`); `.ok` is False
    when any promise is more than the hardware holds. With `curves`, each product carries
    the requests its deployment holds against context (`concurrency_by_context`)."""
    loaded = load_deployments(Path(path), DeploymentFile, _catalog(catalog))
    return check_report(check_products(loaded), curves)


def claim(
    model: ModelRef | Deployment,
    *,
    sku: SkuRef,
    context: int | str = "128k",
    batch: int = 1,
    catalog: Catalog | None = None,
    curves: bool = False,
    **deployment_options: Any,
) -> ClaimReport:
    """The bytes behind "serves `context` tokens at batch `batch`" on `sku` (`kvplan claim`);
    with `curves`, the requests the deployment holds against context."""
    planned = _as_deployment(model, catalog, deployment_options)
    sheet = claim_sheet(
        planned, load_sku(sku, catalog=catalog), _tokens(context, "--context"), batch
    )
    return claim_report(sheet, curves)


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


def _as_deployment(
    model: ModelRef | Deployment, catalog: Catalog | None, options: dict[str, Any]
) -> Deployment:
    if isinstance(model, Deployment):
        if options:
            raise KvplanError(f"options {sorted(options)} given with a ready Deployment")
        return model
    options = dict(options)
    return deployment(model, catalog=catalog, **options)


def _skus(skus: SkuRef | Iterable[SkuRef] | None, catalog: Catalog) -> list[SkuSpec]:
    if skus is None:
        return catalog.skus()
    given = [skus] if isinstance(skus, str | SkuSpec) else list(skus)
    chosen: dict[str, SkuSpec] = {}
    for item in given:
        for spec in [item] if isinstance(item, SkuSpec) else catalog.skus_matching(item):
            chosen.setdefault(spec.name, spec)  # named twice (h200 and family h200): one row
    return list(chosen.values())
