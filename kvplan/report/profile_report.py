"""`verify --profile`: each measured point with what it achieved, and the fitted constants."""

from __future__ import annotations

from typing import Any

from kvplan.report.render import Format, emit
from kvplan.report.table import Table

GEMM_ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}  # as kvplan.perf.calibration counts


def render_profile(payload: dict[str, Any], fmt: Format) -> None:
    """Print the profile in `fmt`: the JSON payload, one CSV row per point, or the table."""
    records = _records(payload["calibration"])
    emit(fmt, payload, records, lambda: _table(payload, records))


def _records(document: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for p in document["gemm"]:
        flops = 2 * p["m"] * p["n"] * p["k"]
        moved = (p["m"] * p["k"] + p["k"] * p["n"] + p["m"] * p["n"]) * GEMM_ELEMENT_BYTES[
            p["dtype"]
        ]
        shape = f"{p['op']} {p['m']}×{p['n']}×{p['k']} {p['dtype']}"
        rows.append(_row("gemm", shape, p["seconds"], flops, moved))
    for p in document["decode_attention"]:
        shape = f"{p['batch']} × {p['context_tokens']:,} tokens"
        rows.append(_row("decode_attention", shape, p["seconds"], None, p["kv_bytes"]))
    for p in document["all_reduce"]:
        bus = 2 * (p["gpus"] - 1) / p["gpus"] * p["bytes"]
        rows.append(
            _row("all_reduce", f"{p['bytes']:,} B over {p['gpus']} GPUs", p["seconds"], None, bus)
        )
    return rows


def _row(kind: str, shape: str, seconds: float, flops: int | None, moved: float) -> dict[str, Any]:
    return {
        "kind": kind,
        "shape": shape,
        "seconds": seconds,
        "flop_per_s": None if flops is None else flops / seconds,
        "bytes_per_s": moved / seconds,
    }


def _table(payload: dict[str, Any], records: list[dict[str, Any]]) -> Table:
    on = payload["calibration"]["measured_on"]
    table = Table(
        f"verify --profile · {on['gpu']} · {on['sku'] or 'unknown SKU'} · {on['date']}",
        ["kind", "shape", "µs", "TFLOP/s", "GB/s"],
        ["kind", "shape", "seconds", "flop_per_s", "bytes_per_s"],
        key_columns=2,
    )
    for r in records:
        flops = "—" if r["flop_per_s"] is None else f"{r['flop_per_s'] / 1e12:,.1f}"
        shown = [
            r["kind"],
            r["shape"],
            f"{r['seconds'] * 1e6:,.1f}",
            flops,
            f"{r['bytes_per_s'] / 1e9:,.1f}",
        ]
        table.add(list(r.values()), shown)
    fitted = ", ".join(f"{name} {value:.4g}" for name, value in payload["fitted"].items())
    table.notes += [
        f"fitted (kvplan.perf.calibration_map): {fitted or 'nothing'}",
        f"wrote {payload['file']}: give it to report, simulate, pools or recommend with "
        "--calibration",
        *payload["calibration"]["notes"],
        *payload["notes"],
    ]
    return table
