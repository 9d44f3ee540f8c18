"""The `size` command: KV bytes per token, request and batch; weights; fit on one SKU."""

from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli.common import _batch, _catalog, _deployment, _format, user_errors
from kvplan.cli.engine_options import EngineOptions, engine_options
from kvplan.cli.options import (
    BatchOpt,
    CatalogOpt,
    ContextOpt,
    FormatOpt,
    KvDtypeOpt,
    LengthsOpt,
    ModelArg,
    PpOpt,
    RopeScalingOpt,
    SkuOpt,
    TpOpt,
    WeightDtypeOpt,
)


@engine_options
def size(
    model: ModelArg,
    context: ContextOpt = "8k",
    batch: BatchOpt = 1,
    lengths: LengthsOpt = None,
    kv_dtype: KvDtypeOpt = None,
    weight_dtype: WeightDtypeOpt = None,
    tp: TpOpt = 1,
    pp: PpOpt = 1,
    rope_scaling: RopeScalingOpt = None,
    sku: SkuOpt = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="print the formula with the model's numbers")
    ] = False,
    fmt: FormatOpt = "table",
    catalog_dirs: CatalogOpt = None,
    *,
    engine_options: EngineOptions,
) -> None:
    """KV bytes per token, per request and per batch; weights; fit on a GPU SKU (exit 1 if not).

    Shows the exact bytes the tokens need beside what the engine charges for them; with --sku
    the fit is the engine's own budget, the same answer `report`, `check` and `claim` give.
    """
    with user_errors():
        from kvplan.api import size as size_report
        from kvplan.cli.flags import with_flags
        from kvplan.report.size_report import render_size

        output = _format(fmt)
        catalog = _catalog(catalog_dirs)
        deployment = _deployment(
            catalog,
            model,
            engine_options,
            kv_dtype=kv_dtype,
            weight_dtype=weight_dtype,
            tp=tp,
            pp=pp,
            rope_scaling=rope_scaling,
        )
        target = catalog.sku(sku) if sku is not None else None
        result = size_report(deployment, batch=_batch(context, batch, lengths), sku=target)
        render_size(with_flags(result), output, explain)
    # Not fitting is a result, not an error: rendered above, then exit 1 like `check`.
    if result.fits is False:
        raise typer.Exit(1)
