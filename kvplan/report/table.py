"""The one table every format draws: exact values beside the strings shown, and where the
command's JSON holds each of them.

Its own module so that the renderers (kvplan.report.terminal, markdown, html) and `emit`
(kvplan.report.render), which picks among them, all import it without importing each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kvplan.errors import KvplanError


@dataclass
class Table:
    """Rows of plain values with headers; `keys` name the columns (the JSON/CSV keys).

    A wide table says how to narrow it: `priority` ranks its columns for a narrow terminal
    (0: always shown; higher numbers are hidden first), and its command offers --columns.
    `key_columns` leading columns name a row (the heading of each row in the vertical
    layout). `wrap` lists keys of prose columns that may wrap onto more lines.

    The HTML page ties every shown number to the JSON output: a cell whose JSON Pointer
    (RFC 6901) into the command's JSON document is known carries it. Row tables give the
    list their rows come from (`rows_at`, e.g. "/products": cell (i, key) is
    /products/i/key); other tables give each cell's pointer in `add(paths=...)`.
    """

    title: str
    headers: list[str]
    keys: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    display_rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    footer: list[str] = field(default_factory=list)  # verbatim lines (commands, log lines)
    priority: list[int] | None = None
    key_columns: int = 1
    wrap: tuple[str, ...] = ()
    rows_at: str | None = None
    paths: list[list[str | None]] = field(default_factory=list)
    # A note about one column (what its `*` or `!` marks mean): shown with that column only.
    footnotes: dict[str, str] = field(default_factory=dict)
    # Columns that draw a picture with text characters (a bar): the HTML page draws it as a
    # chart instead and leaves them out.
    text_pictures: tuple[str, ...] = ()

    def add(
        self, values: list[Any], shown: list[str], paths: list[str | None] | None = None
    ) -> None:
        """Add one row: exact `values` for JSON/CSV, `shown` strings for table/Markdown/HTML,
        and optionally each cell's JSON Pointer (None for a cell with none)."""
        self.rows.append(values)
        self.display_rows.append(shown)
        self.paths.append(paths if paths is not None else [None] * len(shown))

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.keys, row, strict=True)) for row in self.rows]

    def is_text(self, column: int) -> bool:
        """Whether column `column` holds words, not numbers (aligned left)."""
        values = [row[column] for row in self.rows if row[column] is not None]
        return bool(values) and all(isinstance(v, str) for v in values)

    def notes_for(self, keys: Sequence[str]) -> list[str]:
        """The notes to print under the columns `keys`: their footnotes, then the rest."""
        return [self.footnotes[k] for k in keys if k in self.footnotes] + self.notes

    def cell_path(self, row: int, column: int) -> str | None:
        """The JSON Pointer of one cell, or None when it shows no single JSON value."""
        given = self.paths[row][column] if row < len(self.paths) else None
        if given is not None or self.rows_at is None:
            return given
        return f"{self.rows_at}/{row}/{self.keys[column]}"

    def select(self, keys: Sequence[str]) -> Table:
        """The same table with only the columns `keys`, in that order.

        Raises:
            KvplanError: a key that is not one of the table's columns.
        """
        unknown = [k for k in keys if k not in self.keys]
        if unknown:
            raise KvplanError(
                f"--columns: unknown column {unknown[0]!r} (allowed: {', '.join(self.keys)})"
            )
        picked = [self.keys.index(k) for k in dict.fromkeys(keys)]
        return replace(
            self,
            headers=[self.headers[i] for i in picked],
            keys=[self.keys[i] for i in picked],
            rows=[[row[i] for i in picked] for row in self.rows],
            display_rows=[[row[i] for i in picked] for row in self.display_rows],
            notes=list(self.notes),
            footer=list(self.footer),
            priority=None,  # the user chose these columns: none is hidden
            key_columns=min(self.key_columns, len(picked)),
            rows_at=None,
            paths=[[self.cell_path(r, i) for i in picked] for r in range(len(self.rows))],
            footnotes={k: note for k, note in self.footnotes.items() if k in keys},
        )
