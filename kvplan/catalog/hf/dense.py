"""Dense families: every layer one attention block and one MLP.

Llama-like configs (Llama, Mistral, Phi-3, Starcoder2, Cohere, Qwen2/3, Gemma, OLMo 2/3, SmolLM3,
Seed-OSS) share `_base`; Falcon predates those names and spells its fields its own way (GPT-2 and
OPT, with learned positions, are in `learned`).
"""

from __future__ import annotations

from typing import Any

from kvplan.catalog.hf.fields import _attention, _base, _Config, _weight_dtype
from kvplan.catalog.hf.layers import _all_windowed, _full, _layer_types, _window_or_full


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


def _phi3(c: _Config) -> dict[str, Any]:
    spec = _llama(c)
    # Phi-3 states one sliding_window for the model and Phi3Attention applies it to every layer;
    # taken as given (2047 for mini-4k; 262144 for mini-128k, which never binds).
    spec["layers"] = _all_windowed(c, spec, "Phi3 windows all layers")
    return spec


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


def _qwen2(c: _Config) -> dict[str, Any]:
    base = _base(c, tie_default=False)
    # Qwen2 always has q/k/v biases (no config switch), and no o_proj bias.
    return {
        **base,
        "attention": _attention(c, base["hidden_size"], qkv_bias=True),
        "layers": _qwen_plan(c, base),
    }


def _qwen3(c: _Config) -> dict[str, Any]:
    base = _base(c, tie_default=False)
    bias = c.flag("attention_bias", False)
    return {
        **base,
        "attention": _attention(c, base["hidden_size"], qkv_bias=bias, o_bias=bias, qk_norm=True),
        "layers": _qwen_plan(c, base),
    }


def _smollm3(c: _Config) -> dict[str, Any]:
    spec = _llama(c)
    spec["tie_word_embeddings"] = c.flag("tie_word_embeddings", True)  # SmolLM3Config default
    nope = c.get("no_rope_layers") or []
    if isinstance(nope, list) and 0 in nope:
        # NoPE layers skip the rotary embedding only; they attend over the whole context.
        c.warn(f"no_rope_layers: {nope.count(0)} NoPE layers still cache K and V (full attention)")
    spec["layers"] = _qwen_plan(c, spec)  # SmolLM3 keeps Qwen2's use_sliding_window switch
    return spec


def _seed_oss(c: _Config) -> dict[str, Any]:
    spec = _llama(c)
    # SeedOss: attention_bias covers q, k and v; the output projection has attention_out_bias.
    spec["attention"]["o_bias"] = c.flag("attention_out_bias", False)
    return spec


def _olmo2(c: _Config) -> dict[str, Any]:
    spec = _llama(c)
    # OLMo 2 RMSNorms the whole q (heads x head_dim) and k (kv_heads x head_dim) projections;
    # kvplan's qk_norm counts one head_dim-wide norm each (a few thousand weights per layer).
    spec["attention"]["qk_norm"] = True
    c.warn("q_norm/k_norm span the whole q and k projections; counted as head_dim-wide norms")
    return spec


def _olmo3(c: _Config) -> dict[str, Any]:
    spec = _olmo2(c)
    if not c.has("sliding_window"):
        c.data = {**c.data, "sliding_window": 4096}
        c.warn("sliding_window absent: 4096 used (Olmo3Config default)")
    spec["layers"] = _every_nth_full_plan(c, spec, every=4)
    return spec


def _gemma(c: _Config) -> dict[str, Any]:
    spec = _llama(c)
    spec["tie_word_embeddings"] = c.flag("tie_word_embeddings", True)  # Gemma ties by default
    return spec


def _every_nth_full_plan(c: _Config, base: dict, every: int) -> dict:
    """Local/global layers: layer_types when given, else one global (full) layer every `every`."""
    n = base["num_layers"]
    kinds = _layer_types(c, n)
    if kinds is None:
        # Gemma 2: even layers local (sliding), odd global. Gemma 3: 5 local then 1 global.
        # OLMo 3: 3 local then 1 global.
        kinds = ["full" if (i + 1) % every == 0 else "sliding" for i in range(n)]
        c.warn(
            f"no layer_types: one global layer every {every} (layer {every - 1} first), "
            f"the rest windowed at {c.get('sliding_window')}"
        )
    return _window_or_full(c, kinds, c.int("sliding_window"), base["max_context"])


def _gemma2(c: _Config) -> dict[str, Any]:
    spec = _gemma(c)
    spec["layers"] = _every_nth_full_plan(c, spec, every=2)
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
    c.fill_defaults(_GEMMA3_TEXT_DEFAULTS, "transformers Gemma3TextConfig")
    spec = _gemma(c)
    spec["attention"]["qk_norm"] = True
    every = c.int("sliding_window_pattern") if c.has("sliding_window_pattern") else 6
    spec["layers"] = _every_nth_full_plan(c, spec, every=every)
    spec["norms_per_layer"] = 4
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
        "attention": _attention(
            c,
            hidden,
            num_heads=num_heads,
            num_kv_heads=num_kv_heads,
            qkv_bias=bias,
            o_bias=bias,
        ),
        "layers": _full(),
        "mlp": "plain",
        "mlp_bias": bias,
        "norm": "layer",
        # Old parallel blocks share one LayerNorm; new_decoder_architecture has ln_attn + ln_mlp.
        "norms_per_layer": 1 if parallel and not new_arch else 2,
    }
