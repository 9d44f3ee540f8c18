"""`kvplan verify` output: the summary table of a verify record, and the record in every format.

The record (a JSON-ready dict built by ``kvplan.validate``) is the contract; this module only
turns it into text. Bandwidth is shown in decimal GB/s (10⁹ bytes/s), as datasheets state it.
"""

from __future__ import annotations

from typing import Any

from kvplan.report.render import Format, Table, emit, human_bytes

NOT_MEANINGFUL = "not meaningful on CPU"


def _bytes(value: int | None) -> str:
    return "—" if value is None else f"{human_bytes(value)} ({value:,} B)"


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 1:
        return f"{value:,.3f} s"
    if value >= 1e-3:
        return f"{value * 1e3:,.3f} ms"
    return f"{value * 1e6:,.1f} µs"


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value / 1e9:,.0f} GB/s"


def _percent(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.1%}"


def _title(record: dict[str, Any]) -> str:
    inputs, environment = record["inputs"], record["environment"]
    lengths = inputs["lengths_tokens"]
    batch = (
        f"{len(lengths)} × {lengths[0]:,} tokens"
        if len(set(lengths)) == 1
        else f"{len(lengths)} sequences of {min(lengths):,}–{max(lengths):,} tokens"
    )
    where = environment.get("gpu_name") or "CPU (Triton interpreter)"
    return (
        f"kvplan verify · {inputs['model']} · engine {inputs['engine']} · KV {inputs['kv_dtype']} "
        f"· {batch} · tp {inputs['tp']} · {inputs['layers_verified']} of "
        f"{inputs['model_layers']} layers · {where}"
    )


class _Rows:
    """The summary table being built: one row per quantity, exact values beside shown text."""

    def __init__(self, title: str) -> None:
        self.table = Table(
            title=title,
            headers=["quantity", "predicted", "measured", "check"],
            keys=["quantity", "predicted", "measured", "check"],
        )

    def add(self, quantity: str, predicted: Any, measured: Any, check: str, shown: list[str]):
        self.table.add([quantity, predicted, measured, check], [quantity, *shown, check])


def _memory_rows(rows: _Rows, record: dict[str, Any]) -> None:
    memory, verdict, scaling = record["memory"], record["verdict"], record["scaling"]
    if memory.get("not_allocated"):
        rows.add("KV pool", None, None, "did not allocate", ["—", "—"])
        return
    blocks_check = "pass" if memory["blocks_passed"] else "fail"
    rows.add(
        "KV blocks per layer (allocator)",
        memory["predicted_blocks_per_layer"],
        memory["allocator_blocks_per_layer"],
        f"{blocks_check} (exact)",
        [f"{memory['predicted_blocks_per_layer']:,}", f"{memory['allocator_blocks_per_layer']:,}"],
    )
    device = memory["device"]
    if device is None:
        rows.add(
            "KV pool, verified layers",
            memory["predicted_pool_bytes"],
            None,
            f"{verdict['memory']} (CPU)",
            [_bytes(memory["predicted_pool_bytes"]), "— (no device allocator)"],
        )
    else:
        labels = {
            "requested": "requested (allocator counter)",
            "allocated": "memory_allocated (replayed rules)",
            "reserved": "memory_reserved (replayed rules)",
            "driver": "driver used, mem_get_info (replayed)",
        }
        for name, term in device["terms"].items():
            rows.add(
                f"KV pool: {labels[name]}",
                term["expected_bytes"],
                term["measured_bytes"],
                f"{'pass' if term['passed'] else 'fail'} "
                f"(Δ vs plan {term['expected_minus_planned_bytes']:+,} B explained)",
                [_bytes(term["expected_bytes"]), _bytes(term["measured_bytes"])],
            )
    rows.add(
        f"KV pool, whole model (×{scaling['whole_model_factor']:g})",
        memory["predicted_pool_bytes_whole_model"],
        None,
        "scaled",
        [_bytes(memory["predicted_pool_bytes_whole_model"]), "—"],
    )
    fit = memory["fit"]
    if fit is None:  # --capacity: the capacity rows say whether the pool fits
        return
    if fit["available_bytes"]:
        rows.add(
            "fit: required vs available",
            fit["required_bytes"],
            fit["available_bytes"],
            "fits" if fit["fits"] else "does not fit",
            [_bytes(fit["required_bytes"]), _bytes(fit["available_bytes"])],
        )
    if fit["non_torch_bytes"] is not None:
        rows.add(
            "CUDA context and other processes",
            None,
            fit["non_torch_bytes"],
            "shown apart",
            ["—", _bytes(fit["non_torch_bytes"])],
        )


