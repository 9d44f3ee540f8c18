"""Options more than one command declares, each written once as an `Annotated` alias.

Numbers and names are parsed here, before a command runs, by the same functions as the rest
of kvplan (kvplan.units, kvplan.limits): ASCII digits only, a stated maximum for every count,
no empty or padded names. A refusal is a usage error: one line, exit 2.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

import kvplan.limits as limits
from kvplan.errors import KvplanError
from kvplan.report.render import FORMATS
from kvplan.units import parse_count, parse_decimal, parse_fraction


def _usage(parse: Callable[[str], object]) -> Callable[[str], object]:
    """`parse`, with its KvplanError turned into typer's usage error (the option is named)."""

    def parser(value: str) -> object:
        try:
            return parse(value)
        except KvplanError as error:
            raise typer.BadParameter(str(error).split(": ", 1)[-1]) from None

    return parser


def count(limit: limits.Limit, minimum: int = 1) -> Callable[[str], object]:
    """Parser of a whole number from `minimum` to `limit`'s stated maximum."""
    return _usage(lambda value: parse_count(value, "value", limit, minimum))


def fraction(allow_zero: bool = False) -> Callable[[str], object]:
    """Parser of a fraction in (0, 1], or [0, 1] with `allow_zero`."""
    return _usage(lambda value: parse_fraction(value, "fraction", allow_zero=allow_zero))


def rate() -> Callable[[str], object]:
    """Parser of an arrival rate in requests per second: a decimal, 0.000001 to 10⁹."""
    return _usage(
        lambda value: float(
            parse_decimal(
                value,
                "value",
                limits.REQUEST_RATE,
                limits.MIN_REQUEST_RATE,
                "write requests per second as a decimal, e.g. 2.5",
            )
        )
    )


def _checked_name(value: str) -> str:
    limits.check_name(value, "name")
    return value


name = _usage(_checked_name)


def _folder(value: str) -> Path:
    # typer would read '' as Path('') == '.', the working folder: a value that went missing
    if not value:
        raise KvplanError("value: an empty path; give a folder")
    return Path(value)


folder = _usage(_folder)


def _file(value: str) -> Path:
    # as _folder: typer would read '' as Path('') == '.', and say "is a folder"
    if not value:
        raise KvplanError("value: an empty path; give a file")
    return Path(value)


file_path = _usage(_file)

MODEL_HELP = (
    "catalogue name or alias (see `kvplan models`), or a Hub repo name without its org "
    "(Llama-3.1-70B-Instruct) matched against the aliases; a Hugging Face id org/name[@revision] "
    "(config and safetensors headers read through your HF cache, HF_TOKEN and HF_HUB_OFFLINE; "
    "never the weights); a config.json or a folder holding one; or a local .gguf file (its "
    "header only). A catalogue name or alias wins over the Hub (aliases hold Hub ids); "
    "hf:org/name forces the Hub"
)
ModelArg = Annotated[str, typer.Argument(help=MODEL_HELP, show_default=False)]
RopeScalingOpt = Annotated[
    str | None,
    typer.Option(
        "--rope-scaling",
        help="serve with this RoPE scaling, TYPE:FACTOR[:ORIGINAL_TOKENS] (yarn, dynamic, "
        "linear, llama3, longrope), e.g. yarn:4 for Qwen3's 128k (the model card's advice "
        "when config.json omits it; vLLM --hf-overrides): the context limit becomes "
        "ORIGINAL (default: the model's recommendation, else max_position_embeddings) × FACTOR",
        show_default=False,
    ),
]
ContextOpt = Annotated[
    str,
    typer.Option(
        "--context",
        "-c",
        help="tokens per sequence; accepts 8k, 128k, 1M (k = 1024, so 128k = 131,072); "
        f"at most {limits.CONTEXT.maximum:,}",
    ),
]
BatchOpt = Annotated[
    int,
    typer.Option(
        "--batch",
        "-b",
        parser=count(limits.BATCH),
        metavar="N",
        help=f"concurrent sequences (at most {limits.BATCH.maximum:,})",
    ),
]
LengthsOpt = Annotated[
    str | None,
    typer.Option(
        help="a ragged batch instead of --batch × --context: comma-separated lengths, "
        "e.g. 1k,4k,32k (overrides --context and --batch)",
    ),
]
KvDtypeOpt = Annotated[
    str | None,
    typer.Option(
        "--kv-dtype",
        parser=name,
        help="KV element type: fp32, bf16, fp16, fp8 (= fp8_e4m3), fp8_e5m2, int8, int4, "
        "nvfp4, mxfp4; llama.cpp/ollama ggml types f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, "
        "q5_1, iq4_nl (-ctk; scales counted); each engine accepts only the dtypes it stores "
        "(docs/engines.md); default bf16 (llama.cpp/ollama f16)",
        show_default=False,
    ),
]
WeightDtypeOpt = Annotated[
    str | None,
    typer.Option(
        "--weight-dtype",
        parser=name,
        help="weight type: bf16, fp16, fp32, fp8, fp8_block, int8, int4, awq, gptq (int4, "
        "group 128: 4 bits + an fp16 scale and a 4-bit zero per 128 weights, as AutoAWQ and "
        "GPTQ store them), nvfp4, mxfp4, or a GGUF file type (Q8_0, Q6_K, Q5_K_M, Q4_K_M, "
        "IQ4_XS, Q4_0, …: llama-quantize's per-tensor mix); default: the checkpoint's own "
        "bytes (safetensors headers, a GGUF's tensor table) or the model's released dtype",
        show_default=False,
    ),
]
def degree_option(flag: str, help: str) -> Any:
    """A TP or PP degree option: a whole number of GPUs up to the stated limit."""
    return typer.Option(flag, parser=count(limits.GPUS), metavar="N", help=help)


TpOpt = Annotated[int, degree_option("--tp", "tensor-parallel degree (GPUs per stage)")]
PpOpt = Annotated[int, degree_option("--pp", "pipeline-parallel degree (stages)")]
BlockSizeOpt = Annotated[
    int | None,
    typer.Option(
        "--block-size",
        parser=count(limits.BLOCK),
        metavar="TOKENS",
        help="tokens per KV block for paged engines; default 16 (MLA: 64); "
        f"at most {limits.BLOCK.maximum:,}",
        show_default=False,
    ),
]
SkuOpt = Annotated[
    str | None,
    typer.Option(
        "--sku",
        "-s",
        parser=name,
        help="GPU SKU to fit on (see `kvplan skus`)",
        show_default=False,
    ),
]
FormatOpt = Annotated[
    str, typer.Option("--format", "-f", help=f"output format: {', '.join(FORMATS)}")
]
ColumnsOpt = Annotated[
    str | None,
    typer.Option(
        "--columns",
        help="the table's columns to show (table, md and html output), as their JSON keys, "
        "comma-separated, e.g. model,sku,tp,max_concurrency; default: every column, or on a "
        "narrow terminal the most important that fit (the rest are named below the table)",
        show_default=False,
    ),
]
CatalogOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--catalog",
        parser=folder,
        help="extra folder of model/SKU YAML (repeatable; also $KVPLAN_CATALOG)",
        show_default=False,
    ),
]
