"""The `recommend` command: from a target to the cheapest deployment and its launch command."""

from __future__ import annotations

import re
from typing import Annotated

import typer

import kvplan.limits as limits
from kvplan.cli.common import _catalog, _columns, _deployment_of, _format, _model, user_errors
from kvplan.cli.engine_options import EngineOptions, engine_options
from kvplan.cli.options import (
    CatalogOpt,
    ColumnsOpt,
    FormatOpt,
    ModelArg,
    RopeScalingOpt,
    count,
    degree_option,
)
from kvplan.cli.options import name as name_parser
from kvplan.cli.simulate_options import (
    SERVING_PARAMETERS,
    WORKLOAD_PARAMETERS,
    ServingOptions,
    WorkloadOptions,
    recommend_workload_options,
    serving_options,
)
from kvplan.errors import KvplanError
from kvplan.units import parse_decimal

# The price itself is read by kvplan.units.parse_decimal: ASCII digits, a stated range.
_PRICE = re.compile(r"\s*(?P<sku>[^=]+?)\s*=\s*(?P<price>[^/]*?)\s*/\s*h\s*", re.I)


@engine_options
@serving_options
@recommend_workload_options
def recommend(
    ctx: typer.Context,
    model: ModelArg,
    context: Annotated[
        str | None,
        typer.Option(
            "--context",
            "-c",
            help="tokens per request, the max_model_len to serve; accepts 8k, 128k, 1M "
            "(k = 1024); default: the model's context limit (native, or with --rope-scaling)",
            show_default=False,
        ),
    ] = None,
    concurrency: Annotated[
        int,
        typer.Option(
            "--concurrency",
            "-n",
            parser=count(limits.BATCH),
            metavar="N",
            help="requests of --context tokens held at once; with --slo-ttft/--slo-tpot, a "
            "closed loop of N clients instead (as in `kvplan simulate --concurrency`), and "
            "with --rate or --trace at most N requests in flight",
        ),
    ] = 1,
    sku: Annotated[
        list[str] | None,
        typer.Option(
            "--sku",
            "-s",
            help="SKUs to search: a name, a family such as h100, or a comma-separated list "
            "(repeatable); default: every SKU in the catalogue",
            show_default=False,
        ),
    ] = None,
    max_gpus: Annotated[
        int,
        typer.Option(
            "--max-gpus",
            parser=count(limits.GPUS),
            metavar="N",
            help="most GPUs one deployment may use (tp × pp × dp); GPU counts tried: 1, 2, 4, "
            "… up to a node, then whole nodes",
        ),
    ] = 64,
    kv_dtypes: Annotated[
        list[str] | None,
        typer.Option(
            "--kv-dtype",
            parser=name_parser,
            help="KV dtypes allowed (repeatable); default: 16-bit, plus fp8 on GPUs with fp8 "
            "tensor cores",
            show_default=False,
        ),
    ] = None,
    weight_dtypes: Annotated[
        list[str] | None,
        typer.Option(
            "--weight-dtype",
            parser=name_parser,
            help="weight dtypes allowed (repeatable), in place of what the engine offers: "
            "bf16, fp8, int4, … or a GGUF file type (Q8_0, Q6_K, Q5_K_M, Q4_K_M, IQ4_XS, "
            "…; llama.cpp and ollama try those five by default)",
            show_default=False,
        ),
    ] = None,
    no_quantization: Annotated[
        bool,
        typer.Option(
            "--no-quantization",
            help="only the released weights (default also tries fp8 weights quantised at load, "
            "vLLM/SGLang `--quantization fp8`, on GPUs with fp8 tensor cores, and for llama.cpp "
            "and ollama the GGUF file types Q8_0, Q6_K, Q5_K_M, Q4_K_M and IQ4_XS)",
        ),
    ] = False,
    tp: Annotated[
        int | None,
        degree_option("--tp", "fix the tensor-parallel degree (default: searched)"),
    ] = None,
    pp: Annotated[
        int | None,
        degree_option("--pp", "fix the pipeline-parallel degree (default: searched)"),
    ] = None,
    headroom: Annotated[
        str,
        typer.Option(
            "--headroom",
            help="share of each GPU's KV budget kept unused for bursts and fragmentation: "
            "10% or 0.1",
        ),
    ] = "10%",
    price: Annotated[
        list[str] | None,
        typer.Option(
            "--price",
            help="price of one GPU-hour, SKU=PRICE/h (repeatable; a family sets all its SKUs), "
            "e.g. h100-sxm=2.5/h; overrides price_per_hour in SKU files; kvplan ships none",
            show_default=False,
        ),
    ] = None,
    rank: Annotated[
        str | None,
        typer.Option(
            "--rank",
            help="what cheapest means: gpus (GPU count) or price (GPUs × price per GPU-hour); "
            "default: price when --price is given, else gpus",
            show_default=False,
        ),
    ] = None,
    top: Annotated[
        int,
        typer.Option(
            "--top",
            parser=count(limits.LISTED, minimum=0),
            help="how many distinct deployments to list",
        ),
    ] = 5,
    slo_attainment: Annotated[
        str,
        typer.Option(
            "--slo-attainment",
            help="with --rate or --trace: share of the workload's requests that must meet "
            "every SLO (--slo-ttft, --slo-tpot); rejected requests count as misses: 90% or 0.9",
        ),
    ] = "90%",
    pareto: Annotated[
        bool,
        typer.Option(
            "--pareto",
            help="instead of the cheapest: the frontier of output tokens/s per GPU against "
            "tokens/s per user over tp, batch, KV and weight dtypes, for requests of "
            "--prompt-tokens and --output-tokens (token counts, both needed), with KV bytes "
            "per token and requests held beside each point; --context is the max_model_len "
            "(default prompt + output)",
        ),
    ] = False,
    rope_scaling: RopeScalingOpt = None,
    columns: ColumnsOpt = None,
    fmt: FormatOpt = "table",
    catalog_dirs: CatalogOpt = None,
    *,
    workload_options: WorkloadOptions,
    serving_options: ServingOptions,
    engine_options: EngineOptions,
) -> None:
    """The cheapest deployment that holds --concurrency requests of --context tokens, and how
    to start it (exit 1 when nothing in the searched space does).

    Searches SKUs, GPUs per instance (tp, pp; dp with expert parallelism for MoE models), KV
    and weight dtypes, block size, max_num_seqs and the memory fraction; an engine option
    you set (--utilization 0.9, --block-size, --max-num-seqs, --dp, --ep, ...) is fixed, one
    you leave unset is searched. Every candidate is sized by the same engine model as
    `kvplan report`. Ranks by cost, then fewer quantised parts, fewer nodes and stages, more
    KV, a lower memory fraction. Prints the launch command and the startup log lines to
    expect.

    With --rate, --trace, --offline or --concurrency and --slo-ttft/--slo-tpot the target is
    throughput instead: each candidate (dense models also as dp replicas behind a router) serves
    the workload in `kvplan simulate`, and it meets the target when --slo-attainment of the
    requests meet every SLO. Points whose KV cannot hold one --context request, or whose
    quickest decode step is slower than --slo-tpot, are ruled out without a simulation; the
    workload and serving options are `kvplan simulate`'s.
    """
    with user_errors():
        from kvplan.api import recommend as recommend_report
        from kvplan.cli.flags import with_flags
        from kvplan.report.recommend_report import render_recommendation

        output = _format(fmt)
        catalog = _catalog(catalog_dirs)
        base = _deployment_of(
            _model(catalog, model, rope_scaling), engine_options, None, None, tp or 1, pp or 1
        )
        space = {
            "context": context,
            "skus": _sku_names(sku) if sku else None,
            "max_gpus": max_gpus,
            "kv_dtypes": kv_dtypes,
            "quantization": not no_quantization,
            "weight_dtypes": weight_dtypes,
            "tp": tp,
            "pp": pp,
            "catalog": catalog,
        }
        if pareto:
            from kvplan.cli.recommend_pareto import pareto_frontier

            given = [name for name in ctx.params if _given(ctx, name)]
            pareto_frontier(
                given, base, workload_options, serving_options, output, _columns(columns), **space
            )
            return
        throughput = _throughput_options(ctx, workload_options, serving_options)
        if throughput and _given(ctx, "concurrency"):  # the closed loop's clients
            workload_options = WorkloadOptions(
                {**workload_options.values, "concurrency": concurrency}
            )
        result = recommend_report(
            base,
            concurrency=1 if throughput else concurrency,
            dp=base.dp if _given(ctx, "dp") else None,
            ep=base.ep if _given(ctx, "ep") else None,
            headroom=headroom,
            prices=_prices(price or []),
            rank=rank,
            top=top,
            slo_attainment=slo_attainment,
            **space,
            **_simulation(throughput, workload_options, serving_options, context, base),
        )
        render_recommendation(with_flags(result), output, _columns(columns))
    if not result.meets:
        raise typer.Exit(1)


