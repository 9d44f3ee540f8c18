"""Output formats shared by every command: one place where numbers become text.

JSON and CSV go to stdout with plain writes (never through rich, which wraps long
lines even inside strings); tables go through rich; Markdown is plain text.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from kvplan.units import GIB, KIB, MIB, TIB

Format = Literal["table", "json", "csv", "md"]
FORMATS: tuple[str, ...] = ("table", "json", "csv", "md")


def gib(value: int | float) -> str:
    """Bytes as GiB with two decimals (the table unit)."""
    return f"{value / GIB:,.2f} GiB"


def human_bytes(value: int | float) -> str:
    """Bytes in the largest binary unit that keeps the number ≥ 1."""
    magnitude = abs(value)
    for unit, size in (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if magnitude >= size:
            return f"{value / size:,.2f} {unit}"
    return f"{value:,} B"


def bar(parts: Sequence[tuple[int, str]], total: int, width: int = 40) -> str:
    """A text bar of `width` cells split in proportion to `parts` (value, fill character)."""
    if total <= 0:
        return ""
    cells = []
    used = 0
    for value, char in parts:
        n = max(0, min(width - used, round(width * max(value, 0) / total)))
        cells.append(char * n)
        used += n
    return "".join(cells) + " " * (width - used)


@dataclass
class Table:
    """Rows of plain values with headers; `key_columns` name the JSON/CSV keys."""

    title: str
    headers: list[str]
    keys: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    display_rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    footer: list[str] = field(default_factory=list)  # verbatim lines (commands, log lines)

    def add(self, values: list[Any], shown: list[str]) -> None:
        """Add one row: exact `values` for JSON/CSV and `shown` strings for table/Markdown."""
        self.rows.append(values)
        self.display_rows.append(shown)

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.keys, row, strict=True)) for row in self.rows]


def write_json(payload: Any) -> None:
    """Exact JSON on stdout (integers stay integers), whatever the terminal width.

    A list is written one record per line: still one JSON document, and json's C encoder
    (used only without indentation) keeps a whole-catalogue report fast.
    """
    if isinstance(payload, list):
        body = ",\n".join(json.dumps(record) for record in payload)
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
        writer.writerow({k: _csv_cell(v) for k, v in record.items()})
    sys.stdout.write(buffer.getvalue())


def _csv_cell(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return ";".join(str(v) for v in value)
    if isinstance(value, dict):
        return ";".join(f"{k}={v}" for k, v in value.items())
    return value


def markdown(table: Table) -> str:
    """A GitHub-flavoured Markdown table with its notes."""
    lines = [f"### {table.title}", "", "| " + " | ".join(table.headers) + " |"]
    lines.append("|" + "|".join("---" for _ in table.headers) + "|")
    lines += ["| " + " | ".join(row) + " |" for row in table.display_rows]
    lines += [""] + [f"- {note}" for note in table.notes]
    if table.footer:
        lines += ["", "```", *table.footer, "```"]
    return "\n".join(lines) + "\n"


def emit(
    fmt: Format, payload: Any, records: list[dict[str, Any]], table: Callable[[], Table]
) -> None:
    """Print one result in `fmt`: the JSON `payload`, CSV `records`, or `table()` drawn."""
    if fmt == "json":
        write_json(payload)
    elif fmt == "csv":
        write_csv(records)
    elif fmt == "md":
        sys.stdout.write(markdown(table()))
    else:
        print_table(table())


def print_table(table: Table) -> None:
    """A rich table on stdout, notes below it."""
    from rich.console import Console
    from rich.table import Table as RichTable

    # Piped output has no terminal width; rich would assume 80 columns and fold every cell.
    console = Console(width=None if sys.stdout.isatty() else 200)
    console.print(table.title, markup=False, highlight=False, soft_wrap=True)
    rich_table = RichTable()
    for i, header in enumerate(table.headers):
        rich_table.add_column(header, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for row in table.display_rows:
        rich_table.add_row(*row)
    console.print(rich_table)
    for note in table.notes:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    for line in table.footer:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
