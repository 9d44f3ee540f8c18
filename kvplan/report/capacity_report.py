"""`kvplan report`: one row per model × SKU × TP, and vLLM's own log lines to compare with."""

from __future__ import annotations

from kvplan.api.results import CapacityRow, RefusedRow, dump, json_text
from kvplan.report.memory_split import memory_bar, memory_split
from kvplan.report.render import (
    Format,
    Table,
    emit,
    gib,
    human_bytes,
)
from kvplan.report.row_labels import parallel_label

NODES_MARK = "†"  # the tp cell of a deployment that spans nodes

SORT_KEYS = (
    "model",
    "sku",
    "tp",
    "max_context_tokens",
    "max_concurrency",
    "kv_capacity_tokens",
    "decode_tokens_per_s",
    "kv_budget_bytes_per_gpu",
)


Row = CapacityRow | RefusedRow


def capacity_table(rows: list[Row]) -> Table:
    """The per-SKU table; exact values in the records, rounded strings on screen."""
    first = rows[0]
    batch, context = first.batch, first.context
    table = Table(
        f"engine {first.engine} · KV {first.kv_dtype} · "
        f"longest context at batch {batch} · concurrency at {context:,} tokens",
        [
            "model",
            "sku",
            "tp",
            "weights/GPU",
            "KV budget/GPU",
            "KV tokens",
            f"max ctx @{batch}",
            f"max conc @{context:,}",
            "decode tok/s",
            "KV/token",
            "verdict",
            "weights/KV/free",
        ],
        [
            "model",
            "sku",
            "tp",
            "weights_bytes_per_gpu",
            "kv_budget_bytes_per_gpu",
            "kv_capacity_tokens",
            "max_context_tokens",
            "max_concurrency",
            "decode_tokens_per_s",
            "engine_kv_bytes_per_token_per_gpu",
            "verdict",
            "bar",
        ],
        # A narrow terminal keeps which rows these are, then what they hold (STYLE: the
        # concurrency and context a planner asks about first), the bar last.
        priority=[0, 0, 0, 5, 4, 6, 2, 1, 7, 8, 3, 9],
        key_columns=3,
        rows_at="",
        text_pictures=("bar",),
        # A refusal's reason is a sentence: it may wrap in a terminal.
        wrap=("verdict",) if any(isinstance(r, RefusedRow) for r in rows) else (),
    )
    for row in rows:
        table.add(*_cells(row, table.keys))
    _capacity_notes(table, [r for r in rows if isinstance(r, CapacityRow)])
    return table


def _cells(row: Row, keys: list[str]) -> tuple[list[object], list[str]]:
    """One row of the table: its exact values (by `keys`) and the rounded cells shown."""
    record = dump(row)
    if isinstance(row, RefusedRow):
        return [record.get(k) for k in keys], [
            row.model, row.sku, str(row.tp), *["—"] * 7, row.verdict, ""
        ]  # fmt: skip
    split = memory_split(row)
    picture = memory_bar(split, 12)
    picture += f" +{gib(split.overflow_bytes)}" if split.overflow_bytes else ""
    cap_mark = "*" if record["native_limit_binds"] else ""
    tokens_per_s = record["decode_tokens_per_s"]
    per_token = record["engine_kv_bytes_per_token_per_gpu"]
    shown = [
        row.model,
        row.sku,
        _parallel(row),
        gib(row.weights_bytes_per_gpu),
        gib(record["kv_budget_bytes_per_gpu"]),
        f"{record['kv_capacity_tokens']:,}",
        f"{record['max_context_tokens']:,}{cap_mark}",
        f"{record['max_concurrency']:,}",
        _tokens_per_s_cell(tokens_per_s, record["decode_tokens_per_s_band_fraction"]),
        human_bytes(per_token) if per_token else "—",
        record["verdict"],
        picture,
    ]
    return [record[k] for k in keys[:-1]] + [picture], shown


def _decode_footnote(rows: list[CapacityRow]) -> str:
    """Where the decode figures come from: the step model, at which batch and context."""
    batches = sorted({r.decode_batch for r in rows if r.decode_batch})
    contexts = sorted({r.decode_context_tokens for r in rows if r.decode_context_tokens})
    at = ""
    if len(batches) == 1 and len(contexts) == 1:
        at = f" at batch {batches[0]:,} and context {contexts[0]:,} tokens"
    elif batches:
        at = " at each row's fitting batch (JSON decode_batch) and context (decode_context_tokens)"
    return (
        f"decode tok/s: the per-operation step model{at}, the requests that fit up to the batch "
        "above; ± the median error of throughput on held-out measurements "
        "(docs/speed-model.md); KV/token is per GPU"
    )


