"""The `kvplan` command line: parse, call, render, exit code (0 ok, 1 check failed, 2 bad input).

One module per command group; this file builds the typer app and registers the commands in
the order `kvplan --help` lists them. Commands import heavy modules inside their bodies, so
importing this package loads no torch, triton or numpy.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from kvplan.cli import catalogue, check, recommend, report, simulate, size, verify
from kvplan.cli.common import user_errors, warn

__all__ = ["app", "main", "user_errors", "warn"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Exact KV-cache sizing, per-GPU capacity and on-device verification for LLM serving.",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from kvplan import __version__

        typer.echo(f"kvplan {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="print kvplan's version and exit",
        ),
    ] = False,
) -> None:
    """Exact KV-cache sizing, per-GPU capacity and on-device verification for LLM serving."""


app.command()(size.size)
app.command()(catalogue.models)
app.command()(catalogue.skus)
app.command()(catalogue.show)
app.command()(catalogue.schema)
app.command()(report.report)
app.command()(check.check)
app.command()(check.claim)
app.command()(recommend.recommend)
app.command()(simulate.simulate)
app.command()(simulate.pools)
app.command()(verify.verify)
app.command("import-hf")(catalogue.import_hf_command)


def main() -> None:
    """Console-script entry point."""
    # pydantic scans every installed distribution's entry points for plugins when the first
    # model class is built (~0.1 s with torch installed); kvplan uses none, and `size` must
    # start in a few hundred milliseconds. A user's explicit setting still wins.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    app()
