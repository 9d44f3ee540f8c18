"""`--format html`: one self-contained page: the table, its notes and inline SVG charts.

Nothing is fetched: the style is inline, the charts are inline SVG drawn by
kvplan.report.svg, there is no script, and the page's Content-Security-Policy forbids any
load (a page that tried would show it in the browser's console). The print stylesheet lays
the page out on landscape A4 with the table header repeated on each page and colours kept.

Each table cell whose number the command's JSON holds carries that JSON's exact value and
where it lies (`data-path`, a JSON Pointer, and `data-value`), so a reader or a test can
check that the page says what `--format json` says.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from kvplan.report.table import Table

_MISSING = object()

STYLE = """
:root { --weights: #4c72b0; --kv: #dd8452; --free: #d9d9d9; --over: #c44e52;
  --reserve: #8c8c8c; --ink: #1b1b1b; --muted: #5b5b5b; --rule: #d0d0d0; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
  sans-serif; color: var(--ink); background: #fff; margin: 0 auto; padding: 24px;
  max-width: 1400px; }
h1 { font-size: 18px; margin: 0 0 4px; }
.sub { color: var(--muted); margin: 0 0 16px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 10px; border-bottom: 1px solid var(--rule); text-align: right;
  white-space: nowrap; vertical-align: top; }
