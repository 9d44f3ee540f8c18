"""The `simulate` and `pools` commands: serving under traffic, and disaggregated pool sizes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from kvplan.cli.common import _catalog, _deployment, _format, user_errors, warn
from kvplan.cli.engine_options import EngineOptions, engine_options
from kvplan.cli.options import (
    CatalogOpt,
    FormatOpt,
    KvDtypeOpt,
    ModelArg,
    PpOpt,
    TpOpt,
    WeightDtypeOpt,
)
from kvplan.cli.simulate_options import (
    WORKLOAD_PARAMETERS,
    ServingOptions,
    WorkloadOptions,
    pools_workload_options,
    serving_options,
    workload_options,
)
from kvplan.errors import KvplanError

SimSkuOpt = Annotated[
    str, typer.Option("--sku", "-s", help="GPU SKU of every instance (see `kvplan skus`)")
]
# Options a --vs configuration may not change: the workload is shared, the output is one.
NOT_IN_VS = {*WORKLOAD_PARAMETERS, "model", "vs", "plot", "fmt", "catalog_dirs"}


@engine_options
@serving_options
@workload_options
def simulate(
    model: ModelArg,
    sku: SimSkuOpt,
    tp: TpOpt = 1,
    pp: PpOpt = 1,
    kv_dtype: KvDtypeOpt = None,
    weight_dtype: WeightDtypeOpt = None,
    vs: Annotated[
        str | None,
        typer.Option(
            "--vs",
            help="a second configuration run on the same workload and shown beside the first: "
            'the options that differ, quoted, e.g. --vs "--kv-dtype fp8" or --vs '
            '"--kv-bytes-factor 2 --step-time-factor 0.8"',
            show_default=False,
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            help="also draw the KV pool and queue over time to FILE.svg or FILE.png "
            "(needs kvplan[plot])",
            show_default=False,
        ),
    ] = None,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="instead of the run's figures, its mean step (the run's decode and prefill "
            "tokens per step, at the workload's mean context) split into its operations with "
            "their share",
        ),
    ] = False,
    fmt: FormatOpt = "table",
    catalog_dirs: CatalogOpt = None,
    *,
    workload_options: WorkloadOptions,
    serving_options: ServingOptions,
    engine_options: EngineOptions,
) -> None:
    """Serve a workload: throughput, TTFT/TPOT/ITL/E2E percentiles, goodput, KV memory over time.

    A discrete-event simulation of serving instances over the engine model (the same budget
    and blocks as `size` and `report`) with the per-operation step model's step times.
    """
    with user_errors():
        from kvplan.api.build_simulate import simulation_run
        from kvplan.cli.flags import with_flags
        from kvplan.report.simulate_report import render_simulation

        output = _format(fmt)
        if explain and plot is not None:  # --explain prints one step; it has no timeline
            raise KvplanError("--plot: does not apply to --explain (it draws a run's timeline)")
        if plot is not None:
            from kvplan.report.plot import ensure_plot_possible

            ensure_plot_possible(plot)
        first = {
            "model": model,
            "sku": sku,
            "tp": tp,
            "pp": pp,
            "kv_dtype": kv_dtype,
            "weight_dtype": weight_dtype,
            **workload_options.values,
            **serving_options.values,
            **engine_options.values,
        }
        catalog = _catalog(catalog_dirs)
        runs = [("" if vs is None else "as given", first)]
        if vs is not None:
            runs.append((vs.strip(), _vs_values(first, vs)))
        workload = workload_options.build()
        engine_keys = tuple(engine_options.values)
        results = [
            _simulate(catalog, values, engine_keys, workload_options, workload, label)
            for label, values in runs
        ]
        if explain:
            _explain(results, output)
            return
        runs = [with_flags(simulation_run(result)) for result in results]
        render_simulation(runs, output)
        if plot is not None:
            from kvplan.report.simulate_plot import plot_simulation

            plot_simulation(runs, plot)
            sys.stderr.write(f"wrote {plot}\n")


def _explain(results, output) -> None:
    """Print each run's mean step, operation by operation (--explain)."""
    from kvplan.api.step_explain import explain_step
    from kvplan.report.step_explain_report import render_explanations

    explained = []
    for result in results:
        view, steps = result.view, max(result.steps, 1)
        requests = result.workload.requests
        prompt = sum(r.prompt_tokens for r in requests) / max(len(requests), 1)
        output_tokens = sum(r.output_tokens for r in requests) / max(len(requests), 1)
        explained.append(
            explain_step(
                view.deployment,
                view.sku,
                round(result.decode_tokens / steps),
                max(round(prompt + output_tokens / 2), 1),
                round(result.prefill_tokens / steps),
                view.config.efficiency,
            )
        )
    render_explanations(explained, output)


