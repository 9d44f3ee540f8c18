"""`kvplan explain` output: each logged number beside kvplan's, the difference and its term."""

from __future__ import annotations

import math
from typing import Any

from kvplan.api.results import dump
from kvplan.explain.result import ExplainReport, ExplainRow
from kvplan.report.render import Format, Table, emit
from kvplan.units import GIB, MIB

_UNITS = {"GiB": GIB, "MiB": MIB, "GB": GIB}  # SGLang's "GB" are GiB (bytes / 2**30)


def _shown(value: float | None, row: ExplainRow, signed: bool = False) -> str:
    """`value` written the way the log wrote the row's figure (its unit and digits)."""
    if value is None:
        return "—"
    unit = row.logged_text.rsplit(" ", 1)[-1] if row.unit == "bytes" else ""
    scale = _UNITS.get(unit, 1)
    step = row.step / scale
    digits = max(0, -math.floor(math.log10(step) + 1e-9)) if 0 < step < 1 else 0
    sign = "+" if signed else ""
    text = f"{value / scale:{sign},.{digits}f}"
    return f"{text} {unit}".strip()


def explain_title(report: ExplainReport) -> str:
    """What the log was read as: engine and release, model, GPU, parallelism, KV dtype."""
    release = f"{report.engine} {report.version}" if report.version else report.engine
    return (
        f"{release} log: {report.model} on {report.sku} (tp {report.tp} × pp {report.pp}"
        f"{f' × dp {report.dp}' if report.dp > 1 else ''}) · KV {report.kv_dtype} · "
        f"{report.context_tokens:,} tokens per request"
    )


def explain_table(report: ExplainReport) -> Table:
    """One row per logged number: logged, kvplan, difference, basis, term."""
    table = Table(
        explain_title(report),
        ["quantity", "line", "logged", "kvplan", "difference", "from", "term"],
        ["quantity", "line", "logged", "kvplan", "difference", "basis", "term"],
        rows_at="/rows",
        wrap=("term",),
    )
    for row in report.rows:
        difference = "=" if row.matches else _shown(row.difference, row, signed=True)
        table.add(
            [row.quantity, row.line, row.logged, row.kvplan, row.difference, row.basis, row.term],
            [
                row.quantity,
                str(row.line),
                row.logged_text,
                _shown(row.kvplan, row),
                difference,
                row.basis,
                row.term or "",
            ],
        )
    table.notes = explain_notes(report)
    table.footer = _target_lines(report)
    return table


def explain_notes(report: ExplainReport) -> list[str]:
    """The release basis, readings the engine model lacks, and the rebuild's notes."""
    notes = [f"release: {report.version or 'default'} ({report.version_basis})"]
    if report.unknown_terms:
        notes.append(
            "what kvplan cannot know from the log or its engine model: "
            + ", ".join(report.unknown_terms)
        )
    matched = sum(row.matches for row in report.rows)
    notes.append(f"{matched} of {len(report.rows)} logged numbers reproduced within their rounding")
    return notes + list(report.notes)


def _target_lines(report: ExplainReport) -> list[str]:
    target = report.target
    if target is None:
        return []
    ask = f"{target.concurrency} × {target.context_tokens:,} tokens"
    now = "" if target.holds_now is None else f" (as logged: {target.holds_now} requests)"
    lines = [f"target {ask}{now}: {target.change}"]
    if target.launch_command:
        lines.append(target.launch_command)
    return lines


def explain_record(report: ExplainReport) -> dict[str, Any]:
    """The JSON of `kvplan explain`: the report's fields, the title and the notes in words."""
    record = dump(report)
    return record | {"title": explain_title(report), "notes": explain_notes(report)}


def render_explain(report: ExplainReport, fmt: Format) -> None:
    """Print the explanation in `fmt`."""
    emit(fmt, explain_record(report), [dump(r) for r in report.rows], lambda: explain_table(report))
