"""`quantization_config`: the weight dtype it implies; the KV cache keeps the activation dtype."""

from __future__ import annotations

from typing import Any

from kvplan.catalog.hf.fields import _Config


def _quantization(c: _Config, spec: dict[str, Any]) -> None:
    """Weight dtype from quantization_config; the KV cache keeps the activation dtype."""
    q = c.get("quantization_config")
    if not isinstance(q, dict):
        return
    method = str(q.get("quant_method", "")).lower()
    activation = spec["weight_dtype"]
    if method == "fp8":
        block = q.get("weight_block_size")
        if block == [128, 128]:
            spec["weight_dtype"] = "fp8_block"  # DeepSeek-V3: one fp32 scale per 128x128 block
        else:
            spec["weight_dtype"] = "fp8"
            if block is not None:
                c.warn(f"fp8 weight_block_size {block} read as fp8 with negligible scales")
        read = spec["weight_dtype"]
    elif method == "mxfp4" and spec.get("moe") is not None:
        # GPT-OSS: routed experts in MXFP4, attention/router/embeddings left in bf16.
        spec["moe"]["expert_weight_dtype"] = "mxfp4"
        read = "mxfp4 routed experts"
    elif method == "bitsandbytes" and (q.get("load_in_4bit") or q.get("load_in_8bit")):
        # NF4/FP4 keep one absmax per 64 values: close to, not exactly, int4 group-128 scales.
        spec["weight_dtype"] = "int4" if q.get("load_in_4bit") else "int8"
        read = f"{spec['weight_dtype']} (bitsandbytes; scale overhead approximate)"
    elif method in ("gptq", "awq") and q.get("bits") in (4, 8):
        spec["weight_dtype"] = "int4" if q["bits"] == 4 else "int8"
        read = spec["weight_dtype"]
        if q["bits"] == 4 and q.get("group_size", 128) != 128:
            c.warn(f"{method} group_size {q.get('group_size')} counted as int4 group-128 scales")
    else:
        c.warn(
            f"quantization_config quant_method {method or None!r} not understood: "
            f"weights counted as {activation}"
        )
        return
    c.warn(
        f"quantization_config {method}: weights read as {read}; the KV cache stays in the "
        f"activation dtype ({activation}) unless a KV dtype is chosen"
    )
