"""`--format table`: a rich table that fits the terminal, never a cut or folded number.

The width is $COLUMNS when set, else the terminal's when stdout is one; piped output has no
width (the whole table, unwrapped: what a file or a paste wants). A table wider than that:

1. columns whose cell is the same on every row leave the table for one note line;
2. a table with column priorities (the wide row tables of `report`, `check`, `recommend`)
   drops its least important columns, says which in a note, and the command's --columns
   picks others; it keeps at least its key numbers (priority 1) beside the names;
3. when even the columns that must stay and the key numbers do not fit, each row is printed
   as a block of `header  value` lines (the vertical layout), which fits any width of 30 or
   more.

Numbers never wrap: only prose columns (`Table.wrap`) and the title and notes wrap, at
spaces. Verbatim lines (launch commands, log lines) are printed as they are.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field

from rich.cells import cell_len

from kvplan.report.table import Table

# Below this, even the vertical layout's label and value cannot share a line.
MIN_WIDTH = 30
# A prose column is never squeezed below this; a longer word (a URL) folds.
PROSE_MIN_WIDTH = 24
# A $COLUMNS beyond this is not a terminal; taken as no limit.
MAX_WIDTH = 100_000


def terminal_width() -> int | None:
    """Columns to fit: $COLUMNS, else the terminal's width, else None (piped: no limit)."""
    text = os.environ.get("COLUMNS", "").strip()
    if text.isascii() and text.isdigit() and len(text) <= len(str(MAX_WIDTH)):
        columns = int(text)
        if columns > 0:
            return max(columns, MIN_WIDTH) if columns <= MAX_WIDTH else None
    if sys.stdout.isatty():
        return max(shutil.get_terminal_size().columns, MIN_WIDTH)
    return None


def _column_width(table: Table, i: int) -> int:
    """Cells of column `i` on one line each: the widest cell or header."""
    return max([cell_len(table.headers[i])] + [cell_len(row[i]) for row in table.display_rows])


def _min_width(table: Table, i: int) -> int:
    """The narrowest column `i` can be: a prose column wraps at spaces (and folds a word
    longer than PROSE_MIN_WIDTH, such as a URL), others never wrap."""
    if table.keys[i] not in table.wrap:
        return _column_width(table, i)
    cells = [table.headers[i], *(row[i] for row in table.display_rows)]
    words = [word for cell in cells for word in (cell.split() or [""])]
    longest = max(cell_len(word) for word in words)
    # A URL folded mid-word cannot be copied or clicked: it keeps its whole width (a table
    # too narrow for it goes vertical, where it runs past the edge on a line of its own).
    url = max((cell_len(word) for word in words if "://" in word), default=0)
    return max(min(longest, PROSE_MIN_WIDTH), url)


def table_width(widths: list[int]) -> int:
    """Characters a rich table with these column widths takes: a space either side of each
    cell and a border before, between and after the columns."""
    return sum(widths) + 3 * len(widths) + 1


@dataclass
class Fitted:
    """What to print: the columns kept (indexes), notes about the rest, and the layout."""

    columns: list[int]
    notes: list[str]
    vertical: bool
    folded: list[int] = field(default_factory=list)  # same on every row: told in a note


def fit(table: Table, width: int | None) -> Fitted:
    """Choose the columns and layout that fit `width` characters (None: no limit)."""
    every = list(range(len(table.headers)))
    if width is None or table_width([_min_width(table, i) for i in every]) <= width:
        return Fitted(every, [], False)
    notes: list[str] = []
    columns, same = every, []
    if len(table.display_rows) > 1:
        same = [i for i in every if len({row[i] for row in table.display_rows}) == 1]
        if len(same) == len(every):
            same = []
        if same:
            shown = ", ".join(f"{table.headers[i]} {table.display_rows[0][i]}" for i in same)
            notes.append(f"every row: {shown}")
            columns = [i for i in every if i not in same]
    widths = {i: _min_width(table, i) for i in columns}
    if table_width(list(widths.values())) <= width:
        return Fitted(columns, notes, False, same)
    if table.priority is not None:
        kept = [i for i in columns if table.priority[i] == 0]
        # The key numbers (priority 1, e.g. report's max concurrency) must fit beside the
        # must-stay columns; a table of names alone says nothing, so rows go vertical.
        key = [i for i in columns if table.priority[i] <= 1]
        if table_width([widths[i] for i in key]) <= width:
            for i in sorted(columns, key=lambda i: (table.priority[i], i)):
                if i not in kept and table_width([widths[k] for k in [*kept, i]]) <= width:
                    kept.append(i)
            kept.sort()
            hidden = ", ".join(table.keys[i] for i in columns if i not in kept)
            notes.append(
                f"hidden to fit {width} columns: {hidden} (--columns KEY,… picks the columns; "
                "--format json has every field)"
            )
            return Fitted(kept, notes, False, same)
    return Fitted(columns, notes, True, same)


