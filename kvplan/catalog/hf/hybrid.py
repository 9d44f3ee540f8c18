"""Hybrid families: attention layers interleaved with recurrent state layers (no per-token KV)."""

from __future__ import annotations

from typing import Any

from kvplan.catalog.hf.fields import _attention, _base, _Config
from kvplan.catalog.hf.layers import _layer_types, _plan, _window_or_full
from kvplan.catalog.hf.moe import _mla_reading, _qwen_moe
from kvplan.errors import KvplanError


def _gated_delta_net(c: _Config) -> dict[str, Any]:
    """Qwen3-Next / Qwen3.5 Gated DeltaNet state from the linear_* fields."""
    value_heads, key_heads = c.int("linear_num_value_heads"), c.int("linear_num_key_heads")
    key_dim, value_dim = c.int("linear_key_head_dim"), c.int("linear_value_head_dim")
    return {
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


def _linear_plan(c: _Config, n: int) -> list[str]:
    kinds = _layer_types(c, n)
    if kinds is None:
        # transformers Qwen3-Next: every full_attention_interval-th layer is full attention.
        interval = c.count("full_attention_interval", 4) or 4
        kinds = ["full" if (i + 1) % interval == 0 else "state" for i in range(n)]
    return kinds


def _gdn_hybrid(c: _Config, *, output_gate: bool) -> dict[str, Any]:
    """Gated-attention layers between Gated DeltaNet layers (Qwen3-Next, Qwen3.5)."""
    base = _base(c, tie_default=False)
    return {
        **base,
        "attention": _attention(
            c,
            base["hidden_size"],
            qkv_bias=c.flag("attention_bias", False),
            qk_norm=True,
            output_gate=output_gate,
        ),
        "layers": _plan(_linear_plan(c, base["num_layers"])),
        "state": _gated_delta_net(c),
    }


def _qwen3_next(c: _Config) -> dict[str, Any]:
    spec = _gdn_hybrid(c, output_gate=True)
    spec["moe"] = _qwen_moe(c, spec, shared=True)
    return spec


def _qwen3_5(c: _Config) -> dict[str, Any]:
    """Qwen3.5 / Qwen3.6 (qwen3_5, qwen3_5_moe): Qwen3-Next's layer stack in a multimodal
    wrapper; the MoE variant routes every layer, the dense one has a SwiGLU MLP."""
    moe = c.model_type.startswith("qwen3_5_moe")
    if moe and not c.has("intermediate_size"):
        width = c.int("moe_intermediate_size")
        c.warn(f"intermediate_size absent: no dense layer; the expert width {width} is used")
        c.data = {**c.data, "intermediate_size": width}
    outer_tie = c.outer.get("tie_word_embeddings") if c.outer is not None else None
    if not c.has("tie_word_embeddings") and isinstance(outer_tie, bool):
        c.data = {**c.data, "tie_word_embeddings": outer_tie}  # stated at the wrapper level
    spec = _gdn_hybrid(c, output_gate=c.flag("attn_output_gate", True))
    if moe:
        spec["moe"] = _qwen_moe(c, spec, shared=True)
    if c.count("mtp_num_hidden_layers", 0):
        c.warn(f"mtp_num_hidden_layers {c.get('mtp_num_hidden_layers')}: MTP not counted")
    if c.outer is not None and c.outer.has("vision_config"):
        c.warn("vision_config: the vision encoder is not counted (params and weights)")
    return spec


def _kimi_linear(c: _Config) -> dict[str, Any]:
    """Kimi-Linear: KDA state layers and MLA layers, DeepSeek-V3-style MoE."""
    if not c.has("max_position_embeddings") and c.has("model_max_length"):
        length = c.int("model_max_length")  # the release states only this (1048576)
        c.warn(f"max_position_embeddings absent: model_max_length {length} used")
        c.data = {**c.data, "max_position_embeddings": length}
    base = _base(c, tie_default=False)
    linear = c.get("linear_attn_config")
    if not isinstance(linear, dict):
        raise KvplanError(f"{c.where}: linear_attn_config must be an object, got {linear!r:.60}")
    lc = _Config(linear, f"{c.where} linear_attn_config", c.model_type)
    mla, attention = _mla_reading(c)
    if c.flag("mla_use_nope", False):
        c.warn("mla_use_nope: no rotary embedding, but the qk_rope_head_dim slice is still cached")
    heads, head_dim = lc.int("num_heads"), lc.int("head_dim")
    spec = {
        **base,
        "attention": attention,
        "mla": mla,
        "state": {
            "kind": "kda",
            "conv_kernel": lc.int("short_conv_kernel_size"),
            "conv_channels": 3 * heads * head_dim,  # separate q, k and v short convs
            "ssm_heads": heads,
            "ssm_head_dim": head_dim,
            "ssm_state_size": head_dim,
            "ssm_state_dtype": "fp32",  # vLLM kda_state_dtype: float32 recurrent state
            "inner_size": heads * head_dim,
            "num_key_heads": heads,
            "key_head_dim": head_dim,
        },
        "layers": _plan(_kda_kinds(c, lc, base["num_layers"])),
        "moe": {
            "num_experts": c.int("num_experts"),
            "experts_per_token": c.int("num_experts_per_token"),
            "expert_intermediate_size": c.int("moe_intermediate_size"),
            "num_shared_experts": c.count("num_shared_experts", 0),
            "dense_layers": c.count("first_k_dense_replace", 0),
            "layer_step": c.count("moe_layer_freq", 1) or 1,
            "router_bias": True,  # KimiMoE gate: e_score_correction_bias, one per expert
        },
    }
    c.warnings += lc.warnings
    return spec


def _kda_kinds(c: _Config, lc: _Config, n: int) -> list[str]:
    """kda_layers / full_attn_layers are 1-based (vLLM KimiLinearConfig.is_kda_layer)."""
    lists = {key: lc.get(key) for key in ("kda_layers", "full_attn_layers")}
    for key, value in lists.items():
        if not isinstance(value, list) or not all(isinstance(i, int) for i in value):
            raise KvplanError(
                f"{lc.where}: {key} must be a list of layer numbers, got {value!r:.60}"
            )
    kda, full = set(lists["kda_layers"]), set(lists["full_attn_layers"])
    if kda & full or kda | full != set(range(1, n + 1)):
        raise KvplanError(
            f"{lc.where}: kda_layers and full_attn_layers must split layers 1..{n} (1-based) "
            f"between them, got {sorted(kda)} and {sorted(full)}"
        )
    c.warn("kda_layers / full_attn_layers read as 1-based layer numbers (vLLM's reading)")
    return ["state" if i + 1 in kda else "mla" for i in range(n)]


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
