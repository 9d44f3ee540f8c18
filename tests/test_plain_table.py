"""The plain grid equals what rich draws, character for character, or declines to draw."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from kvplan.report.plain_table import plain_lines

# Digits, letters, a space, wide (日), combining (é as e + U+0301), an emoji.
_CELL = st.text("0123456789.,abcXYZ -日é\u0301🙂", max_size=12)


def _rich(headers, rows, right, width) -> str:
    table = RichTable()
    for header, flush_right in zip(headers, right, strict=True):
        table.add_column(Text(header), justify="right" if flush_right else "left", no_wrap=True,
                         overflow="fold")  # fmt: skip
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    out = io.StringIO()
    Console(file=out, width=width, highlight=False).print(table)
    return out.getvalue()


@settings(max_examples=300, deadline=None)
@given(
    columns=st.integers(1, 5),
    data=st.data(),
    width=st.integers(20, 120),
)
def test_plain_grid_is_rich_grid(columns, data, width):
    headers = data.draw(st.lists(_CELL, min_size=columns, max_size=columns))
    rows = data.draw(
        st.lists(st.lists(_CELL, min_size=columns, max_size=columns), min_size=1, max_size=4)
    )
    right = data.draw(st.lists(st.booleans(), min_size=columns, max_size=columns))
    lines = plain_lines(headers, rows, right, width)
    if lines is not None:
        assert "\n".join(lines) + "\n" == _rich(headers, rows, right, width)


def test_a_plain_table_is_drawn_and_a_wide_one_is_left_to_rich():
    headers, rows, right = ["model", "KV"], [["gpt2", "36 KiB"], ["日本", "1"]], [False, True]
    assert plain_lines(headers, rows, right, 80) == [
        "┏━━━━━━━┳━━━━━━━━┓",
        "┃ model ┃     KV ┃",
        "┡━━━━━━━╇━━━━━━━━┩",
        "│ gpt2  │ 36 KiB │",
        "│ 日本  │      1 │",
        "└───────┴────────┘",
    ]
    # 5 + 6 cells, 3 a column and one border: 18 characters; rich would wrap at 17.
    assert plain_lines(headers, rows, right, 17) is None
    for control in ("a\tb", "a\nb", "\x1b[31m"):  # rich expands or splits these itself
        assert plain_lines(headers, [[control, "1"]], right, 80) is None
