"""GGUF weight types: ggml's block types and the llama-quantize file types named after them.

A ggml quantised type stores a row in blocks: `weights_per_block` values in `bytes_per_block`
bytes (scales included), so its bits per weight are exact: Q4_K = 144 B per 256 weights =
4.5 bpw, Q8_0 = 34 B per 32 = 8.5 bpw. The sizes are read from the `gguf` package's
`GGML_QUANT_SIZES` (gguf-py/gguf/constants.py in ggml-org/llama.cpp, the table the GGUF reader
and writer use), imported only when a GGUF type is asked for: `gguf` imports numpy, and
`kvplan size` with other dtypes should not pay for it.

A file type (llama-quantize's `Q4_K_M`, `IQ4_XS`, …; `llama_ftype` in llama.h) names a mix: a
default ggml type plus per-tensor exceptions (`engine/gguf_mix.py`). The file types listed
here are the ones kvplan models the mix of; the IQ1/IQ2/IQ3 and TQ types need an importance
matrix or ternary weights and are not offered.
"""

from __future__ import annotations

from functools import lru_cache

# llama-quantize file type (kvplan's lower-case name) -> its default ggml type:
# src/llama-quant.cpp llama_ftype_get_default_type (ggml-org/llama.cpp).
GGUF_FILE_TYPES: dict[str, str] = {
    "q8_0": "Q8_0",
    "q6_k": "Q6_K",
    "q5_k_m": "Q5_K",
    "q5_k_s": "Q5_K",
    "q5_1": "Q5_1",
    "q5_0": "Q5_0",
    "q4_k_m": "Q4_K",
    "q4_k_s": "Q4_K",
    "q4_1": "Q4_1",
    "q4_0": "Q4_0",
    "iq4_xs": "IQ4_XS",
    "iq4_nl": "IQ4_NL",
    "q3_k_l": "Q3_K",
    "q3_k_m": "Q3_K",
    "q3_k_s": "Q3_K",
    "q2_k": "Q2_K",
    "mxfp4_moe": "MXFP4",
}
# tools/quantize/quantize.cpp QUANT_OPTIONS: "Q4_K" is an alias of Q4_K_M, and so on.
GGUF_FILE_TYPE_ALIASES: dict[str, str] = {"q3_k": "q3_k_m", "q4_k": "q4_k_m", "q5_k": "q5_k_m"}


def gguf_file_type(name: str) -> str | None:
    """kvplan's name of the llama-quantize file type `name` (any case; Q4_K for Q4_K_M), or
    None when `name` is not one."""
    lowered = name.lower()
    canonical = GGUF_FILE_TYPE_ALIASES.get(lowered, lowered)
    return canonical if canonical in GGUF_FILE_TYPES else None


@lru_cache(maxsize=64)
def ggml_block(ggml_type: str) -> tuple[int, int]:
    """(weights per block, bytes per block) of the ggml type `ggml_type` (Q4_K, F16, …)."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    return GGML_QUANT_SIZES[GGMLQuantizationType[ggml_type.upper()]]


def ggml_row_bytes(ggml_type: str, weights: int) -> int:
    """Bytes of one row of `weights` values in `ggml_type` (ggml_row_size); the row must be
    whole blocks, as llama-quantize makes sure (`engine/gguf_mix.py` falls back otherwise)."""
    block, block_bytes = ggml_block(ggml_type)
    if weights % block:
        raise ValueError(f"a row of {weights} values is not whole {ggml_type} blocks of {block}")
    return weights // block * block_bytes


def ggml_bits_per_weight(ggml_type: str) -> float:
    """Bits per weight of `ggml_type`: block bytes × 8 / weights per block."""
    block, block_bytes = ggml_block(ggml_type)
    return block_bytes * 8 / block
