"""The `report` command: per-SKU capacity across models, SKUs and TP degrees."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kvplan import limits
from kvplan.cli.common import _catalog, _deployment, _format, user_errors
from kvplan.cli.options import (
    BlockSizeOpt,
    CatalogOpt,
    FormatOpt,
    KvDtypeOpt,
    PpOpt,
    WeightDtypeOpt,
    count,
    fraction,
    name,
    version,
)
from kvplan.errors import KvplanError

RepeatOpt = list[str] | None


def report(
    model: Annotated[
        RepeatOpt,
        typer.Option(
            "--model",
            "-m",
            parser=name,
            help="model name (repeatable), or 'all' for the whole catalogue",
        ),
    ] = None,
    sku: Annotated[
        RepeatOpt,
        typer.Option(
            "--sku",
            "-s",
            parser=name,
            help="SKU name or family such as h100 (repeatable); default: every SKU",
        ),
    ] = None,
    tp: Annotated[
        list[int] | None,
        typer.Option(
            "--tp",
            parser=count(limits.GPUS),
            metavar="N",
            help="TP degrees (repeatable); default 1, 2, 4, 8 that fit the node",
        ),
    ] = None,
    pp: PpOpt = 1,
    batch: Annotated[
        int,
        typer.Option(
            "--batch",
            "-b",
            parser=count(limits.BATCH),
            metavar="N",
            help="sequences for the longest-context column",
        ),
    ] = 1,
    context: Annotated[
        str | None,
        typer.Option(
            "--context",
            "-c",
            help="tokens per request for the concurrency column (8k, 128k); "
            "default: each model's native limit; vLLM's max_model_len",
        ),
    ] = None,
    kv_dtype: KvDtypeOpt = "bf16",
    weight_dtype: WeightDtypeOpt = None,
    engine: Annotated[
        str, typer.Option("--engine", "-e", help="vllm (default), sglang, exact, hf or naive")
    ] = "vllm",
    utilization: Annotated[
        float | None,
        typer.Option(
            parser=fraction(),
            metavar="FRACTION",
            help="fraction of GPU memory the engine may use (vLLM gpu_memory_utilization, "
            "default 0.9, 0.92 from 0.20; SGLang mem_fraction_static, default by TP; exact 1.0)",
            show_default=False,
        ),
    ] = None,
    kv_memory: Annotated[
        str | None,
        typer.Option(
            help="fixed KV budget per GPU, like vLLM --kv-cache-memory (e.g. 51.38GiB; "
            "a fraction of a byte is rounded down)",
            show_default=False,
        ),
    ] = None,
    vllm_version: Annotated[
        str,
        typer.Option(
            parser=version,
            help="vLLM version whose accounting and log wording to follow (0.6–0.33)",
        ),
    ] = "0.11",
    max_num_batched_tokens: Annotated[
        int | None,
        typer.Option(
            parser=count(limits.BATCHED_TOKENS),
            metavar="TOKENS",
            help="vLLM max_num_batched_tokens (default 8192 on ≥70 GiB non-A100 GPUs, else 2048)",
            show_default=False,
        ),
    ] = None,
    max_num_seqs: Annotated[
        int | None,
        typer.Option(
            parser=count(limits.BATCH),
            metavar="N",
            help="vLLM max_num_seqs (default 1024 / 256 as above)",
            show_default=False,
        ),
    ] = None,
    activation_memory: Annotated[
        str | None,
        typer.Option(
            help="override vLLM's activation peak estimate (bytes or GiB)", show_default=False
        ),
    ] = None,
    non_torch_memory: Annotated[
        str | None,
        typer.Option(help="override the non-torch overhead (default 0.13 GiB)", show_default=False),
    ] = None,
    cudagraph_memory: Annotated[
        str | None,
        typer.Option(
            help="CUDA-graph memory vLLM ≥ 0.20 subtracts (default 0)", show_default=False
        ),
    ] = None,
    block_size: BlockSizeOpt = None,
    no_hybrid_allocator: Annotated[
        bool,
        typer.Option(
            "--no-hybrid-allocator",
            help="windowed layers reserve full length (vLLM --disable-hybrid-kv-cache-manager)",
        ),
    ] = False,
    draft_layers: Annotated[
        int,
        typer.Option(
            parser=count(limits.LAYERS, minimum=0),
            metavar="N",
            help="speculative-decoding draft layers that share the KV cache (EAGLE: 1)",
        ),
    ] = 0,
    bandwidth_efficiency: Annotated[
        float,
        typer.Option(
            parser=fraction(),
            metavar="FRACTION",
            help="fraction of datasheet bandwidth decode reaches (roofline)",
        ),
    ] = 0.85,
    compute_efficiency: Annotated[
        float,
        typer.Option(
            parser=fraction(),
            metavar="FRACTION",
            help="fraction of dense peak FLOP/s prefill reaches (roofline)",
        ),
    ] = 0.5,
    sort: Annotated[
        str | None,
        typer.Option(
            help="sort rows by: model, sku, tp, max_context_tokens, max_concurrency, "
            "kv_capacity_tokens, decode_tokens_per_s, kv_budget_bytes_per_gpu",
            show_default=False,
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            help="also draw the report to FILE.svg or FILE.png (needs kvplan[plot])",
            show_default=False,
        ),
    ] = None,
    fmt: FormatOpt = "table",
    catalog_dirs: CatalogOpt = None,
) -> None:
    """Per-SKU capacity: KV budget, longest context, highest concurrency, decode tokens/s."""
    with user_errors():
        from kvplan.perf import Efficiency
        from kvplan.plan.budget import MemoryOverrides
        from kvplan.plan.capacity import CapacityRequest, capacity_grid
        from kvplan.plan.engines import EngineOptions
        from kvplan.plan.engines import engine as engine_profile
        from kvplan.plan.sizing import Deployment
        from kvplan.plan.vllm import parse_version
        from kvplan.report.capacity_report import SORT_KEYS, capacity_record, render_report
        from kvplan.specs import kv_dtype_info
        from kvplan.units import parse_bytes, parse_tokens

        output = _format(fmt)
        if plot is not None:
            from kvplan.report.plot import ensure_plot_possible

            ensure_plot_possible(plot)  # fail before printing: exit 2 means empty stdout
        if not model:
            raise KvplanError("--model: give at least one model (repeatable), or --model all")
        if sort is not None and sort not in SORT_KEYS:
            raise KvplanError(f"--sort: unknown column {sort!r} (allowed: {', '.join(SORT_KEYS)})")
        catalog = _catalog(catalog_dirs)
        skus_list = (
            catalog.skus() if not sku else [s for name in sku for s in catalog.skus_matching(name)]
        )
        if model == ["all"]:
            deployments = [
                Deployment(
                    m,
                    engine_profile(engine),
                    kv_dtype_info(kv_dtype).name,
                    weight_dtype,
                    1,
                    pp,
                    EngineOptions(tokens_per_block=block_size),
                )
                for m in catalog.models()
            ]
        else:
            deployments = [
                _deployment(
                    catalog,
                    m,
                    engine=engine,
                    kv_dtype=kv_dtype,
                    weight_dtype=weight_dtype,
                    tp=1,
                    pp=pp,
                    tokens_per_block=block_size,
                )
                for m in model
            ]
        profile = deployments[0].engine

        def size_or_none(text: str | None, what: str) -> int | None:
            return parse_bytes(text, what) if text is not None else None

        request = CapacityRequest(
            batch=batch,
            context_tokens=parse_tokens(context, "--context") if context else None,
            overrides=MemoryOverrides(
                utilization=utilization,
                kv_memory_bytes=size_or_none(kv_memory, "--kv-memory"),
                activation_bytes=size_or_none(activation_memory, "--activation-memory"),
                non_torch_bytes=size_or_none(non_torch_memory, "--non-torch-memory"),
                cudagraph_bytes=size_or_none(cudagraph_memory, "--cudagraph-memory"),
                max_num_batched_tokens=max_num_batched_tokens,
                max_num_seqs=max_num_seqs,
            ),
            vllm_version=parse_version(vllm_version),
            hybrid_allocator=False if no_hybrid_allocator else None,
            draft_layers=draft_layers,
            efficiency=Efficiency(bandwidth_efficiency, compute_efficiency),
        )
        rows = capacity_grid(deployments, skus_list, request, tuple(tp) if tp else None)
        if not rows:
            raise KvplanError(
                "no (model, SKU, TP) combination to report; check --tp against the SKUs' node size"
            )
        if sort is not None:
            rows.sort(
                key=lambda r: _sort_key(capacity_record(r)[sort]),
                reverse=sort not in ("model", "sku", "tp"),
            )
        render_report(rows, output, log_lines=profile.name == "vllm" and len(rows) <= 4)
        if plot is not None:
            from kvplan.report.plot import plot_report

            plot_report(rows, plot)
            sys.stderr.write(f"wrote {plot}\n")


def _sort_key(value: object) -> tuple[int, object]:
    return (0, value) if value is not None else (1, 0)
