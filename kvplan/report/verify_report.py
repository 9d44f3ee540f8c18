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


def verify_table(record: dict[str, Any]) -> Table:
    """Predicted against measured, one row per quantity, with each check's verdict."""
    memory, numerics, bandwidth = record["memory"], record["numerics"], record["bandwidth"]
    verdict, scaling = record["verdict"], record["scaling"]
    factor = f"×{scaling['whole_model_factor']:g}"
    meaningful = bandwidth["timings_meaningful"]
    table = Table(
        title=_title(record),
        headers=["quantity", "predicted", "measured", "check"],
        keys=["quantity", "predicted", "measured", "check"],
    )

    def row(quantity: str, predicted: Any, measured: Any, check: str, shown: list[str]) -> None:
        table.add([quantity, predicted, measured, check], [quantity, *shown, check])

    fit = memory["fit"]
    row(
        "KV pool, verified layers",
        memory["predicted_pool_bytes"],
        memory["measured_pool_bytes"],
        f"{verdict['memory']} (Δ {memory['difference_bytes']:,} B, "
        f"tolerance {memory['tolerance_bytes']:,} B)",
        [_bytes(memory["predicted_pool_bytes"]), _bytes(memory["measured_pool_bytes"])],
    )
    row(
        f"KV pool, whole model ({factor})",
        memory["predicted_pool_bytes_whole_model"],
        None,
        "scaled",
        [_bytes(memory["predicted_pool_bytes_whole_model"]), "—"],
    )
    row(
        "fit: required vs available",
        fit["required_bytes"],
        fit["available_bytes"],
        "fits" if fit["fits"] else "does not fit",
        [_bytes(fit["required_bytes"]), _bytes(fit["available_bytes"])],
    )
    if fit["non_torch_bytes"] is not None:
        row(
            "CUDA context and other processes",
            None,
            fit["non_torch_bytes"],
            "shown apart",
            ["—", _bytes(fit["non_torch_bytes"])],
        )
    error = numerics["max_error"]
    row(
        "numerics: max error vs float64 reference",
        numerics["tolerance"],
        error,
        verdict["numerics"],
        [f"≤ {numerics['tolerance']:g}", "non-finite" if error is None else f"{error:.2e}"],
    )
    row(
        "KV bytes read per step, per layer",
        bandwidth["kv_bytes_read_per_step_per_layer"],
        None,
        "exact tokens",
        [_bytes(bandwidth["kv_bytes_read_per_step_per_layer"]), "—"],
    )
    others = (
        bandwidth["q_bytes_per_step_per_layer"]
        + bandwidth["out_bytes_per_step_per_layer"]
        + bandwidth["block_table_bytes_per_step_per_layer"]
    )
    row("q + out + block table, per layer", others, None, "", [_bytes(others), "—"])
    row(
        f"split-K partials, per layer (S = {bandwidth['num_splits']})",
        bandwidth["split_partial_bytes_per_step_per_layer"],
        None,
        "listed apart",
        [_bytes(bandwidth["split_partial_bytes_per_step_per_layer"]), "—"],
    )
    time_note = "" if meaningful else NOT_MEANINGFUL
    row(
        "time per step, per layer",
        None,
        bandwidth["time_per_step_per_layer_s"],
        time_note or f"median of {bandwidth['repeats']} ({bandwidth['timing_method']})",
        ["—", _seconds(bandwidth["time_per_step_per_layer_s"])],
    )
    predicted_s = bandwidth.get("predicted_attention_time_whole_model_s")
    row(
        f"attention time per step, whole model ({factor})",
        predicted_s,
        bandwidth["time_per_step_whole_model_s"],
        time_note or f"measured/predicted {_ratio(bandwidth.get('measured_over_predicted'))}",
        [_seconds(predicted_s), _seconds(bandwidth["time_per_step_whole_model_s"])],
    )
    if meaningful:
        achieved = bandwidth["achieved_bytes_per_s"]
        row(
            "achieved bandwidth vs datasheet",
            bandwidth["datasheet_bytes_per_s"],
            achieved,
            f"{_percent(bandwidth['achieved_fraction_of_datasheet'])} of datasheet",
            [_rate(bandwidth["datasheet_bytes_per_s"]), _rate(achieved)],
        )
        row(
            "achieved bandwidth vs measured copy",
            bandwidth["copy_bytes_per_s"],
            achieved,
            f"{verdict['bandwidth']} ({_percent(bandwidth['achieved_fraction_of_copy'])}; "
            f"band ≥ {bandwidth['pass_fraction_of_copy']:.0%})",
            [_rate(bandwidth["copy_bytes_per_s"]), _rate(achieved)],
        )
        row(
            "decode tokens/s (attention only), KV bytes per token",
            bandwidth["kv_bytes_per_token_whole_model"],
            bandwidth["decode_tokens_per_s_attention_only"],
            "",
            [
                _bytes(bandwidth["kv_bytes_per_token_whole_model"]),
                f"{bandwidth['decode_tokens_per_s_attention_only']:,.0f} tokens/s",
            ],
        )
    else:
        row(
            "bandwidth",
            None,
            None,
            verdict["bandwidth"],
            ["—", NOT_MEANINGFUL],
        )
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
