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

This module answers size, report and capacity; calls_check.py check and claim,
calls_recommend.py recommend (each loads its planning code only when called).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from kvplan.api.build import capacity_row, refused_row, size_report
from kvplan.api.results import CapacityRow, RefusedRow, SizeReport
from kvplan.catalog.resolve import ResolvedModel, resolve_model
from kvplan.catalog.store import Catalog
from kvplan.engine import DEFAULT_ENGINE, EngineSettings
from kvplan.engine import engine as engine_profile
from kvplan.engine.batch import Batch
from kvplan.engine.deployment import Deployment
from kvplan.engine.settings import ENGINE_SETTINGS
from kvplan.errors import KvplanError
from kvplan.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from kvplan.plan.capacity import Capacity, Refusal, capacity_grid
from kvplan.plan.sizing import size as size_plan
from kvplan.specs import ModelSpec, SkuSpec, kv_dtype_info, weight_dtype_info
from kvplan.units import parse_tokens

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