def _simulate(catalog, values: dict[str, Any], engine_keys, workload_options, workload, label):
    """One configuration's run on the shared workload."""
    from kvplan.cli.simulate_options import SERVING_PARAMETERS
    from kvplan.simulate import simulate as run

    engine = EngineOptions({k: values[k] for k in engine_keys})
    serving = ServingOptions({k: values[k] for k in SERVING_PARAMETERS})
    sku = catalog.sku(values["sku"])
    config, notes = serving.resolve(sku, label)
    deployment = _deployment(
        catalog,
        values["model"],
        engine,
        kv_dtype=values["kv_dtype"],
        weight_dtype=values["weight_dtype"],
        tp=values["tp"],
        pp=values["pp"],
    )
    workload_options.check_fits(config.max_model_len or deployment.model.max_context)
    for note in notes:
        warn(note)
    return run(deployment, sku, workload, config)


def _vs_values(first: dict[str, Any], vs: str) -> dict[str, Any]:
    """The first configuration's values with the options written in --vs replacing them.

    The options are read against `simulate`'s own signature (names, flags and types), so
    --vs accepts exactly what the command line does.
    """
    import shlex

    try:
        tokens = shlex.split(vs)
    except ValueError as error:
        raise KvplanError(f"--vs: {vs!r}: {error}") from None
    options = _option_table()
    given: dict[str, Any] = {}
    while tokens:
        token = tokens.pop(0)
        written, equals, inline = token.partition("=")
        if written not in options:
            raise KvplanError(f"--vs: unknown option {written!r} in {vs!r}")
        name, kind, value = options[written]
        if kind is bool:
            given[name] = value
            continue
        if not equals:
            if not tokens:
                raise KvplanError(f"--vs: {written} needs a value")
            inline = tokens.pop(0)
        given[name] = _converted(written, kind, inline)
    refused = sorted(set(given) & NOT_IN_VS)
    if refused:
        # Name each option as the user writes it (--format), not by its parameter (fmt).
        written_as: dict[str, str] = {}
        for text, (name, _, _) in options.items():
            written_as.setdefault(name, text)
        names = ", ".join(written_as[name] for name in refused)
        raise KvplanError(f"--vs: {names} cannot differ: both runs share one workload and output")
    if not given:
        raise KvplanError(f"--vs: {vs!r} changes no option")
    return {**first, **given}


def _option_table() -> dict[str, tuple[str, type, Any]]:
    """`simulate`'s options: written form -> (parameter, type, value a flag sets)."""
    import inspect
    import typing

    table: dict[str, tuple[str, type, Any]] = {}
    for name, parameter in inspect.signature(simulate).parameters.items():
        kind, *infos = typing.get_args(parameter.annotation)
        info = next((i for i in infos if isinstance(i, typer.models.OptionInfo)), None)
        if info is None:
            continue  # the model argument
        kind = next((t for t in typing.get_args(kind) if t is not type(None)), kind)
        declared = [info.default] if isinstance(info.default, str) else []
        declared += list(info.param_decls or ()) or (
            [] if declared else ["--" + name.replace("_", "-")]
        )
        for text in declared:
            if kind is bool:
                on, _, off = text.partition("/")
                table[on] = (name, bool, True)
                if off:
                    table[off] = (name, bool, False)
            else:
                table[text] = (name, kind, None)
    return table


def _converted(written: str, kind: type, text: str) -> Any:
    if kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            raise KvplanError(f"--vs: {written} {text!r} is not a number") from None
    return kind(text)


