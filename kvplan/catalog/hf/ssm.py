"""Mamba-2 hybrids: Nemotron-H (one block per layer), Granite 4.0-H (mixer + MoE on every
layer), Falcon-H1 (attention and Mamba-2 side by side in every layer)."""

from __future__ import annotations

from typing import Any

from kvplan.catalog.hf.fields import _attention, _base, _Config
from kvplan.catalog.hf.layers import _layer_types, _plan
from kvplan.errors import KvplanError


def _mamba2(c: _Config, *, heads: int, head_dim: int, groups: int, state: int, kernel: int) -> dict:
    """A Mamba-2 state section; inner = heads x head_dim, the width vLLM's MambaMixer2 uses."""
    inner = heads * head_dim
    return {
        "kind": "mamba2",
        "conv_kernel": kernel,
        "conv_channels": inner + 2 * groups * state,  # x, B and C go through the conv
        "ssm_heads": heads,
        "ssm_head_dim": head_dim,
        "ssm_state_size": state,
        "inner_size": inner,
        "num_groups": groups,
    }


def _check_inner(c: _Config, inner: int, hidden: int, expand_key: str) -> None:
    if c.has(expand_key) and c.int(expand_key) * hidden != inner:
        c.warn(
            f"{expand_key} {c.get(expand_key)} x hidden_size {hidden} != heads x head_dim "
            f"{inner}: the heads' width is used (what the checkpoint's in_proj holds)"
        )


_NEMOTRON_BLOCKS = {"M": "state", "*": "full", "-": "mlp"}


def _nemotron_h(c: _Config) -> dict[str, Any]:
    """Nemotron-H: hybrid_override_pattern gives each layer ONE block: M, * or -."""
    c.fill_defaults({"max_position_embeddings": 4096}, "NemotronHConfig")
    base = _base(c, tie_default=False)
    n, hidden = base["num_layers"], base["hidden_size"]
    pattern = c.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or len(pattern) != n:
        raise KvplanError(
            f"{c.where}: hybrid_override_pattern must be a string of {n} characters "
            f"(num_hidden_layers), got {pattern!r:.80}"
        )
    unknown = sorted(set(pattern) - set(_NEMOTRON_BLOCKS))
    if unknown:
        raise KvplanError(
            f"{c.where}: hybrid_override_pattern has block(s) {unknown} kvplan cannot express; "
            "known: M (Mamba-2), * (attention), - (MLP)"
        )
    heads, head_dim = c.int("mamba_num_heads"), c.int("mamba_head_dim")
    state = _mamba2(
        c,
        heads=heads,
        head_dim=head_dim,
        groups=c.int("n_groups", "mamba_n_groups"),
        state=c.int("ssm_state_size"),
        kernel=c.int("conv_kernel", "mamba_d_conv"),
    )
    _check_inner(c, heads * head_dim, hidden, "expand")
    if c.get("mlp_hidden_act", "relu2") != "relu2":
        c.warn(f"mlp_hidden_act {c.get('mlp_hidden_act')}: MLP counted as 2 matrices (no gate)")
    attention = _attention(c, hidden)
    if c.has("attention_head_dim") and not c.has("head_dim"):
        attention["head_dim"] = c.int("attention_head_dim")
    c.warn("hybrid_override_pattern: M = Mamba-2 (state), * = attention (full), - = MLP (mlp)")
    return {
        **base,
        "attention": attention,
        "state": state,
        "layers": _plan([_NEMOTRON_BLOCKS[ch] for ch in pattern]),
        "mlp": "plain",  # squared ReLU: up and down projections
        "mlp_bias": c.flag("mlp_bias", False),
        "norms_per_layer": 1,
        "ffn_per_mixer_layer": False,
    }


def _granite_hybrid(c: _Config) -> dict[str, Any]:
    """Granite 4.0 (granitemoehybrid): layer_types mamba/attention; every layer also has the
    shared MLP and, when num_local_experts > 0, a routed MoE block."""
    base = _base(c, tie_default=False)
    n, hidden = base["num_layers"], base["hidden_size"]
    kinds = _layer_types(c, n)
    if kinds is None:
        raise KvplanError(f"{c.where}: granitemoehybrid needs layer_types (mamba / attention)")
    experts = c.count("num_local_experts", 0)
    shared = c.int("shared_intermediate_size")
    spec: dict[str, Any] = {
        **base,
        "attention": _attention(c, hidden, qkv_bias=c.flag("attention_bias", False)),
        "layers": _plan(kinds),
    }
    if "state" in kinds:
        heads, head_dim = c.int("mamba_n_heads"), c.int("mamba_d_head")
        spec["state"] = _mamba2(
            c,
            heads=heads,
            head_dim=head_dim,
            groups=c.int("mamba_n_groups"),
            state=c.int("mamba_d_state"),
            kernel=c.int("mamba_d_conv"),
        )
        _check_inner(c, heads * head_dim, hidden, "mamba_expand")
    if experts:
        spec["intermediate_size"] = shared
        spec["moe"] = {
            "num_experts": experts,
            "experts_per_token": c.int("num_experts_per_tok"),
            "expert_intermediate_size": base["intermediate_size"],
            "num_shared_experts": 1,
            "shared_expert_intermediate_size": shared,
        }
    else:
        # No experts: each layer's FFN is the shared MLP (GraniteMoeHybridDecoderLayer).
        c.warn(f"num_local_experts 0: the FFN is shared_mlp of shared_intermediate_size {shared}")
        spec["intermediate_size"] = shared
    return spec


def _falcon_h1(c: _Config) -> dict[str, Any]:
    """Falcon-H1: every layer runs attention and Mamba-2 on the same input (`parallel`)."""
    base = _base(c, tie_default=False)
    hidden = base["hidden_size"]
    if c.get("attn_layer_indices") is not None:
        raise KvplanError(
            f"{c.where}: attn_layer_indices {c.get('attn_layer_indices')!r:.60}: Falcon-H1 "
            "with attention on some layers only is not expressible (every layer is parallel)"
        )
    if not c.flag("mamba_use_mlp", True):
        raise KvplanError(f"{c.where}: mamba_use_mlp false (no MLP) is not expressible")
    heads, head_dim = c.int("mamba_n_heads"), c.int("mamba_d_head")
    inner = c.int("mamba_d_ssm") if c.has("mamba_d_ssm") else c.int("mamba_expand") * hidden
    if heads * head_dim != inner:
        raise KvplanError(
            f"{c.where}: mamba_d_ssm {inner} != mamba_n_heads {heads} x mamba_d_head {head_dim}"
        )
    state = _mamba2(
        c,
        heads=heads,
        head_dim=head_dim,
        groups=c.int("mamba_n_groups"),
        state=c.int("mamba_d_state"),
        kernel=c.int("mamba_d_conv"),
    )
    state["gated_norm"] = c.flag("mamba_rms_norm", False)
    for key in ("mamba_proj_bias", "projectors_bias"):
        if c.flag(key, False):
            c.warn(f"{key} true: those biases are not counted")
    c.warn("Falcon-H1: every layer holds attention K/V per token and a Mamba-2 state (parallel)")
    return {
        **base,
        "attention": _attention(c, hidden, qkv_bias=c.flag("attention_bias", False)),
        "state": state,
        "layers": {"pattern": ["parallel"]},
        "mlp_bias": c.flag("mlp_bias", False),
    }
