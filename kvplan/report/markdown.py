"""`--format md`: a table as GitHub-flavoured Markdown that renders as it reads.

Every piece of text is escaped, so what a cell shows is what the reader sees: a `|` in a
header or cell would end the cell (the report's old `weights|KV|free` header turned the
whole table into a paragraph), `*` after a number (the native-limit mark) would start
emphasis, and a note that starts with `#` or `-` would become a heading or a nested list.
CommonMark lets a backslash escape any ASCII punctuation (spec 0.31, section 2.4), and a
GFM table cell takes `\\|` as a literal pipe.
"""

from __future__ import annotations

import re

from kvplan.report.table import Table

# Characters that start inline markup anywhere in a line: code, emphasis, links and images,
# raw HTML and autolinks, entities, GFM strikethrough and table cells.
_INLINE = re.compile(r"[\\`*\[\]<>&~|]")
# `_` is emphasis only at a word's edge (CommonMark's flanking rules): fp8_e4m3 stays as is.
_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
# What a line may not start with: a heading, a list item (`-`, `+`, `1.`, `2)`), a
# thematic break or setext underline (`---`, `===`); each needs a space, the line's end or
# more of its kind after it (`>` is escaped everywhere above).
_LINE_START = re.compile(r"^(\s*\d*)([#+=.)-])(?=\s|$|[#+=-])")


def escape(text: str, line: bool = False) -> str:
    """`text` as Markdown inline content that renders as exactly `text`, on one line.

    Args:
        text: what the reader should see.
        line: `text` starts a line (a heading or list item), not a table cell.
    """
    text = " ".join(text.split("\n"))
    text = _INLINE.sub(lambda m: "\\" + m.group(0), text)
    text = _UNDERSCORE.sub(r"\\_", text)
    if line:
        text = _LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), text, count=1)
    return text


def _fence(lines: list[str]) -> str:
    """A backtick fence longer than any run of backticks inside the block."""
    longest = max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)
    return "`" * max(3, longest + 1)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(escape(cell) or " " for cell in cells) + " |"


def markdown(table: Table) -> str:
    """The table as GFM: a heading, the table, its notes as a list, verbatim lines fenced."""
    lines = [f"### {escape(table.title, line=True)}", "", _row(table.headers)]
    lines.append("|" + "|".join("---" for _ in table.headers) + "|")
    lines += [_row(row) for row in table.display_rows]
    notes = table.notes_for(table.keys)
    if notes:
        lines += [""] + [f"- {escape(note.strip(), line=True)}" for note in notes]
    if table.footer:
        fence = _fence(table.footer)
        lines += ["", fence, *table.footer, fence]
    return "\n".join(lines) + "\n"