@engine_options
@serving_options
@pools_workload_options
def pools(
    model: ModelArg,
    sku: SimSkuOpt,
    tp: Annotated[
        list[int] | None,
        typer.Option("--tp", help="TP degrees a pool may use (repeatable); default 1"),
    ] = None,
    search_tp: Annotated[
        bool,
        typer.Option(
            "--search-tp", help="try TP 1, 2, 4, 8 (those the engine accepts on one node) per pool"
        ),
    ] = False,
    pp: PpOpt = 1,
    kv_dtype: KvDtypeOpt = None,
    weight_dtype: WeightDtypeOpt = None,
    slo_percentile: Annotated[
        int,
        typer.Option(
            "--slo-percentile",
            help="share of all requests, in % (1-99), that must meet each pool's target; "
            "rejected requests count as misses",
        ),
    ] = 90,
    prompt_scale: Annotated[
        float,
        typer.Option("--prompt-scale", help="also size for prompts × this (a surge), side by side"),
    ] = 1.0,
    output_scale: Annotated[
        float,
        typer.Option("--output-scale", help="also size for outputs × this (a surge), side by side"),
    ] = 1.0,
    link_bandwidth: Annotated[
        str | None,
        typer.Option(
            "--link-bandwidth",
            help="bytes/s one way the KV copy from prefill to decode runs at (50GB = 400 Gb/s "
            "InfiniBand); default: the SKU's interconnect",
            show_default=False,
        ),
    ] = None,
    max_instances: Annotated[
        int, typer.Option("--max-instances", help="largest instance count tried per pool")
    ] = 64,
    goodput: Annotated[
        bool,
        typer.Option(
            "--goodput",
            help="also search, for the colocated and the disaggregated layout chosen, the "
            "highest rate at which --slo-percentile % of requests meet both SLOs (DistServe's "
            "goodput; the same requests at other rates), and that rate per GPU; needs --rate "
            "or --trace",
        ),
    ] = False,
    fmt: FormatOpt = "table",
    catalog_dirs: CatalogOpt = None,
    *,
    workload_options: WorkloadOptions,
    serving_options: ServingOptions,
    engine_options: EngineOptions,
) -> None:
    """Fewest prefill and decode instances meeting --slo-ttft and --slo-tpot, vs colocated.

    Needs --rate, --offline or --trace, and --slo-ttft and --slo-tpot. Each pool's instance
    count is searched by simulation; the KV copy between the pools runs over the SKU's
    interconnect.
    """
    with user_errors():
        from kvplan.api.build_simulate import pools_run
        from kvplan.cli.flags import with_flags
        from kvplan.plan.capacity import tp_degrees
        from kvplan.report.pools_report import render_pools
        from kvplan.units import parse_bytes

        output = _format(fmt)
        if serving_options.values["instances"] != 1:
            raise KvplanError("--instances: pools searches the instance counts itself; drop it")
        catalog = _catalog(catalog_dirs)
        target = catalog.sku(sku)
        config, notes = serving_options.resolve(target)
        deployment = _deployment(
            catalog,
            model,
            engine_options,
            kv_dtype=kv_dtype,
            weight_dtype=weight_dtype,
            tp=(tp or [1])[0],
            pp=pp,
        )
        degrees = tuple(tp_degrees(deployment, target)) if search_tp else tuple(tp or [1])
        for degree in degrees:  # a degree the engine refuses is an error before any run
            deployment.replace(tp=degree)
        workload = workload_options.build()
        workload_options.check_fits(config.max_model_len or deployment.model.max_context)
        link = None if link_bandwidth is None else parse_bytes(link_bandwidth, "--link-bandwidth")
        if link == 0:  # a copy at 0 bytes/s never ends
            raise KvplanError(f"--link-bandwidth: {link_bandwidth} must be above 0 bytes/s")
        surge = (prompt_scale, output_scale)
        results = _pools_results(
            deployment,
            target,
            workload,
            config,
            degrees,
            surge,
            slo_percentile,
            link,
            (max_instances, goodput),
        )
        for note in notes:
            warn(note)
        render_pools([with_flags(pools_run(label, r)) for label, r in results], output)


def _pools_results(deployment, sku, workload, config, degrees, surge, percentile, link, search):
    """Pools for the workload, and again for its surge when --prompt/--output-scale ask;
    `search` is (--max-instances, --goodput)."""
    limit, goodput = search
    from kvplan.simulate.pools import size_pools

    workloads = [("base", workload)]
    if surge != (1.0, 1.0):
        label = f"prompts ×{surge[0]:g}, outputs ×{surge[1]:g}"
        workloads.append((label, workload.scaled(*surge)))
    return [
        (
            label,
            size_pools(
                deployment,
                sku,
                load,
                config.slo,
                config=config,
                percentile=percentile,
                tps=degrees,
                link_bytes_per_s=link,
                max_instances=limit,
                goodput=goodput,
            ),
        )
        for label, load in workloads
    ]
