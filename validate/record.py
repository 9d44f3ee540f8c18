"""The verify record: sections with units in every key, the verdict, the exit code, the file.

Keys carry their units (``_bytes``, ``_s``, ``_bytes_per_s``); fractions run 0–1 and say so
(``achieved_fraction_of_copy``). Bytes are exact integers. Written with a temporary name and
renamed, so a crash never leaves half a record.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan.files import write_atomically
from kvplan.specs import SkuSpec
from kvplan.validate.numerics import NumericsResult
from kvplan.validate.verify_plan import VerifyPlan

RECORD_VERSION = 2  # 2: memory terms measured on the device, traffic, capacity
PASS, FAIL, NOT_MEASURED = "pass", "fail", "not-measured"

NULL_PAGE_NOTE = (
    "predicted pool = the engine formula's KV bytes for the batch plus one reserved null page "
    "per layer, which the allocator keeps out of every sequence as vLLM keeps its null block "
    "(block-table padding points at it)"
)


def inputs_section(
    plan: VerifyPlan,
    *,
    device_type: str,
    sku: SkuSpec | None,
    sku_match: str,
    bandwidth_pass_fraction: float,
    seed: int,
) -> dict[str, Any]:
    """What was asked for, after defaults were applied."""
    return {
        "model": plan.model.name,
        "model_source": plan.model.source,
        "engine": plan.engine,
        "kv_dtype": plan.kv_dtype,
        "q_dtype": plan.q_dtype,
        "tp": plan.tp,
        "device": device_type,
        "sku": sku.name if sku else None,
        "sku_match": sku_match,
        "lengths_tokens": list(plan.lengths),
        "batch": plan.batch,
        "context_tokens": max(plan.lengths),
        "tokens_per_block": plan.tokens_per_block,
        "layer_kind": plan.kind,
        "layers_verified": plan.layers_verified,
        "model_layers": plan.model_layers,
        "num_heads_per_gpu": plan.num_heads_per_gpu,
        "num_kv_heads_per_gpu": plan.num_kv_heads_per_gpu,
        "head_dim_k": plan.head_dim_k,
        "head_dim_v": plan.head_dim_v,
        "bandwidth_pass_fraction_of_copy": bandwidth_pass_fraction,
        "seed": seed,
    }


def scaling_section(plan: VerifyPlan) -> dict[str, Any]:
    return {
        "layers_verified": plan.layers_verified,
        "model_layers": plan.model_layers,
        "whole_model_factor": plan.whole_model_factor,
        "statement": plan.scaling_statement,
    }


def numerics_section(result: NumericsResult) -> dict[str, Any]:
    return {
        "layers_checked": list(result.layers_checked),
        "sequences_checked": list(result.sequences_checked),
        "tokens_checked": list(result.tokens_checked),
        "max_error": result.max_error if result.max_error != float("inf") else None,
        "tolerance": result.tolerance,
        "error_definition": "max |kernel − float64 reference| / max(max |reference|, 1), "
        "reference on the same stored K and V",
        "all_outputs_finite": result.all_outputs_finite,
        "passed": result.passed,
    }


def verdict(record: dict[str, Any]) -> dict[str, str]:
    """pass/fail per check; memory bytes and bandwidth are not-measured off-GPU (the blocks
    are counted everywhere); capacity only when asked."""
    bandwidth, numerics = record["bandwidth"], record["numerics"]
    fraction = bandwidth.get("achieved_fraction_of_copy") if bandwidth else None
    if not bandwidth or not bandwidth["timings_meaningful"] or fraction is None:
        bandwidth_verdict = NOT_MEASURED
    else:
        bandwidth_verdict = PASS if fraction >= bandwidth["pass_fraction_of_copy"] else FAIL
    result = {
        "blocks": PASS if record["memory"].get("blocks_passed") else FAIL,
        "memory": _memory_verdict(record["memory"]),
        "numerics": NOT_MEASURED if numerics is None else PASS if numerics["passed"] else FAIL,
        "bandwidth": bandwidth_verdict,
    }
    capacity = record.get("capacity")
    if capacity is not None:
        result["capacity"] = PASS if capacity["fits"] else FAIL
    return result


def _memory_verdict(memory: dict[str, Any]) -> str:
    """fail when the blocks or a measured byte term failed; not-measured when the blocks
    matched but no device allocator counted the bytes (a CPU run): nothing was measured
    that could have failed."""
    if not memory["passed"]:
        return FAIL
    return PASS if memory.get("device") is not None else NOT_MEASURED


def exit_code(record: dict[str, Any]) -> int:
    """0 when every measured check passed, 1 when one failed (STYLE: a result, not an error)."""
    return 1 if FAIL in record["verdict"].values() else 0


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Write the record as JSON to `path`, atomically (kvplan.files.write_atomically)."""
    write_atomically(path, json.dumps(record, indent=2) + "\n", "--json")
