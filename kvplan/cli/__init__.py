"""The `kvplan` command line: parse, call, render, exit code (0 ok, 1 check failed, 2 bad input).

One module per command group; this file builds the typer app and registers the commands in
the order `kvplan --help` lists them. Commands import heavy modules inside their bodies, so
importing this package loads no torch, triton or numpy. A run builds only the command it
invokes: typer reads every parameter of every registered command when it builds the app, and
`kvplan size` must not pay for the other twelve.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterable
from importlib import import_module
from typing import Annotated, Any

import typer

from kvplan.cli.common import user_errors, warn
from kvplan.cli.exits import OneExitGroup

__all__ = ["COMMANDS", "app", "main", "run", "user_errors", "warn"]

# Each command -> (module of kvplan.cli, function), in the order `kvplan --help` lists them.
COMMANDS = {
    "size": ("size", "size"),
    "models": ("catalogue", "models"),
    "skus": ("catalogue", "skus"),
    "show": ("catalogue", "show"),
    "schema": ("catalogue", "schema"),
    "report": ("report", "report"),
    "check": ("check", "check"),
    "claim": ("check", "claim"),
    "recommend": ("recommend", "recommend"),
    "simulate": ("simulate", "simulate"),
    "pools": ("simulate", "pools"),
    "verify": ("verify", "verify"),
    "import-hf": ("catalogue", "import_hf_command"),
}


def _print_version(value: bool) -> None:
    if value:
        from kvplan import __version__

        typer.echo(f"kvplan {__version__}")
        raise typer.Exit()


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


def build_app(names: Iterable[str] = COMMANDS) -> typer.Typer:
    """The `kvplan` app with the commands `names` (default: all), in COMMANDS order."""
    built = typer.Typer(
        cls=OneExitGroup,
        add_completion=False,
        no_args_is_help=True,
        rich_markup_mode=None,
        help="Exact KV-cache sizing, per-GPU capacity and on-device verification for LLM serving.",
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    built.callback()(_options)
    chosen = set(names)
    for name, (module, function) in COMMANDS.items():
        if name in chosen:
            built.command(name)(getattr(import_module(f"kvplan.cli.{module}"), function))
    return built


def _invoked(argv: list[str]) -> str | None:
    """The command `argv` runs, or None (`--help`, no command, an unknown name): the group's
    own options are flags, so the first word that is not one names the command."""
    word = next((arg for arg in argv if not arg.startswith("-")), None)
    return word if word in COMMANDS else None


def __getattr__(name: str) -> Any:
    # `from kvplan.cli import app` (tests, docs runners): every command, built on first use.
    if name != "app":
        raise AttributeError(f"module 'kvplan.cli' has no attribute {name!r}")
    return _full_app()


def _full_app() -> typer.Typer:
    if "app" not in globals():
        globals()["app"] = build_app()
    return globals()["app"]  # type: ignore[no-any-return]


def run(argv: list[str] | None = None) -> int:
    """Run one command line (default: sys.argv[1:]); its exit code (kvplan.cli.exits).

    0 ok, 1 a check failed, 2 bad input or an internal error.
    """
    args = sys.argv[1:] if argv is None else argv
    invoked = _invoked(args)
    command = typer.main.get_command(build_app([invoked]) if invoked else _full_app())
    return command.main(args=args, prog_name="kvplan", standalone_mode=False)  # type: ignore[no-any-return]


def main() -> None:
    """Console-script entry point."""
    # pydantic scans every installed distribution's entry points for plugins when the first
    # model class is built (~0.1 s with torch installed); kvplan uses none, and `size` must
    # start in a few hundred milliseconds. A user's explicit setting still wins.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    # A command is one short process that keeps what it builds until it prints (a
    # whole-catalogue report: ~14k rows, about a million live objects, none of them in a
    # reference cycle). At the collector's defaults every older-generation pass walks all of
    # them again, a fifth of that report's time; here young objects are still collected
    # (every 100k allocations, so a cycle made and dropped is freed) and older ones are left
    # to reference counting.
    gc.set_threshold(100_000, 1000, 1000)
    sys.exit(run())
