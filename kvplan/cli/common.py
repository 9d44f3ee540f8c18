"""Helpers every command shares: the one place errors are printed, and input parsing."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from kvplan.errors import KvplanError
from kvplan.report.render import FORMATS, Format


@contextmanager
def user_errors() -> Iterator[None]:
    """Print a KvplanError as one `error:` line per problem on stderr and exit 2."""
    try:
        yield
    except KvplanError as error:
        for line in str(error).splitlines():
            sys.stderr.write(f"error: {line}\n")
        raise typer.Exit(2) from None


def warn(message: str) -> None:
    """A `warning:` line on stderr (config readings, capped values)."""
    sys.stderr.write(f"warning: {message}\n")


def _format(value: str) -> Format:
    if value not in FORMATS:
        raise KvplanError(f"--format: unknown format {value!r} (allowed: {', '.join(FORMATS)})")
    return value  # type: ignore[return-value]


def _catalog(dirs: list[Path] | None):
    from kvplan.catalog import Catalog

    return Catalog(tuple(dirs or ()))


def _batch(context: str, batch: int, lengths: str | None):
    """The batch to size: --lengths, else --batch sequences of --context tokens."""
    from kvplan.plan.batch import Batch
    from kvplan.units import parse_tokens

    if lengths:
        parts = [part for part in lengths.split(",") if part.strip()]
        return Batch.of(parse_tokens(part, "--lengths") for part in parts)
    return Batch.uniform(parse_tokens(context, "--context"), batch)


def _model(catalog, name: str):
    """A catalogue model, an imported HF config (path) or a GGUF file's header; warnings
    printed. The gguf package (and numpy) load only for a .gguf path."""
    path = Path(name)
    if path.suffix.lower() == ".gguf":
        from kvplan.catalog.gguf import read_gguf

        return read_gguf(path)
    if path.suffix == ".json" or path.is_dir() or path.exists():
        from kvplan.catalog.hf import import_hf

        imported = import_hf(path)
        for line in imported.warnings:
            warn(line)
        return imported.spec, imported.weights_bytes
    return catalog.model(name), None


def _deployment(
    catalog,
    model: str,
    engine_options,
    *,
    kv_dtype: str,
    weight_dtype: str | None,
    tp: int,
    pp: int,
):
    """The deployment a command describes; an imported HF config's exact weight bytes count
    unless --weight-dtype asks for another dtype."""
    spec, exact_weights = _model(catalog, model)
    return _deployment_of(spec, engine_options, kv_dtype, weight_dtype, tp, pp, exact_weights)


def _deployment_of(spec, engine_options, kv_dtype, weight_dtype, tp, pp, exact_weights=None):
    """A deployment of a model spec with the command's engine options."""
    from kvplan.plan.deployment import Deployment
    from kvplan.plan.engines import engine as engine_profile
    from kvplan.specs import kv_dtype_info, weight_dtype_info

    name, settings, dp, ep = engine_options.resolve()
    if weight_dtype is not None:
        weight_dtype = weight_dtype_info(weight_dtype).name
    profile = engine_profile(name)
    return Deployment(
        model=spec,
        engine=profile,
        kv_dtype=kv_dtype_info(kv_dtype or profile.default_kv_dtype).name,
        weight_dtype=weight_dtype,
        tp=tp,
        pp=pp,
        dp=dp,
        ep=ep,
        settings=settings,
        exact_weights_bytes=exact_weights if weight_dtype is None else None,
    )


def _write_atomically(path: Path, text: str) -> None:
    """Write to a temporary name beside `path`, then rename: never a half-written file."""
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(path)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise KvplanError(f"{path}: cannot write: {error.strerror}") from None