def _throughput_options(
    ctx: typer.Context, workload: WorkloadOptions, serving: ServingOptions
) -> bool:
    """Whether the target is throughput (--rate, --trace, --offline, or --concurrency with
    an SLO: a closed loop); refuses options that do not go with the target asked."""
    v = workload.values
    slo = _given(ctx, "slo_ttft") or _given(ctx, "slo_tpot")
    closed_loop = _given(ctx, "concurrency") and slo
    throughput = v["rate"] is not None or v["trace"] is not None or v["offline"] or closed_loop
    simulation = [*WORKLOAD_PARAMETERS, *SERVING_PARAMETERS, "slo_attainment"]
    given = [name for name in simulation if name != "concurrency" and _given(ctx, name)]
    if not throughput and given:
        raise KvplanError(
            f"{_flag(given[0])} needs a throughput target: give --rate, --trace, --offline, "
            "or --concurrency with --slo-ttft/--slo-tpot"
        )
    if v["offline"] and _given(ctx, "concurrency"):
        raise KvplanError(
            "give --offline or --concurrency, not both: offline sends every request at t = 0"
        )
    for name, instead in (("max_model_len", "--context"), ("instances", "the dp searched")):
        if _given(ctx, name):
            raise KvplanError(f"{_flag(name)}: recommend sets it from {instead}; drop it")
    return throughput


