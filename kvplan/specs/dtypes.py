"""Number formats: bits per element plus quantisation metadata, for KV caches and weights."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from kvplan.errors import KvplanError
from kvplan.specs.gguf_types import (
    GGUF_FILE_TYPES,
    ggml_block,
    gguf_file_type,
)


@dataclass(frozen=True)
class DtypeInfo:
    """Storage cost of a number format: bits per element plus quantisation metadata.

    A group of `group_elements` values shares `metadata_bits` of scales/zero points.
    `group_elements == 0` means one group per token-head row (vLLM's per-token-head scales);
    `metadata_bits == 0` means per-tensor scales only (negligible, not counted).
    """

    name: str
    bits: int
    group_elements: int = 0
    metadata_bits: int = 0
    description: str = ""

    def row_bytes(self, elements: int) -> int:
        """Bytes of one row of `elements` values (one token of one KV head), metadata included."""
        groups = 1 if self.group_elements == 0 else -(-elements // self.group_elements)
        return -(-(elements * self.bits + groups * self.metadata_bits) // 8)

    @property
    def is_quantised(self) -> bool:
        return self.bits < 16


KV_DTYPES: dict[str, DtypeInfo] = {
    d.name: d
    for d in (
        DtypeInfo("fp32", 32, description="IEEE float32"),
        DtypeInfo("bf16", 16, description="bfloat16 (vLLM 'auto' for bf16 models)"),
        DtypeInfo("fp16", 16, description="IEEE float16"),
        DtypeInfo("fp8_e4m3", 8, description="FP8 E4M3 with per-tensor scales (vLLM 'fp8')"),
        DtypeInfo("fp8_e5m2", 8, description="FP8 E5M2 with per-tensor scales"),
        # vLLM int8_per_token_head: one fp32 scale per token per KV head, carved from the page.
        DtypeInfo("int8", 8, 0, 32, "int8 + one fp32 scale per token per head"),
        # transformers QuantizedCache defaults (nbits=4, q_group_size=64): bf16 scale + zero.
        DtypeInfo("int4", 4, 64, 32, "int4 + bf16 scale and zero point per 64 values"),
        DtypeInfo("nvfp4", 4, 16, 8, "FP4 E2M1 + one fp8 E4M3 scale per 16 values"),
        DtypeInfo("mxfp4", 4, 32, 8, "FP4 E2M1 + one E8M0 scale per 32 values (OCP MX)"),
        # ggml block types (ggml/src/ggml-common.h), llama.cpp -ctk/-ctv: a block of 32 values
        # carries an fp16 scale (d), plus an fp16 min (m) in the _1 types; q5 types add one
        # high bit per value. q8_0 = 34 B, q4_0 = iq4_nl = 18 B, q4_1 = 20, q5_0 = 22, q5_1 = 24.
        DtypeInfo("q8_0", 8, 32, 16, "ggml q8_0: 32 int8 + fp16 scale (34 B per 32)"),
        DtypeInfo("q5_1", 5, 32, 32, "ggml q5_1: 32 x 5 bit + fp16 scale and min (24 B per 32)"),
        DtypeInfo("q5_0", 5, 32, 16, "ggml q5_0: 32 x 5 bit + fp16 scale (22 B per 32)"),
        DtypeInfo("q4_1", 4, 32, 32, "ggml q4_1: 32 x 4 bit + fp16 scale and min (20 B per 32)"),
        DtypeInfo("q4_0", 4, 32, 16, "ggml q4_0: 32 x 4 bit + fp16 scale (18 B per 32)"),
        DtypeInfo("iq4_nl", 4, 32, 16, "ggml iq4_nl: 32 x 4 bit non-linear + fp16 scale (18 B)"),
    )
}

WEIGHT_DTYPES: dict[str, DtypeInfo] = {
    d.name: d
    for d in (
        DtypeInfo("fp32", 32, description="IEEE float32"),
        DtypeInfo("bf16", 16, description="bfloat16"),
        DtypeInfo("fp16", 16, description="IEEE float16"),
        DtypeInfo("fp8", 8, description="FP8 with per-tensor or per-channel scales (negligible)"),
        # DeepSeek-V3 checkpoint: one fp32 scale per 128x128 block.
        DtypeInfo("fp8_block", 8, 128 * 128, 32, "FP8 + one fp32 scale per 128x128 block"),
        DtypeInfo("int8", 8, description="int8 with per-channel scales (negligible)"),
        # GPTQ/AWQ group 128: an fp16 scale and a packed 4-bit zero point per group.
        DtypeInfo("int4", 4, 128, 20, "int4, group 128: fp16 scale + 4-bit zero"),
        # AutoAWQ GEMM layout: qweight int32 [in, out/8], scales fp16 [in/128, out],
        # qzeros int32 [in/128, out/8]: 4 bits per weight + 16 + 4 bits per group of 128.
        DtypeInfo("awq", 4, 128, 20, "AWQ int4, group 128: fp16 scale + packed 4-bit zero"),
        # GPTQ layout: qweight int32 [in/8, out], scales fp16 [in/128, out], qzeros int32
        # [in/128, out/8], plus g_idx int32 [in] per matrix (one input row's group index:
        # 4 bytes per input row, under 0.1 % of a 4096-wide matrix; not counted here).
        DtypeInfo("gptq", 4, 128, 20, "GPTQ int4, group 128: fp16 scale + packed 4-bit zero"),
        DtypeInfo("nvfp4", 4, 16, 8, "FP4 E2M1 + one fp8 scale per 16 values"),
        DtypeInfo("mxfp4", 4, 32, 8, "FP4 E2M1 + one E8M0 scale per 32 values"),
    )
}

# Spellings users type; mapped once, here, onto the canonical names above.
KV_DTYPE_ALIASES: dict[str, str] = {
    "float32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "fp8": "fp8_e4m3",
    "fp8_e4m3fn": "fp8_e4m3",
    "e4m3": "fp8_e4m3",
    "e5m2": "fp8_e5m2",
    "f32": "fp32",  # ggml's names (llama.cpp -ctk f16)
    "f16": "fp16",
}


WEIGHT_DTYPE_ALIASES: dict[str, str] = {
    "float32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
}


def _dtype_info(
    table: dict[str, DtypeInfo],
    aliases: dict[str, str],
    name: str,
    what: str,
    more: tuple[str, ...] = (),
) -> DtypeInfo:
    canonical = aliases.get(name.lower(), name.lower())
    if canonical in table:
        return table[canonical]
    close = difflib.get_close_matches(name.lower(), [*table, *aliases, *more], n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    allowed = ", ".join([*table, *more])
    raise KvplanError(f"{what}: unknown dtype {name!r}{hint} (allowed: {allowed})")


def kv_dtype_info(name: str) -> DtypeInfo:
    """The KV dtype called `name` (aliases such as 'fp8' and 'bfloat16' accepted)."""
    return _dtype_info(KV_DTYPES, KV_DTYPE_ALIASES, name, "kv dtype")


def weight_dtype_info(name: str) -> DtypeInfo:
    """The weight dtype called `name`: one of WEIGHT_DTYPES, or a GGUF file type (Q4_K_M,
    IQ4_XS, …; any case) described by its default ggml type."""
    file_type = gguf_file_type(name)
    if file_type is not None:
        return gguf_file_type_info(file_type)
    return _dtype_info(
        WEIGHT_DTYPES, WEIGHT_DTYPE_ALIASES, name, "weight dtype", tuple(GGUF_FILE_TYPES)
    )


def is_gguf_weight_dtype(name: str | None) -> bool:
    """Whether `name` is a GGUF file type (weights made by llama-quantize)."""
    return name is not None and gguf_file_type(name) is not None


@lru_cache(maxsize=64)
def gguf_file_type_info(file_type: str) -> DtypeInfo:
    """A GGUF file type as a dtype: its default ggml type's block, whole bits per weight and
    the rest of the block's bits as group metadata (Q4_K: 4 bits + 128 per 256 weights). Its
    per-tensor mix is `engine.gguf_mix`'s."""
    ggml_type = GGUF_FILE_TYPES[file_type]
    block, block_bytes = ggml_block(ggml_type)
    bits = block_bytes * 8 // block
    return DtypeInfo(
        file_type,
        bits,
        block,
        block_bytes * 8 - bits * block,
        f"GGUF {file_type.upper()}: llama-quantize's mix, mostly {ggml_type} "
        f"({block_bytes} B per {block} weights)",
    )


KvDtypeName = Literal[
    "fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "int8", "int4", "nvfp4", "mxfp4",
    "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl",
]  # fmt: skip
WeightDtypeName = Literal[
    "fp32", "bf16", "fp16", "fp8", "fp8_block", "int8", "int4", "awq", "gptq", "nvfp4", "mxfp4"
]
