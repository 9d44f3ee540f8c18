"""The ggml type llama-quantize gives each tensor of a GGUF file type (Q4_K_M is not Q4_K
everywhere).

Read from ggml-org/llama.cpp `src/llama-quant.cpp` at commit 007dbbf (`llama_tensor_get_type`,
`llama_tensor_get_type_impl`, `tensor_type_fallback`, `tensor_allows_quantization`,
`llama_ftype_get_default_type`), without an importance matrix, `--pure` or per-tensor
overrides; the rules for the K-quant mixes below are the same since the k-quants landed. The
reading kvplan takes:

- Only 2-D and 3-D tensors whose names end in `weight` are quantised; norms, the router
  (`ffn_gate_inp`) and 1-D tensors keep the type the converter wrote (F32).
- `output.weight` (and `token_embd.weight` when the embeddings are tied) gets Q6_K unless the
  file type is Q8_0 (or Q6_K), Falcon, or its rows are not whole blocks (then Q8_0).
- `attn_v` (and `attn_qkv`, `attn_kv_b`: "more sensitive to quantization") and `ffn_down` get
  more bits on the layers `use_more_bits` picks — the first and last eighth and every third
  layer between — in Q4_K_M and Q5_K_M (Q6_K), and on a few leading layers in Q4_K_S, Q3_K_M,
  IQ4_XS; IQ4_XS/IQ4_NL give `attn_v` Q5_K when n_head / n_head_kv ≥ 4; 8-expert models
  (Mixtral) get Q8_0 `attn_v` and `attn_k`; a 70B Llama (80 layers, GQA) Q5_K `attn_v`
  where the mix would give Q3_K or Q4_K.
- A tensor visits the rules in llama.cpp's order (block number, then name), which sets the
  `attn_v` and dense `ffn_down` counters; MoE models take the layer from the name.
- A row that is not whole blocks of the chosen type falls back (Q4_K → Q5_0, Q5_K → Q5_1,
  Q6_K → Q8_0, IQ4_XS → IQ4_NL, Q2_K/Q3_K → Q4_0), and to F16 when that fails too.
- MXFP4_MOE: 3-D tensors (experts) MXFP4, every other quantised tensor Q8_0.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.specs.gguf_types import GGUF_FILE_TYPES, ggml_block


@dataclass(frozen=True)
class MixFacts:
    """What the rule reads of the model (llama.cpp hparams)."""

    num_layers: int  # n_layer: the ffn_* counters' range
    num_experts: int = 0  # n_expert (0: dense)
    gqa: int = 1  # n_head / n_head_kv
    falcon: bool = False  # LLM_ARCH_FALCON has rules of its own
    is_70b: bool = False  # LLM_TYPE_70B (Llama/Qwen2 with 80 layers)
    tied: bool = False  # no output.weight: token_embd takes the output's type


@dataclass(frozen=True)
class MixTensor:
    """One tensor as llama-quantize sees it: name and ggml dimensions (ne0 first)."""

    name: str
    shape: tuple[int, ...]
    quantisable: bool  # 2-D/3-D `*weight`, not a norm or router (tensor_allows_quantization)


_FALLBACK = {
    "IQ4_XS": "IQ4_NL",
    "Q2_K": "Q4_0",
    "Q3_K": "Q4_0",
    "Q4_K": "Q5_0",
    "Q5_K": "Q5_1",
    "Q6_K": "Q8_0",
}


def use_more_bits(layer: int, layers: int) -> bool:
    """llama-quant.cpp use_more_bits: the first and last eighth, and every third between."""
    eighth = layers // 8
    return layer < eighth or layer >= 7 * layers // 8 or (layer - eighth) % 3 == 2


def _category(name: str) -> str:
    """tensor_get_category, in its order of tests."""
    if name == "output.weight":
        return "output"
    if name in ("token_embd.weight", "per_layer_token_embd.weight"):
        return "token_embd"
    for part, category in (
        ("attn_qkv.weight", "attn_v"),
        ("attn_kv_b.weight", "attn_v"),
        ("attn_v.weight", "attn_v"),
        ("attn_k.weight", "attn_k"),
        ("attn_q.weight", "attn_q"),
        ("attn_output.weight", "attn_output"),
        ("ffn_up", "ffn_up"),
        ("ffn_gate", "ffn_gate"),
        ("ffn_down", "ffn_down"),
    ):
        if part in name:
            return category
    return "other"


def _fits(ggml_type: str, ne0: int) -> bool:
    return ne0 % ggml_block(ggml_type)[0] == 0


def _fallback(ggml_type: str, ne0: int) -> str:
    """tensor_type_fallback: a type whose blocks divide the row."""
    if _fits(ggml_type, ne0):
        return ggml_type
    # No fallback is defined for the 32-wide types (llama-quantize stops); F16 is what such a
    # tensor could be stored as.
    fallback = _FALLBACK.get(ggml_type, "F16")
    return fallback if _fits(fallback, ne0) else "F16"


def _output_type(file_type: str, default: str, facts: MixFacts, ne0: int) -> str:
    if file_type == "mxfp4_moe" or facts.falcon or not _fits(default, ne0):
        return "Q8_0"
    return default if default == "Q8_0" else "Q6_K"


def _attn_v_type(file_type: str, default: str, facts: MixFacts, index: int, count: int) -> str:
    chosen = default
    if file_type == "q2_k":
        chosen = "Q4_K" if facts.gqa >= 4 else "Q3_K"
    elif file_type == "q3_k_m":
        chosen = "Q5_K" if index < 2 else "Q4_K"
    elif file_type == "q3_k_l" or (file_type in ("iq4_nl", "iq4_xs") and facts.gqa >= 4):
        chosen = "Q5_K"
    elif file_type in ("q4_k_m", "q5_k_m") and use_more_bits(index, count):
        chosen = "Q6_K"
    elif file_type == "q4_k_s" and index < 4:
        chosen = "Q5_K"
    if facts.is_70b and chosen in ("Q3_K", "Q4_K"):
        chosen = "Q5_K"  # 8 heads share attn_v: a tensor 8x smaller than attn_q
    return "Q8_0" if facts.num_experts == 8 else chosen


def _ffn_down_type(file_type: str, default: str, facts: MixFacts, layer: int) -> str:
    n, falcon = facts.num_layers, facts.falcon
    if file_type == "q2_k":
        return "Q3_K"
    if file_type == "q3_k_m":
        if layer < n // 16:
            return "Q5_K"
        return "Q4_K" if not falcon or use_more_bits(layer, n) else "Q3_K"
    if file_type == "q3_k_l":
        return "Q4_K" if falcon else "Q5_K"
    if file_type == "q4_k_m":
        if falcon:
            if layer < n // 16:
                return "Q6_K"
            return "Q5_K" if use_more_bits(layer, n) else "Q4_K"
        return "Q6_K" if use_more_bits(layer, n) else default
    if layer < n // 8 and file_type in ("iq4_nl", "iq4_xs"):
        return "Q5_K"
    if file_type == "q5_k_m" and use_more_bits(layer, n):
        return "Q6_K"
    if file_type == "q4_k_s" and not falcon and layer < n // 8:
        return "Q5_K"
    return default


_EIGHT_EXPERT_OUTPUT_Q5_K = ("q2_k", "q3_k_s", "q3_k_m", "iq4_nl", "q4_k_s", "q4_k_m", "iq4_xs")


def _attn_output_type(file_type: str, default: str, facts: MixFacts) -> str:
    if facts.falcon:
        return "Q4_K" if file_type == "q3_k_l" else default
    if facts.num_experts == 8:
        return "Q5_K" if file_type in _EIGHT_EXPERT_OUTPUT_Q5_K else default
    return {"q2_k": "Q3_K", "q3_k_m": "Q4_K", "q3_k_l": "Q5_K"}.get(file_type, default)


def _layer_of(name: str) -> int:
    return int(name.split(".")[1])


def tensor_types(
    tensors: list[MixTensor], file_type: str, facts: MixFacts, unquantised: str = "F32"
) -> list[str]:
    """The ggml type of each of `tensors` (in llama.cpp's order) in `file_type`; a tensor
    that is not quantised keeps `unquantised`, the converter's type."""
    default = GGUF_FILE_TYPES[file_type]
    count_v = sum(_category(t.name) == "attn_v" for t in tensors)
    index_v = index_down = 0
    types = []
    for tensor in tensors:
        if not tensor.quantisable:
            types.append(unquantised)
            continue
        category, ne0 = _category(tensor.name), tensor.shape[0]
        chosen = default
        if category == "output" or (facts.tied and category == "token_embd"):
            chosen = _output_type(file_type, default, facts, ne0)
        elif file_type == "mxfp4_moe":
            chosen = "MXFP4" if len(tensor.shape) > 2 and tensor.shape[2] > 1 else "Q8_0"
        elif category == "attn_v":
            chosen = _attn_v_type(file_type, default, facts, index_v, count_v)
            index_v += 1
        elif category == "attn_k" and facts.num_experts == 8:
            chosen = "Q8_0"
        elif category == "ffn_down":
            layer = _layer_of(tensor.name) if facts.num_experts > 1 else index_down
            chosen = _ffn_down_type(file_type, default, facts, layer)
            index_down += 1
        elif category == "attn_output":
            chosen = _attn_output_type(file_type, default, facts)
        types.append(_fallback(chosen, ne0))
    return types