def _bandwidth_rows(rows: _Rows, record: dict[str, Any]) -> None:
    bandwidth, verdict = record["bandwidth"], record["verdict"]
    factor = f"×{record['scaling']['whole_model_factor']:g}"
    traffic = bandwidth["traffic_per_step_per_layer"]
    rows.add(
        "KV bytes per step, per layer: unique vs issued",
        traffic["kv_unique_bytes"],
        traffic["kv_issued_bytes"],
        f"re-read ×{traffic['kv_reread_factor']:g} (⌈G / {traffic['heads_per_program']}⌉ "
        "head blocks)",
        [_bytes(traffic["kv_unique_bytes"]), _bytes(traffic["kv_issued_bytes"])],
    )
    others = traffic["unique_bytes"] - traffic["kv_unique_bytes"]
    rows.add("q + out + block table, per layer", others, None, "", [_bytes(others), "—"])
    rows.add(
        f"split-K partials, per layer (S = {bandwidth['num_splits']})",
        bandwidth["split_partial_bytes_per_step_per_layer"],
        None,
        "in issued bytes",
        [_bytes(bandwidth["split_partial_bytes_per_step_per_layer"]), "—"],
    )
    meaningful = bandwidth["timings_meaningful"]
    time_note = "" if meaningful else NOT_MEANINGFUL
    rows.add(
        "time per step, per layer",
        None,
        bandwidth["time_per_step_per_layer_s"],
        time_note or f"median of {bandwidth['repeats']} ({bandwidth['timing_method']})",
        ["—", _seconds(bandwidth["time_per_step_per_layer_s"])],
    )
    predicted_s = bandwidth.get("predicted_attention_time_whole_model_s")
    rows.add(
        f"attention time per step, whole model ({factor})",
        predicted_s,
        bandwidth["time_per_step_whole_model_s"],
        time_note or f"measured/predicted {_ratio(bandwidth.get('measured_over_predicted'))}",
        [_seconds(predicted_s), _seconds(bandwidth["time_per_step_whole_model_s"])],
    )
    if meaningful:
        _achieved_rows(rows, bandwidth, verdict["bandwidth"])
    else:
        rows.add("bandwidth", None, None, verdict["bandwidth"], ["—", NOT_MEANINGFUL])


