"""`kvplan.pareto` / `recommend --pareto`: the speed frontier of a workload, as a record."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kvplan.api.pareto_results import ParetoReport, ParetoRow
from kvplan.catalog.store import Catalog
from kvplan.engine.deployment import Deployment
from kvplan.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from kvplan.plan.recommend import DEFAULT_MAX_GPUS
from kvplan.plan.recommend.pareto import ParetoPoint, ParetoSearch, ParetoWorkload
from kvplan.plan.recommend.pareto import pareto as sweep
from kvplan.plan.recommend.space import named_space
from kvplan.specs import SkuSpec

STEADY_STATE_NOTE = (
    "closed loop: `batch` requests always in flight; one request's life = (output − 1) decode "
    "steps of the batch + `batch` prefills of the prompt, not overlapped (chunked prefill "
    "overlaps them: an upper bound on time)"
)


def pareto(
    model: Any,
    *,
    prompt_tokens: int | str,
    output_tokens: int | str,
    context: int | str | None = None,
    skus: Any = None,
    max_gpus: int = DEFAULT_MAX_GPUS,
    kv_dtypes: Iterable[str] | None = None,
    quantization: bool = True,
    weight_dtypes: Iterable[str] | None = None,
    tp: int | None = None,
    pp: int | None = None,
    efficiency: Efficiency | Callable[[SkuSpec], Efficiency] = DEFAULT_EFFICIENCY,
    speed_model: str = "shipped constants",
    notes: Iterable[str] = (),
    catalog: Catalog | None = None,
    **deployment_options: Any,
) -> ParetoReport:
    """The frontier of output tokens/s per GPU against tokens/s per user for requests of
    `prompt_tokens` in and `output_tokens` out (`kvplan recommend --pareto`), over tp, batch,
    KV and weight dtypes on `skus`; `context` is the max_model_len (default prompt + output).
    `efficiency` may be a function of the SKU (a calibration file's, for the SKU it measured).
    """
    from kvplan.api.calls import _as_deployment, _catalog, _skus, _tokens

    known = _catalog(catalog)
    fixed = {"tp": tp or 1, "pp": pp or 1}
    options = deployment_options if isinstance(model, Deployment) else deployment_options | fixed
    base = _as_deployment(model, known, options)
    prompt = _tokens(prompt_tokens, "--prompt-tokens")
    output = _tokens(output_tokens, "--output-tokens")
    context_tokens = _tokens(context, "--context") if context else prompt + output
    workload = ParetoWorkload(prompt, output, context_tokens)
    space = named_space(
        tuple({s.name: s for s in _skus(skus, known)}.values()),
        kv_dtypes,
        weight_dtypes,
        max_gpus=max_gpus,
        quantization=quantization,
        tp=tp,
        pp=pp,
    )
    result = sweep(base, workload, space, efficiency)
    return pareto_report(base, result, speed_model, [STEADY_STATE_NOTE, *notes])


def pareto_report(
    base: Deployment, result: ParetoSearch, speed_model: str, notes: list[str]
) -> ParetoReport:
    """The record `recommend --pareto` renders (docs/commands/recommend.md)."""
    workload = result.workload
    searched = {
        key: ["released" if v is None else v for v in values]
        for key, values in result.searched.items()
    }
    return ParetoReport(
        model=base.model.name,
        engine=base.engine.name,
        engine_version=base.settings.version,
        prompt_tokens=workload.prompt_tokens,
        output_tokens=workload.output_tokens,
        context_tokens=workload.context_tokens,
        speed_model=speed_model,
        frontier=[_row(p) for p in result.frontier],
        points_swept=len(result.points),
        configurations=result.configurations,
        refused=result.refused,
        searched=searched,  # type: ignore[arg-type]
        notes=notes,
    )


def _row(p: ParetoPoint) -> ParetoRow:
    d = p.deployment
    return ParetoRow(
        sku=p.sku.name,
        gpus=d.gpus,
        tp=d.tp,
        pp=d.pp,
        weight_dtype=d.weight_dtype or d.model.weight_dtype,
        kv_dtype=d.kv_dtype,
        batch=p.batch,
        max_batch=p.max_batch,
        max_num_batched_tokens=d.settings.max_num_batched_tokens or 0,
        kv_bytes_per_token=p.kv_bytes_per_token,
        kv_bytes_per_token_per_gpu=p.kv_bytes_per_token_per_gpu,
        decode_step_s=p.times.decode_s,
        prefill_s=p.times.prefill_s,
        request_s=p.request_s,
        tokens_per_s_per_user=p.tokens_per_s_per_user,
        output_tokens_per_s_per_gpu=p.output_tokens_per_s_per_gpu,
    )
