"""Hugging Face `config.json` -> ModelSpec, with the reading taken of every ambiguous field.

Configs are where KV calculators go wrong by 8x-71x: a `head_dim` that is not
hidden/heads (Gemma), `multi_query: true` with no KV head count (Falcon), a
`sliding_window` that may or may not apply to every layer (Mistral, Qwen2), MLA
configs whose `num_key_value_heads` is not what is cached (DeepSeek). Each
family below is one small function that reads its config the way transformers
builds the model, and says so in a warning whenever it had to choose.

The only I/O here is reading `config.json` and `model.safetensors.index.json`.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kvplan.errors import KvplanError
from kvplan.specs import ModelSpec

INDEX_FILE = "model.safetensors.index.json"
CONFIG_FILE = "config.json"

# torch_dtype / dtype spellings -> weight dtype names.
_TORCH_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


@dataclass(frozen=True)
class HfImport:
    """A ModelSpec read from a Hugging Face config, the readings taken, and exact weight bytes."""

    spec: ModelSpec
    warnings: tuple[str, ...]
    weights_bytes: int | None  # model.safetensors.index.json metadata.total_size, when present


class _Config:
    """One config dict plus where it came from: typed reads that fail as one-line errors."""

    def __init__(self, data: dict[str, Any], where: str, model_type: str) -> None:
        self.data = data
        self.where = where
        self.model_type = model_type
        self.warnings: list[str] = []
        self.defaulted: set[str] = set()  # keys filled from transformers defaults, not stated

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def get(self, key: str, default: Any = None) -> Any:
        value = self.data.get(key)
        return default if value is None else value

    def int(self, *keys: str) -> int:
        """The first of `keys` present (aliases, in order); missing or non-integer is an error."""
        for key in keys:
            if self.has(key):
                return self._positive(key, self.data[key])
        also = f" (or {', '.join(repr(k) for k in keys[1:])})" if len(keys) > 1 else ""
        raise KvplanError(
            f"{self.where}: required field {keys[0]!r}{also} is missing for model_type "
            f"{self.model_type!r}"
        )

    def int_or(self, key: str, default: int, why: str) -> int:
        """`key` if present, else `default` with a warning saying where the default comes from."""
        if self.has(key):
            return self._positive(key, self.data[key])
        self.warn(f"{key} absent: {default} used ({why})")
        return default

    def count(self, key: str, default: int) -> int:
        """An optional whole number (0 allowed: strides, offsets, counts), `default` if absent."""
        value = self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise KvplanError(
                f"{self.where}: field {key!r} is {value!r}; expected a non-negative integer"
            )
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise KvplanError(f"{self.where}: field {key!r} is {value!r}; expected true or false")
        return value

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def _positive(self, key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise KvplanError(
                f"{self.where}: field {key!r} is {value!r}; expected a positive integer"
            )
        return value


# --- shared readings ------------------------------------------------------------------------


def _head_dim(c: _Config, hidden: int, num_heads: int) -> int:
    """head_dim as stated; hidden/heads only when the config gives none."""
    derived = hidden // num_heads if hidden % num_heads == 0 else None
    if not c.has("head_dim"):
        if derived is None:
            raise KvplanError(
                f"{c.where}: no head_dim and hidden_size {hidden} is not a multiple of "
                f"num_attention_heads {num_heads}"
            )
        return derived
    head_dim = c.int("head_dim")
    if head_dim != derived:
        # Gemma 2 9B: 256 stated, 3584/16 = 224. The weights are 256 wide; the config wins.
        would = derived if derived is not None else f"{hidden}/{num_heads} (not an integer)"
        how = "from the default" if "head_dim" in c.defaulted else "as stated"
        c.warn(
            f"head_dim {head_dim} used {how}; hidden_size/num_attention_heads would give {would}"
        )
    return head_dim


def _weight_dtype(c: _Config, top: _Config | None = None) -> str:
    """Released weight dtype from torch_dtype (or the newer `dtype`), else bf16 with a warning."""
    for cfg in (c, top) if top is not None else (c,):
        for key in ("torch_dtype", "dtype"):
            name = cfg.get(key)
            if isinstance(name, str) and name in _TORCH_DTYPES:
                return _TORCH_DTYPES[name]
    c.warn("no torch_dtype in the config: weights read as fp32 (transformers' default)")
    return "fp32"


def _attention(c: _Config, hidden: int, *, num_kv_heads: int | None = None, **flags: Any) -> dict:
    num_heads = c.int("num_attention_heads")
    if num_kv_heads is None:
        # No num_key_value_heads means one KV head per query head (MHA), as in transformers.
        num_kv_heads = c.int("num_key_value_heads") if c.has("num_key_value_heads") else num_heads
    return {
        "num_heads": num_heads,
        "num_kv_heads": num_kv_heads,
        "head_dim": _head_dim(c, hidden, num_heads),
        **flags,
    }


def _base(c: _Config, *, tie_default: bool) -> dict[str, Any]:
    """Fields every llama-like config states the same way."""
    hidden = c.int("hidden_size")
    return {
        "family": c.model_type,
        "hidden_size": hidden,
        "num_layers": c.int("num_hidden_layers"),
        "vocab_size": c.int("vocab_size"),
        "intermediate_size": c.int("intermediate_size"),
        "tie_word_embeddings": c.flag("tie_word_embeddings", tie_default),
        "max_context": c.int("max_position_embeddings"),
        "weight_dtype": _weight_dtype(c),
    }


def _full() -> dict:
    return {"pattern": ["full"]}


def _window_or_full(c: _Config, kinds: list[str], window: int | None, max_context: int) -> dict:
    """A layer plan; sliding layers whose window covers the whole context become full."""
    if "sliding" not in kinds:
        return _plan(kinds)
    if window is None:
        raise KvplanError(f"{c.where}: sliding layers but no 'sliding_window' given")
    window = c._positive("sliding_window", window)
    if window >= max_context:
        # Phi-3-mini-128k: sliding_window 262144 > max_position_embeddings 131072; it never binds.
        c.warn(
            f"sliding_window {window} >= max_position_embeddings {max_context}: "
            "it never binds, layers read as full attention"
        )
        return _plan(["full" if k == "sliding" else k for k in kinds])
    return _plan(kinds, sliding_window=window)


def _plan(kinds: list[str], **extra: Any) -> dict:
    """Compact form when every layer is the same kind, explicit kinds otherwise."""
    if len(set(kinds)) == 1:
        return {"pattern": [kinds[0]], **extra}
    return {"kinds": kinds, **extra}


_LAYER_TYPES = {
    "full_attention": "full",
    "sliding_attention": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "state",
    "mamba": "state",
    "attention": "full",
}


def _layer_types(c: _Config, num_layers: int) -> list[str] | None:
    """Per-layer kinds from the config's `layer_types` list, when it has one."""
    types = c.get("layer_types")
    if types is None:
        return None
    if not isinstance(types, list) or len(types) != num_layers:
        raise KvplanError(
            f"{c.where}: layer_types must list {num_layers} entries (num_hidden_layers), "
            f"got {types!r:.80}"
        )
    unknown = sorted({t for t in types if t not in _LAYER_TYPES})
    if unknown:
        raise KvplanError(
            f"{c.where}: layer_types has unknown value(s) {unknown}; known: {sorted(_LAYER_TYPES)}"
        )
    return [_LAYER_TYPES[t] for t in types]


