"""Catalogue commands: `models`, `skus`, `show`, `schema` and `import-hf`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kvplan.cli.common import _catalog, _columns, _format, _model, user_errors, warn
from kvplan.cli.options import MODEL_HELP, CatalogOpt, ColumnsOpt, FormatOpt
from kvplan.cli.options import name as name_parser
from kvplan.errors import KvplanError
from kvplan.specs import ModelSpec


def models(
    pattern: Annotated[
        str | None,
        typer.Argument(
            parser=name_parser,
            help="only models whose name or an alias matches: a shell pattern (llama-3*), "
            "or any part of the name (qwen3); any case",
            show_default=False,
        ),
    ] = None,
    family: Annotated[
        str | None,
        typer.Option(
            help="only models of this family (the `family` field: llama, qwen3_moe, …)",
            show_default=False,
        ),
    ] = None,
    min_context: Annotated[
        str | None,
        typer.Option(
            "--min-context",
            help="only models whose native context is at least this many tokens; accepts "
            "8k, 128k, 1M (k = 1024)",
            show_default=False,
        ),
    ] = None,
    fmt: FormatOpt = "table",
    columns: ColumnsOpt = None,
    catalog_dirs: CatalogOpt = None,
) -> None:
    """List the catalogue's models with their KV geometry and bytes per token."""
    with user_errors():
        from kvplan.plan.catalog_facts import models_matching
        from kvplan.report.catalog_report import render_models
        from kvplan.units import parse_tokens

        least = None if min_context is None else parse_tokens(min_context, "--min-context")
        output, picked = _format(fmt), _columns(columns)
        chosen = models_matching(_catalog(catalog_dirs).models(), pattern, family, least)
        if not chosen:
            raise KvplanError(_no_model_line(pattern, family, min_context))
        render_models(chosen, output, picked)


def _no_model_line(pattern: str | None, family: str | None, min_context: str | None) -> str:
    given = [
        f"{label} {value!r}"
        for label, value in (
            ("name", pattern),
            ("--family", family),
            ("--min-context", min_context),
        )
        if value is not None
    ]
    return f"models: no model matches {' and '.join(given)} (`kvplan models` lists them all)"


def skus(fmt: FormatOpt = "table", catalog_dirs: CatalogOpt = None) -> None:
    """List the catalogue's GPU SKUs: memory, bandwidth, dense peak FLOP/s."""
    with user_errors():
        from kvplan.report.catalog_report import render_skus

        render_skus(_catalog(catalog_dirs).skus(), _format(fmt))


def show(
    name: Annotated[
        str,
        typer.Argument(
            help=f"a GPU SKU name or alias, or a model: {MODEL_HELP}", show_default=False
        ),
    ],
    fmt: FormatOpt = "table",
    catalog_dirs: CatalogOpt = None,
) -> None:
    """Show one model (catalogue entry, config.json, .gguf file or Hub id) or SKU with its
    source and derived numbers."""
    with user_errors():
        from kvplan.report.catalog_report import render_entry

        catalog = _catalog(catalog_dirs)
        try:
            entry = _model(catalog, name).spec
        except KvplanError as model_error:
            try:
                entry = catalog.sku(name)
            except KvplanError:
                raise model_error from None
        render_entry(entry, _format(fmt))


DocumentFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format",
        "-f",
        help="output format: json or yaml (schema: json by default; import-hf: yaml)",
        show_default=False,
    ),
]


def _document_format(value: str | None, default: str) -> str:
    chosen = default if value is None else value
    if chosen not in ("json", "yaml"):
        raise KvplanError(f"--format: unknown format {chosen!r} (allowed: json, yaml)")
    return chosen


def schema(
    kind: Annotated[str, typer.Argument(help="models or skus", show_default=False)],
    fmt: DocumentFormatOpt = None,
) -> None:
    """Print the JSON Schema of catalogue files, for editor validation of your own YAML."""
    with user_errors():
        from kvplan.report.catalog_report import schema_text
        from kvplan.specs import ModelSpec, SkuSpec

        types = {"models": ModelSpec, "model": ModelSpec, "skus": SkuSpec, "sku": SkuSpec}
        output = _document_format(fmt, "json")
        if kind not in types:
            raise KvplanError(f"schema: unknown kind {kind!r} (allowed: models, skus)")
        sys.stdout.write(schema_text(types[kind].model_json_schema(), output))


def import_hf_command(
    config: Annotated[
        str,
        typer.Argument(
            help="config.json, a folder holding it, or a Hugging Face id org/name[@revision] "
            "(its config.json read through your HF cache)",
            show_default=False,
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="write the catalogue YAML here (default: stdout)"),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(parser=name_parser, help="catalogue name (default: from the config)"),
    ] = None,
    fmt: DocumentFormatOpt = None,
) -> None:
    """Turn a Hugging Face config.json (local or on the Hub) into a catalogue YAML entry (or
    its JSON)."""
    with user_errors():
        from kvplan.catalog.resolve import import_model
        from kvplan.report.catalog_report import spec_json, spec_yaml

        output_format = _document_format(fmt, "yaml")
        if output is not None:
            from kvplan.files import output_target, write_atomically

            output_target(output, "--output")
        spec, readings = import_model(config, name=name)
        for line in [*readings, *_shipped_alias_notes(spec)]:
            warn(line)
        text = (spec_json if output_format == "json" else spec_yaml)(spec)
        if output is None:
            sys.stdout.write(text)
            return
        write_atomically(output, text, "--output")
        sys.stderr.write(f"wrote {output}\n")


def _shipped_alias_notes(spec: ModelSpec) -> list[str]:
    """A line for each alias of `spec` that already names a shipped model: in a catalogue
    folder the user's entry takes it over, which they should hear of once, here."""
    from kvplan.catalog import Catalog

    shipped = Catalog(())
    notes = []
    for alias in spec.aliases:
        try:
            owner = shipped.model(alias).name
        except KvplanError:
            continue
        if owner != spec.name:
            notes.append(
                f"{alias!r} is also an alias of the shipped model {owner!r}; in a --catalog "
                f"folder this entry takes it over, so {alias!r} then means {spec.name!r}"
            )
    return notes
