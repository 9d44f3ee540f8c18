"""A model spec and exact weight bytes from a local GGUF file's header (llama.cpp, ollama).

Only the metadata and the tensor-info table are read (kvplan.catalog.gguf_header: a bounded
walk of the memory-mapped header; no tensor data is touched). Keys follow llama.cpp's
`llama-arch.cpp` (`<arch>.block_count`, `<arch>.attention.head_count_kv`, …). Which layers
slide is llama.cpp's per-architecture rule (`llama-model.cpp` `hparams.set_swa_pattern`):
layer i is sliding when i mod n < n − 1 — Gemma 2 and GPT-OSS n = 2, Cohere 2, EXAONE 4 and
OLMo 3 (olmo2) n = 4, Gemma 3 n = 6 — unless the file carries
`<arch>.attention.sliding_window_pattern` (one bool per layer).

Llama 4 (llama-model.cpp LLM_ARCH_LLAMA4): chunked attention of 8,192 tokens on 3 layers of
every 4 (the 4th full), unless `llama4.attention.sliding_window` is stated as 0 (no chunking);
MoE on layer i when (i + 1) mod `interleave_moe_layer_step` = 0, the other layers a dense FFN of
`feed_forward_length`; one shared expert beside the routed ones (its `ffn_*_shexp` tensors).
GLM-4.5 (LLM_ARCH_GLM4_MOE): `block_count` counts the NextN/MTP layers
(`nextn_predict_layers`) appended past the decoder; llama.cpp gives them no KV
(`n_layer_kv_from_start = n_layer - nextn_predict_layers`), so they are left out of the layers.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kvplan.catalog.checkpoint import CheckpointWeights
from kvplan.catalog.gguf_header import read_header
from kvplan.catalog.gguf_weights import gguf_checkpoint
from kvplan.catalog.hf.families import ENCODER_FAMILIES, ENCODER_REFUSAL
from kvplan.catalog.tensor_headers import TensorHeader
from kvplan.errors import KvplanError
from kvplan.files import check_regular
from kvplan.specs import ModelSpec

# Architectures whose attention kvplan reads from GGUF keys (llama-arch.cpp names; the
# gguf package's MODEL_ARCH_NAMES spell them the same).
DENSE_ARCHS = frozenset(
    {
        "llama", "mistral3", "qwen2", "qwen3", "qwen2moe", "qwen3moe", "phi3", "gemma",
        "gemma2", "gemma3", "cohere2", "exaone4", "granite", "olmo2", "starcoder2",
        "smollm3", "gpt-oss", "deepseek2", "command-r", "llama4", "glm4moe", "olmoe",
    }
)  # fmt: skip
# olmo2: OLMo 3 files state a window; llama-model.cpp LLM_ARCH_OLMO2 then sets
# set_swa_pattern(4) (PR #16015), three sliding layers to one full.
SWA_PATTERN = {"gemma2": 2, "gpt-oss": 2, "cohere2": 4, "exaone4": 4, "olmo2": 4, "gemma3": 6}
_SPLIT = re.compile(r"^(?P<stem>.*)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$")


def read_gguf(path: Path) -> tuple[ModelSpec, CheckpointWeights]:
    """(spec, exact weight bytes by tensor) from the GGUF header at `path` (and the other
    files of a split GGUF).

    Raises:
        KvplanError: one line naming the file and the key or problem (not a GGUF file,
            truncated, an unknown architecture, a missing or unusable key).
    """
    fields, tensors = _read(path)
    arch = _text(path, fields, "general.architecture")
    if arch in ENCODER_FAMILIES:
        raise KvplanError(f"{path}: general.architecture {arch!r} {ENCODER_REFUSAL}")
    if arch not in DENSE_ARCHS:
        raise KvplanError(
            f"{path}: general.architecture {arch!r} is not an architecture kvplan reads from "
            f"GGUF (known: {', '.join(sorted(DENSE_ARCHS))}); import its config.json instead"
        )
    spec = _spec(path, arch, fields, tensors)
    every = [*tensors, *_other_splits_tensors(path, fields)]
    return spec, gguf_checkpoint(every, spec.num_layers, str(path))


def _read(path: Path) -> tuple[dict[str, Any], list[TensorHeader]]:
    """Metadata (key → Python value) and every tensor's name, ggml type, shape and bytes: the
    bounded header reader (kvplan.catalog.gguf_header), whose every refusal names the byte."""
    check_regular(path)  # a pipe would block the memory map; a name too long is one line
    header = read_header(path)
    return header.fields, header.tensors


def _value(path: Path, fields: dict[str, Any], key: str, default: Any = KvplanError) -> Any:
    if key in fields:
        return fields[key]
    if default is KvplanError:
        raise KvplanError(f"{path}: GGUF key {key} is missing")
    return default


def _text(path: Path, fields: dict[str, Any], key: str) -> str:
    value = _value(path, fields, key)
    if not isinstance(value, str):
        raise KvplanError(f"{path}: GGUF key {key} is {value!r}, not a string")
    return value


def _count(path: Path, fields: dict[str, Any], key: str, default: Any = KvplanError) -> int:
    """A positive count, or a per-layer array whose entries all agree."""
    value = _value(path, fields, key, default)
    if isinstance(value, list):
        distinct = set(value)
        if len(distinct) != 1:
            raise KvplanError(
                f"{path}: GGUF key {key} varies per layer ({sorted(distinct)[:4]}…): kvplan's "
                "model spec holds one value (hybrid and per-layer-head models are not read)"
            )
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise KvplanError(f"{path}: GGUF key {key} is {value!r}, not a positive integer")
    return value


def _spec(path: Path, arch: str, fields: dict[str, Any], tensors: list[TensorHeader]) -> ModelSpec:
    def key(name: str) -> str:
        return f"{arch}.{name}"

    blocks = _count(path, fields, key("block_count"))
    layers = blocks - _nextn_layers(path, arch, fields, key, blocks)
    for name in ("attention.head_count", "attention.head_count_kv", "feed_forward_length"):
        value = fields.get(key(name))
        if isinstance(value, list) and len(value) != blocks:
            # llama.cpp reads one entry per block; any other length is a broken file.
            raise KvplanError(
                f"{path}: GGUF key {key(name)} has {len(value)} per-layer entries, "
                f"but {key('block_count')} is {blocks}"
            )
    hidden = _count(path, fields, key("embedding_length"))
    heads = _count(path, fields, key("attention.head_count"))
    kv_heads = _count(path, fields, key("attention.head_count_kv"), heads)
    head_dim = _count(path, fields, key("attention.key_length"), hidden // heads)
    value_dim = _count(path, fields, key("attention.value_length"), head_dim)
    names = {tensor.name for tensor in tensors}
    vocab = len(fields.get("tokenizer.ggml.tokens") or []) or _count(
        path, fields, key("vocab_size")
    )
    document: dict[str, Any] = {
        "name": path.stem.lower(),
        "aliases": [str(path)],
        "source": path.resolve().as_uri(),
        "family": arch,
        "hidden_size": hidden,
        "num_layers": layers,
        "vocab_size": vocab,
        "intermediate_size": _count(path, fields, key("feed_forward_length"), 4 * hidden),
        "tie_word_embeddings": "output.weight" not in names,
        "max_context": _count(path, fields, key("context_length")),
        "attention": {"num_heads": heads, "num_kv_heads": kv_heads, "head_dim": head_dim},
        "notes": [f"read from the GGUF header of {path.name}"],
    }
    if arch == "deepseek2":
        document |= _mla(path, fields, key, head_dim, value_dim)
        qk_head = document["mla"]["qk_nope_head_dim"] + document["mla"]["qk_rope_head_dim"]
        document["attention"] = {"num_heads": heads, "num_kv_heads": heads, "head_dim": qk_head}
    else:
        if value_dim != head_dim:
            raise KvplanError(
                f"{path}: GGUF key {key('attention.value_length')} {value_dim} differs from "
                f"key_length {head_dim}: kvplan's model spec holds one head_dim"
            )
        plan = _llama4_plan if arch == "llama4" else _layer_plan
        document["layers"] = plan(path, arch, fields, key, layers)
    experts = fields.get(key("expert_count"))
    if experts:
        document["moe"] = _moe(path, fields, key)
        if arch == "llama4":
            document["moe"] |= _llama4_moe(path, fields, key, names)
            # feed_forward_length is the dense layers' width; experts and the shared expert
            # use expert_feed_forward_length (the catalogue's llama-4 entries read the same).
            document["intermediate_size"] = document["moe"]["expert_intermediate_size"]
    if layers < blocks:
        document["notes"].append(
            f"{blocks - layers} NextN/MTP block(s) past the {layers} decoder layers: no KV "
            "(llama.cpp n_layer_kv_from_start); their tensors count in the weights"
        )
    try:
        return ModelSpec.model_validate(document)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise KvplanError(
            f"{path}: the GGUF header gives an invalid {where}: {first['msg']}"
        ) from None


def _layer_plan(path: Path, arch: str, fields: dict[str, Any], key, layers: int) -> dict[str, Any]:
    window = fields.get(key("attention.sliding_window"))
    pattern = fields.get(key("attention.sliding_window_pattern"))
    if not window:
        return {"pattern": ["full"]}
    window = _count(path, fields, key("attention.sliding_window"))
    if isinstance(pattern, list):
        if len(pattern) != layers:
            raise KvplanError(
                f"{path}: GGUF key {key('attention.sliding_window_pattern')} has {len(pattern)} "
                f"entries for {layers} layers"
            )
        kinds = ["sliding" if flag else "full" for flag in pattern]
        return {"kinds": kinds, "sliding_window": window}
    every = pattern if isinstance(pattern, int) and pattern > 0 else SWA_PATTERN.get(arch)
    if every is None:  # a window with no pattern: every layer slides (Mistral v0.1 style)
        return {"pattern": ["sliding"], "sliding_window": window}
    kinds = ["sliding" if i % every < every - 1 else "full" for i in range(layers)]
    return {"kinds": kinds, "sliding_window": window}


def _nextn_layers(path: Path, arch: str, fields: dict[str, Any], key, blocks: int) -> int:
    """GLM-4.5's NextN/MTP blocks counted in block_count (0 for other architectures)."""
    nextn = fields.get(key("nextn_predict_layers")) if arch == "glm4moe" else None
    if not nextn:
        return 0
    if isinstance(nextn, bool) or not isinstance(nextn, int) or not 0 < nextn < blocks:
        raise KvplanError(
            f"{path}: GGUF key {key('nextn_predict_layers')} is {nextn!r}: expected fewer "
            f"than {key('block_count')} {blocks}"
        )
    return nextn