def _all_windowed(c: _Config, base: dict, reason: str) -> dict:
    """Plan for configs whose one `sliding_window` applies to every layer (Mistral, Starcoder2)."""
    n = base["num_layers"]
    kinds = _layer_types(c, n)
    if kinds is not None:
        return _window_or_full(c, kinds, c.get("sliding_window"), base["max_context"])
    if not c.has("sliding_window"):
        return _full()
    window = c.int("sliding_window")
    plan = _window_or_full(c, ["sliding"] * n, window, base["max_context"])
    if "sliding_window" in plan:
        c.warn(
            f"sliding_window {window} with no layer_types: every layer read as windowed ({reason})"
        )
    return plan


# --- quantization ---------------------------------------------------------------------------


def _quantization(c: _Config, spec: dict[str, Any]) -> None:
    """Weight dtype from quantization_config; the KV cache keeps the activation dtype."""
    q = c.get("quantization_config")
    if not isinstance(q, dict):
        return
    method = str(q.get("quant_method", "")).lower()
    activation = spec["weight_dtype"]
    if method == "fp8":
        block = q.get("weight_block_size")
        if block == [128, 128]:
            spec["weight_dtype"] = "fp8_block"  # DeepSeek-V3: one fp32 scale per 128x128 block
        else:
            spec["weight_dtype"] = "fp8"
            if block is not None:
                c.warn(f"fp8 weight_block_size {block} read as fp8 with negligible scales")
        read = spec["weight_dtype"]
    elif method == "mxfp4" and spec.get("moe") is not None:
        # GPT-OSS: routed experts in MXFP4, attention/router/embeddings left in bf16.
        spec["moe"]["expert_weight_dtype"] = "mxfp4"
        read = "mxfp4 routed experts"
    elif method == "bitsandbytes" and (q.get("load_in_4bit") or q.get("load_in_8bit")):
        # NF4/FP4 keep one absmax per 64 values: close to, not exactly, int4 group-128 scales.
        spec["weight_dtype"] = "int4" if q.get("load_in_4bit") else "int8"
        read = f"{spec['weight_dtype']} (bitsandbytes; scale overhead approximate)"
    elif method in ("gptq", "awq") and q.get("bits") in (4, 8):
        spec["weight_dtype"] = "int4" if q["bits"] == 4 else "int8"
        read = spec["weight_dtype"]
        if q["bits"] == 4 and q.get("group_size", 128) != 128:
            c.warn(f"{method} group_size {q.get('group_size')} counted as int4 group-128 scales")
    else:
        c.warn(
            f"quantization_config quant_method {method or None!r} not understood: "
            f"weights counted as {activation}"
        )
        return
    c.warn(
        f"quantization_config {method}: weights read as {read}; the KV cache stays in the "
        f"activation dtype ({activation}) unless a KV dtype is chosen"
    )


