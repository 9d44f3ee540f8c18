"""Mixture-of-experts families: the dense reading plus which layers route and to how many."""

from __future__ import annotations

from typing import Any

from kvplan.catalog.hf.dense import _mistral, _olmo2, _qwen2, _qwen3
from kvplan.catalog.hf.fields import _attention, _base, _Config
from kvplan.catalog.hf.layers import _full, _layer_types, _plan, _window_or_full
from kvplan.errors import KvplanError


def _routed_in_every_layer(c: _Config, spec: dict, experts_key: str) -> dict[str, Any]:
    """`spec` with a routed MoE in every layer, each expert `intermediate_size` wide."""
    spec["moe"] = {
        "num_experts": c.int(experts_key),
        "experts_per_token": c.int("num_experts_per_tok"),
        "expert_intermediate_size": spec["intermediate_size"],
    }
    return spec


def _mixtral(c: _Config) -> dict[str, Any]:
    return _routed_in_every_layer(c, _mistral(c), "num_local_experts")


def _olmoe(c: _Config) -> dict[str, Any]:
    """OLMoE: OLMo 2's attention (q/k norms) with a routed MoE in every layer; transformers
    OlmoeSparseMoeBlock gives each of num_experts experts intermediate_size, no shared expert."""
    return _routed_in_every_layer(c, _olmo2(c), "num_experts")


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


def _qwen2_moe(c: _Config) -> dict[str, Any]:
    spec = _qwen2(c)
    spec["moe"] = _qwen_moe(c, spec, shared=True)
    return spec


def _qwen3_moe(c: _Config) -> dict[str, Any]:
    spec = _qwen3(c)
    spec["moe"] = _qwen_moe(c, spec, shared=False)
    return spec


def _warn_mtp(c: _Config) -> None:
    """Multi-token-prediction layers are stored beside the model and used only to draft tokens."""
    if c.count("num_nextn_predict_layers", 0):
        c.warn(
            f"num_nextn_predict_layers {c.get('num_nextn_predict_layers')}: MTP layers are not "
            "counted (weights or KV); speculative decoding with them adds one layer's KV each"
        )


def _routed_moe(c: _Config, *, router_bias: bool) -> dict[str, Any]:
    """DeepSeek-style routed experts (n_routed_experts, first_k_dense_replace); GLM-4.5 too."""
    return {
        "num_experts": c.int("n_routed_experts"),
        "experts_per_token": c.int("num_experts_per_tok"),
        "expert_intermediate_size": c.int("moe_intermediate_size"),
        "num_shared_experts": c.count("n_shared_experts", 0),
        "dense_layers": c.count("first_k_dense_replace", 0),
        # transformers DeepSeek: MoE when i >= first_k_dense_replace, i % moe_layer_freq == 0.
        "layer_step": c.count("moe_layer_freq", 1) or 1,
        "router_bias": router_bias,
    }


def _mla_reading(c: _Config) -> tuple[dict[str, Any], dict[str, Any]]:
    """The MLA section and the attention section it implies (DeepSeek-V2/V3, Kimi)."""
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
    # Per-head q/k width nope + rope; used only for the decompressed (hf engine) reading.
    attention = {
        "num_heads": num_heads,
        "num_kv_heads": stated_kv,
        "head_dim": mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"],
    }
    return mla, attention


def _indexer(c: _Config) -> dict[str, Any] | None:
    """DeepSeek Sparse Attention's indexer (DeepSeek-V3.2): index_n_heads/head_dim/topk."""
    if not c.has("index_head_dim"):
        return None
    head_dim = c.int("index_head_dim")
    c.warn(
        f"index_head_dim {head_dim}: every MLA layer also caches an indexer key of {head_dim} "
        f"fp8 values + one fp32 scale per 128 = {head_dim + -(-head_dim // 128) * 4} bytes per "
        "token, whatever the KV dtype (DeepSeek's reference and vLLM's DeepseekV32IndexerCache)"
    )
    return {
        "num_heads": c.int("index_n_heads"),
        "head_dim": head_dim,
        "topk_tokens": c.int("index_topk"),
    }


def _deepseek(c: _Config) -> dict[str, Any]:
    base = _base(c, tie_default=False)
    mla, attention = _mla_reading(c)
    indexer = _indexer(c)
    if indexer is not None:
        mla["indexer"] = indexer
    _warn_mtp(c)
    # V3's noaux_tc routing adds e_score_correction_bias: one value per expert.
    moe = (
        _routed_moe(c, router_bias=c.get("topk_method") == "noaux_tc")
        if c.has("n_routed_experts")
        else None
    )
    return {
        **base,
        "attention": attention,
        "mla": mla,
        "moe": moe,
        "layers": {"pattern": ["mla"]},
    }


def _glm4_moe(c: _Config) -> dict[str, Any]:
    base = _base(c, tie_default=False)
    _warn_mtp(c)
    return {
        **base,
        # Glm4MoeAttention: attention_bias puts biases on q, k and v only (o_proj has none);
        # partial_rotary_factor rotates part of each head, the whole head is cached either way.
        "attention": _attention(
            c,
            base["hidden_size"],
            qkv_bias=c.flag("attention_bias", False),
            qk_norm=c.flag("use_qk_norm", False),
        ),
        "layers": _full(),
        # Glm4MoeTopkRouter always keeps e_score_correction_bias, one value per expert.
        "moe": _routed_moe(c, router_bias=True),
    }


def _minimax_m2(c: _Config) -> dict[str, Any]:
    base = _base(c, tie_default=False)
    n = base["num_layers"]
    types = c.get("attn_type_list")
    if types is not None and (not isinstance(types, list) or len(types) != n or set(types) != {1}):
        # MiniMax-01/M1 interleave lightning (linear) attention, type 0; M2 is all softmax (1).
        raise KvplanError(
            f"{c.where}: attn_type_list must list {n} entries of 1 (softmax attention); "
            f"linear-attention layers (0) are not supported, got {types!r:.80}"
        )
    qk_norm = c.flag("use_qk_norm", False)
    if qk_norm and c.get("qk_norm_type") == "per_layer":
        c.warn(
            "qk_norm_type per_layer: q_norm/k_norm span the whole q and k projections; counted "
            "as head_dim-wide norms"
        )
    if c.flag("use_mtp", False) or c.count("num_mtp_modules", 0):
        c.warn(f"num_mtp_modules {c.get('num_mtp_modules')}: MTP modules are not counted")
    moe: dict[str, Any] = {
        "num_experts": c.int("num_local_experts"),
        "experts_per_token": c.int("num_experts_per_tok"),
        # MiniMax-M2: intermediate_size is the routed-expert width; no layer has a dense FFN.
        "expert_intermediate_size": base["intermediate_size"],
        "router_bias": c.flag("use_routing_bias", False),
    }
    shared = c.count("shared_intermediate_size", 0)
    if shared:
        moe |= {"num_shared_experts": 1, "shared_expert_intermediate_size": shared}
    return {
        **base,
        "attention": _attention(c, base["hidden_size"], qk_norm=qk_norm),
        "layers": _full(),
        "moe": moe,
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