def _simulation(
    throughput: bool,
    workload: WorkloadOptions,
    serving: ServingOptions,
    context: str | None,
    base,
) -> dict:
    """The workload and per-SKU simulation configuration of a throughput target."""
    if not throughput:
        return {}
    from kvplan.cli.common import warn
    from kvplan.units import parse_tokens

    if context is not None:
        workload.check_fits(parse_tokens(context, "--context"))
    warned: set[str] = set()

    def config_of(sku):
        config, notes = serving.resolve(sku)
        for note in notes if sku.name not in warned else ():
            warn(note)
        warned.add(sku.name)
        return config

    return {"workload": workload.build(), "simulation": config_of}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether the user set option `name` (on the command line, not by its default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name != "DEFAULT"


def _sku_names(names: list[str]) -> list[str]:
    """--sku values: names, families and comma-separated lists, in order."""
    found = [part.strip() for text in names for part in text.split(",")]
    if not all(found):
        raise KvplanError(f"--sku: empty name in {names!r}")
    return found


def _prices(texts: list[str]) -> dict[str, float]:
    """SKU (or family) -> price of one GPU-hour, from SKU=PRICE/h."""
    prices: dict[str, float] = {}
    for text in texts:
        match = _PRICE.fullmatch(text)
        if match is None:
            raise KvplanError(
                f"--price: {text!r} is not SKU=PRICE/h (e.g. h100-sxm=2.5/h: 2.5 per GPU-hour)"
            )
        price = parse_decimal(
            match["price"],
            f"--price {match['sku']}",
            limits.PRICE,
            limits.MIN_PRICE,
            "write the price of one GPU-hour as a decimal, e.g. h100-sxm=2.5/h",
        )
        prices[match["sku"]] = float(price)
    return prices
