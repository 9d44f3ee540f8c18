"""Output formats shared by every command: one place where numbers become text.

JSON and CSV go to stdout with plain writes (never through rich, which wraps long lines
even inside strings); tables go through rich, fitted to the terminal (kvplan.report.terminal);
Markdown (kvplan.report.markdown) and HTML (kvplan.report.html) are plain text built here.
Every command renders through `emit`, so a format added here reaches every command.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, Literal

from kvplan.errors import KvplanError
from kvplan.report.table import Table
from kvplan.units import GIB, KIB, MIB, TIB, gib

Format = Literal["table", "json", "csv", "md", "html"]
FORMATS: tuple[str, ...] = ("table", "json", "csv", "md", "html")
# Formats that show a table's columns; JSON and CSV always carry every field.
SHOWN_FORMATS = ("table", "md", "html")


def human_bytes(value: int | float) -> str:
    """Bytes in the largest binary unit that keeps the number ≥ 1."""
    magnitude = abs(value)
    for unit, size in (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if magnitude >= size:
            return f"{value / size:,.2f} {unit}"
    return f"{value:,} B"


def plural(count: int, noun: str, many: str | None = None) -> str:
    """'1 GPU', '2 GPUs', '1,024 sequences': the count and its noun, agreed.

    Args:
        count: how many.
        noun: the singular noun.
        many: the plural when it is not `noun` + "s" (e.g. "capacities").
    """
    return f"{count:,} " + (noun if count == 1 else many or f"{noun}s")


def tokens_label(tokens: int) -> str:
    """1024 → '1k', 2**20 → '1M': a context the way users type it (exact multiples only)."""
    if tokens >= 2**20 and tokens % 2**20 == 0:
        return f"{tokens // 2**20}M"
    if tokens >= 1024 and tokens % 1024 == 0:
        return f"{tokens // 1024}k"
    return f"{tokens:,}"


def bar(parts: Sequence[tuple[int, str]], total: int, width: int = 40, always: str = "") -> str:
    """A text bar of `width` cells split in proportion to `parts` (value, fill character).

    A part whose character is in `always` gets at least one cell when its value is positive
    (taken from the widest part): an overflow too small to round to a cell still shows.
    """
    if total <= 0:
        return ""
    counts = []
    used = 0
    for value, _ in parts:
        n = max(0, min(width - used, round(width * max(value, 0) / total)))
        counts.append(n)
        used += n
    for i, (value, char) in enumerate(parts):
        if char in always and value > 0 and counts[i] == 0:
            widest = max(range(len(counts)), key=lambda j: counts[j])
            if counts[widest] > 1:
                counts[widest] -= 1
                counts[i] = 1
    cells = "".join(char * n for (_, char), n in zip(parts, counts, strict=True))
    return cells + " " * (width - sum(counts))


def quantity_row(
    table: Table,
    label: str,
    per_gpu: int | None,
    total: int | None,
    keys: tuple[str | None, str | None] = (None, None),
    show: Callable[[int], str] = gib,
) -> None:
    """One row of a quantity table (`size`, `claim`): per GPU and whole deployment, in bytes.

    Args:
        table: the table to add to.
        label: what the row is.
        per_gpu: bytes on one GPU, or None.
        total: bytes in the whole deployment, or None.
        keys: where the command's JSON holds the two figures (top-level keys or a/b paths).
        show: how bytes are written (GiB with two decimals by default).
    """
    table.add(
        [label, per_gpu, total],
        [
            label,
            show(per_gpu) if per_gpu is not None else "—",
            show(total) if total is not None else "—",
        ],
        [None, *(f"/{key}" if key else None for key in keys)],
    )


def write_json(payload: Any, encode: Callable[[Any], str] = json.dumps) -> None:
    """Exact JSON on stdout (integers stay integers), whatever the terminal width.

    A list is written one record per line, each record as `encode` writes it: still one JSON
    document, and json's C encoder (used only without indentation) keeps a whole-catalogue
    report fast.
    """
    if isinstance(payload, list):
        body = ",\n".join(encode(record) for record in payload)
        sys.stdout.write(f"[\n{body}\n]\n" if payload else "[]\n")
    else:
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")


def write_csv(records: list[dict[str, Any]]) -> None:
    """CSV on stdout, one row per record, the union of keys as header."""
    if not records:
        return
    keys: list[str] = []
    for record in records:
        keys += [k for k in record if k not in keys]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=keys, lineterminator="\n")
    writer.writeheader()
    for record in records:
        writer.writerow({k: csv_cell(v) for k, v in record.items()})
    sys.stdout.write(buffer.getvalue())


def csv_cell(value: Any) -> Any:
    """One CSV cell: booleans as true/false (as JSON writes them), lists joined with ';'."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ";".join(str(csv_cell(v)) for v in value)
    if isinstance(value, dict):
        return ";".join(f"{k}={csv_cell(v)}" for k, v in value.items())
    return value


def emit(
    fmt: Format,
    payload: Any,
    records: list[dict[str, Any]],
    table: Callable[[], Table],
    *,
    figures: Callable[[], list[str]] | None = None,
    columns: Sequence[str] | None = None,
    encode: Callable[[Any], str] = json.dumps,
) -> None:
    """Print one result in `fmt`: the JSON `payload`, CSV `records`, or `table()` drawn.

    Args:
        fmt: the output format.
        payload: the JSON document (its numbers exact).
        records: the CSV rows.
        table: builds the table the table, Markdown and HTML formats show.
        figures: builds the HTML page's inline SVG figures (charts), drawn above the table.
        columns: the table's keys to show (--columns); every column when None.
        encode: writes one record of a JSON list (`payload` of records, or of results
            with `api.results.json_text`).

    Raises:
        KvplanError: --columns with JSON or CSV, or an unknown column.
    """
    if columns is not None and fmt not in SHOWN_FORMATS:
        raise KvplanError(
            f"--columns: picks the columns of {', '.join(SHOWN_FORMATS)} output; "
            f"--format {fmt} carries every field"
        )
    if fmt == "json":
        write_json(payload, encode)
        return
    if fmt == "csv":
        write_csv(records)
        return
    drawn = table()
    if columns is not None:
        drawn = drawn.select(columns)
    if fmt == "md":
        from kvplan.report.markdown import markdown

        sys.stdout.write(markdown(drawn))
    elif fmt == "html":
        from kvplan.report.html import html_page

        sys.stdout.write(html_page(drawn, payload, figures() if figures else []))
    else:
        from kvplan.report.terminal import print_table

        print_table(drawn)
