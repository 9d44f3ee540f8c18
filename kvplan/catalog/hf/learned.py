"""Families with learned absolute positions, LayerNorm and biased plain MLPs: GPT-2 and OPT.

Both are plain multi-head attention (every head caches its own K and V) and spell their fields
their own way; `_mha_with_learned_positions` is the spec they share, each family reads its names.
"""

from __future__ import annotations

from typing import Any

from kvplan.catalog.hf.fields import _attention, _Config, _weight_dtype
from kvplan.catalog.hf.layers import _full


def _mha_with_learned_positions(
    c: _Config,
    *,
    hidden: int,
    num_heads: int,
    num_layers: int,
    intermediate: int,
    positions: int,
    bias: bool,
) -> dict[str, Any]:
    """The spec of a biased MHA + LayerNorm + plain-MLP stack with `positions` learned rows."""
    return {
        "family": c.model_type,
        "hidden_size": hidden,
        "num_layers": num_layers,
        "vocab_size": c.int("vocab_size"),
        "intermediate_size": intermediate,
        "tie_word_embeddings": c.flag("tie_word_embeddings", True),
        "weight_dtype": _weight_dtype(c),
        "attention": _attention(
            c, hidden, num_heads=num_heads, num_kv_heads=num_heads, qkv_bias=bias, o_bias=bias
        ),
        "layers": _full(),
        "mlp": "plain",
        "mlp_bias": bias,
        "norm": "layer",
        "learned_positions": positions,
    }


def _gpt2(c: _Config) -> dict[str, Any]:
    hidden = c.int("n_embd")
    positions = c.int("n_positions")
    spec = _mha_with_learned_positions(
        c,
        hidden=hidden,
        num_heads=c.int("n_head"),
        num_layers=c.int("n_layer"),
        intermediate=c.int("n_inner") if c.has("n_inner") else 4 * hidden,
        positions=positions,
        bias=True,
    )
    return {**spec, "max_context": positions}


# transformers OPTLearnedPositionalEmbedding: position ids are offset by 2 (a fairseq legacy), so
# the table has max_position_embeddings + 2 rows (opt-13b: 2050 x 5120).
_OPT_POSITION_OFFSET = 2


def _opt(c: _Config) -> dict[str, Any]:
    hidden = c.int("hidden_size")
    positions = c.int("max_position_embeddings")
    projected = c.get("word_embed_proj_dim", hidden)
    if projected != hidden:
        # OPT-350m: 512-wide embeddings projected in and out of the 1024-wide stack; the KV cache
        # is unaffected, the weights gain project_in/project_out and lose embedding width.
        c.warn(
            f"word_embed_proj_dim {projected} != hidden_size {hidden}: embeddings counted as "
            f"{hidden} wide, project_in/project_out ({projected} x {hidden} each) not counted"
        )
    if not c.flag("do_layer_norm_before", True):
        c.warn(
            "do_layer_norm_before false: post-LayerNorm blocks with no final LayerNorm; "
            f"one is counted anyway (2 x {hidden} weights)"
        )
    spec = _mha_with_learned_positions(
        c,
        hidden=hidden,
        num_heads=c.int("num_attention_heads"),
        num_layers=c.int("num_hidden_layers"),
        intermediate=c.int("ffn_dim"),
        positions=positions + _OPT_POSITION_OFFSET,
        bias=c.flag("enable_bias", True),
    )
    return {**spec, "max_context": positions}