# --- families -------------------------------------------------------------------------------


def _llama(c: _Config) -> dict[str, Any]:
    base = _base(c, tie_default=False)
    bias = c.flag("attention_bias", False)
    return {
        **base,
        "attention": _attention(c, base["hidden_size"], qkv_bias=bias, o_bias=bias),
        "layers": _full(),
        "mlp_bias": c.flag("mlp_bias", False),
    }


def _mistral(c: _Config) -> dict[str, Any]:
    spec = _llama(c)
    # Mistral-7B-v0.1 states sliding_window 4096 and MistralAttention windows every layer;
    # v0.2+ publish null. Reading the window as "some layers" would be 8x off at 32k.
    spec["layers"] = _all_windowed(c, spec, "MistralAttention windows all layers")
    return spec


def _mixtral(c: _Config) -> dict[str, Any]:
    spec = _mistral(c)
    spec["moe"] = {
        "num_experts": c.int("num_local_experts"),
        "experts_per_token": c.int("num_experts_per_tok"),
        "expert_intermediate_size": spec["intermediate_size"],
    }
    return spec


def _qwen_plan(c: _Config, base: dict) -> dict:
    """Qwen2/Qwen3: the window applies only with use_sliding_window, from max_window_layers up."""
    n = base["num_layers"]
    kinds = _layer_types(c, n)
    if kinds is not None:
        return _window_or_full(c, kinds, c.get("sliding_window"), base["max_context"])
    window = c.get("sliding_window")
    if not c.flag("use_sliding_window", False):
        if window is not None:
            c.warn(f"sliding_window {window} ignored: use_sliding_window is false")
        return _full()
    first = c.count("max_window_layers", 0)
    # transformers Qwen2Config: "the first max_window_layers layers use full attention", the
    # rest are windowed. (A Qwen maintainer's forum answer states the opposite; the code wins.)
    kinds = ["sliding" if i >= first else "full" for i in range(n)]
    c.warn(
        f"use_sliding_window true: layers {first}..{n - 1} windowed at {window}, the first "
        f"max_window_layers {first} full (transformers' reading)"
    )
    return _window_or_full(c, kinds, window, base["max_context"])


def _qwen_moe(c: _Config, base: dict, shared: bool) -> dict[str, Any]:
    step = c.count("decoder_sparse_step", 1) or 1
    dense_only = c.get("mlp_only_layers") or []
    if dense_only:
        c.warn(f"mlp_only_layers {dense_only} not expressible: every step-th layer counted as MoE")
    moe = {
        "num_experts": c.int("num_experts"),
        "experts_per_token": c.int("num_experts_per_tok"),
        "expert_intermediate_size": c.int("moe_intermediate_size"),
        # transformers Qwen2-MoE: layer i is sparse when (i + 1) % decoder_sparse_step == 0.
        "layer_step": step,
        "layer_offset": step - 1,
    }
    if shared:
        moe |= {
            "num_shared_experts": 1,
            "shared_expert_intermediate_size": c.int("shared_expert_intermediate_size"),
            "shared_expert_gate": True,
        }
    return moe


def _qwen2(c: _Config) -> dict[str, Any]:
    base = _base(c, tie_default=False)
    # Qwen2 always has q/k/v biases (no config switch), and no o_proj bias.
    return {
        **base,
        "attention": _attention(c, base["hidden_size"], qkv_bias=True),
        "layers": _qwen_plan(c, base),
    }


def _qwen2_moe(c: _Config) -> dict[str, Any]:
    spec = _qwen2(c)
    spec["moe"] = _qwen_moe(c, spec, shared=True)
    return spec