# llama-model.cpp LLM_ARCH_LLAMA4: "hparams.n_swa = 8192; hparams.set_swa_pattern(4); //
# pattern: 3 chunked - 1 full" (the chunk is not a GGUF key; Scout and Maverick share it).
LLAMA4_CHUNK_TOKENS = 8192
LLAMA4_CHUNK_PATTERN = 4


def _llama4_plan(path: Path, arch: str, fields: dict[str, Any], key, layers: int) -> dict:
    """Llama 4's chunked and full layers as llama.cpp sets them."""
    if fields.get(key("attention.sliding_window")) == 0:  # stated 0: no chunking (newer builds)
        return {"pattern": ["full"]}
    every = LLAMA4_CHUNK_PATTERN
    kinds = ["chunked" if i % every < every - 1 else "full" for i in range(layers)]
    return {"kinds": kinds, "chunk_size": LLAMA4_CHUNK_TOKENS}


def _llama4_moe(path: Path, fields: dict[str, Any], key, names: set[str]) -> dict[str, Any]:
    """Interleaved MoE (layer i when (i + 1) mod step = 0), the dense FFN width of the other
    layers, and the shared expert whose tensors the file carries."""
    step = _count(path, fields, key("interleave_moe_layer_step"), 1)
    extra: dict[str, Any] = {"layer_step": step, "layer_offset": step - 1}
    if step > 1:
        extra["dense_intermediate_size"] = _count(path, fields, key("feed_forward_length"))
    if not fields.get(key("expert_shared_count")) and any("ffn_up_shexp" in n for n in names):
        extra["num_shared_experts"] = 1
    return extra


