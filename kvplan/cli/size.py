"""The `size` command: KV bytes per token, request and batch; weights; fit on one SKU."""

from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli.common import _catalog, _deployment, _format, _lengths, user_errors
from kvplan.cli.options import (
    BatchOpt,
    BlockSizeOpt,
    CatalogOpt,
    ContextOpt,
    EngineOpt,
    FormatOpt,
    KvDtypeOpt,
    LengthsOpt,
    ModelArg,
    PpOpt,
    SkuOpt,
    TpOpt,
    WeightDtypeOpt,
)


def size(
    model: ModelArg,
    context: ContextOpt = "8k",
    batch: BatchOpt = 1,
    lengths: LengthsOpt = None,
    kv_dtype: KvDtypeOpt = "bf16",
    weight_dtype: WeightDtypeOpt = None,
    engine: EngineOpt = "exact",
    tp: TpOpt = 1,
    pp: PpOpt = 1,
    block_size: BlockSizeOpt = None,
    sku: SkuOpt = None,
    fmt: FormatOpt = "table",
    explain: Annotated[
        bool, typer.Option("--explain", help="print the formula with the model's numbers")
    ] = False,
    catalog_dirs: CatalogOpt = None,
) -> None:
    """KV bytes per token, per request and per batch; weights; fit on a GPU SKU."""
    with user_errors():
        from kvplan.plan.sizing import size as size_plan
        from kvplan.report.size_report import render_size

        output = _format(fmt)
        catalog = _catalog(catalog_dirs)
        deployment = _deployment(
            catalog,
            model,
            engine=engine,
            kv_dtype=kv_dtype,
            weight_dtype=weight_dtype,
            tp=tp,
            pp=pp,
            tokens_per_block=block_size,
        )
        target = catalog.sku(sku) if sku else None
        result = size_plan(deployment, _lengths(context, batch, lengths), target)
        render_size(result, output, explain)
