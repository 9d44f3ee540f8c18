"""The engine options every planning command takes, declared once.

`size`, `report`, `claim` (and any command that computes a budget) get the same engine,
version, memory and parallelism options with the same defaults: the `@engine_options`
decorator adds them to the command's signature and hands the command one `EngineOptions`
value, which it resolves inside its error handler.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import typer

import kvplan.limits as limits
from kvplan.cli.options import count, fraction, name

F = TypeVar("F", bound=Callable[..., Any])

ENGINE_HELP = (
    "serving engine whose accounting to follow: vllm (default; paged blocks, vLLM's budget), "
    "sglang (token pool), trtllm (TensorRT-LLM blocks), llama.cpp and ollama (cells -c / -np "
    "allocate), exact (physics, no reserve), hf (transformers caches), naive (textbook MHA)"
)


def _option(*decls: str, help: str, **kwargs: Any) -> Any:
    return typer.Option(*decls, help=help, show_default=kwargs.pop("show_default", False), **kwargs)


# name -> (annotation, default)
_PARAMETERS: dict[str, tuple[Any, Any]] = {
    "engine": (
        Annotated[str, _option("--engine", "-e", parser=name, help=ENGINE_HELP, show_default=True)],
        "vllm",
    ),
    "engine_version": (
        Annotated[
            str | None,
            _option(
                "--engine-version",
                "--vllm-version",
                help="engine version whose rules and log wording to follow: vLLM 0.5 – 0.33 "
                "(default 0.11), SGLang 0.1 – 0.5.x (0.5.3), TensorRT-LLM 0.5 – 1.x (1.0), "
                "llama.cpp build b1 – b20000 (b7900), ollama 0.1 – 0.x (0.13)",
            ),
        ],
        None,
    ),
    "utilization": (
        Annotated[
            float | None,
            _option(
                "--utilization",
                parser=fraction(),
                metavar="FRACTION",
                help="fraction (0–1] of GPU memory the engine may use: vLLM "
                "gpu_memory_utilization (default 0.9; 0.92 from 0.20), SGLang "
                "mem_fraction_static (default by TP), exact 1.0",
            ),
        ],
        None,
    ),
    "kv_memory": (
        Annotated[
            str | None,
            _option(
                "--kv-memory",
                help="fixed KV budget per GPU, like vLLM --kv-cache-memory (e.g. 51.38GiB; a "
                "fraction of a byte is rounded down); replaces the estimated budget",
            ),
        ],
        None,
    ),
    "block_size": (
        Annotated[
            int | None,
            _option(
                "--block-size",
                parser=count(limits.BLOCK),
                metavar="TOKENS",
                help="tokens per KV block for paged engines; default 16 (vLLM MLA: 64 on "
                f"Hopper, 128 on Blackwell); at most {limits.BLOCK.maximum:,}",
            ),
        ],
        None,
    ),
    "max_num_batched_tokens": (
        Annotated[
            int | None,
            _option(
                "--max-num-batched-tokens",
                parser=count(limits.BATCHED_TOKENS),
                metavar="TOKENS",
                help="tokens per scheduler step (vLLM default 8192 on ≥ 70 GiB non-A100 GPUs, "
                "else 2048); sliding layers are charged window − 1 + this",
            ),
        ],
        None,
    ),
    "max_num_seqs": (
        Annotated[
            int | None,
            _option(
                "--max-num-seqs",
                parser=count(limits.BATCH),
                metavar="N",
                help="requests running at once (vLLM 1024 / 256 as above)",
            ),
        ],
        None,
    ),
    "activation_memory": (
        Annotated[
            str | None,
            _option(
                "--activation-memory",
                help="override the activation peak estimate (bytes or with a unit: 4.76GiB)",
            ),
        ],
        None,
    ),
    "non_torch_memory": (
        Annotated[
            str | None,
            _option(
                "--non-torch-memory",
                help="override the non-torch estimate (CUDA context growth, NCCL, cuBLAS)",
            ),
        ],
        None,
    ),
    "cudagraph_memory": (
        Annotated[
            str | None,
            _option(
                "--cudagraph-memory",
                help="CUDA-graph memory the engine subtracts from the KV budget (bytes or with a "
                "unit: 1GiB). Default: vLLM ≥ 0.20 estimates it, 0.45 GiB + 16.5 MiB per layer of "
                "the largest pipeline stage (0.97 GiB for 32 layers; said in the notes); 0 before "
                "0.20 and for other engines",
            ),
        ],
        None,
    ),
    "no_hybrid_allocator": (
        Annotated[
            bool,
            _option(
                "--no-hybrid-allocator",
                help="windowed layers reserve full length (vLLM --disable-hybrid-kv-cache-manager)",
            ),
        ],
        False,
    ),
    "draft_layers": (
        Annotated[
            int,
            _option(
                "--draft-layers",
                parser=count(limits.LAYERS, minimum=0),
                metavar="N",
                help="speculative-decoding draft layers that share the KV cache (EAGLE: 1)",
                show_default=True,
            ),
        ],
        0,
    ),
    "max_kv_tokens": (
        Annotated[
            int | None,
            _option(
                "--max-kv-tokens",
                parser=count(limits.CONTEXT),
                help="cap on the KV pool in tokens per GPU (SGLang --max-total-tokens, "
                "TensorRT-LLM kv_cache_config.max_tokens)",
            ),
        ],
        None,
    ),
    "ctx_size": (
        Annotated[
            int | None,
            _option(
                "--ctx-size",
                parser=count(limits.CONTEXT),
                help="llama.cpp -c / ollama num_ctx × OLLAMA_NUM_PARALLEL: cells allocated "
                "for all slots, in tokens; default: planned as one slot of --context per "
                "request",
            ),
        ],
        None,
    ),
    "parallel": (
        Annotated[
            int | None,
            _option(
                "--parallel",
                parser=count(limits.BATCH),
                help="llama.cpp -np / OLLAMA_NUM_PARALLEL: slots sharing --ctx-size (default 1)",
            ),
        ],
        None,
    ),
    "v_dtype": (
        Annotated[
            str | None,
            _option(
                "--v-dtype",
                help="llama.cpp -ctv: V cache type when it differs from --kv-dtype (-ctk): "
                "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl (also the exact and hf "
                "profiles; engines with one KV type refuse it); default: --kv-dtype",
            ),
        ],
        None,
    ),
    "flash_attn": (
        Annotated[
            bool | None,
            _option(
                "--flash-attn/--no-flash-attn",
                help="llama.cpp -fa / OLLAMA_FLASH_ATTENTION (default: on from the -fa auto "
                "builds, off before; ollama off); a quantised V cache needs it",
            ),
        ],
        None,
    ),
    "kv_unified": (
        Annotated[
            bool,
            _option("--kv-unified", help="llama.cpp --kv-unified: one KV stream for all slots"),
        ],
        False,
    ),
    "swa_full": (
        Annotated[
            bool,
            _option("--swa-full", help="llama.cpp --swa-full: sliding layers keep every cell"),
        ],
        False,
    ),
    "gpu_layers": (
        Annotated[
            int | None,
            _option(
                "--gpu-layers",
                parser=count(limits.LAYERS, minimum=0),
                help="llama.cpp -ngl / ollama num_gpu: layers on the GPU(s); the rest keep "
                "weights and KV in host memory (default: all)",
            ),
        ],
        None,
    ),
    "ubatch_size": (
        Annotated[
            int | None,
            _option(
                "--ubatch-size",
                parser=count(limits.BATCHED_TOKENS),
                help="llama.cpp -ub: tokens per physical batch (default 512); sizes the SWA "
                "cache and compute buffers",
            ),
        ],
        None,
    ),
    "batch_size": (
        Annotated[
            int | None,
            _option(
                "--batch-size",
                parser=count(limits.BATCHED_TOKENS),
                help="llama.cpp -b: tokens per logical batch (default 2048); the physical batch "
                "is the least of -c, -b and -ub",
            ),
        ],
        None,
    ),
    "dp": (
        Annotated[
            int,
            _option(
                "--dp",
                parser=count(limits.GPUS),
                metavar="N",
                help="data-parallel replicas, each with its own KV cache (vLLM "
                "--data-parallel-size; with --ep, SGLang --enable-dp-attention)",
                show_default=True,
            ),
        ],
        1,
    ),
    "ep": (
        Annotated[
            bool,
            _option(
                "--ep",
                help="expert parallelism: routed experts spread over all tp × dp GPUs (vLLM "
                "--enable-expert-parallel, SGLang --ep-size)",
            ),
        ],
        False,
    ),
}


@dataclass(frozen=True)
class EngineOptions:
    """The engine options as typed; `resolve()` validates them into engine settings."""

    values: dict[str, Any]

    @property
    def engine(self) -> str:
        return str(self.values["engine"])

    def resolve(self) -> tuple[str, Any, int, bool]:
        """(engine name, EngineSettings, dp, ep); raises KvplanError on a bad value."""
        from kvplan.engine.engine_options import engine_settings

        return engine_settings(self.values)


def engine_options(command: F) -> F:
    """Add the engine options to `command`; it receives them as `engine_options`."""
    return option_group(_PARAMETERS, "engine_options", EngineOptions)(command)


def option_group(
    parameters: dict[str, tuple[Any, Any]], keyword: str, make: Callable[[dict[str, Any]], Any]
) -> Callable[[F], F]:
    """A decorator that adds `parameters` (name -> (annotation, default)) to a command.

    The command declares one keyword-only parameter `keyword` and receives
    `make({name: value})` there. Decorators stack: each keeps the command's own parameters
    first and --format and --catalog last in --help.
    """

    def decorate(command: F) -> F:
        signature = inspect.signature(command, eval_str=True)
        kept = [p for p in signature.parameters.values() if p.name != keyword]
        tail = [p for p in kept if p.name in ("fmt", "catalog_dirs")]
        head = [p for p in kept if p not in tail]
        keyword_only = inspect.Parameter.KEYWORD_ONLY
        added = [
            inspect.Parameter(name, keyword_only, default=default, annotation=hint)
            for name, (hint, default) in parameters.items()
        ]
        keyword_head = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in head]
        first = [p for p in keyword_head if p.default is inspect.Parameter.empty]
        rest = [p for p in keyword_head if p.default is not inspect.Parameter.empty]
        tail = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in tail]

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            values = {name: kwargs.pop(name) for name in parameters}
            return command(**kwargs, **{keyword: make(values)})

        wrapper.__signature__ = signature.replace(parameters=first + rest + added + tail)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {}
        return wrapper  # type: ignore[return-value]

    return decorate
