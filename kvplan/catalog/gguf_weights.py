"""A GGUF file's exact weight bytes from its tensor table, by ggml type and by how GPUs hold
each tensor.

The tensor table gives every tensor's name, ggml type and byte length (quantisation blocks
included), so the weights are exact, as a safetensors header makes them. Names follow
llama.cpp's `llama-arch.cpp` (LLM_TENSOR_NAMES): `token_embd`, `output`, `output_norm`, and per
block `blk.N.attn_q`, `blk.N.attn_k`, `blk.N.ffn_up_exps`, …. The roles are those of
`catalog.checkpoint`:

- split: attention and MLP matrices (`attn_q`, `attn_output`, `attn_qkv`, `ffn_gate/up/down`,
  shared experts `*_shexp`, MLA's `attn_q_b`, `attn_kv_b`, `attn_k_b`, `attn_v_b`), the
  vocabulary (`token_embd`, `output`);
- kv: `attn_k`, `attn_v`;
- expert: routed experts (`ffn_*_exps`);
- replicated: norms, routers (`ffn_gate_inp`, `exp_probs_b`), MLA's `attn_q_a` and
  `attn_kv_a_mqa`, biases of `attn_output` and `ffn_down`, attention sinks, `rope_freqs`,
  one-element tensors;
- unloaded: blocks past num_layers (multi-token-prediction layers).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from kvplan.catalog.checkpoint import FIRST, LAST, CheckpointWeights, checkpoint_weights
from kvplan.catalog.tensor_headers import TensorHeader

GGUF_BASIS = "GGUF tensor table"
_BLOCK = re.compile(r"^blk\.(\d+)\.(?P<module>[^.]+)(?:\.(?P<part>.+))?$")
_REPLICATED = {"ffn_gate_inp", "exp_probs_b", "attn_q_a", "attn_kv_a_mqa", "attn_sinks"}
_ROW_PARALLEL = {"attn_output", "ffn_down", "ffn_down_shexp"}


def gguf_tensor_role(name: str, numel: int, num_layers: int) -> tuple[str, int]:
    """(role, place) of the GGUF tensor `name` with `numel` elements (see the module
    docstring)."""
    block = _BLOCK.match(name)
    if block is None:
        if name.startswith("output_norm"):
            return "replicated", LAST
        if name.startswith("output."):
            return "split", LAST
        if name.startswith("token_embd.") and numel > 1:
            return "split", FIRST
        return "replicated", FIRST  # token_embd_norm, rope_freqs, …
    index, module, part = int(block.group(1)), block["module"], block["part"]
    if index >= num_layers:
        return "unloaded", index
    if numel <= 1 or "norm" in module or module in _REPLICATED:
        return "replicated", index
    if part == "bias" and module in _ROW_PARALLEL:
        return "replicated", index  # a row-parallel layer keeps its whole bias on every rank
    if module.endswith("_exps"):
        return "expert", index
    if module in ("attn_k", "attn_v"):
        return "kv", index
    return "split", index


def gguf_checkpoint(
    tensors: Iterable[TensorHeader], num_layers: int, source: str
) -> CheckpointWeights:
    """Exact weight bytes of a GGUF file's tensors, by ggml type name (F16, Q8_0, Q4_K, …);
    its weight dtype reads as those types, largest share first ("Q4_K/Q6_K/F32")."""
    weights = checkpoint_weights(tensors, num_layers, source, gguf_tensor_role, GGUF_BASIS)
    types = "/".join(name for name, _ in weights.bytes_by_dtype)
    return dataclasses.replace(weights, weight_dtype=types or None)