def _qwen3(c: _Config) -> dict[str, Any]:
    base = _base(c, tie_default=False)
    bias = c.flag("attention_bias", False)
    return {
        **base,
        "attention": _attention(c, base["hidden_size"], qkv_bias=bias, o_bias=bias, qk_norm=True),
        "layers": _qwen_plan(c, base),
    }


def _qwen3_moe(c: _Config) -> dict[str, Any]:
    spec = _qwen3(c)
    spec["moe"] = _qwen_moe(c, spec, shared=False)
    return spec


def _qwen3_next(c: _Config) -> dict[str, Any]:
    base = _base(c, tie_default=False)
    n = base["num_layers"]
    kinds = _layer_types(c, n)
    if kinds is None:
        # transformers Qwen3-Next: every full_attention_interval-th layer is full attention.
        interval = c.count("full_attention_interval", 4) or 4
        kinds = ["full" if (i + 1) % interval == 0 else "state" for i in range(n)]
    value_heads, key_heads = c.int("linear_num_value_heads"), c.int("linear_num_key_heads")
    key_dim, value_dim = c.int("linear_key_head_dim"), c.int("linear_value_head_dim")
    state = {
        "kind": "gated_delta_net",
        "conv_kernel": c.int("linear_conv_kernel_dim"),
        # The short conv runs over q, k and v together: 2 x Hk x Dk + Hv x Dv channels.
        "conv_channels": 2 * key_heads * key_dim + value_heads * value_dim,
        "ssm_heads": value_heads,
        "ssm_head_dim": key_dim,  # each value head keeps a Dk x Dv matrix
        "ssm_state_size": value_dim,
        "inner_size": value_heads * value_dim,
        "num_key_heads": key_heads,
        "key_head_dim": key_dim,
    }
    spec = {
        **base,
        "attention": _attention(
            c,
            base["hidden_size"],
            qkv_bias=c.flag("attention_bias", False),
            qk_norm=True,
            output_gate=True,
        ),
        "layers": _plan(kinds),
        "state": state,
    }
    spec["moe"] = _qwen_moe(c, spec, shared=True)
    return spec


def _gemma(c: _Config) -> dict[str, Any]:
    spec = _llama(c)
    spec["tie_word_embeddings"] = c.flag("tie_word_embeddings", True)  # Gemma ties by default
    return spec


def _gemma_plan(c: _Config, base: dict, every: int) -> dict:
    """Gemma 2/3 local/global layers: layer_types when given, else one global every `every`."""
    n = base["num_layers"]
    kinds = _layer_types(c, n)
    if kinds is None:
        # Gemma 2: even layers local (sliding), odd global. Gemma 3: 5 local then 1 global.
        kinds = ["full" if (i + 1) % every == 0 else "sliding" for i in range(n)]
        c.warn(
            f"no layer_types: one global layer every {every} (layer {every - 1} first), "
            f"the rest windowed at {c.get('sliding_window')}"
        )
    return _window_or_full(c, kinds, c.int("sliding_window"), base["max_context"])


def _gemma2(c: _Config) -> dict[str, Any]:
    spec = _gemma(c)
    spec["layers"] = _gemma_plan(c, spec, every=2)
    spec["norms_per_layer"] = 4  # pre/post attention and pre/post feed-forward
    return spec


# transformers Gemma3TextConfig defaults: the multimodal configs leave these out of text_config.
_GEMMA3_TEXT_DEFAULTS = {
    "vocab_size": 262_208,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 131_072,
    "sliding_window": 4096,
}


def _gemma3_text(c: _Config) -> dict[str, Any]:
    for key, default in _GEMMA3_TEXT_DEFAULTS.items():
        if not c.has(key):
            c.warn(f"{key} absent: {default} used (transformers Gemma3TextConfig default)")
            c.data = {**c.data, key: default}
            c.defaulted.add(key)
    spec = _gemma(c)
    spec["attention"]["qk_norm"] = True
    every = c.int("sliding_window_pattern") if c.has("sliding_window_pattern") else 6
    spec["layers"] = _gemma_plan(c, spec, every=every)
    spec["norms_per_layer"] = 4
    return spec


def _phi3(c: _Config) -> dict[str, Any]:
    spec = _llama(c)
    # Phi-3 states one sliding_window for the model and Phi3Attention applies it to every layer;
    # taken as given (2047 for mini-4k; 262144 for mini-128k, which never binds).
    spec["layers"] = _all_windowed(c, spec, "Phi3 windows all layers")
    return spec


