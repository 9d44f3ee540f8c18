"""Guardrail commands: `check` (a deployment file's promises) and `claim` (one claim)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvplan.cli.common import _catalog, _columns, _deployment, _format, user_errors
from kvplan.cli.engine_options import EngineOptions, engine_options
from kvplan.cli.options import (
    BatchOpt,
    CatalogOpt,
    ColumnsOpt,
    ContextOpt,
    FormatOpt,
    KvDtypeOpt,
    ModelArg,
    PpOpt,
    RopeScalingOpt,
    TpOpt,
    WeightDtypeOpt,
    file_path,
    name,
)


def check(
    file: Annotated[
        Path,
        typer.Argument(
            help="deployment YAML listing products: model, sku, tp/pp, engine, kv_dtype, "
            "context (tokens; 8k, 128k) and concurrency or requests_per_s + duration_s",
            show_default=False,
            parser=file_path,
        ),
    ],
    columns: ColumnsOpt = None,
    fmt: FormatOpt = "table",
    catalog_dirs: CatalogOpt = None,
) -> None:
    """Check each product's promised context × concurrency against its SKU (exit 1 if over)."""
    with user_errors():
        from kvplan.api import check as check_file
        from kvplan.cli.flags import with_flags
        from kvplan.report.check_report import render_check

        output = _format(fmt)
        result = check_file(file, catalog=_catalog(catalog_dirs), curves=output == "html")
        render_check(with_flags(result), output, _columns(columns))
    # A failed promise is a result, not an error: rendered above, then exit 1 (STYLE).
    if not result.ok:
        raise typer.Exit(1)


@engine_options
def claim(
    model: ModelArg,
    sku: Annotated[
        str,
        typer.Option(
            "--sku", "-s", parser=name, help="GPU SKU the claim is made for (see `kvplan skus`)"
        ),
    ],
    context: ContextOpt = "128k",
    batch: BatchOpt = 1,
    kv_dtype: KvDtypeOpt = None,
    weight_dtype: WeightDtypeOpt = None,
    tp: TpOpt = 1,
    pp: PpOpt = 1,
    rope_scaling: RopeScalingOpt = None,
    fmt: FormatOpt = "table",
    catalog_dirs: CatalogOpt = None,
    *,
    engine_options: EngineOptions,
) -> None:
    """The bytes behind a "long context" claim: KV, weights, the engine's reserve per GPU.

    Exits 1 when the claim does not fit, with the same verdict `check` and `report` give.
    """
    with user_errors():
        from kvplan.api import claim as claim_report
        from kvplan.cli.flags import with_flags
        from kvplan.report.claim_report import render_claim

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
        sheet = claim_report(
            deployment,
            sku=catalog.sku(sku),
            context=context,
            batch=batch,
            curves=output == "html",  # the page's requests-against-context chart
        )
        render_claim(with_flags(sheet), output)
    if not sheet.fits:
        raise typer.Exit(1)
