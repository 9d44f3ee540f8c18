"""The `verify` command: allocate the predicted KV pool on a device, run, measure, compare."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kvplan.cli.common import _batch, _catalog, _format, _model, user_errors
from kvplan.cli.options import (
    BatchOpt,
    BlockSizeOpt,
    CatalogOpt,
    FormatOpt,
    KvDtypeOpt,
    LengthsOpt,
    ModelArg,
)
from kvplan.errors import KvplanError


class _VerifyProgress:
    """A rich progress bar on stderr while verify runs; silent when stderr is not a terminal."""

    def __enter__(self) -> _VerifyProgress:
        self._bar = None
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn("{task.description:<18}"),
                BarColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("verify", total=1.0)
        return self

    def __call__(self, stage: str, fraction: float) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=stage, completed=fraction)

    def __exit__(self, *exc_info: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def verify(
    model: ModelArg,
    context: Annotated[
        str | None,
        typer.Option(
            "--context",
            "-c",
            help="tokens per sequence; accepts 8k, 128k (k = 1024); default 8k on CUDA, 64 on CPU",
            show_default=False,
        ),
    ] = None,
    batch: BatchOpt = 1,
    lengths: LengthsOpt = None,
    kv_dtype: KvDtypeOpt = "bf16",
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            "-e",
            help="KV accounting to verify: vllm (16-token blocks, MLA 64), sglang or exact "
            "(1-token pages)",
        ),
    ] = "vllm",
    tp: Annotated[
        int, typer.Option("--tp", help="tensor-parallel degree; this GPU holds one rank's share")
    ] = 1,
    block_size: BlockSizeOpt = None,
    sku: Annotated[
        str | None,
        typer.Option(
            "--sku",
            "-s",
            help="SKU whose datasheet bandwidth to compare with; default: detected from the "
            "GPU's name (unknown GPU: comparison marked unknown)",
            show_default=False,
        ),
    ] = None,
    layers: Annotated[
        int | None,
        typer.Option(
            "--layers",
            help="verify this many layers (when the whole cache does not fit); whole-model "
            "figures are scaled by layers/verified and say so; default all on CUDA, 2 on CPU",
            show_default=False,
        ),
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            help="cuda or cpu (Triton interpreter, tiny shapes); default cuda when available",
            show_default=False,
        ),
    ] = None,
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="also write the JSON record to FILE", show_default=False),
    ] = None,
    bandwidth_pass: Annotated[
        float,
        typer.Option(
            "--bandwidth-pass",
            help="bandwidth passes when achieved ≥ this fraction (0–1) of the measured copy",
        ),
    ] = 0.8,
    repeats: Annotated[
        int | None,
        typer.Option(help="timed decode steps; default 50 on CUDA, 2 on CPU", show_default=False),
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the page shuffle, q and KV contents")] = 0,
    fmt: FormatOpt = "table",
    catalog_dirs: CatalogOpt = None,
) -> None:
    """Allocate the KV pool the plan predicts on a GPU, run the decode kernel, measure, compare."""
    with user_errors():
        output = _format(fmt)
        catalog = _catalog(catalog_dirs)
        spec = _model(catalog, model).spec
        target = catalog.sku(sku) if sku else None
        try:  # torch and triton are the optional `verify` extra; size/report never load them
            from kvplan.validate.harness import resolve_device, run_verify
        except ImportError as error:
            raise KvplanError(
                f"kvplan verify needs torch and triton ({error.name} is missing): "
                "pip install 'kvplan[verify]'"
            ) from None
        from kvplan.report.verify_report import render_verify
        from kvplan.validate.record import exit_code, write_record

        where = resolve_device(device)
        default_context = "8k" if where.type == "cuda" else "64"
        with _VerifyProgress() as progress:
            record = run_verify(
                spec,
                lengths=[
                    tokens
                    for tokens, count in _batch(context or default_context, batch, lengths)
                    for _ in range(count)
                ],
                kv_dtype=kv_dtype,
                engine=engine,
                tp=tp,
                block_size=block_size,
                layers=layers,
                device=where.type,
                sku=target,
                skus=catalog.skus(),
                bandwidth_pass_fraction=bandwidth_pass,
                repeats=repeats,
                seed=seed,
                progress=progress,
            )
        if json_path is not None:
            write_record(json_path, record)
            sys.stderr.write(f"wrote {json_path}\n")
        render_verify(record, output)
    # A failed check is a result, not an error: rendered above, then exit 1 (STYLE).
    if exit_code(record):
        raise typer.Exit(1)