def _falcon_kv_heads(c: _Config, num_heads: int) -> int:
    """Falcon's KV head count: three spellings and an override that transformers applies."""
    stated_key = next((k for k in ("num_kv_heads", "n_head_kv") if c.has(k)), None)
    stated = c.int(stated_key) if stated_key else None
    if c.flag("new_decoder_architecture", False):
        # Falcon-40B/180B: grouped KV; multi_query is ignored by this architecture.
        return stated if stated is not None else num_heads
    if c.flag("multi_query", True):
        if stated is None:
            c.warn("multi_query true with no num_kv_heads: 1 KV head (MQA)")
        elif stated != 1:
            c.warn(f"multi_query true contradicts {stated_key} {stated}: 1 KV head used (MQA)")
        return 1
    return stated if stated is not None else num_heads


def _falcon(c: _Config) -> dict[str, Any]:
    hidden = c.int("hidden_size", "n_embed")
    num_heads = c.int("num_attention_heads", "n_head")
    bias = c.flag("bias", False)
    parallel = c.flag("parallel_attn", True)
    new_arch = c.flag("new_decoder_architecture", False)
    num_kv_heads = _falcon_kv_heads(c, num_heads)
    return {
        "family": c.model_type,
        "hidden_size": hidden,
        "num_layers": c.int("num_hidden_layers", "n_layer"),
        "vocab_size": c.int("vocab_size"),
        "intermediate_size": c.int_or("ffn_hidden_size", 4 * hidden, "FalconConfig: 4 x hidden"),
        "tie_word_embeddings": c.flag("tie_word_embeddings", True),
        "max_context": c.int_or("max_position_embeddings", 2048, "FalconConfig default"),
        "weight_dtype": _weight_dtype(c),
        "attention": {
            "num_heads": num_heads,
            "num_kv_heads": num_kv_heads,
            "head_dim": _head_dim(c, hidden, num_heads),
            "qkv_bias": bias,
            "o_bias": bias,
        },
        "layers": _full(),
        "mlp": "plain",
        "mlp_bias": bias,
        "norm": "layer",
        # Old parallel blocks share one LayerNorm; new_decoder_architecture has ln_attn + ln_mlp.
        "norms_per_layer": 1 if parallel and not new_arch else 2,
    }


def _gpt2(c: _Config) -> dict[str, Any]:
    hidden = c.int("n_embd")
    num_heads = c.int("n_head")
    positions = c.int("n_positions")
    return {
        "family": c.model_type,
        "hidden_size": hidden,
        "num_layers": c.int("n_layer"),
        "vocab_size": c.int("vocab_size"),
        "intermediate_size": c.int("n_inner") if c.has("n_inner") else 4 * hidden,
        "tie_word_embeddings": c.flag("tie_word_embeddings", True),
        "max_context": positions,
        "weight_dtype": _weight_dtype(c),
        # GPT-2 is plain MHA: every head caches its own K and V.
        "attention": {
            "num_heads": num_heads,
            "num_kv_heads": num_heads,
            "head_dim": _head_dim(c, hidden, num_heads),
            "qkv_bias": True,
            "o_bias": True,
        },
        "layers": _full(),
        "mlp": "plain",
        "mlp_bias": True,
        "norm": "layer",
        "learned_positions": positions,
    }


def _starcoder2(c: _Config) -> dict[str, Any]:
    base = _base(c, tie_default=True)
    bias = c.flag("use_bias", True)
    spec = {
        **base,
        "attention": _attention(c, base["hidden_size"], qkv_bias=bias, o_bias=bias),
        "mlp": "plain",
        "mlp_bias": bias,
        "norm": "layer",
    }
    spec["layers"] = _all_windowed(c, spec, "Starcoder2Attention windows all layers")
    return spec


def _cohere(c: _Config) -> dict[str, Any]:
    base = _base(c, tie_default=True)
    bias = c.flag("attention_bias", False)
    qk_norm = c.flag("use_qk_norm", False)
    if qk_norm:
        c.warn("use_qk_norm: Cohere's per-head LayerNorm counted as one head_dim-wide norm")
    # Cohere's LayerNorm has a weight and no bias: counted like an RMSNorm (one vector).
    return {
        **base,
        "attention": _attention(
            c, base["hidden_size"], qkv_bias=bias, o_bias=bias, qk_norm=qk_norm
        ),
        "layers": _full(),
        "norm": "rms",
        "norms_per_layer": 1,  # parallel attention + MLP behind one input_layernorm
    }


