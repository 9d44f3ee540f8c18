"""Hybrid families: attention layers interleaved with recurrent state layers (no per-token KV)."""

from __future__ import annotations

from typing import Any

from kvplan.catalog.hf.fields import _attention, _base, _Config
from kvplan.catalog.hf.layers import _layer_types, _plan, _window_or_full
from kvplan.catalog.hf.moe import _qwen_moe


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
