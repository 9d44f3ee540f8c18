"""Weight bytes of a model quantised to a GGUF file type, tensor by tensor.

The tensors are the ones llama.cpp's converter (`convert_hf_to_gguf.py`) writes, named as
`llama-arch.cpp` names them, with ggml dimensions (ne0 = the row, the input width): per block
`attn_q` [hidden, heads·head_dim], `attn_k`/`attn_v` [hidden, kv_heads·head_dim],
`attn_output` [heads·head_dim, hidden], `ffn_gate`/`ffn_up` [hidden, width], `ffn_down`
[width, hidden] (routed experts `*_exps` with a third dimension of experts, shared experts
`*_shexp`), MLA's `attn_q_a`, `attn_q_b`, `attn_kv_a_mqa`, `attn_k_b` [qk_nope, kv_lora,
heads] and `attn_v_b` [kv_lora, v_head, heads] (the converter splits kv_b for the absorbed
MLA); then `token_embd`, `output` (untied) and the norms. Each gets the type of
`engine.gguf_mix`, and its bytes are rows × whole blocks (ggml_row_size). The parameters of each
layer are `kvmath.layer_params`'; what the named matrices do not cover (biases, q/k norms,
sinks) is kept in F32 1-D tensors, and the matrices of recurrent mixers and the DeepSeek-V3.2
indexer are one quantised tensor each (a reading: their real split changes only the fallback
of rows that are not whole blocks). An image encoder is not counted: llama.cpp loads it from a
separate mmproj file.
"""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache

from kvplan.catalog.checkpoint import CheckpointWeights
from kvplan.catalog.gguf_weights import gguf_checkpoint
from kvplan.catalog.tensor_headers import TensorHeader
from kvplan.engine.gguf_mix import MixFacts, MixTensor, tensor_types
from kvplan.kvmath import layer_params
from kvplan.kvmath.params import is_moe_layer
from kvplan.specs import ModelSpec
from kvplan.specs.gguf_types import ggml_row_bytes

ATTENTION_LAYER_KINDS = ("full", "sliding", "chunked", "shared")
# llama-model.cpp: LLM_TYPE_70B for 80-layer Llama (GQA) and Qwen2 models.
_70B_FAMILIES = ("llama", "qwen2")
MIX_BASIS = "llama-quantize mix, llama.cpp src/llama-quant.cpp"


def _matrix(name: str, *shape: int) -> MixTensor:
    return MixTensor(f"{name}.weight", shape, True)


def _vector(name: str, size: int) -> list[MixTensor]:
    return [MixTensor(name, (size,), False)] if size > 0 else []


def _attention(model: ModelSpec, prefix: str, params: int) -> list[MixTensor]:
    a, hidden = model.attention, model.hidden_size
    q_width, kv_width = a.num_heads * a.head_dim, a.num_kv_heads * a.head_dim
    gate = 2 if a.output_gate else 1
    tensors = [
        _matrix(f"{prefix}attn_q", hidden, q_width * gate),
        _matrix(f"{prefix}attn_k", hidden, kv_width),
        _matrix(f"{prefix}attn_v", hidden, kv_width),
        _matrix(f"{prefix}attn_output", q_width, hidden),
    ]
    rest = params - sum(math.prod(t.shape) for t in tensors)
    return tensors + _vector(f"{prefix}attn_q_norm.weight", rest)


