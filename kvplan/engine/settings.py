"""The one declaration of every engine setting, and the value the engine model reads.

Each row of `SETTINGS` says everything about one setting: its declared name (the field of
`EngineSettings` or `Deployment`, the keyword of the Python API, and the name messages below
`cli` use), its Python type and unit, its limits, its default, the engines that read it, its
command-line flag(s), its products-file key and its help text. The command-line options
(`kvplan.cli.engine_options`), the products-file fields (`kvplan.plan.guardrail.products`) and
the API keywords (`kvplan.api`) are built from these rows, so a setting is added, renamed or
bounded here and nowhere else.

Errors about a setting are `SettingError`s that carry its declared name: the CLI prints the
flag (`--block-size: 0 ...`), a products file the key (`block_size: 0 ...`), the API the
declared name (`tokens_per_block: 0 ...`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, make_dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import kvplan.limits as limits
from kvplan.engine.names import engine_name
from kvplan.errors import KvplanError, SettingError
from kvplan.units import parse_bytes, parse_count, parse_decimal, parse_fraction

# The engines with a release table, and every engine (kvplan.engine.ENGINES).
RELEASED = ("vllm", "sglang", "trtllm", "llama.cpp", "ollama")
EVERY_ENGINE = (*RELEASED, "exact", "hf", "naive")
LLAMA_CPP_FAMILY = ("llama.cpp", "ollama")
# Units a setting may have; the unit decides how its text is read and checked.
FRACTION = "fraction"  # in (0, 1]; text like 0.9
BYTES = "bytes"  # text like 51.38GiB, or a whole number of bytes
SWITCH = "switch"  # a flag without a value: given or not
NAME = "name"  # a name looked up in a table (the engine)
FACTOR = "factor"  # a plain decimal from `minimum` to the stated maximum: 1.0, 0.3


@dataclass(frozen=True)
class Setting:
    """One engine setting, declared once (see the module docstring)."""

    name: str  # declared name: EngineSettings / Deployment field and API keyword
    type: type  # Python type of a given value (int, float, str, bool)
    unit: str  # tokens, bytes, fraction, sequences, layers, GPUs, switch, or "" for text
    flags: tuple[str, ...]  # command-line flags; the first is the one messages print
    key: str  # products-file key
    help: str  # --help text and products-file description
    engines: tuple[str, ...] = EVERY_ENGINE  # engines that read it
    limit: limits.Limit | None = None  # the stated maximum of a count
    minimum: int | Fraction = 1  # the smallest value of a count or fraction
    # The value when not given; None: the engine's own default for its release (the engine
    # module computes it, the help text states it).
    default: Any = None
    inverted: bool = False  # a switch that turns the setting off (--no-hybrid-allocator)
    metavar: str | None = None
    show_default: bool = False
    on_deployment: bool = False  # a Deployment field (engine, dp, ep), not EngineSettings

    @property
    def flag(self) -> str:
        """The flag messages print (`--flash-attn` of `--flash-attn/--no-flash-attn`)."""
        return self.flags[0].split("/")[0]

    @property
    def keyword(self) -> str:
        """The keyword of kvplan.size(), kvplan.report(), … (the declared name)."""
        return self.name

    def check(self, value: Any) -> Any:
        """`value` when the declaration allows it; else a SettingError naming this setting.

        The one range check of every setting: EngineSettings runs it for the CLI, products
        files and the API alike, and the CLI's parsers run it on the text typed.
        """
        if value is None or self.type is bool or self.type is str:
            if value == "":  # the engines read '' as "not given"
                raise SettingError(self.name, "empty; leave it out for the engine's default")
            return value
        try:
            if self.unit == FRACTION:
                return parse_fraction(value, self.name)
            if self.unit == BYTES:
                return parse_bytes(value, self.name)
            if self.unit == FACTOR and self.limit is not None:
                minimum = Fraction(self.minimum)
                return float(parse_decimal(value, self.name, self.limit, minimum, _DECIMAL))
            if self.limit is None:  # a bug in the rows above, not the user's
                raise TypeError(f"setting {self.name}: a count needs a stated maximum")
            return parse_count(value, self.name, self.limit, int(self.minimum))
        except KvplanError as error:
            raise SettingError(self.name, str(error).split(": ", 1)[-1]) from None


_FLASH = "a quantised V cache needs it"
_DECIMAL = "write a decimal such as 1.5"
# One row a setting: name, type, unit, flags, key, help, then what differs from the defaults.
# fmt: off
SETTINGS: tuple[Setting, ...] = (
    Setting("engine", str, NAME, ("--engine", "-e"), "engine",
            "serving engine whose accounting to follow: vllm (default; paged blocks, vLLM's "
            "budget), sglang (token pool), trtllm (TensorRT-LLM blocks), llama.cpp and ollama "
            "(cells -c / -np allocate), exact (physics, no reserve), hf (transformers caches), "
            "naive (textbook MHA)",
            default="vllm", show_default=True, on_deployment=True),
    Setting("version", str, "", ("--engine-version", "--vllm-version"), "engine_version",
            "engine version whose rules and log wording to follow: vLLM 0.5 – 0.33 "
            "(default 0.11), SGLang 0.1 – 0.5.x (0.5.3), TensorRT-LLM 0.5 – 1.x (1.0), "
            "llama.cpp build b1 – b20000 (b7900), ollama 0.1 – 0.x (0.13)",
            engines=RELEASED),
    Setting("utilization", float, FRACTION, ("--utilization",), "utilization",
            "fraction (0–1] of GPU memory the engine may use: vLLM gpu_memory_utilization "
            "(default 0.9; 0.92 from 0.20), SGLang mem_fraction_static (default by TP), "
            "exact 1.0",
            engines=("vllm", "sglang", "trtllm", "exact", "hf", "naive"),
            minimum=limits.MIN_FRACTION, metavar="FRACTION"),
    Setting("kv_memory_bytes", int, BYTES, ("--kv-memory",), "kv_memory",
            "fixed KV budget per GPU, like vLLM --kv-cache-memory (e.g. 51.38GiB; a fraction of "
            "a byte is rounded down); replaces the estimated budget",
            engines=("vllm", "sglang", "trtllm", "exact", "hf", "naive"), minimum=0),
    Setting("tokens_per_block", int, "tokens", ("--block-size",), "block_size",
            "tokens per KV block for paged engines; default 16 (vLLM MLA: 64 on Hopper, 128 on "
            f"Blackwell); at most {limits.BLOCK.maximum:,}",
            engines=("vllm", "sglang", "trtllm"), limit=limits.BLOCK, metavar="TOKENS"),
    Setting("max_num_batched_tokens", int, "tokens", ("--max-num-batched-tokens",),
            "max_num_batched_tokens",
            "tokens per scheduler step (vLLM default 8192 on ≥ 70 GiB non-A100 GPUs, else 2048); "
            "sliding layers are charged window − 1 + this",
            engines=("vllm", "sglang", "trtllm"), limit=limits.BATCHED_TOKENS, metavar="TOKENS"),
    Setting("max_num_seqs", int, "sequences", ("--max-num-seqs",), "max_num_seqs",
            "requests running at once (vLLM 1024 / 256 as above)",
            engines=("vllm", "sglang", "trtllm"), limit=limits.BATCH, metavar="N"),
    Setting("activation_bytes", int, BYTES, ("--activation-memory",), "activation_memory",
            "override the activation peak estimate (bytes or with a unit: 4.76GiB)",
            engines=("vllm", "trtllm", "llama.cpp", "ollama"), minimum=0),
    Setting("non_torch_bytes", int, BYTES, ("--non-torch-memory",), "non_torch_memory",
            "override the non-torch estimate (CUDA context growth, NCCL, cuBLAS)",
            engines=("vllm", "sglang", "trtllm"), minimum=0),
    Setting("cudagraph_bytes", int, BYTES, ("--cudagraph-memory",), "cudagraph_memory",
            "CUDA-graph memory the engine subtracts from the KV budget (bytes or with a unit: "
            "1GiB). Default: vLLM ≥ 0.20 estimates it, 0.45 GiB + 16.5 MiB per layer of the "
            "largest pipeline stage (0.97 GiB for 32 layers; said in the notes); 0 before 0.20 "
            "and for other engines",
            engines=("vllm",), minimum=0),
    # vLLM ModelConfig enforce_eager (default False, vllm/config/model.py), SGLang ServerArgs
    # disable_cuda_graph (default False, python/sglang/srt/server_args.py), TensorRT-LLM
    # TorchLlmArgs cuda_graph_config (default_factory=CudaGraphConfig: on; None turns it
    # off, tensorrt_llm/llmapi/llm_args.py): graphs are on by default in all three.
    Setting("cuda_graphs", bool, SWITCH, ("--no-cuda-graphs",), "no_cuda_graphs",
            "run without CUDA graphs (vLLM --enforce-eager, SGLang --disable-cuda-graph, "
            "TensorRT-LLM cuda_graph_config: null in --extra_llm_api_options): every kernel "
            "launch is paid on the host each step; default: graphs on",
            engines=("vllm", "sglang", "trtllm"), inverted=True),
    Setting("hybrid_allocator", bool, SWITCH, ("--no-hybrid-allocator",), "no_hybrid_allocator",
            "windowed layers reserve full length (vLLM --disable-hybrid-kv-cache-manager)",
            engines=("vllm", "exact", "hf", "naive"), inverted=True),
    Setting("draft_layers", int, "layers", ("--draft-layers",), "draft_layers",
            "speculative-decoding draft layers that share the KV cache (EAGLE: 1)",
            engines=("vllm",), limit=limits.LAYERS, minimum=0, default=0, metavar="N",
            show_default=True),
    Setting("max_kv_tokens", int, "tokens", ("--max-kv-tokens",), "max_kv_tokens",
            "cap on the KV pool in tokens per GPU (SGLang --max-total-tokens, TensorRT-LLM "
            "kv_cache_config.max_tokens)",
            engines=("sglang", "trtllm"), limit=limits.CONTEXT),
    # SGLang ServerArgs schedule_conservativeness (default 1.0, server_args.py): the
    # scheduler's initial new-token ratio is min(0.7 × it, 1) and its floor 0.14 × that
    # (scheduler.py, NewTokenRatioTracker.from_server_args); SGLang refuses a negative one.
    Setting("schedule_conservativeness", float, FACTOR, ("--schedule-conservativeness",),
            "schedule_conservativeness",
            "SGLang --schedule-conservativeness: scales the share of its remaining output each "
            "running request is assumed to still need when a new one is admitted (initial "
            "new-token ratio min(0.7 × this, 1)); lower admits more and retracts more",
            engines=("sglang",), limit=limits.CONSERVATIVENESS, minimum=0, default=1.0,
            metavar="FACTOR", show_default=True),
    Setting("context_size_tokens", int, "tokens", ("--ctx-size",), "ctx_size",
            "llama.cpp -c / ollama num_ctx × OLLAMA_NUM_PARALLEL: cells allocated for all slots, "
            "in tokens; default: planned as one slot of --context per request",
            engines=LLAMA_CPP_FAMILY, limit=limits.CONTEXT),
    Setting("parallel", int, "sequences", ("--parallel",), "parallel",
            "llama.cpp -np / OLLAMA_NUM_PARALLEL: slots sharing --ctx-size (default 1)",
            engines=LLAMA_CPP_FAMILY, limit=limits.BATCH),
    Setting("v_dtype", str, "", ("--v-dtype",), "v_dtype",
            "llama.cpp -ctv: V cache type when it differs from --kv-dtype (-ctk): f32, f16, "
            "bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl (also the exact and hf profiles; engines "
            "with one KV type refuse it); default: --kv-dtype",
            engines=(*LLAMA_CPP_FAMILY, "exact", "hf")),
    Setting("flash_attention", bool, "", ("--flash-attn/--no-flash-attn",), "flash_attn",
            "llama.cpp -fa / OLLAMA_FLASH_ATTENTION (default: on from the -fa auto builds, off "
            f"before; ollama off); {_FLASH}",
            engines=LLAMA_CPP_FAMILY),
    Setting("kv_unified", bool, SWITCH, ("--kv-unified",), "kv_unified",
            "llama.cpp --kv-unified: one KV stream for all slots",
            engines=LLAMA_CPP_FAMILY),
    Setting("swa_full", bool, SWITCH, ("--swa-full",), "swa_full",
            "llama.cpp --swa-full: sliding layers keep every cell",
            engines=LLAMA_CPP_FAMILY, default=False),
    Setting("gpu_layers", int, "layers", ("--gpu-layers",), "gpu_layers",
            "llama.cpp -ngl / ollama num_gpu: layers on the GPU(s); the rest keep weights and KV "
            "in host memory (default: all)",
            engines=LLAMA_CPP_FAMILY, limit=limits.LAYERS, minimum=0),
    Setting("ubatch_tokens", int, "tokens", ("--ubatch-size",), "ubatch_size",
            "llama.cpp -ub: tokens per physical batch (default 512); sizes the SWA cache and "
            "compute buffers",
            engines=LLAMA_CPP_FAMILY, limit=limits.BATCHED_TOKENS),
    Setting("batch_tokens", int, "tokens", ("--batch-size",), "batch_size",
            "llama.cpp -b: tokens per logical batch (default 2048); the physical batch is the "
            "least of -c, -b and -ub",
            engines=LLAMA_CPP_FAMILY, limit=limits.BATCHED_TOKENS),
    Setting("avail_mem_before_load_bytes", int, BYTES, ("--avail-mem-before-load",),
            "avail_mem_before_load",
            "SGLang's \"Load weight begin. avail mem=X GB\" (the lowest rank; SGLang's GB is "
            "GiB: give 137.29GiB): free memory the pool's fraction applies to; default: the "
            "runtime total less the CUDA context and NCCL",
            engines=("sglang",), minimum=0),
    Setting("avail_mem_after_load_bytes", int, BYTES, ("--avail-mem-after-load",),
            "avail_mem_after_load",
            "SGLang's \"Load weight end. … avail mem=Y GB\" (GiB, as above): free memory once "
            "the weights are in; the pool is Y − X · (1 − mem_fraction_static); default: X "
            "less the weights and the weight loader's overhead",
            engines=("sglang",), minimum=0),
    Setting("total_gpu_memory_bytes", int, BYTES, ("--total-gpu-memory",), "total_gpu_memory",
            "device memory the engine reads: vLLM's \"total_gpu_memory (79.19GiB)\" or the total "
            "of \"Free memory on device (78.68/79.19 GiB)\", TensorRT-LLM's \"total: 79.10 GiB\"; "
            "default: the SKU's runtime-visible memory",
            engines=("vllm", "trtllm"), minimum=1),
    Setting("free_memory_at_start_bytes", int, BYTES, ("--free-memory-at-start",),
            "free_memory_at_start",
            "vLLM's \"Free memory on device (78.68/79.19 GiB) on startup\" (the first figure): "
            "free memory before vLLM loads; from 0.11 vLLM refuses to start when it is below "
            "gpu_memory_utilization × the total; default: not checked (a GPU of its own)",
            engines=("vllm",), minimum=0),
    Setting("available_memory_bytes", int, BYTES, ("--available-memory",), "available_memory",
            "TensorRT-LLM's \"Memory usage when calculating max tokens in paged kv cache: … "
            "available: 70.48 GiB\": free memory after the engine loads, which "
            "free_gpu_memory_fraction applies to; default: estimated from the model",
            engines=("trtllm",), minimum=0),
    Setting("gpus_per_node", int, "GPUs", ("--gpus-per-node",), "gpus_per_node",
            "GPUs in one node of your cluster (default: the SKU's max_gpus_per_node, 8 on HGX "
            "boards): a TP group or pipeline larger than this spans nodes (the report's †, the "
            "notes, the degrees report and recommend try), and vLLM then keeps more memory "
            "outside torch (custom all-reduce off, NCCL's network buffers)",
            limit=limits.GPUS, metavar="N"),
    Setting("dp", int, "GPUs", ("--dp",), "dp",
            "data-parallel replicas, each with its own KV cache (vLLM --data-parallel-size; with "
            "--ep, SGLang --enable-dp-attention)",
            limit=limits.GPUS, default=1, metavar="N", show_default=True, on_deployment=True),
    Setting("ep", bool, SWITCH, ("--ep",), "ep",
            "expert parallelism: routed experts spread over all tp × dp GPUs (vLLM "
            "--enable-expert-parallel, SGLang --ep-size)",
            default=False, on_deployment=True),
)
# fmt: on
# Older spellings of one setting that messages keep: vLLM's version is `--vllm-version` on the
# command line and `vllm_version` in a products file (declared name -> (setting, flag, key)).
ALIASES: dict[str, tuple[str, str, str]] = {
    "vllm_version": ("version", "--vllm-version", "vllm_version"),
}
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}
# The settings EngineSettings holds (engine, dp and ep are fields of the Deployment).
ENGINE_SETTINGS = tuple(s for s in SETTINGS if not s.on_deployment)


def flag_of(name: str) -> str:
    """The command-line flag of the setting (or alias) declared `name`; else `name`."""
    if name in ALIASES:
        return ALIASES[name][1]
    setting = BY_NAME.get(name)
    return setting.flag if setting is not None else name


def key_of(name: str) -> str:
    """The products-file key of the setting (or alias) declared `name`; else `name`."""
    if name in ALIASES:
        return ALIASES[name][2]
    setting = BY_NAME.get(name)
    return setting.key if setting is not None else name


def _engine_settings() -> type:
    """EngineSettings: one field per row of SETTINGS that is not on the Deployment, in the
    rows' order, of the row's type (or None, the engine's default, unless the row declares a
    default), every value checked against its row when the settings are made."""

    def __post_init__(self: Any) -> None:
        for setting in ENGINE_SETTINGS:
            setting.check(getattr(self, setting.name))

    fields = [
        (s.name, s.type if s.default is not None else s.type | None, field(default=s.default))
        for s in ENGINE_SETTINGS
    ]
    namespace = {
        "__post_init__": __post_init__,
        "__module__": __name__,
        "__doc__": "What a user sets about the engine; None means the engine's (and release's) "
        "default. Generated from the rows of SETTINGS (kvplan.engine.settings).",
    }
    return make_dataclass("EngineSettings", fields, namespace=namespace, frozen=True)


if TYPE_CHECKING:  # the fields are the rows': a type checker sees any setting name

    class EngineSettings:
        def __init__(self, **values: Any) -> None: ...
        def __getattr__(self, name: str) -> Any: ...

else:
    EngineSettings = _engine_settings()


def _given(setting: Setting, value: Any) -> Any:
    """A value as the CLI or a products file gives it, as the setting holds it."""
    if setting.unit == SWITCH and not setting.on_deployment:
        if not value:
            return setting.default
        return not setting.inverted
    return setting.default if value is None else value


def unread_settings(
    values: Mapping[str, Any], engine: str, name_of: Callable[[Setting], str] = lambda s: s.key
) -> list[Setting]:
    """The settings `values` gives (other than their defaults) that `engine` does not read."""
    return [
        s
        for s in ENGINE_SETTINGS
        if engine not in s.engines and _given(s, values.get(name_of(s))) != s.default
    ]


def settings_from(
    values: Mapping[str, Any], name_of: Callable[[Setting], str] = lambda s: s.key
) -> tuple[str, EngineSettings, int, bool]:
    """(engine name, settings, dp, ep) from values keyed by `name_of` each setting (the
    products-file key by default, which the CLI's parameters also use).

    Missing keys take the declared defaults. Memory is bytes, or text with a unit ("4.76GiB").

    Raises:
        SettingError: a value the declaration refuses.
        KvplanError: an unknown engine.
    """
    given = {s.name: s.check(_given(s, values.get(name_of(s)))) for s in SETTINGS}
    settings = EngineSettings(**{s.name: given[s.name] for s in ENGINE_SETTINGS})
    return engine_name(given["engine"]), settings, given["dp"], bool(given["ep"])
