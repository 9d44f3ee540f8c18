"""The `kvplan` command line: parse, call, render, exit code (0 ok, 1 check failed, 2 bad input)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from kvplan.errors import KvplanError
from kvplan.report.render import FORMATS, Format

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Exact KV-cache sizing, per-GPU capacity and on-device verification for LLM serving.",
    context_settings={"help_option_names": ["-h", "--help"]},
)


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


# --- shared options -------------------------------------------------------------------

ModelArg = Annotated[
    str,
    typer.Argument(
        help="catalogue name or alias (see `kvplan models`), or a Hugging Face config.json "
        "or a folder holding one",
        show_default=False,
    ),
]
ContextOpt = Annotated[
    str,
    typer.Option(
        "--context",
        "-c",
        help="tokens per sequence; accepts 8k, 128k, 1M (k = 1024, so 128k = 131,072)",
    ),
]
BatchOpt = Annotated[int, typer.Option("--batch", "-b", help="concurrent sequences")]
LengthsOpt = Annotated[
    str | None,
    typer.Option(
        help="a ragged batch instead of --batch × --context: comma-separated lengths, "
        "e.g. 1k,4k,32k (overrides --context and --batch)",
    ),
]
KvDtypeOpt = Annotated[
    str,
    typer.Option(
        "--kv-dtype",
        help="KV element type: fp32, bf16, fp16, fp8 (= fp8_e4m3), fp8_e5m2, int8, int4, "
        "nvfp4, mxfp4 (quantisation scales counted)",
    ),
]
WeightDtypeOpt = Annotated[
    str | None,
    typer.Option(
        "--weight-dtype",
        help="weight type: bf16, fp16, fp32, fp8, fp8_block, int8, int4 (group 128), nvfp4, "
        "mxfp4; default: the model's released dtype",
        show_default=False,
    ),
]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        "-e",
        help="KV accounting: exact (physics), vllm (16-token blocks, MLA 64), sglang "
        "(token pool), hf (transformers caches), naive (textbook MHA)",
    ),
]
TpOpt = Annotated[int, typer.Option("--tp", help="tensor-parallel degree (GPUs per stage)")]
PpOpt = Annotated[int, typer.Option("--pp", help="pipeline-parallel degree (stages)")]
BlockSizeOpt = Annotated[
    int | None,
    typer.Option(
        "--block-size",
        help="tokens per KV block for paged engines; default 16 (MLA: 64)",
        show_default=False,
    ),
]
SkuOpt = Annotated[
    str | None,
    typer.Option("--sku", "-s", help="GPU SKU to fit on (see `kvplan skus`)", show_default=False),
]
FormatOpt = Annotated[
    str, typer.Option("--format", "-f", help=f"output format: {', '.join(FORMATS)}")
]
CatalogOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--catalog",
        help="extra folder of model/SKU YAML (repeatable; also $KVPLAN_CATALOG)",
        show_default=False,
    ),
]


def _format(value: str) -> Format:
    if value not in FORMATS:
        raise KvplanError(f"--format: unknown format {value!r} (allowed: {', '.join(FORMATS)})")
    return value  # type: ignore[return-value]


def _catalog(dirs: list[Path] | None):
    from kvplan.catalog import Catalog

    return Catalog(tuple(dirs or ()))


def _lengths(context: str, batch: int, lengths: str | None) -> list[int]:
    from kvplan.units import parse_tokens

    if lengths:
        return [parse_tokens(part, "--lengths") for part in lengths.split(",") if part.strip()]
    if batch < 1:
        raise KvplanError(f"--batch: {batch} must be at least 1 sequence")
    return [parse_tokens(context, "--context")] * batch


def _model(catalog, name: str):
    """A catalogue model, or an imported HF config (path); warnings printed."""
    path = Path(name)
    if path.suffix == ".json" or path.is_dir() or path.exists():
        from kvplan.catalog.hf import import_hf

        imported = import_hf(path)
        for line in imported.warnings:
            warn(line)
        return imported.spec, imported.weights_bytes
    return catalog.model(name), None


# --- commands ---------------------------------------------------------------------------


@app.command()
def size(
    model: ModelArg,
    context: ContextOpt = "8k",
    batch: BatchOpt = 1,
    lengths: LengthsOpt = None,
    kv_dtype: KvDtypeOpt = "bf16",
    weight_dtype: WeightDtypeOpt = None,
    engine: EngineOpt = "exact",
    tp: TpOpt = 1,
    pp: PpOpt = 1,
    block_size: BlockSizeOpt = None,
    sku: SkuOpt = None,
    fmt: FormatOpt = "table",
    explain: Annotated[
        bool, typer.Option("--explain", help="print the formula with the model's numbers")
    ] = False,
    catalog_dirs: CatalogOpt = None,
) -> None:
    """KV bytes per token, per request and per batch; weights; fit on a GPU SKU."""
    with user_errors():
        from kvplan.plan.engines import EngineOptions
        from kvplan.plan.engines import engine as engine_profile
        from kvplan.plan.sizing import Deployment
        from kvplan.plan.sizing import size as size_plan
        from kvplan.report.size_report import render_size
        from kvplan.specs import kv_dtype_info

        output = _format(fmt)
        if block_size is not None and block_size < 1:
            raise KvplanError(f"--block-size: {block_size} must be at least 1 token")
        catalog = _catalog(catalog_dirs)
        spec, exact_weights = _model(catalog, model)
        deployment = Deployment(
            model=spec,
            engine=engine_profile(engine),
            kv_dtype=kv_dtype_info(kv_dtype).name,
            weight_dtype=weight_dtype,
            tp=tp,
            pp=pp,
            options=EngineOptions(tokens_per_block=block_size),
            exact_weights_bytes=exact_weights if weight_dtype is None else None,
        )
        target = catalog.sku(sku) if sku else None
        result = size_plan(deployment, _lengths(context, batch, lengths), target)
        render_size(result, output, explain)


@app.command()
def models(fmt: FormatOpt = "table", catalog_dirs: CatalogOpt = None) -> None:
    """List the catalogue's models with their KV geometry and bytes per token."""
    with user_errors():
        from kvplan.report.catalog_report import render_models

        render_models(_catalog(catalog_dirs).models(), _format(fmt))


