"""The deployment a log describes, built through kvplan's API (kvplan.api.deployment).

The log's facts give the model, GPU, parallelism and settings; what the user passes
(`Given`) replaces them. A fact the log lacks and kvplan needs is one error naming it and
the option that supplies it (--model, --sku). No engine rule lives here: a setting the
engine model refuses is the engine model's error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvplan.api import deployment as api_deployment
from kvplan.catalog import Catalog
from kvplan.engine.deployment import Deployment
from kvplan.errors import KvplanError, shown
from kvplan.explain.reading import Reading
from kvplan.limits import NAME_CHARS
from kvplan.specs import SkuSpec

# facts that are engine settings (declared names of kvplan.engine.settings)
SETTING_FACTS = (
    "utilization",
    "tokens_per_block",
    "max_num_seqs",
    "max_num_batched_tokens",
    "kv_memory_bytes",
    "max_kv_tokens",
    "context_size_tokens",
    "parallel",
    "v_dtype",
    "flash_attention",
    "kv_unified",
    "gpu_layers",
    "ubatch_tokens",
    "batch_tokens",
    "draft_layers",
    "free_memory_at_start_bytes",
)


@dataclass(frozen=True)
class Given:
    """What the user states beside the log (each replaces the log's fact)."""

    model: str | None = None
    sku: str | None = None
    version: str | None = None
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    kv_dtype: str | None = None
    weight_dtype: str | None = None
    context_tokens: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # declared name -> value


@dataclass(frozen=True)
class Rebuilt:
    """The deployment, its GPU and the request length the log's figures are for."""

    deployment: Deployment
    sku: SkuSpec
    context_tokens: int
    version: str | None
    version_basis: str
    notes: tuple[str, ...]


def _named(name: object, what: str, option: str) -> str:
    text = str(name)
    if len(text) > NAME_CHARS or not text.isprintable():
        raise KvplanError(
            f"the log's {what} {shown(text[:60])}… is not a name kvplan reads; give {option}"
        )
    return text


def model_of(reading: Reading, given: Given, catalog: Catalog):
    """The catalogue model the log (or --model) names."""
    if given.model is not None:
        return catalog.model(given.model)
    stated = reading.facts.get("model")
    if stated is None:
        raise KvplanError("the log does not name the model; give --model NAME")
    name = _named(stated, "model", "--model NAME")
    for candidate in _model_candidates(name):
        try:
            return catalog.model(candidate)
        except KvplanError:
            continue
    line = reading.fact_lines.get("model")
    raise KvplanError(
        f"the log's model {shown(name)} (line {line}) is not in kvplan's catalogue; give "
        "--model NAME (a catalogue name, config.json or .gguf)"
    )


# Checkpoint suffixes that name a quantisation or tuning, not another architecture.
_SUFFIXES = (
    "-FP8-dynamic", "-FP8-Dynamic", "-FP8", "-fp8", "-AWQ", "-awq", "-GPTQ", "-Int4", "-Int8",
    "-w8a8", "-W8A8", "-bnb-4bit", "-unsloth-bnb-4bit", "-GGUF", "-Instruct", "-instruct",
    "-Chat", "-chat", "-it", "-Base",
)  # fmt: skip


def _model_candidates(name: str) -> list[str]:
    """The name as logged, then a path's last part, then without each suffix in turn."""
    bare = name.rstrip("/").rsplit("/", 1)[-1].removesuffix(".gguf")
    names = [name, bare]
    for _ in range(3):  # Qwen3-Coder-480B-A35B-Instruct-FP8: -FP8, then -Instruct
        bare = next((bare.removesuffix(s) for s in _SUFFIXES if bare.endswith(s)), bare)
        names.append(bare)
    return list(dict.fromkeys(n for n in names if n))


def sku_of(reading: Reading, given: Given, catalog: Catalog) -> SkuSpec:
    """The GPU the log (or --sku) names."""
    if given.sku is not None:
        return catalog.sku(given.sku)
    stated = reading.facts.get("gpu")
    if stated is None:
        raise KvplanError("the log does not name the GPU; give --sku NAME (kvplan skus lists them)")
    name = _named(stated, "GPU", "--sku NAME")
    try:
        return catalog.sku(name)
    except KvplanError:
        raise KvplanError(
            f"the log's GPU {shown(name)} (line {reading.fact_lines.get('gpu')}) is not one "
            "kvplan knows; give --sku NAME"
        ) from None


def _setting_values(reading: Reading, given: Given, version: str | None) -> dict[str, Any]:
    values = {k: reading.facts[k] for k in SETTING_FACTS if reading.facts.get(k) is not None}
    values |= given.settings
    if version is not None:
        values["version"] = version
    return values


# The engines' quantization names (vLLM --quantization, SGLang quantization=, TensorRT-LLM's
# "Quantization:") and checkpoint-name suffixes, as kvplan's weight dtypes.
_QUANTIZATION = {
    "fp8": "fp8", "FP8": "fp8", "awq": "awq", "awq_marlin": "awq", "gptq": "gptq",
    "gptq_marlin": "gptq",
}  # fmt: skip
_NAME_SUFFIX = {"-FP8": "fp8", "-fp8": "fp8", "-AWQ": "awq", "-awq": "awq", "-GPTQ": "gptq"}


def _suffix_dtype(name: str) -> str | None:
    bare = name.rstrip("/").rsplit("/", 1)[-1]
    return next((dtype for end, dtype in _NAME_SUFFIX.items() if end in bare), None)


def logged_weight_dtype(reading: Reading) -> str | None:
    """The weight dtype the log states (its quantization argument, else the checkpoint's
    name: Qwen3-235B-A22B-FP8); None when it states none."""
    stated = _QUANTIZATION.get(str(reading.facts.get("quantization")))
    return stated or _suffix_dtype(str(reading.facts.get("model") or ""))


def weights_basis(reading: Reading) -> str:
    if str(reading.facts.get("quantization")) in _QUANTIZATION:
        return f"line {reading.fact_lines['quantization']}: quantization"
    return f"the checkpoint's name, line {reading.fact_lines.get('model')}"


def rebuild(
    reading: Reading, given: Given, catalog: Catalog, version: tuple[str | None, str]
) -> Rebuilt:
    """The deployment, SKU and request length the log describes (`version`: the release
    and the line or wording it was read from)."""
    model = model_of(reading, given, catalog)
    sku = sku_of(reading, given, catalog)
    facts = reading.facts
    notes = []
    weights = None if given.weight_dtype else logged_weight_dtype(reading)
    if weights is not None:
        notes.append(f"weights read as {weights} from the log ({weights_basis(reading)})")
    context = given.context_tokens or facts.get("max_model_len")
    if context is None:
        context = model.max_context
        notes.append(f"the log states no max model length: {model.name}'s native {context:,}")
    planned = api_deployment(
        model,
        engine=reading.engine,
        kv_dtype=given.kv_dtype or facts.get("kv_dtype"),
        weight_dtype=given.weight_dtype or weights,
        tp=given.tp or facts.get("tp") or 1,
        pp=given.pp or facts.get("pp") or 1,
        dp=given.dp or facts.get("dp") or 1,
        ep=bool(facts.get("ep")),
        catalog=catalog,
        **_setting_values(reading, given, version[0]),
    )
    return Rebuilt(planned, sku, int(context), version[0], version[1], tuple(notes))