def _tokens_per_s_cell(tokens_per_s: float | None, band: float | None) -> str:
    """4,214 ±12% (the test-split median error beside the figure), or — for no figure."""
    if not tokens_per_s:
        return "—"
    return f"{tokens_per_s:,.0f} ±{band:.0%}" if band is not None else f"{tokens_per_s:,.0f}"


def _capacity_notes(table: Table, rows: list[CapacityRow]) -> None:
    """The footnotes of the marked columns and the notes every report carries."""
    spanning = sorted({r.nodes for r in rows if r.nodes > 1})
    if spanning:
        counts = " or ".join(f"{n:,}" for n in spanning)
        table.footnotes["tp"] = (
            f"{NODES_MARK} one replica spans {counts} nodes (tp × pp above the SKU's GPUs per "
            "node): its TP or pipeline traffic crosses the network (JSON: nodes, notes)"
        )
    if any(r.dp > 1 and r.ep for r in rows):
        meaning = (
            "dpN+ep: data-parallel attention, N replicas of the attention each keeping only "
            "its own requests' KV, with the routed experts spread over the N GPUs (expert "
            "parallelism); max conc counts every replica"
        )
        spans = table.footnotes.get("tp")
        table.footnotes["tp"] = f"{spans}; {meaning}" if spans else meaning
    if any(r.native_limit_binds for r in rows):
        table.footnotes["max_context_tokens"] = (
            "* the model's native context limit binds, not memory"
        )
    table.footnotes["decode_tokens_per_s"] = _decode_footnote(rows)
    band = max((r.kv_budget_uncertainty_bytes for r in rows), default=0)
    if band:
        table.notes.append(
            f"KV budgets carry estimated engine terms (activation peak, non-torch memory): "
            f"± {gib(band)} per GPU; verdicts use the estimate, which errs towards less KV"
        )
    table.footnotes["bar"] = "weights/KV/free: █ weights ▒ KV of the batch ░ free or engine reserve"
    if any(memory_split(r).overflow_bytes for r in rows):
        table.footnotes["bar"] += (
            "; ! KV of the batch the KV budget does not hold, +N GiB what the batch needs beyond "
            "the budget (per GPU)"
        )


def _parallel(row: CapacityRow) -> str:
    """tp, then ×pp and dp N (+ep) when they are used; † when a replica spans nodes."""
    text = f"{row.tp}" + (f"×{row.pp}" if row.pp > 1 else "")
    text += f" dp{row.dp}" + ("+ep" if row.ep else "") if row.dp > 1 else ""
    return text + (NODES_MARK if row.nodes > 1 else "")


def render_report(
    rows: list[Row],
    fmt: Format,
    log_lines: bool,
    columns: list[str] | None = None,
) -> None:
    """Print the report; with `log_lines`, the engine's startup lines for each distinct plan.

    Args:
        rows: the report's rows.
        fmt: the output format.
        log_lines: print the engine's startup lines below the table.
        columns: the table's keys to show (--columns); all when None.
    """
    from kvplan.report.figures import capacity_figures

    # JSON writes each row straight from its result (json_text); the table and Markdown
    # read the rows, not their records.
    records = [dump(r) for r in rows] if fmt in ("csv", "html") else []
    flat = _csv_rows(records) if fmt == "csv" else []
    planned = [r for r in rows if isinstance(r, CapacityRow)]
    emit(
        fmt,
        rows if fmt == "json" else records,
        flat,
        lambda: _table_with_log_lines(rows, log_lines),
        figures=lambda: capacity_figures(planned),
        columns=columns,
        encode=json_text,
    )


def _csv_rows(records: list[dict]) -> list[dict]:
    """The CSV lines: each record without its nested ones."""
    flat = [{k: v for k, v in r.items() if not isinstance(v, dict)} for r in records]
    if len({tuple(r) for r in flat}) > 1:
        # Refused rows among planned ones: every CSV line in the planned rows' column order,
        # the reason last (empty where none).
        keys = list(dict.fromkeys([k for r in flat if "refused" not in r for k in r]))
        flat = [{k: r.get(k) for k in [*keys, "refused"]} for r in flat]
    return flat


def _table_with_log_lines(rows: list[Row], log_lines: bool) -> Table:
    table = capacity_table(rows)
    if not log_lines:
        return table
    seen: dict[tuple[str, ...], list[str]] = {}
    for row in rows:
        if isinstance(row, CapacityRow) and row.log_lines:
            label = f"{row.model} {parallel_label(row)} {row.sku}"
            seen.setdefault(tuple(row.log_lines), []).append(label)
    engine = rows[0].engine
    for lines, labels in seen.items():
        more = f" (+{len(labels) - 3} more)" if len(labels) > 3 else ""
        table.footer.append(f"{engine} log lines for {', '.join(labels[:3])}{more}:")
        table.footer += [f"    {line}" for line in lines]
    return table