def _deepseek(c: _Config) -> dict[str, Any]:
    base = _base(c, tie_default=False)
    num_heads = c.int("num_attention_heads")
    mla = {
        "kv_lora_rank": c.int("kv_lora_rank"),
        "qk_rope_head_dim": c.int("qk_rope_head_dim"),
        "qk_nope_head_dim": c.int("qk_nope_head_dim"),
        "v_head_dim": c.int("v_head_dim"),
        "q_lora_rank": c.int("q_lora_rank") if c.has("q_lora_rank") else None,
    }
    stated_kv = c.get("num_key_value_heads", num_heads)
    latent = mla["kv_lora_rank"] + mla["qk_rope_head_dim"]
    c.warn(
        f"MLA: num_key_value_heads {stated_kv} is not the cached head count; each layer caches "
        f"one latent of kv_lora_rank + qk_rope_head_dim = {latent}"
    )
    if c.count("num_nextn_predict_layers", 0):
        c.warn(
            f"num_nextn_predict_layers {c.get('num_nextn_predict_layers')}: MTP layers are not "
            "counted (weights or KV); speculative decoding with them adds one layer's KV each"
        )
    moe = None
    if c.has("n_routed_experts"):
        moe = {
            "num_experts": c.int("n_routed_experts"),
            "experts_per_token": c.int("num_experts_per_tok"),
            "expert_intermediate_size": c.int("moe_intermediate_size"),
            "num_shared_experts": c.count("n_shared_experts", 0),
            "dense_layers": c.count("first_k_dense_replace", 0),
            # transformers DeepSeek: MoE when i >= first_k_dense_replace, i % moe_layer_freq == 0.
            "layer_step": c.count("moe_layer_freq", 1) or 1,
            # V3's noaux_tc routing adds e_score_correction_bias: one value per expert.
            "router_bias": c.get("topk_method") == "noaux_tc",
        }
    return {
        **base,
        # Per-head q/k width nope + rope; used only for the decompressed (hf engine) reading.
        "attention": {
            "num_heads": num_heads,
            "num_kv_heads": stated_kv,
            "head_dim": mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"],
        },
        "mla": mla,
        "moe": moe,
        "layers": {"pattern": ["mla"]},
    }


def _gpt_oss(c: _Config) -> dict[str, Any]:
    base = _base(c, tie_default=False)
    n = base["num_layers"]
    kinds = _layer_types(c, n)
    if kinds is None:
        # GptOssConfig default: alternate sliding and full, sliding first.
        kinds = ["sliding" if i % 2 == 0 else "full" for i in range(n)]
        c.warn("no layer_types: alternating sliding/full layers, sliding first")
    bias = c.flag("attention_bias", True)
    spec = {
        **base,
        "attention": _attention(c, base["hidden_size"], qkv_bias=bias, o_bias=bias, sinks=True),
        "layers": _window_or_full(c, kinds, c.get("sliding_window"), base["max_context"]),
        "moe": {
            "num_experts": c.int("num_local_experts"),
            "experts_per_token": c.int("num_experts_per_tok", "experts_per_token"),
            "expert_intermediate_size": base["intermediate_size"],
            "router_bias": True,
            "expert_bias": True,
        },
    }
    return spec


def _llama4(c: _Config) -> dict[str, Any]:
    hidden = c.int("hidden_size")
    n = c.int("num_hidden_layers")
    base = {
        **_base(c, tie_default=False),
        # Llama 4: intermediate_size is the expert width; dense layers use intermediate_size_mlp.
        "intermediate_size": c.int("intermediate_size_mlp"),
    }
    kinds = _layer_types(c, n)
    if kinds is None:
        nope = c.get("no_rope_layers") or []
        if (
            not isinstance(nope, list)
            or (nope and len(nope) != n)
            or not all(v in (0, 1) and not isinstance(v, bool) for v in nope)
        ):
            raise KvplanError(
                f"{c.where}: no_rope_layers must list {n} entries of 0 or 1, got {nope!r:.80}"
            )
        if not nope:
            # Llama4TextConfig: no_rope_layer_interval 4 -> every 4th layer NoPE (global).
            nope = [int((i + 1) % 4 != 0) for i in range(n)]
            c.warn("no_rope_layers empty: every 4th layer read as global NoPE, the rest chunked")
        # no_rope_layers[i] == 1 means RoPE, and RoPE layers use chunked local attention.
        kinds = ["chunked" if use_rope else "full" for use_rope in nope]
    if c.flag("use_qk_norm", False):
        c.warn("use_qk_norm: Llama 4's L2 q/k norm has no weights; not counted as qk_norm")
    step = c.count("interleave_moe_layer_step", 1)
    chunk = c.int("attention_chunk_size") if "chunked" in kinds else None
    spec = {
        **base,
        "attention": _attention(c, hidden),
        "layers": _plan(kinds, chunk_size=chunk) if chunk else _plan(kinds),
    }
    if step and c.count("num_local_experts", 0) and c.count("num_experts_per_tok", 0):
        spec["moe"] = {
            "num_experts": c.int("num_local_experts"),
            "experts_per_token": c.int("num_experts_per_tok"),
            "expert_intermediate_size": c.int("intermediate_size"),
            "num_shared_experts": 1,  # Llama 4 always adds one shared expert of the same width
            # transformers Llama4: moe_layers = range(step - 1, n, step).
            "layer_step": step,
            "layer_offset": step - 1,
        }
    return spec