def _mla(path: Path, fields: dict[str, Any], key, key_length: int, value_length: int) -> dict:
    """DeepSeek-V2/V3 latent geometry; re-converted files (llama.cpp PR #12801) keep the
    per-head sizes in key_length_mla / value_length_mla."""
    rope = _count(path, fields, key("rope.dimension_count"))
    qk_head = _count(path, fields, key("attention.key_length_mla"), key_length)
    v_head = _count(path, fields, key("attention.value_length_mla"), value_length)
    mla = {
        "kv_lora_rank": _count(path, fields, key("attention.kv_lora_rank")),
        "qk_rope_head_dim": rope,
        "qk_nope_head_dim": qk_head - rope,
        "v_head_dim": v_head,
    }
    q_lora = fields.get(key("attention.q_lora_rank"))
    if q_lora:
        mla["q_lora_rank"] = int(q_lora)
    return {"mla": mla, "layers": {"pattern": ["mla"]}}


def _moe(path: Path, fields: dict[str, Any], key) -> dict[str, Any]:
    moe: dict[str, Any] = {
        "num_experts": _count(path, fields, key("expert_count")),
        "experts_per_token": _count(path, fields, key("expert_used_count")),
        "expert_intermediate_size": _count(
            path, fields, key("expert_feed_forward_length"), fields.get(key("feed_forward_length"))
        ),
    }
    shared = fields.get(key("expert_shared_count"))
    if shared:
        moe["num_shared_experts"] = int(shared)
    dense = fields.get(key("leading_dense_block_count"))
    if dense:
        moe["dense_layers"] = int(dense)
    return moe


def _other_splits_tensors(path: Path, fields: dict[str, Any]) -> list[TensorHeader]:
    """Tensors of the other files of a split GGUF (`-00001-of-00003.gguf`)."""
    count = int(fields.get("split.count") or 1)
    match = _SPLIT.match(path.name)
    if count <= 1 or match is None:
        return []
    tensors = []
    for index in range(1, count + 1):
        name = f"{match['stem']}-{index:05d}-of-{count:05d}.gguf"
        if name == path.name:
            continue
        tensors += _read(path.with_name(name))[1]
    return tensors