def _achieved_rows(rows: _Rows, bandwidth: dict[str, Any], verdict: str) -> None:
    """The bandwidth the kernel reached against the datasheet and the measured copy."""
    achieved = bandwidth["achieved_bytes_per_s"]
    rows.add(
        "achieved bandwidth (unique bytes) vs datasheet",
        bandwidth["datasheet_bytes_per_s"],
        achieved,
        f"{_percent(bandwidth['achieved_fraction_of_datasheet'])} of datasheet",
        [_rate(bandwidth["datasheet_bytes_per_s"]), _rate(achieved)],
    )
    rows.add(
        "achieved bandwidth (unique bytes) vs measured copy",
        bandwidth["copy_bytes_per_s"],
        achieved,
        f"{verdict} ({_percent(bandwidth['achieved_fraction_of_copy'])}; "
        f"band ≥ {bandwidth['pass_fraction_of_copy']:.0%})",
        [_rate(bandwidth["copy_bytes_per_s"]), _rate(achieved)],
    )
    rows.add(
        "issued bandwidth (re-reads, partials) vs measured copy",
        bandwidth["copy_bytes_per_s"],
        bandwidth["achieved_issued_bytes_per_s"],
        f"{_percent(bandwidth['issued_fraction_of_copy'])} of copy",
        [_rate(bandwidth["copy_bytes_per_s"]), _rate(bandwidth["achieved_issued_bytes_per_s"])],
    )
    rows.add(
        "decode tokens/s (attention only), KV bytes per token",
        bandwidth["kv_bytes_per_token_whole_model"],
        bandwidth["decode_tokens_per_s_attention_only"],
        "",
        [
            _bytes(bandwidth["kv_bytes_per_token_whole_model"]),
            f"{bandwidth['decode_tokens_per_s_attention_only']:,.0f} tokens/s",
        ],
    )
    shortfall = bandwidth.get("shortfall")
    if shortfall:
        rows.add(
            "bandwidth shortfall: responsible term",
            shortfall["ideal_s"],
            shortfall["measured_s"],
            shortfall["responsible"],
            [_seconds(shortfall["ideal_s"]), _seconds(shortfall["measured_s"])],
        )


def _capacity_rows(rows: _Rows, capacity: dict[str, Any], verdict: str) -> None:
    prediction, pool = capacity["prediction"], capacity["pool"]
    rows.add(
        f"capacity: KV blocks for {prediction['sku']} (planner vs largest that allocates)",
        capacity["predicted_blocks"],
        capacity["largest_blocks_within_ceiling"],
        verdict,
        [
            f"{capacity['predicted_blocks']:,}",
            "—"
            if capacity["largest_blocks_within_ceiling"] is None
            else f"{capacity['largest_blocks_within_ceiling']:,}",
        ],
    )
    rows.add(
        "capacity: memory in use with the predicted pool vs ceiling",
        capacity["device"]["ceiling_bytes"],
        pool["used_after_bytes"],
        "fits" if capacity["fits"] else "does not fit",
        [_bytes(capacity["device"]["ceiling_bytes"]), _bytes(pool["used_after_bytes"])],
    )
    rows.add(
        "capacity: free memory after the predicted pool",
        None,
        pool["free_after_bytes"],
        capacity["device"]["used_source"].split(":")[0],
        ["—", _bytes(pool["free_after_bytes"])],
    )


def verify_table(record: dict[str, Any]) -> Table:
    """Predicted against measured, one row per quantity, with each check's verdict."""
    rows = _Rows(_title(record))
    _memory_rows(rows, record)
    numerics = record["numerics"]
    if numerics is not None:
        error = numerics["max_error"]
        rows.add(
            "numerics: max error vs float64 reference",
            numerics["tolerance"],
            error,
            record["verdict"]["numerics"],
            [f"≤ {numerics['tolerance']:g}", "non-finite" if error is None else f"{error:.2e}"],
        )
    if record["bandwidth"] is not None:
        _bandwidth_rows(rows, record)
    if record.get("capacity") is not None:
        _capacity_rows(rows, record["capacity"], record["verdict"]["capacity"])
        rows.table.notes.append("capacity: " + record["capacity"]["statement"])
    table = rows.table
    table.notes += record["notes"]
    table.notes.append(
        "verdict: " + ", ".join(f"{check} {result}" for check, result in record["verdict"].items())
    )
    return table


def _ratio(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.2f}"


def _flatten(value: Any, prefix: str = "") -> list[dict[str, Any]]:
    if isinstance(value, dict):
        rows: list[dict[str, Any]] = []
        for key, item in value.items():
            rows += _flatten(item, f"{prefix}.{key}" if prefix else key)
        return rows
    return [{"key": prefix, "value": value}]


def render_verify(record: dict[str, Any], fmt: Format) -> None:
    """Print the record: the summary table, Markdown, the JSON record, or key/value CSV."""
    emit(fmt, record, _flatten(record), lambda: verify_table(record))