def _jamba(c: _Config) -> dict[str, Any]:
    base = _base(c, tie_default=False)
    n, hidden = base["num_layers"], base["hidden_size"]
    period, offset = c.int("attn_layer_period"), c.count("attn_layer_offset", 0)
    kinds = ["full" if i % period == offset else "state" for i in range(n)]
    inner = c.count("mamba_expand", 2) * hidden
    # mamba_dt_rank "auto" is ceil(hidden / 16), as JambaConfig computes it.
    dt_rank = -(-hidden // 16) if c.get("mamba_dt_rank") == "auto" else c.count("mamba_dt_rank", 0)
    dt_rank = dt_rank or -(-hidden // 16)
    d_state = c.int("mamba_d_state")
    spec = {
        **base,
        "attention": _attention(c, hidden),
        "layers": _window_or_full(c, kinds, c.get("sliding_window"), base["max_context"]),
        "state": {
            "kind": "mamba1",
            "conv_kernel": c.int("mamba_d_conv"),
            "conv_channels": inner,
            "ssm_heads": inner,
            "ssm_head_dim": 1,
            "ssm_state_size": d_state,
            "inner_size": inner,
            "dt_rank": dt_rank,
        },
    }
    if c.count("num_experts", 1) > 1:
        spec["moe"] = {
            "num_experts": c.int("num_experts"),
            "experts_per_token": c.int("num_experts_per_tok"),
            "expert_intermediate_size": base["intermediate_size"],
            "layer_step": c.count("expert_layer_period", 1) or 1,
            "layer_offset": c.count("expert_layer_offset", 0),
        }
    return spec


_FAMILIES: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "llama": _llama,
    "mistral": _mistral,
    "mixtral": _mixtral,
    "qwen2": _qwen2,
    "qwen2_moe": _qwen2_moe,
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "qwen3_next": _qwen3_next,
    "gemma": _gemma,
    "gemma2": _gemma2,
    "gemma3": _gemma3_text,  # multimodal wrapper: read from text_config
    "gemma3_text": _gemma3_text,
    "phi3": _phi3,
    "falcon": _falcon,
    "gpt2": _gpt2,
    "starcoder2": _starcoder2,
    "cohere": _cohere,
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "kimi_k2": _deepseek,  # Kimi K2 ships DeepseekV3ForCausalLM with its own model_type
    "gpt_oss": _gpt_oss,
    "llama4": _llama4,  # multimodal wrapper: read from text_config
    "llama4_text": _llama4,
    "jamba": _jamba,
}

SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(_FAMILIES))

# Wrappers whose language model lives in a nested text_config.
_NESTED_TEXT = ("gemma3", "llama4")


# --- entry points ---------------------------------------------------------------------------


def spec_from_hf_config(
    config: dict, *, name: str, source: str
) -> tuple[ModelSpec, tuple[str, ...]]:
    """The ModelSpec for a parsed config.json, and the readings taken (one line each).

    Args:
        config: the parsed config.json object.
        name: catalogue name for the spec.
        source: where the config came from (URL or path); also names it in errors.

    Returns:
        The spec (its notes hold the same readings) and the warnings.

    Raises:
        KvplanError: unknown model_type, a missing or malformed field, or a spec that fails
            validation; one line naming the source, field and value.
    """
    return _spec(config, name=name, source=source, where=source, aliases=())


