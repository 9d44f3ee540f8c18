"""Helpers every command shares: the one place errors are printed, and input parsing."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from kvplan.cli.exits import write_error
from kvplan.errors import KvplanError
from kvplan.report.render import FORMATS, Format

# Warnings held until the command has succeeded: bad input gets its error line alone.
_HELD: list[str] = []


@contextmanager
def user_errors() -> Iterator[None]:
    """Print a KvplanError as one `error:` line per problem on stderr and exit 2; on success,
    the held warnings (`hold_warning`)."""
    _HELD.clear()
    try:
        yield
    except KvplanError as error:
        _HELD.clear()
        write_error(error)  # the same lines as an error that reaches kvplan.cli.exits
        raise typer.Exit(2) from None
    for message in dict.fromkeys(_HELD):  # each once, in order
        warn(message)
    _HELD.clear()


def hold_warning(message: str) -> None:
    """A `warning:` line printed when the command succeeds (not beside an error)."""
    _HELD.append(message)


def warn(message: str) -> None:
    """A `warning:` line on stderr (config readings, capped values)."""
    sys.stderr.write(f"warning: {message}\n")


def _format(value: str) -> Format:
    if value not in FORMATS:
        raise KvplanError(f"--format: unknown format {value!r} (allowed: {', '.join(FORMATS)})")
    return value  # type: ignore[return-value]


def _columns(text: str | None) -> list[str] | None:
    """--columns KEY,KEY,… as a list of keys (None when not given)."""
    if text is None:
        return None
    keys = [key.strip() for key in text.split(",")]
    if not all(keys):
        raise KvplanError(f"--columns: empty column name in {text!r}")
    return keys


def _catalog(dirs: list[Path] | None):
    from kvplan.catalog import Catalog

    catalog = Catalog(tuple(dirs or ()))
    if catalog.user_dirs:  # a bad folder is one error here, not one per product of `check`
        catalog.models()
    return catalog


def _batch(context: str, batch: int, lengths: str | None):
    """The batch to size: --lengths, else --batch sequences of --context tokens."""
    import kvplan.limits as limits
    from kvplan.engine.batch import Batch
    from kvplan.units import parse_tokens

    if lengths is not None:
        parts = lengths.split(",")
        limits.BATCH.check(len(parts), "--lengths")
        return Batch.of(parse_tokens(part, "--lengths") for part in parts)
    return Batch.uniform(parse_tokens(context, "--context"), batch)


def _model(catalog, name: str, rope_scaling: str | None = None):
    """The model `name` means (catalogue, config.json, GGUF file or Hub id); warnings printed."""
    from kvplan.catalog.resolve import resolve_model

    resolved = resolve_model(catalog, name, rope_scaling)
    for line in resolved.warnings:
        warn(line)
    return resolved


def _deployment(
    catalog,
    model: str,
    engine_options,
    *,
    kv_dtype: str,
    weight_dtype: str | None,
    tp: int,
    pp: int,
    rope_scaling: str | None = None,
):
    """The deployment a command describes; a checkpoint's exact weight bytes count unless
    --weight-dtype asks for another dtype."""
    resolved = _model(catalog, model, rope_scaling)
    return _deployment_of(resolved, engine_options, kv_dtype, weight_dtype, tp, pp)


def _deployment_of(resolved, engine_options, kv_dtype, weight_dtype, tp, pp):
    """A deployment of a resolved model (or a bare spec) with the command's engine options;
    an option the engine does not read is said to be ignored when the command succeeds."""
    from kvplan.api import deployment
    from kvplan.engine.settings import unread_settings

    name, settings, dp, ep = engine_options.resolve()
    for setting in unread_settings(engine_options.values, name):
        readers = ", ".join(setting.engines)
        hold_warning(f"{setting.flag} is not read by {name} (only by {readers}); ignored")
    return deployment(
        resolved,
        engine=name,
        kv_dtype=kv_dtype,
        weight_dtype=weight_dtype,
        tp=tp,
        pp=pp,
        dp=dp,
        ep=ep,
        settings=settings,
    )