def _mla(model: ModelSpec, prefix: str, params: int) -> list[MixTensor]:
    mla, heads, hidden = model.mla, model.attention.num_heads, model.hidden_size
    assert mla is not None  # mla layers are validated to have the section
    qk_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    tensors = []
    if mla.q_lora_rank:
        tensors += [
            _matrix(f"{prefix}attn_q_a", hidden, mla.q_lora_rank),
            _matrix(f"{prefix}attn_q_b", mla.q_lora_rank, heads * qk_head),
        ]
    else:
        tensors.append(_matrix(f"{prefix}attn_q", hidden, heads * qk_head))
    tensors += [
        _matrix(f"{prefix}attn_kv_a_mqa", hidden, mla.kv_lora_rank + mla.qk_rope_head_dim),
        _matrix(f"{prefix}attn_k_b", mla.qk_nope_head_dim, mla.kv_lora_rank, heads),
        _matrix(f"{prefix}attn_v_b", mla.kv_lora_rank, mla.v_head_dim, heads),
        _matrix(f"{prefix}attn_output", heads * mla.v_head_dim, hidden),
    ]
    norms = (mla.q_lora_rank or 0) + mla.kv_lora_rank
    rest = params - norms - sum(math.prod(t.shape) for t in tensors)
    if rest >= hidden:
        tensors.append(_matrix(f"{prefix}indexer.proj", hidden, rest // hidden))
    return tensors + _vector(f"{prefix}attn_kv_a_norm.weight", params - _count(tensors))


def _count(tensors: list[MixTensor]) -> int:
    return sum(math.prod(t.shape) for t in tensors)


def _mixer(model: ModelSpec, layer: int, prefix: str, params: int) -> list[MixTensor]:
    kind = model.layer_kinds[layer]
    if kind in ATTENTION_LAYER_KINDS:
        return _attention(model, prefix, params)
    if kind == "mla":
        return _mla(model, prefix, params)
    if params == 0:
        return []
    # Recurrent and cross-attention mixers: one quantised matrix of the layer's width.
    rows, rest = divmod(params, model.hidden_size)
    return [_matrix(f"{prefix}ssm_in", model.hidden_size, rows), *_vector(f"{prefix}ssm_d", rest)]


def _ffn(model: ModelSpec, layer: int, prefix: str) -> list[MixTensor]:
    p, hidden, moe = layer_params(model, layer), model.hidden_size, model.moe
    names = ("ffn_gate", "ffn_up") if model.mlp == "gated" else ("ffn_up",)
    tensors = []
    if p.dense_ffn:
        width = (moe.dense_intermediate_size if moe else None) or model.intermediate_size
        tensors += [_matrix(f"{prefix}{n}", hidden, width) for n in names]
        tensors.append(_matrix(f"{prefix}ffn_down", width, hidden))
        tensors += _vector(f"{prefix}ffn_up.bias", p.dense_ffn - _count(tensors))
    if moe is not None and is_moe_layer(model, layer):
        width, experts = moe.expert_intermediate_size, moe.num_experts
        routed = [_matrix(f"{prefix}{n}_exps", hidden, width, experts) for n in names]
        routed.append(_matrix(f"{prefix}ffn_down_exps", width, hidden, experts))
        routed += _vector(f"{prefix}ffn_up_exps.bias", p.routed_experts - _count(routed))
        router = MixTensor(f"{prefix}ffn_gate_inp.weight", (hidden, experts), False)
        shared = [router]
        if moe.num_shared_experts:
            shared_width = moe.num_shared_experts * (moe.shared_expert_intermediate_size or width)
            shared += [_matrix(f"{prefix}{n}_shexp", hidden, shared_width) for n in names]
            shared.append(_matrix(f"{prefix}ffn_down_shexp", shared_width, hidden))
        shared += _vector(f"{prefix}exp_probs_b.bias", p.shared - _count(shared))
        tensors += routed + shared
    return tensors


# llama-arch.cpp names of a block's norms, in the order models add them (Gemma 2/3: four).
_NORM_NAMES = ("attn_norm", "ffn_norm", "post_attention_norm", "post_ffw_norm")


def _norms(model: ModelSpec, prefix: str, params: int) -> list[MixTensor]:
    """The layer's norm tensors: norms_per_layer of equal size, else one."""
    count = model.norms_per_layer
    if count > len(_NORM_NAMES) or params % count:
        return _vector(f"{prefix}attn_norm.weight", params)
    names = _NORM_NAMES[:count]
    return [t for name in names for t in _vector(f"{prefix}{name}.weight", params // count)]


def gguf_tensor_list(model: ModelSpec) -> list[MixTensor]:
    """The converter's tensors for `model`, in llama.cpp's order (block number, then name)."""
    hidden = model.hidden_size
    outside = [_matrix("token_embd", hidden, model.vocab_size)]
    if not model.tie_word_embeddings:
        outside.append(_matrix("output", hidden, model.vocab_size))
    outside += _vector("output_norm.weight", hidden * (1 if model.norm == "rms" else 2))
    if model.learned_positions:
        outside.append(MixTensor("position_embd.weight", (hidden, model.learned_positions), False))
    tensors = sorted(outside, key=lambda t: t.name)
    for layer in range(model.num_layers):
        prefix = f"blk.{layer}."
        p = layer_params(model, layer)
        block = _mixer(model, layer, prefix, p.mixer) + _ffn(model, layer, prefix)
        block += _norms(model, prefix, p.norms)
        tensors += sorted(block, key=lambda t: t.name)
    return tensors


def mix_facts(model: ModelSpec) -> MixFacts:
    """What llama-quantize's rule reads of `model`."""
    heads, kv_heads = model.attention.num_heads, model.attention.num_kv_heads
    return MixFacts(
        num_layers=model.num_layers,
        num_experts=model.moe.num_experts if model.moe else 0,
        gqa=heads // kv_heads,
        falcon=model.family == "falcon",
        is_70b=model.family in _70B_FAMILIES and model.num_layers == 80 and kv_heads < heads,
        tied=model.tie_word_embeddings,
    )


@lru_cache(maxsize=256)
def quantised_checkpoint(model: ModelSpec, file_type: str) -> CheckpointWeights:
    """Exact weight bytes of `model` in the GGUF file type `file_type` (kvplan's name,
    `specs.gguf_types`), as a GGUF file's tensor table would give them."""
    tensors = gguf_tensor_list(model)
    types = tensor_types(tensors, file_type, mix_facts(model))
    headers = []
    for tensor, ggml_type in zip(tensors, types, strict=True):
        ne0 = tensor.shape[0]
        rows = math.prod(tensor.shape) // ne0
        nbytes = rows * ggml_row_bytes(ggml_type, ne0)
        headers.append(TensorHeader(tensor.name, ggml_type, tensor.shape, nbytes))
    weights = gguf_checkpoint(headers, model.num_layers, f"{model.name} as {file_type.upper()}")
    return dataclasses.replace(weights, basis=MIX_BASIS, weight_dtype=file_type)
