"""The `explain` command: an engine's startup log read back, number for number."""

from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli.common import _catalog, _format, user_errors
from kvplan.cli.options import (
    CatalogOpt,
    FormatOpt,
    KvDtypeOpt,
    WeightDtypeOpt,
    degree_option,
    name,
)
from kvplan.errors import KvplanError, SettingError

LogArg = Annotated[
    str,
    typer.Argument(
        metavar="LOGFILE|-",
        help="a startup log of vLLM, SGLang, TensorRT-LLM, llama.cpp (llama-server, llama-cli) "
        "or ollama; '-' reads standard input",
    ),
]


_TRUE, _FALSE = ("1", "true", "on", "yes"), ("0", "false", "off", "no")


def _settings(pairs: list[str] | None) -> dict[str, object]:
    """--set NAME=VALUE pairs as engine settings by declared name or products-file key."""
    from kvplan.engine.settings import BY_KEY, BY_NAME

    values: dict[str, object] = {}
    for pair in pairs or ():
        key, _, value = pair.partition("=")
        setting = BY_NAME.get(key) or BY_KEY.get(key)
        if setting is None or setting.on_deployment:
            raise KvplanError(
                f"--set: {pair[:60]!r}: give NAME=VALUE with an engine setting name "
                "(utilization, block_size, max_num_seqs, ctx_size, …)"
            )
        if not value:
            raise KvplanError(f"--set {key}: an empty value; give {key}=VALUE")
        text: object = value
        if setting.type is bool:
            if value.lower() not in (*_TRUE, *_FALSE):
                raise KvplanError(f"--set {key}: {value[:40]!r} is not true or false")
            text = value.lower() in _TRUE
        try:
            values[setting.name] = setting.check(text)
        except SettingError as error:  # named as typed: --set NAME, not the setting's flag
            raise KvplanError(f"--set {key}: {error.problem}") from None
    return values


def explain(
    logfile: LogArg,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            parser=name,
            help="the model, when the log does not name one kvplan's catalogue knows",
        ),
    ] = None,
    sku: Annotated[
        str | None,
        typer.Option("--sku", "-s", parser=name, help="the GPU, when the log does not name it"),
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine",
            "-e",
            parser=name,
            help="the engine, when the log's lines do "
            "not say (vllm, sglang, trtllm, llama.cpp, ollama)",
        ),
    ] = None,
    engine_version: Annotated[
        str | None,
        typer.Option("--engine-version", help="the release, when the log does not print it"),
    ] = None,
    tp: Annotated[
        int | None,
        degree_option("--tp", "TP degree, when the log does not state it"),
    ] = None,
    pp: Annotated[
        int | None,
        degree_option("--pp", "PP degree, when the log does not state it"),
    ] = None,
    kv_dtype: KvDtypeOpt = None,
    weight_dtype: WeightDtypeOpt = None,
    context: Annotated[
        str | None,
        typer.Option(
            "--context",
            "-c",
            help="tokens per request (vLLM max_model_len), when "
            "the log does not state it (8k, 32k)",
        ),
    ] = None,
    setting: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="NAME=VALUE",
            help="an engine setting the log does not "
            "state (repeatable): max_num_batched_tokens=8192, draft_layers=1, …",
        ),
    ] = None,
    target: Annotated[
        str | None,
        typer.Option(
            "--target",
            metavar="LxN",
            help="also the smallest change of settings that "
            "serves N requests of L tokens: 32k×16 or 32kx16",
        ),
    ] = None,
    fmt: FormatOpt = "table",
    catalog_dirs: CatalogOpt = None,
) -> None:
    """Read an engine's startup log and reproduce each number it prints, term by term."""
    with user_errors():
        from kvplan.explain import Given, explain_log
        from kvplan.explain.source import log_lines
        from kvplan.explain.target import parse_target
        from kvplan.report.explain_report import render_explain
        from kvplan.units import parse_tokens

        output = _format(fmt)
        wanted = parse_target(target) if target is not None else None
        given = Given(
            model=model,
            sku=sku,
            version=engine_version,
            tp=tp,
            pp=pp,
            kv_dtype=kv_dtype,
            weight_dtype=weight_dtype,
            context_tokens=parse_tokens(context, "--context") if context else None,
            settings=_settings(setting),
        )
        lines = log_lines(logfile)
        report = explain_log(lines, given, _catalog(catalog_dirs), engine, wanted)
        render_explain(report, output)
