"""`recommend --pareto`: the speed frontier as a table, JSON, CSV, Markdown or HTML."""

from __future__ import annotations

from typing import Any

from kvplan.api.pareto_results import ParetoReport
from kvplan.api.results import dump
from kvplan.report.recommend_report import _dtype_label
from kvplan.report.render import Format, emit, plural
from kvplan.report.table import Table

COLUMNS = (
    # (header, JSON key of the frontier row, how it is shown)
    ("sku", "sku", str),
    ("tp", "tp", str),
    ("weights", "weight_dtype", str),
    ("KV", "kv_dtype", _dtype_label),
    ("batch", "batch", lambda v: f"{v:,}"),
    ("tok/s/user", "tokens_per_s_per_user", lambda v: f"{v:,.1f}"),
    ("out tok/s/GPU", "output_tokens_per_s_per_gpu", lambda v: f"{v:,.0f}"),
    ("KV B/token", "kv_bytes_per_token", lambda v: f"{v:,}"),
    ("holds", "max_batch", lambda v: f"{v:,}"),
    ("step ms", "decode_step_s", lambda v: f"{v * 1e3:,.2f}"),
    ("prefill ms", "prefill_s", lambda v: f"{v * 1e3:,.2f}"),
)


def render_pareto(result: ParetoReport, fmt: Format, columns: list[str] | None = None) -> None:
    """Print the frontier in `fmt` (--columns: the table's keys to show)."""
    payload = dump(result)
    records = [{"rank": i + 1, **row} for i, row in enumerate(payload["frontier"])]
    emit(fmt, payload, records, lambda: _table(payload), columns=columns)


def _table(payload: dict[str, Any]) -> Table:
    version = f" {payload['engine_version']}" if payload["engine_version"] else ""
    table = Table(
        f"{payload['model']} · {payload['prompt_tokens']:,} prompt + "
        f"{payload['output_tokens']:,} output tokens · engine {payload['engine']}{version} · "
        "frontier of output tok/s per GPU vs tok/s per user",
        ["#", *(header for header, _, _ in COLUMNS)],
        ["rank", *(key for _, key, _ in COLUMNS)],
        priority=[0, 0, 1, 1, 1, 0, 0, 0, 2, 3, 4, 5],
        key_columns=1,
        rows_at="/frontier",
    )
    for i, row in enumerate(payload["frontier"]):
        values = [i + 1, *(row[key] for _, key, _ in COLUMNS)]
        shown = [str(i + 1), *(show(row[key]) for _, key, show in COLUMNS)]
        table.add(values, shown, [None, *(f"/frontier/{i}/{key}" for _, key, _ in COLUMNS)])
    table.notes += _notes(payload)
    return table


def _notes(payload: dict[str, Any]) -> list[str]:
    searched = "; ".join(
        f"{key} {', '.join(str(v) for v in values)}" for key, values in payload["searched"].items()
    )
    dominated = payload["points_swept"] - len(payload["frontier"])
    return [
        f"swept {plural(payload['configurations'], 'configuration')} ({searched}) × batch 1, 2, "
        f"4, … up to what the KV holds: {plural(payload['points_swept'], 'point')}, "
        f"{dominated:,} dominated (another point is at least as fast per user and per GPU); "
        f"{payload['refused']:,} configurations hold no request",
        "holds: requests of prompt + output tokens the KV pool holds at once; KV B/token: the "
        "whole instance's KV bytes per token of context (a dtype that doubles it holds half)",
        f"step times: {payload['speed_model']}",
        *payload["notes"],
    ]