def print_table(table: Table) -> None:
    """The table on stdout, fitted to the terminal, then its notes and verbatim lines."""
    from rich.console import Console

    width = terminal_width()
    fitted = fit(table, width)
    natural = table_width([_column_width(table, i) for i in fitted.columns])
    console = Console(width=width or max(natural, 80), highlight=False)
    wrap_text = width is not None  # prose wraps at the terminal's width; piped, never
    _print_prose(console, table.title, wrap_text)
    if fitted.vertical:
        _print_vertical(console, table, fitted.columns, console.width)
    else:
        _print_grid(console, table, fitted.columns)
    shown = [table.keys[i] for i in sorted([*fitted.columns, *fitted.folded])]
    for note in [*fitted.notes, *table.notes_for(shown)]:
        _print_prose(console, f"note: {note}", wrap_text)
    for line in table.footer:
        console.print(line, markup=False, soft_wrap=True)


def _print_prose(console, text: str, wrap: bool) -> None:
    """A title or note: wrapped at spaces to the console's width when `wrap`, with no
    trailing space on a wrapped line (rich keeps the space it broke at), else one line."""
    from rich.text import Text

    if not wrap:
        console.print(text, markup=False, soft_wrap=True)
        return
    for line in Text(text).wrap(console, console.width):
        line.rstrip()
        console.print(line, soft_wrap=True)


def _print_grid(console, table: Table, columns: list[int]) -> None:
    """The table as a grid: as plain lines when nothing needs rich (see plain_table)."""
    lines = None
    if not console.is_terminal and not console.options.ascii_only:
        from kvplan.report.plain_table import plain_lines

        right = [_right_justified(table, i, position) for position, i in enumerate(columns)]
        headers = [table.headers[i] for i in columns]
        rows = [[row[i] for i in columns] for row in table.display_rows]
        lines = plain_lines(headers, rows, right, console.width)
    if lines is None:
        console.print(_rich_table(table, columns))
    else:
        console.file.write("\n".join(lines) + "\n")


def _right_justified(table: Table, i: int, position: int) -> bool:
    """Numbers are right-justified; the first column, prose and text columns left."""
    return not (position == 0 or table.keys[i] in table.wrap or table.is_text(i))


def _rich_table(table: Table, columns: list[int]):
    from rich.table import Table as RichTable
    from rich.text import Text

    drawn = RichTable()
    for position, i in enumerate(columns):
        prose = table.keys[i] in table.wrap
        drawn.add_column(
            Text(table.headers[i]),
            justify="right" if _right_justified(table, i, position) else "left",
            no_wrap=not prose,
            overflow="fold",
        )
    for row in table.display_rows:
        drawn.add_row(*(Text(row[i]) for i in columns))  # Text: a cell's "[...]" is not markup
    return drawn


def _print_vertical(console, table: Table, columns: list[int], width: int) -> None:
    """Each row as a heading (its key columns) and one `header  value` line per column; a
    header and value too long to share a line take two (the value indented)."""
    heads = [i for i in columns if i < table.key_columns] or columns[:1]
    rest = [i for i in columns if i not in heads]
    label_width = min(max((cell_len(table.headers[i]) for i in rest), default=0), width // 2)
    for row in table.display_rows:
        console.print("")
        console.print(" · ".join(row[i] for i in heads), markup=False, style="bold")
        if len(rest) == 1:  # a field/value table: the value under its heading, no label
            _print_indented(console, row[rest[0]], 2, width)
            continue
        for i in rest:
            label, value = table.headers[i], row[i]
            if 2 + label_width + 2 + cell_len(value) <= width and cell_len(label) <= label_width:
                pad = " " * (label_width - cell_len(label))
                console.print(f"  {label}{pad}  {value}", markup=False)
            else:
                console.print(f"  {label}", markup=False)
                _print_indented(console, value, 6, width)


def _print_indented(console, text: str, indent: int, width: int) -> None:
    """`text` wrapped at spaces within `width`, each line indented; a word longer than the
    room (a URL) is never broken: it runs past the edge on a line of its own."""
    room, lines, line = max(width - indent, 1), [], ""
    for word in text.split():
        if line and cell_len(line) + 1 + cell_len(word) > room:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    for part in lines:
        console.print(" " * indent + part, markup=False, soft_wrap=True)
