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
from kvplan.validate.bandwidth import L2_WORKING_SET_FACTOR, CopyCeiling, Timing
from kvplan.validate.memory import (
    CPU_POOL_CAP_BYTES,
    AllocatedPools,
    FitCheck,
    allocation_tolerance_bytes,
    pool_tensors,
)
from kvplan.validate.numerics import NumericsResult
from kvplan.validate.plan import VerifyPlan

RECORD_VERSION = 1
PASS, FAIL, NOT_MEASURED = "pass", "fail", "not-measured"

NULL_PAGE_NOTE = (
    "predicted pool = the engine formula's KV bytes for the batch plus one reserved null page "
    "per layer, which the allocator keeps out of every sequence as vLLM keeps its null block "
    "(block-table padding points at it)"
)
CPU_TIMING_NOTE = (
    "timings are not meaningful on CPU: the Triton interpreter runs the kernel one program at "
    "a time; no bandwidth verdict"
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


def memory_section(
    plan: VerifyPlan, fit: FitCheck, pools: AllocatedPools, device_type: str
) -> dict[str, Any]:
    """Predicted against measured pool bytes, and the fit against free device memory."""
    tolerance = allocation_tolerance_bytes(plan, device_type)
    difference = pools.measured_bytes - plan.predicted_pool_bytes
    memory = fit.device_memory
    return {
        "predicted_pool_bytes": plan.predicted_pool_bytes,
        "predicted_kv_bytes": plan.predicted_kv_bytes,
        "predicted_null_page_bytes": plan.predicted_null_page_bytes,
        "predicted_pool_bytes_per_layer": plan.predicted_pool_bytes_per_layer,
        "predicted_pool_bytes_whole_model": plan.predicted_pool_bytes_per_layer * plan.model_layers,
        "predicted_blocks_per_layer": plan.predicted_blocks_per_layer,
        "plan_kv_bytes_per_gpu_whole_model": plan.plan_kv_bytes_per_gpu,
        "token_bytes_per_layer": plan.token_bytes_per_layer,
        "allocator_blocks_per_layer": pools.cache.num_blocks,
        "allocator_formula_bytes": pools.allocator_formula_bytes,
        "measured_pool_bytes": pools.measured_bytes,
        "measurement": pools.measurement,
        "difference_bytes": difference,
        "tolerance_bytes": tolerance,
        "tolerance_rule": (
            "measured − predicted in [0, 511 B × pool tensors]: the caching allocator rounds "
            "each block up to 512 B"
            if device_type == "cuda"
            else "exact: measured == predicted"
        ),
        "pool_tensors": pool_tensors(plan),
        "fit": {
            "required_bytes": fit.required_bytes,
            "workspace_bytes": fit.workspace_bytes,
            "available_bytes": fit.available_bytes,
            "fits": fit.fits,
            "device_total_bytes": memory.total_bytes if memory else None,
            "device_free_bytes": memory.free_bytes if memory else None,
            "torch_reserved_bytes": memory.torch_reserved_bytes if memory else None,
            "non_torch_bytes": memory.non_torch_bytes if memory else None,
            "cpu_cap_bytes": None if memory else CPU_POOL_CAP_BYTES,
        },
        "passed": 0 <= difference <= tolerance,
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


def bandwidth_section(
    plan: VerifyPlan,
    *,
    device_type: str,
    num_splits: int,
    timing: Timing,
    eager: Timing | None,
    copy: CopyCeiling | None,
    sku: SkuSpec | None,
    l2_bytes: int,
    l2_flushed: bool,
    pass_fraction: float,
) -> dict[str, Any]:
    """Bytes per step, times, achieved bandwidth against the datasheet and the copy."""
    layers, factor = plan.layers_verified, plan.whole_model_factor
    useful_step = plan.useful_bytes_per_layer * layers
    partial_step = plan.partial_bytes_per_layer(num_splits) * layers
    working_set = plan.kv_bytes_read_per_layer * layers
    step_s = timing.median_s
    whole_model_s = step_s * factor
    kv_whole_model = plan.kv_bytes_read_per_layer * plan.model_layers
    meaningful = device_type == "cuda"
    section: dict[str, Any] = {
        "timings_meaningful": meaningful,
        "num_splits": num_splits,
        "kv_bytes_read_per_step_per_layer": plan.kv_bytes_read_per_layer,
        "q_bytes_per_step_per_layer": plan.q_bytes_per_layer,
        "out_bytes_per_step_per_layer": plan.out_bytes_per_layer,
        "block_table_bytes_per_step_per_layer": plan.block_table_bytes_per_layer,
        "useful_bytes_per_step_per_layer": plan.useful_bytes_per_layer,
        "split_partial_bytes_per_step_per_layer": plan.partial_bytes_per_layer(num_splits),
        "useful_bytes_per_step_verified": useful_step,
        "kv_bytes_read_per_step_whole_model": kv_whole_model,
        "kv_bytes_per_token_whole_model": plan.kv_bytes_per_token_whole_model,
        "working_set_bytes": working_set,
        "l2_bytes": l2_bytes,
        "l2_flushed": l2_flushed,
        "timing_method": timing.method,
        "repeats": timing.repeats,
        "warmup_steps": timing.warmup_steps,
        "time_per_step_verified_s": step_s,
        "time_per_step_verified_p10_s": timing.p10_s,
        "time_per_step_verified_p90_s": timing.p90_s,
        "time_per_step_per_layer_s": step_s / layers,
        "time_per_step_whole_model_s": whole_model_s,
        "eager_time_per_step_verified_s": eager.median_s if eager else None,
        "pass_fraction_of_copy": pass_fraction,
    }
    if not meaningful:
        section["note"] = CPU_TIMING_NOTE
        return section
    achieved = useful_step / step_s
    datasheet = sku.bandwidth_bytes_per_s if sku else None
    predicted_s = kv_whole_model / datasheet if datasheet else None
    section |= {
        "achieved_bytes_per_s": achieved,
        "achieved_bytes_per_s_with_partials": (useful_step + partial_step) / step_s,
        "datasheet_bytes_per_s": datasheet,
        "achieved_fraction_of_datasheet": achieved / datasheet if datasheet else None,
        "copy_bytes_per_s": copy.bytes_per_s if copy else None,
        "copy_buffer_bytes": copy.buffer_bytes if copy else None,
        "achieved_fraction_of_copy": achieved / copy.bytes_per_s if copy else None,
        "predicted_attention_time_whole_model_s": predicted_s,
        "measured_attention_time_whole_model_s": whole_model_s,
        "measured_over_predicted": whole_model_s / predicted_s if predicted_s else None,
        "decode_tokens_per_s_attention_only": plan.batch / whole_model_s,
    }
    if working_set < L2_WORKING_SET_FACTOR * l2_bytes:
        section["note"] = (
            f"the verified pools read {working_set:,} bytes per step, under 4× L2 "
            f"({L2_WORKING_SET_FACTOR * l2_bytes:,} bytes): L2 was flushed before each timed step"
        )
    return section


def verdict(record: dict[str, Any]) -> dict[str, str]:
    """pass/fail per check; bandwidth is not-measured off-GPU."""
    bandwidth = record["bandwidth"]
    fraction = bandwidth.get("achieved_fraction_of_copy")
    if not bandwidth["timings_meaningful"] or fraction is None:
        bandwidth_verdict = NOT_MEASURED
    else:
        bandwidth_verdict = PASS if fraction >= bandwidth["pass_fraction_of_copy"] else FAIL
    return {
        "memory": PASS if record["memory"]["passed"] else FAIL,
        "numerics": PASS if record["numerics"]["passed"] else FAIL,
        "bandwidth": bandwidth_verdict,
    }


def exit_code(record: dict[str, Any]) -> int:
    """0 when every measured check passed, 1 when one failed (STYLE: a result, not an error)."""
    return 1 if FAIL in record["verdict"].values() else 0


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Write the record as JSON to `path`, atomically (kvplan.files.write_atomically)."""
    write_atomically(path, json.dumps(record, indent=2) + "\n", "--json")