@app.command()
def skus(fmt: FormatOpt = "table", catalog_dirs: CatalogOpt = None) -> None:
    """List the catalogue's GPU SKUs: memory, bandwidth, dense peak FLOP/s."""
    with user_errors():
        from kvplan.report.catalog_report import render_skus

        render_skus(_catalog(catalog_dirs).skus(), _format(fmt))


@app.command()
def show(
    name: Annotated[str, typer.Argument(help="a model or SKU name or alias", show_default=False)],
    fmt: FormatOpt = "table",
    catalog_dirs: CatalogOpt = None,
) -> None:
    """Show one catalogue entry (model or SKU) with its source and derived numbers."""
    with user_errors():
        from kvplan.report.catalog_report import render_entry

        catalog = _catalog(catalog_dirs)
        try:
            entry = catalog.model(name)
        except KvplanError as model_error:
            try:
                entry = catalog.sku(name)
            except KvplanError:
                raise model_error from None
        render_entry(entry, _format(fmt))


@app.command()
def schema(
    kind: Annotated[str, typer.Argument(help="models or skus", show_default=False)],
) -> None:
    """Print the JSON Schema of catalogue files, for editor validation of your own YAML."""
    with user_errors():
        import json

        from kvplan.specs import ModelSpec, SkuSpec

        types = {"models": ModelSpec, "model": ModelSpec, "skus": SkuSpec, "sku": SkuSpec}
        if kind not in types:
            raise KvplanError(f"schema: unknown kind {kind!r} (allowed: models, skus)")
        sys.stdout.write(json.dumps(types[kind].model_json_schema(), indent=2) + "\n")


RepeatOpt = list[str] | None