th { background: #f3f3f3; font-weight: 600; border-bottom: 2px solid #9a9a9a; }
th.left, td.left { text-align: left; }
td.prose { white-space: normal; min-width: 16em; }
tbody tr:nth-child(even) { background: #fafafa; }
ul.notes { color: var(--muted); padding-left: 20px; }
pre { background: #f6f6f6; padding: 10px; overflow-x: auto; font-size: 12px; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr));
  gap: 16px; margin: 0 0 20px; align-items: start; }
figure.chart { margin: 0; border: 1px solid var(--rule); border-radius: 6px; padding: 10px; }
figcaption { font-weight: 600; margin-bottom: 4px; }
svg { width: 100%; max-width: 760px; height: auto; display: block;
  font: 11px system-ui, sans-serif; }
svg .label, svg .tick { fill: var(--ink); }
svg .axis-label { fill: var(--muted); }
svg .beyond { fill: #fff; stroke: #1b1b1b; stroke-width: 3px; paint-order: stroke;
  font-weight: 600; }
svg .axis { stroke: #7a7a7a; stroke-width: 1; }
svg .grid { stroke: #e6e6e6; stroke-width: 1; }
svg .marker { stroke: var(--ink); stroke-width: 2; }
svg .marker.budget { stroke: var(--kv); stroke-dasharray: 3 2; }
rect.weights, .swatch.weights { fill: var(--weights); background: var(--weights); }
rect.kv, .swatch.kv { fill: var(--kv); background: var(--kv); }
rect.free, .swatch.free { fill: var(--free); background: var(--free); }
rect.over, .swatch.over { fill: var(--over); background: var(--over); }
rect.reserve, .swatch.reserve { fill: var(--reserve); background: var(--reserve); }
rect.token-states, .swatch.token-states { fill: var(--kv); background: var(--kv); }
rect.partial-blocks, .swatch.partial-blocks { fill: #f2b880; background: #f2b880; }
rect.reserved-unused, .swatch.reserved-unused { fill: #8172b3; background: #8172b3; }
rect.fragmentation, .swatch.fragmentation { fill: var(--over); background: var(--over); }
.swatch.memory { background: var(--ink); height: 12px; width: 3px; }
.swatch.budget { background: var(--kv); height: 12px; width: 3px; }
svg .series { fill: none; stroke-width: 1.8; }
svg .mark.miss { fill: #fff; stroke-width: 2.5; }
ul.legend { list-style: none; padding: 0; margin: 0 0 6px; display: flex; flex-wrap: wrap;
  gap: 4px 14px; font-size: 12px; }
.swatch { display: inline-block; width: 12px; height: 12px; margin-right: 5px;
  vertical-align: -1px; }
.s0 { --c: #4c72b0; } .s1 { --c: #dd8452; } .s2 { --c: #55a868; } .s3 { --c: #c44e52; }
.s4 { --c: #8172b3; } .s5 { --c: #937860; } .s6 { --c: #da8bc3; } .s7 { --c: #8c8c8c; }
.s8 { --c: #ccb974; } .s9 { --c: #64b5cd; }
svg .series { stroke: var(--c); }
svg .series.dashed { stroke-dasharray: 6 3; }
svg .point, svg .mark { fill: var(--c); stroke: var(--c); }
.swatch.line { background: var(--c); height: 3px; vertical-align: 3px; }
.swatch.line.dashed { background: repeating-linear-gradient(90deg, var(--c) 0 4px,
  transparent 4px 7px); }
footer { color: var(--muted); font-size: 12px; margin-top: 24px; }
@page { size: A4 landscape; margin: 10mm; }
@media print {
  body { padding: 0; max-width: none; font-size: 9pt; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  .scroll { overflow: visible; }
  table { font-size: 7.5pt; width: 100%; }
  th, td { padding: 2px 4px; }
  thead { display: table-header-group; }
  tr, figure.chart, li { break-inside: avoid; }
  .charts { grid-template-columns: 1fr 1fr; }
  pre { white-space: pre-wrap; font-size: 7.5pt; }
}
"""

# No load of any kind: styles inline, images only as data: URLs (none today), no script.
POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def pointer_value(document: Any, pointer: str) -> Any:
    """The value at JSON Pointer `pointer` (RFC 6901) in `document`, or _MISSING."""
    value = document
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            return _MISSING
    return value


def _cell(tag: str, text: str, classes: list[str], pointer: str | None, payload: Any) -> str:
    attributes = f' class="{" ".join(classes)}"' if classes else ""
    value = pointer_value(payload, pointer) if pointer is not None else _MISSING
    if value is not _MISSING and not isinstance(value, (dict, list)):
        attributes += f' data-path="{escape(pointer)}" data-value="{escape(json.dumps(value))}"'
        if isinstance(value, int) and not isinstance(value, bool):
            attributes += f' title="{value:,}"'
    return f"<{tag}{attributes}>{escape(text)}</{tag}>"


def table_html(table: Table, payload: Any) -> str:
    """The table as HTML (text pictures left to the charts); cells tied to the JSON
    `payload` where their pointer resolves."""
    shown = [i for i, key in enumerate(table.keys) if key not in table.text_pictures]

    def kind(column: int) -> list[str]:
        if table.keys[column] in table.wrap:
            return ["left", "prose"]
        return ["left"] if column == shown[0] or table.is_text(column) else []

    classes = {column: kind(column) for column in shown}.__getitem__  # once per column

    head = "".join(
        f'<th class="{" ".join(classes(i))}" scope="col">{escape(table.headers[i])}</th>'
        for i in shown
    )
    body = []
    for r, row in enumerate(table.display_rows):
        cells = "".join(
            _cell("td", row[c], classes(c), table.cell_path(r, c), payload) for c in shown
        )
        body.append(f"<tr>{cells}</tr>")
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def html_page(table: Table, payload: Any, figures: list[str]) -> str:
    """The whole page: title, charts, table, notes and verbatim lines."""
    parts = [f"<h1>{escape(table.title)}</h1>"]
    if figures:
        parts.append(f'<section class="charts">{"".join(figures)}</section>')
    parts.append(table_html(table, payload))
    notes = table.notes_for([k for k in table.keys if k not in table.text_pictures])
    if notes:
        items = "".join(f"<li>{escape(note.strip())}</li>" for note in notes)
        parts.append(f'<ul class="notes">{items}</ul>')
    if table.footer:
        parts.append(f"<pre>{escape(chr(10).join(table.footer))}</pre>")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">'
        '<link rel="icon" href="data:,">'
        f"<title>kvplan · {escape(table.title)}</title><style>{STYLE}</style></head>\n"
        f"<body><main>{''.join(parts)}</main>"
        "<footer>kvplan: exact KV-cache sizing and per-GPU capacity</footer></body></html>\n"
    )
