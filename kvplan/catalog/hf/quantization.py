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
        spec["weight_dtype"] = method if q["bits"] == 4 else "int8"
        read = spec["weight_dtype"]
        if q["bits"] == 4 and q.get("group_size", 128) != 128:
            c.warn(f"{method} group_size {q.get('group_size')} counted as int4 group-128 scales")
    elif method in ("compressed-tensors", "modelopt", "fbgemm_fp8") or (
        method == "mxfp4" and spec.get("moe") is None
    ):
        read = _other_formats(q, method, spec)
        if read is None:
            c.warn(
                f"quantization_config {method} scheme not understood: weights counted as "
                f"{activation} (a checkpoint's safetensors headers give the exact bytes)"
            )
            return
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


def _compressed_tensors_dtype(q: dict[str, Any]) -> str | None:
    """compressed-tensors (llm-compressor): the first config group's weight scheme.

    8-bit float → fp8 (fp8_block for a 128x128 block strategy), 8-bit int → int8, 4-bit int
    group 128 → int4, 4-bit float group 16 → nvfp4 (its "nvfp4-pack-quantized" format).
    """
    groups = q.get("config_groups")
    first = next(iter(groups.values()), None) if isinstance(groups, dict) else None
    weights = first.get("weights") if isinstance(first, dict) else None
    if not isinstance(weights, dict):
        return None
    bits, kind = weights.get("num_bits"), weights.get("type")
    if bits == 8 and kind == "float":
        block = weights.get("block_structure")
        return "fp8_block" if block == [128, 128] else "fp8"
    if bits == 8 and kind == "int":
        return "int8"
    if bits == 4 and kind == "int" and weights.get("group_size") == 128:
        return "int4"
    if bits == 4 and kind == "float" and weights.get("group_size") == 16:
        return "nvfp4"
    return None


def _other_formats(q: dict[str, Any], method: str, spec: dict[str, Any]) -> str | None:
    """Weight dtype of compressed-tensors, NVIDIA ModelOpt (quant_algo FP8 / NVFP4),
    fbgemm_fp8 and dense MXFP4 configs, set on `spec`; None when the scheme is unknown."""
    if method == "compressed-tensors":
        dtype = _compressed_tensors_dtype(q)
    elif method == "modelopt":
        dtype = {"FP8": "fp8", "NVFP4": "nvfp4"}.get(str(q.get("quant_algo", "")).upper())
    elif method == "fbgemm_fp8":
        dtype = "fp8"
    else:
        dtype = "mxfp4"
    if dtype is not None:
        spec["weight_dtype"] = dtype
    return dtype