@app.command()
def report(
    model: Annotated[
        RepeatOpt,
        typer.Option(
            "--model", "-m", help="model name (repeatable), or 'all' for the whole catalogue"
        ),
    ] = None,
    sku: Annotated[
        RepeatOpt,
        typer.Option(
            "--sku", "-s", help="SKU name or family such as h100 (repeatable); default: every SKU"
        ),
    ] = None,
    tp: Annotated[
        list[int] | None,
        typer.Option("--tp", help="TP degrees (repeatable); default 1, 2, 4, 8 that fit the node"),
    ] = None,
    pp: PpOpt = 1,
    batch: Annotated[
        int, typer.Option("--batch", "-b", help="sequences for the longest-context column")
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
            help="fraction of GPU memory the engine may use (vLLM gpu_memory_utilization, "
            "default 0.9, 0.92 from 0.20; SGLang mem_fraction_static, default by TP; exact 1.0)",
            show_default=False,
        ),
    ] = None,
    kv_memory: Annotated[
        str | None,
        typer.Option(
            help="fixed KV budget per GPU, like vLLM --kv-cache-memory (e.g. 51.38GiB)",
            show_default=False,
        ),
    ] = None,
    vllm_version: Annotated[
        str, typer.Option(help="vLLM version whose accounting and log wording to follow (0.6–0.33)")
    ] = "0.11",
    max_num_batched_tokens: Annotated[
        int | None,
        typer.Option(
            help="vLLM max_num_batched_tokens (default 8192 on ≥70 GiB non-A100 GPUs, else 2048)",
            show_default=False,
        ),
    ] = None,
    max_num_seqs: Annotated[
        int | None,
        typer.Option(help="vLLM max_num_seqs (default 1024 / 256 as above)", show_default=False),
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
        typer.Option(help="speculative-decoding draft layers that share the KV cache (EAGLE: 1)"),
    ] = 0,
    bandwidth_efficiency: Annotated[
        float, typer.Option(help="fraction of datasheet bandwidth decode reaches (roofline)")
    ] = 0.85,
    compute_efficiency: Annotated[
        float, typer.Option(help="fraction of dense peak FLOP/s prefill reaches (roofline)")
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
        if draft_layers < 0:
            raise KvplanError(f"--draft-layers: {draft_layers} must not be negative")
        catalog = _catalog(catalog_dirs)
        specs = catalog.models() if model == ["all"] else [_model(catalog, m)[0] for m in model]
        skus_list = (
            catalog.skus() if not sku else [s for name in sku for s in catalog.skus_matching(name)]
        )
        profile = engine_profile(engine)
        dtype = kv_dtype_info(kv_dtype).name
        deployments = [
            Deployment(
                m, profile, dtype, weight_dtype, 1, pp, EngineOptions(tokens_per_block=block_size)
            )
            for m in specs
        ]

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


@app.command()
def check(
    file: Annotated[
        Path,
        typer.Argument(
            help="deployment YAML listing products: model, sku, tp/pp, engine, kv_dtype, "
            "context (tokens; 8k, 128k) and concurrency or requests_per_s + duration_s",
            show_default=False,
        ),
    ],
    fmt: FormatOpt = "table",
    catalog_dirs: CatalogOpt = None,
) -> None:
    """Check each product's promised context × concurrency against its SKU (exit 1 if over)."""
    with user_errors():
        from kvplan.catalog.deployments import load_deployments
        from kvplan.plan.guardrail import DeploymentFile, check_products
        from kvplan.report.check_report import render_check

        output = _format(fmt)
        loaded = load_deployments(file, DeploymentFile, _catalog(catalog_dirs))
        result = check_products(loaded)
        render_check(result, output)
    # A failed promise is a result, not an error: rendered above, then exit 1 (STYLE).
    if not result.ok:
        raise typer.Exit(1)


@app.command()
def claim(
    model: ModelArg,
    sku: Annotated[
        str, typer.Option("--sku", "-s", help="GPU SKU the claim is made for (see `kvplan skus`)")
    ],
    context: ContextOpt = "128k",
    batch: BatchOpt = 1,
    kv_dtype: KvDtypeOpt = "bf16",
    weight_dtype: WeightDtypeOpt = None,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            "-e",
            help="exact (physics, no reserve), vllm or sglang (add the engine's reserve: "
            "activations, non-torch memory, the unused utilization share), hf or naive",
        ),
    ] = "exact",
    tp: TpOpt = 1,
    pp: PpOpt = 1,
    fmt: FormatOpt = "table",
    catalog_dirs: CatalogOpt = None,
) -> None:
    """The bytes behind a "long context" claim: KV, weights and total per GPU; does it fit."""
    with user_errors():
        from kvplan.plan.engines import engine as engine_profile
        from kvplan.plan.guardrail import claim_sheet
        from kvplan.plan.sizing import Deployment
        from kvplan.report.claim_report import render_claim
        from kvplan.specs import kv_dtype_info
        from kvplan.units import parse_tokens

        output = _format(fmt)
        catalog = _catalog(catalog_dirs)
        spec, exact_weights = _model(catalog, model)
        deployment = Deployment(
            model=spec,
            engine=engine_profile(engine),
            kv_dtype=kv_dtype_info(kv_dtype).name,
            weight_dtype=weight_dtype,
            tp=tp,
            pp=pp,
            exact_weights_bytes=exact_weights if weight_dtype is None else None,
        )
        sheet = claim_sheet(deployment, catalog.sku(sku), parse_tokens(context, "--context"), batch)
        render_claim(sheet, output)


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


@app.command()
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
        spec, _ = _model(catalog, model)
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
                lengths=_lengths(context or default_context, batch, lengths),
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


@app.command("import-hf")
def import_hf_command(
    config: Annotated[
        Path, typer.Argument(help="config.json or a folder holding it", show_default=False)
    ],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="write the catalogue YAML here (default: stdout)"),
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="catalogue name (default: from the config)")
    ] = None,
) -> None:
    """Turn a Hugging Face config.json into a catalogue YAML entry."""
    with user_errors():
        from kvplan.catalog.hf import import_hf
        from kvplan.report.catalog_report import spec_yaml

        imported = import_hf(config, name=name)
        for line in imported.warnings:
            warn(line)
        text = spec_yaml(imported.spec)
        if output is None:
            sys.stdout.write(text)
            return
        _write_atomically(output, text)
        sys.stderr.write(f"wrote {output}\n")


def _write_atomically(path: Path, text: str) -> None:
    """Write to a temporary name beside `path`, then rename: never a half-written file."""
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(path)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise KvplanError(f"{path}: cannot write: {error.strerror}") from None


def main() -> None:
    """Console-script entry point."""
    # pydantic scans every installed distribution's entry points for plugins when the first
    # model class is built (~0.1 s with torch installed); kvplan uses none, and `size` must
    # start in a few hundred milliseconds. A user's explicit setting still wins.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    app()


if __name__ == "__main__":
    main()
