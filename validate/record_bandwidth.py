"""The record's bandwidth section: bytes per step (unique and issued), times, achieved rates.

Achieved bandwidth is given against the unique bytes (what the step must move; the verdict
uses it) and against the bytes the kernel issues (re-reads and split partials included),
each compared with the datasheet and with a device-to-device copy timed in the same run.
When the verdict fails, ``shortfall`` names the term responsible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvplan.specs import SkuSpec
from kvplan.validate.bandwidth import FLUSH_METHOD, L2_WORKING_SET_FACTOR, CopyCeiling, Timing
from kvplan.validate.shortfall import explain_shortfall
from kvplan.validate.traffic import StepTraffic
from kvplan.validate.verify_plan import VerifyPlan

CPU_TIMING_NOTE = (
    "timings are not meaningful on CPU: the Triton interpreter runs the kernel one program at "
    "a time; no bandwidth verdict"
)


@dataclass(frozen=True)
class TimedRun:
    """What the timing step produced, and the device facts it is judged against."""

    device_type: str
    traffic: StepTraffic
    timing: Timing
    eager: Timing | None
    copy: CopyCeiling | None
    sku: SkuSpec | None
    l2_bytes: int
    l2_flushed: bool
    sm_count: int | None


def _common(plan: VerifyPlan, run: TimedRun, pass_fraction: float) -> dict[str, Any]:
    layers, traffic, timing = plan.layers_verified, run.traffic, run.timing
    step_s = timing.median_s
    return {
        "timings_meaningful": run.device_type == "cuda",
        "num_splits": traffic.num_splits,
        "traffic_per_step_per_layer": traffic.as_record(),
        "kv_bytes_read_per_step_per_layer": traffic.kv_unique_bytes,
        "kv_bytes_issued_per_step_per_layer": traffic.kv_issued_bytes,
        "q_bytes_per_step_per_layer": traffic.q_unique_bytes,
        "out_bytes_per_step_per_layer": traffic.out_bytes,
        "block_table_bytes_per_step_per_layer": traffic.table_unique_bytes,
        "useful_bytes_per_step_per_layer": traffic.unique_bytes,
        "issued_bytes_per_step_per_layer": traffic.issued_bytes,
        "split_partial_bytes_per_step_per_layer": traffic.partial_bytes,
        "useful_bytes_per_step_verified": traffic.unique_bytes * layers,
        "kv_bytes_read_per_step_whole_model": traffic.kv_unique_bytes * plan.model_layers,
        "kv_bytes_per_token_whole_model": plan.kv_bytes_per_token_whole_model,
        "working_set_bytes": traffic.kv_unique_bytes * layers,
        "l2_bytes": run.l2_bytes,
        "l2_flushed": run.l2_flushed,
        "l2_flush_method": FLUSH_METHOD if run.l2_flushed else None,
        "timing_method": timing.method,
        "repeats": timing.repeats,
        "warmup_steps": timing.warmup_steps,
        "time_per_step_verified_s": step_s,
        "time_per_step_verified_p10_s": timing.p10_s,
        "time_per_step_verified_p90_s": timing.p90_s,
        "time_per_step_per_layer_s": step_s / layers,
        "time_per_step_whole_model_s": step_s * plan.whole_model_factor,
        "eager_time_per_step_verified_s": run.eager.median_s if run.eager else None,
        "pass_fraction_of_copy": pass_fraction,
    }


def bandwidth_section(plan: VerifyPlan, run: TimedRun, pass_fraction: float) -> dict[str, Any]:
    """Bytes per step, times, achieved bandwidth against the datasheet and the copy."""
    section = _common(plan, run, pass_fraction)
    if run.device_type != "cuda":
        section["note"] = CPU_TIMING_NOTE
        return section
    layers, traffic = plan.layers_verified, run.traffic
    step_s = run.timing.median_s
    whole_model_s = step_s * plan.whole_model_factor
    unique = traffic.unique_bytes * layers / step_s
    issued = traffic.issued_bytes * layers / step_s
    datasheet = run.sku.bandwidth_bytes_per_s if run.sku else None
    copy = run.copy.bytes_per_s if run.copy else None
    predicted_s = traffic.kv_unique_bytes * plan.model_layers / datasheet if datasheet else None
    section |= {
        "achieved_bytes_per_s": unique,
        "achieved_issued_bytes_per_s": issued,
        "achieved_bytes_per_s_with_partials": (
            (traffic.unique_bytes + traffic.partial_bytes) * layers / step_s
        ),
        "datasheet_bytes_per_s": datasheet,
        "achieved_fraction_of_datasheet": unique / datasheet if datasheet else None,
        "issued_fraction_of_datasheet": issued / datasheet if datasheet else None,
        "copy_bytes_per_s": copy,
        "copy_buffer_bytes": run.copy.buffer_bytes if run.copy else None,
        "achieved_fraction_of_copy": unique / copy if copy else None,
        "issued_fraction_of_copy": issued / copy if copy else None,
        "predicted_attention_time_whole_model_s": predicted_s,
        "measured_attention_time_whole_model_s": whole_model_s,
        "measured_over_predicted": whole_model_s / predicted_s if predicted_s else None,
        "decode_tokens_per_s_attention_only": plan.batch / whole_model_s,
    }
    if copy and unique / copy < pass_fraction:
        section["shortfall"] = explain_shortfall(
            traffic, layers=layers, step_s=step_s, copy_bytes_per_s=copy, sm_count=run.sm_count
        ).as_record()
    working_set = traffic.kv_unique_bytes * layers
    if working_set < L2_WORKING_SET_FACTOR * run.l2_bytes:
        section["note"] = (
            f"the verified pools read {working_set:,} bytes per step, under "
            f"{L2_WORKING_SET_FACTOR}× L2 ({L2_WORKING_SET_FACTOR * run.l2_bytes:,} bytes): L2 "
            f"was flushed by a {FLUSH_METHOD}"
        )
    return section
