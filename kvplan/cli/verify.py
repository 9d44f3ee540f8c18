"""The `verify` command: allocate the predicted KV pool on a device, run, measure, compare."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

import kvplan.limits as limits
from kvplan.cli.common import _batch, _catalog, _format, _model, user_errors
from kvplan.cli.options import (
    BatchOpt,
    BlockSizeOpt,
    CatalogOpt,
    FormatOpt,
    KvDtypeOpt,
    LengthsOpt,
    ModelArg,
    count,
    file_path,
    fraction,
    name,
)
from kvplan.errors import KvplanError

if TYPE_CHECKING:
    from kvplan.engine.batch import Batch

CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
# verify allocates and runs every sequence: far above any engine's max_num_seqs (256 – 1024)
# and far below what would take minutes just to lay out block tables.
MAX_VERIFY_SEQUENCES = 65_536


def install_hint(
    root: Path | None = None,
    has_gpu_driver: bool | None = None,
    distribution: metadata.Distribution | None = None,
) -> str:
    """The command that installs the verify extra for the way kvplan is installed here.

    A checkout (editable install, or run from source) has pyproject.toml beside the kvplan
    package: `pip install 'kvplan[verify]'` would fetch another kvplan from an index there,
    so the hint installs the checkout's own extra. An install from a local folder or file
    records where it came from (PEP 610's direct_url.json); the hint installs the extra from
    there for the same reason. On a machine without an NVIDIA driver it first points at
    PyTorch's CPU-only wheels (no CUDA libraries to download).

    Args:
        root: the folder holding the kvplan package; default: where it was imported from.
        has_gpu_driver: whether nvidia-smi is on PATH; default: looked up.
        distribution: kvplan's installed metadata; default: looked up.
    """
    import shutil

    if root is None:
        import kvplan

        root = Path(kvplan.__file__).resolve().parents[1]
    if has_gpu_driver is None:
        has_gpu_driver = shutil.which("nvidia-smi") is not None
    pip = f"{sys.executable} -m pip install"
    if (root / "pyproject.toml").is_file():
        command = f"{pip} -e '{root}[verify]'"
    elif (local := _installed_from(distribution)) is not None:
        command = f"{pip} '{local}[verify]'"
    else:
        command = f"{pip} 'kvplan[verify]'"
    if not has_gpu_driver:
        command = f"{pip} torch --index-url {CPU_TORCH_INDEX} && {command}"
    return command


def _installed_from(distribution: metadata.Distribution | None) -> str | None:
    """The local folder or file kvplan was installed from, if pip recorded one (PEP 610)."""
    import json
    from urllib.parse import unquote, urlparse

    try:
        dist = distribution if distribution is not None else metadata.distribution("kvplan")
        text = dist.read_text("direct_url.json")
        url = json.loads(text)["url"] if text else ""
    except (metadata.PackageNotFoundError, ValueError, KeyError, TypeError):
        return None
    parsed = urlparse(url)
    return unquote(parsed.path) if parsed.scheme == "file" and parsed.path else None


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
            help="tokens per sequence; accepts 8k, 128k (k = 1024); default 8k on CUDA, 64 on "
            "CPU, the model's longest with --capacity",
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
            parser=name,
            help="KV accounting to verify: vllm (16-token blocks; MLA pages by GPU as `size` "
            "takes them: 64 on Hopper, 128 on Blackwell, 16 elsewhere, from --sku or the detected "
            "GPU, 64 when neither, said in the notes), sglang or exact (1-token pages)",
        ),
    ] = "vllm",
    tp: Annotated[
        int,
        typer.Option(
            "--tp",
            parser=count(limits.GPUS),
            help="tensor-parallel degree; this GPU holds one rank's share",
        ),
    ] = 1,
    block_size: BlockSizeOpt = None,
    sku: Annotated[
        str | None,
        typer.Option(
            "--sku",
            "-s",
            parser=name,
            help="SKU whose datasheet bandwidth to compare with and whose engine pages to "
            "plan (MLA), and with --capacity whose plan to prove; default: detected from the "
            "GPU's name (unknown GPU: comparison marked unknown)",
            show_default=False,
        ),
    ] = None,
    layers: Annotated[
        int | None,
        typer.Option(
            "--layers",
            parser=count(limits.LAYERS),
            help="verify this many layers (when the whole cache does not fit); whole-model "
            "figures are scaled by layers/verified and say so; default all on CUDA, 2 on CPU "
            "(--capacity: always all)",
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
            parser=fraction(),
            help="bandwidth passes when achieved ≥ this fraction (0–1) of the measured copy",
        ),
    ] = 0.8,
    repeats: Annotated[
        int | None,
        typer.Option(
            parser=count(limits.REPEATS),
            help="timed decode steps; default 50 on CUDA, 2 on CPU",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[
        int,
        typer.Option(
            parser=count(limits.SEED, minimum=0), help="seed of the page shuffle, q and KV contents"
        ),
    ] = 0,
    capacity: Annotated[
        bool,
        typer.Option(
            "--capacity",
            help="prove the planner's vLLM KV budget for --sku: hold the weights and "
            "activation estimate, allocate the predicted blocks, run the kernel over every "
            "block at --context (default: the model's longest), then find the largest block "
            "count that really allocates",
        ),
    ] = False,
    utilization: Annotated[
        float | None,
        typer.Option(
            parser=fraction(),
            help="with --capacity: vLLM gpu_memory_utilization, a fraction in (0, 1]; "
            "default vLLM's (0.9)",
            show_default=False,
        ),
    ] = None,
    profile: Annotated[
        Path | None,
        typer.Option(
            "--profile",
            help="instead: time the model's GEMMs (torch.matmul at its QKV, output and MLP "
            "shapes, M 1 to 8192), the paged decode kernel over batch × context, and an "
            "all-reduce when several GPUs are visible, and write the calibration FILE (JSON) "
            "that report, simulate, pools and recommend take with --calibration",
            show_default=False,
            parser=file_path,
        ),
    ] = None,
    fmt: FormatOpt = "table",
    catalog_dirs: CatalogOpt = None,
) -> None:
    """Allocate the KV pool the plan predicts on a GPU, run the decode kernel, measure, compare
    (or, with --profile, measure the speed model's operations and write a calibration file)."""
    with user_errors():
        output = _format(fmt)
        if profile is not None:
            from kvplan.cli.verify_profile import verify_profile

            alone = {"--capacity": capacity, "--json": json_path, "--lengths": lengths}
            alone |= {"--context": context, "--batch": batch != 1, "--layers": layers}
            given = [option for option, value in alone.items() if value]
            if given:
                raise KvplanError(
                    f"{given[0]}: --profile times its own shapes and writes its own file; "
                    "drop one of them"
                )

            try:
                verify_profile(model, profile, sku, device, tp, output, catalog_dirs)
            except ImportError as error:  # torch, triton or numpy: the verify extra
                raise KvplanError(
                    f"kvplan verify needs the verify extra ({error.name} is missing): "
                    f"{install_hint()}"
                ) from None
            return
        if json_path is not None:  # a bad path is refused before minutes of work, not after
            from kvplan.files import output_target

            output_target(json_path, "--json")
        catalog = _catalog(catalog_dirs)
        spec = _model(catalog, model).spec
        target = catalog.sku(sku) if sku is not None else None
        # The batch's size does not depend on the context: refuse a huge one before torch loads.
        _verifiable(_batch("1" if context is None else context, batch, lengths))
        from kvplan.validate.plan import check_device, check_engine  # pure Python

        check_device(device)
        check_engine(engine)
        try:  # torch, triton, numpy: the optional `verify` extra; size/report never load them
            from kvplan.validate.harness import VerifyRequest, resolve_device, run_verify
        except ImportError as error:
            raise KvplanError(
                f"kvplan verify needs the verify extra ({error.name} is missing): {install_hint()}"
            ) from None
        from kvplan.report.verify_report import render_verify
        from kvplan.validate.record import exit_code, write_record

        where = resolve_device(device)
        if capacity and (lengths or batch != 1):
            raise KvplanError("--capacity: give --context only; the batch is what fits")
        default_context = (
            str(spec.max_context) if capacity else "8k" if where.type == "cuda" else "64"
        )
        sequences = _batch(default_context if context is None else context, batch, lengths)
        request = VerifyRequest(
            lengths=tuple(tokens for tokens, count in sequences for _ in range(count)),
            kv_dtype=kv_dtype,
            engine=engine,
            tp=tp,
            block_size=block_size,
            layers=layers,
            device=where.type,
            sku=target,
            skus=tuple(catalog.skus()),
            bandwidth_pass_fraction=bandwidth_pass,
            repeats=repeats,
            seed=seed,
            capacity=capacity,
            utilization=utilization,
        )
        try:
            with _VerifyProgress() as progress:
                record = run_verify(spec, request, progress)
        except ModuleNotFoundError as error:  # e.g. numpy, imported by Triton's interpreter
            raise KvplanError(
                f"kvplan verify needs the verify extra ({error.name} is missing): {install_hint()}"
            ) from None
        if json_path is not None:
            write_record(json_path, record)
            sys.stderr.write(f"wrote {json_path}\n")
        render_verify(record, output)
    # A failed check is a result, not an error: rendered above, then exit 1 (STYLE).
    if exit_code(record):
        raise typer.Exit(1)


def _verifiable(sequences: Batch) -> None:
    """Refuse a batch verify cannot lay out: it allocates and runs every sequence."""
    if sequences.size > MAX_VERIFY_SEQUENCES:
        raise KvplanError(
            f"--batch: verify runs every sequence on the device; {sequences.size:,} is more "
            f"than {MAX_VERIFY_SEQUENCES:,} (size a larger batch with `kvplan size`)"
        )