def _spec(
    config: dict, *, name: str, source: str, where: str, aliases: tuple[str, ...]
) -> tuple[ModelSpec, tuple[str, ...]]:
    if not isinstance(config, dict):
        raise KvplanError(f"{where}: top level is {type(config).__name__}, expected a JSON object")
    model_type = config.get("model_type")
    family = _FAMILIES.get(model_type) if isinstance(model_type, str) else None
    if family is None:
        raise KvplanError(_unknown_type(where, model_type))
    c = _Config(config, where, model_type)
    top = None
    if model_type in _NESTED_TEXT:
        text = config.get("text_config")
        if not isinstance(text, dict):
            raise KvplanError(f"{where}: model_type {model_type!r} needs a text_config object")
        top, c = c, _Config(text, f"{where} text_config", model_type)
    fields = family(c)
    if top is not None:
        # Wrappers state torch_dtype at the top level; text_config may repeat it or not.
        fields["weight_dtype"] = _weight_dtype(_Config({**top.data, **c.data}, where, model_type))
        c.warnings = [w for w in c.warnings if not w.startswith("no torch_dtype")]
        _quantization(top, fields)
        c.warnings += top.warnings
    else:
        _quantization(c, fields)
    warnings = tuple(c.warnings)
    fields |= {"name": name, "source": source, "aliases": aliases, "notes": warnings}
    try:
        spec = ModelSpec.model_validate(fields)
    except ValidationError as error:
        raise KvplanError(_validation_line(where, error)) from None
    return spec, warnings


def _unknown_type(where: str, model_type: Any) -> str:
    supported = ", ".join(SUPPORTED_MODEL_TYPES)
    if model_type is None:
        return f"{where}: no 'model_type' field; supported: {supported}"
    close = difflib.get_close_matches(str(model_type), SUPPORTED_MODEL_TYPES, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{where}: model_type {model_type!r} is not supported{hint}; supported: {supported}"


def _validation_line(where: str, error: ValidationError) -> str:
    """Every pydantic error as `field.path value: message`, without the docs URL."""
    parts = []
    for item in error.errors(include_url=False):
        path = ".".join(str(p) for p in item["loc"]) or "spec"
        value = item.get("input")
        shown = "" if isinstance(value, dict) else f" {value!r:.60}"
        parts.append(f"{path}{shown}: {item['msg']}")
    return f"{where}: the config does not give a valid spec: {'; '.join(parts)}"


def import_hf(path: str | Path, name: str | None = None) -> HfImport:
    """Read a Hugging Face config.json (a file, or a folder holding one) into a ModelSpec.

    A `model.safetensors.index.json` beside the config gives the exact weight bytes
    (`metadata.total_size`).

    Args:
        path: config.json, or a folder holding config.json.
        name: catalogue name; defaults to a slug of `_name_or_path` or of the folder.

    Returns:
        The spec, the readings taken of ambiguous fields, and weights_bytes (None without an
        index file).

    Raises:
        KvplanError: a missing or non-JSON file, or a config that gives no valid spec.
    """
    config_path = _config_path(Path(path))
    config = _read_json(config_path)
    if not isinstance(config, dict):
        kind = type(config).__name__
        raise KvplanError(f"{config_path}: top level is {kind}, expected a JSON object")
    repo_id = _repo_id(config)
    if repo_id:
        source = f"https://huggingface.co/{repo_id}/blob/main/config.json"
    else:
        source = str(config_path.resolve())
    default_name = repo_id.split("/")[-1] if repo_id else config_path.resolve().parent.name
    spec, warnings = _spec(
        config,
        name=name or _slug(default_name),
        source=source,
        where=str(config_path),
        aliases=(repo_id,) if repo_id else (),
    )
    weights_bytes, index_warnings = _weights_bytes(config_path.parent / INDEX_FILE)
    if index_warnings:
        warnings += index_warnings
        spec = spec.model_copy(update={"notes": spec.notes + index_warnings})
    return HfImport(spec=spec, warnings=warnings, weights_bytes=weights_bytes)


def _config_path(path: Path) -> Path:
    if path.is_dir():
        config_path = path / CONFIG_FILE
        if not config_path.is_file():
            raise KvplanError(f"{path}: no {CONFIG_FILE} in this folder")
        return config_path
    if not path.is_file():
        raise KvplanError(f"{path}: no such file (give a config.json or a folder holding one)")
    return path


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise KvplanError(f"{path}: cannot be read ({error})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise KvplanError(
            f"{path}: not valid JSON (line {error.lineno} column {error.colno}: {error.msg})"
        ) from None


def _repo_id(config: dict) -> str | None:
    """`_name_or_path` when it is a Hub repo id (org/name), not a local path."""
    value = config.get("_name_or_path")
    if isinstance(value, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", value):
        return value
    return None


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-")
    return slug or "hf-model"


def _weights_bytes(index_path: Path) -> tuple[int | None, tuple[str, ...]]:
    """metadata.total_size of the safetensors index: the exact bytes of the released weights."""
    if not index_path.is_file():
        return None, ()
    index = _read_json(index_path)
    total = index.get("metadata", {}).get("total_size") if isinstance(index, dict) else None
    if isinstance(total, bool) or not isinstance(total, int) or total <= 0:
        return None, (f"{index_path.name} has no metadata.total_size: weight bytes computed",)
    return total, ()
