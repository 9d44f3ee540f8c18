"""The `report` command: per-SKU capacity across models, SKUs and TP degrees."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

import kvplan.limits as limits
from kvplan.cli.calibration_options import CalibrationOpt, calibrated_report
from kvplan.cli.common import _catalog, _columns, _deployment_of, _format, _model, user_errors
from kvplan.cli.engine_options import EngineOptions, engine_options
from kvplan.cli.options import (
    CatalogOpt,
    ColumnsOpt,
    FormatOpt,
    KvDtypeOpt,
    PpOpt,
    RopeScalingOpt,
    WeightDtypeOpt,
    count,
    fraction,
    name,
)
from kvplan.errors import KvplanError

RepeatOpt = list[str] | None


EXPLAIN_ROWS = 64  # rows `report --explain` splits into operations (one table each)


@engine_options
def report(
    model: Annotated[
        RepeatOpt,
        typer.Option(
            "--model",
            "-m",
            parser=name,
            help="model name (repeatable), or 'all' for the whole catalogue",
        ),
    ] = None,
    sku: Annotated[
        RepeatOpt,
        typer.Option(
            "--sku",
            "-s",
            parser=name,
            help="SKU name or family such as h100 (repeatable); default: every SKU",
        ),
    ] = None,
    tp: Annotated[
        list[int] | None,
        typer.Option(
            "--tp",
            parser=count(limits.GPUS),
            metavar="N",
            help="TP degrees (repeatable); default 1, 2, 4, 8 that fit the node; of several "
            "rows, one the engine refuses is a 'refused' row",
        ),
    ] = None,
    pp: PpOpt = 1,
    rope_scaling: RopeScalingOpt = None,
    batch: Annotated[
        int,
        typer.Option(
            "--batch",
            "-b",
            parser=count(limits.BATCH),
            metavar="N",
            help="sequences for the longest-context column",
        ),
    ] = 1,
    context: Annotated[
        str | None,
        typer.Option(
            "--context",
            "-c",
            help="tokens per request for the concurrency column (8k, 128k); "
            "default: each model's native limit; vLLM's max_model_len",
        ),
    ] = None,
    kv_dtype: KvDtypeOpt = None,
    weight_dtype: WeightDtypeOpt = None,
    bandwidth_efficiency: Annotated[
        float | None,
        typer.Option(
            parser=fraction(),
            metavar="FRACTION",
            help="fraction of datasheet bandwidth every read of a step reaches, in place of "
            "the step model's fitted per-operation fractions (docs/speed-model.md)",
            show_default=False,
        ),
    ] = None,
    compute_efficiency: Annotated[
        float | None,
        typer.Option(
            parser=fraction(),
            metavar="FRACTION",
            help="fraction of dense peak FLOP/s large GEMMs and prefill attention reach, in "
            "place of the fitted fractions (docs/speed-model.md)",
            show_default=False,
        ),
    ] = None,
    calibration: CalibrationOpt = None,
    sort: Annotated[
        str | None,
        typer.Option(
            help="sort rows by: model, sku, tp, max_context_tokens, max_concurrency, "
            "kv_capacity_tokens, decode_tokens_per_s, kv_budget_bytes_per_gpu",
            show_default=False,
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            help="also draw the report to FILE.svg or FILE.png (needs kvplan[plot])",
            show_default=False,
        ),
    ] = None,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="instead of the report, each row's decode step split into its operations "
            "(GEMMs, attention, collectives, engine overhead) with their share; at most "
            f"{EXPLAIN_ROWS} rows",
        ),
    ] = False,
    columns: ColumnsOpt = None,
    fmt: FormatOpt = "table",
    catalog_dirs: CatalogOpt = None,
    *,
    engine_options: EngineOptions,
) -> None:
    """Per-SKU capacity: KV budget, longest context, highest concurrency, decode tokens/s."""
    with user_errors():
        from kvplan.api import report as capacity_report
        from kvplan.cli.flags import with_flags
        from kvplan.perf.efficiency import Efficiency
        from kvplan.report.capacity_report import SORT_KEYS, render_report

        output = _format(fmt)
        if plot is not None:
            from kvplan.report.plot import ensure_plot_possible

            ensure_plot_possible(plot)  # fail before printing: exit 2 means empty stdout
        if not model:
            raise KvplanError("--model: give at least one model (repeatable), or --model all")
        if sort is not None and sort not in SORT_KEYS:
            raise KvplanError(f"--sort: unknown column {sort!r} (allowed: {', '.join(SORT_KEYS)})")
        catalog = _catalog(catalog_dirs)
        skus_list = catalog.skus_named(sku) if sku else catalog.skus()
        if model == ["all"]:
            resolved = list(catalog.models())
        else:
            resolved = [_model(catalog, m, rope_scaling) for m in model]
        deployments = [
            _deployment_of(r, engine_options, kv_dtype, weight_dtype, 1, pp) for r in resolved
        ]
        rows = calibrated_report(
            calibration,
            list(skus_list),
            Efficiency(bandwidth_efficiency, compute_efficiency),
            lambda chosen, efficiency: capacity_report(
                deployments,
                skus=chosen,
                tp=tuple(tp) if tp else None,
                batch=batch,
                context=context,
                efficiency=efficiency,
                curves=output == "html",  # the page's requests-against-context chart
            ),
        )
        if not rows:
            raise KvplanError(
                "no (model, SKU, TP) combination to report; check --tp against the SKUs' node "
                "size and the models' attention heads"
            )
        if sort is not None:
            # Refused rows have no figures: they sort last either way.
            descending = sort not in ("model", "sku", "tp")
            rows.sort(key=lambda r: _sort_key(getattr(r, sort, None), descending))
        if explain:
            _explain(rows, deployments, skus_list, output, bandwidth_efficiency, compute_efficiency)
            return
        rows = [with_flags(row) for row in rows]
        render_report(rows, output, log_lines=len(rows) <= 4, columns=_columns(columns))
        if plot is not None:
            from kvplan.api import CapacityRow
            from kvplan.report.plot import plot_report

            plot_report([r for r in rows if isinstance(r, CapacityRow)], plot)
            sys.stderr.write(f"wrote {plot}\n")
    # The rule `size --sku` follows: exit 1 when nothing planned fits the whole batch. A
    # report with one row that fits has answered yes somewhere.
    if not any(getattr(row, "verdict", None) == "fits" for row in rows):
        raise typer.Exit(1)


def _explain(rows, deployments, skus, output, bandwidth_efficiency, compute_efficiency) -> None:
    """Print each row's decode step, operation by operation (--explain)."""
    from kvplan.api import CapacityRow
    from kvplan.api.step_explain import explain_step
    from kvplan.perf.efficiency import Efficiency
    from kvplan.report.step_explain_report import render_explanations

    decoding = [r for r in rows if isinstance(r, CapacityRow) and r.decode_batch]
    if len(decoding) > EXPLAIN_ROWS:
        raise KvplanError(
            f"--explain: {len(decoding):,} rows; narrow the report with --model, --sku or --tp "
            f"(at most {EXPLAIN_ROWS})"
        )
    by_model = {d.model.name: d for d in deployments}
    by_sku = {s.name: s for s in skus}
    efficiency = Efficiency(bandwidth_efficiency, compute_efficiency)
    explained = []
    for row in decoding:
        deployment = by_model[row.model].replace(tp=row.tp, dp=row.dp, ep=row.ep)
        # The replica's share of the batch: dp replicas decode side by side.
        batch = -(-row.decode_batch // row.dp)
        explained.append(
            explain_step(
                deployment, by_sku[row.sku], batch, row.decode_context_tokens, 0, efficiency
            )
        )
    render_explanations(explained, output)


def _sort_key(value: object, descending: bool) -> tuple[int, object]:
    """Values in order (largest first when `descending`), missing ones last."""
    if value is None:
        return (1, 0)
    return (0, -value if descending and isinstance(value, int | float) else value)
