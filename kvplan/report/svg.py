"""Inline SVG charts for the HTML report, drawn by hand: no plotting library, no script.

Two kinds: stacked horizontal bars of one GPU's memory (weights, KV, free …) per row, and
lines of requests held against context on log axes. Colours and fonts come from the page's
stylesheet through class names (kvplan.report.html), so the charts print as the page does.
Every bar segment and point carries its exact number in a tooltip (`<title>`) and, where the
command's JSON holds that number, its JSON Pointer (`data-path`, `data-value`), the way the
page's table cells do.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

from kvplan.report.render import plural, tokens_label
from kvplan.units import GIB

WIDTH = 760  # viewBox units; the page scales the picture to its width
ROW = 22  # one bar's row
CLIP = 1.5  # the axis of a bar chart ends at this × the largest marker (GPU memory)
CHAR = 6.6  # the average width of one 11-unit character, to size label columns
SERIES_CLASSES = 10  # .s0 … .s9 in the stylesheet; the next ten lines are dashed


@dataclass(frozen=True)
class Segment:
    """One part of a bar: `value` bytes of a `kind` (a class name: weights, kv, …)."""

    value: int
    kind: str
    label: str
    path: str | None = None  # the JSON Pointer of `value`, when the JSON holds it


@dataclass(frozen=True)
class Marker:
    """A tick across a bar at `value` bytes (the GPU's memory, where the KV budget ends)."""

    value: int
    kind: str
    label: str
    path: str | None = None


@dataclass(frozen=True)
class Bar:
    """One row of a bar chart; `overflow_bytes` > 0 writes +N GiB after it (what does not
    fit)."""

    label: str
    segments: list[Segment]
    markers: list[Marker] = field(default_factory=list)
    overflow_bytes: int = 0


@dataclass(frozen=True)
class Series:
    """Requests that fit at each context, for one deployment; `mark` is the point asked about
    (drawn larger; `mark_ok` False draws it as a miss)."""

    label: str
    points: list[tuple[int, int]]
    mark: tuple[int, int] | None = None
    mark_ok: bool = True


def _attrs(path: str | None, value: int | float) -> str:
    if path is None:
        return ""
    return f' data-path="{escape(path)}" data-value="{escape(json.dumps(value))}"'


def _figure(title: str, height: float, body: list[str], legend: str) -> str:
    heading = escape(title)
    return (
        f'<figure class="chart"><figcaption>{heading}</figcaption>{legend}'
        f'<svg viewBox="0 0 {WIDTH} {math.ceil(height)}" role="img" '
        f'aria-label="{heading}" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{heading}</title>{''.join(body)}</svg></figure>"
    )


def legend(entries: Sequence[tuple[str, str]]) -> str:
    """A legend as HTML above the picture: (class name, text) swatches."""
    items = "".join(
        f'<li><span class="swatch {escape(kind)}"></span>{escape(text)}</li>'
        for kind, text in entries
    )
    return f'<ul class="legend">{items}</ul>'


def nice_step(span: float, most: int = 8) -> float:
    """The smallest 1, 2 or 5 × 10^k step that cuts `span` into at most `most` parts."""
    if span <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(span / most))
    for factor in (1, 2, 5, 10):
        if span / (factor * power) <= most:
            return factor * power
    return 10 * power


def bar_chart(
    title: str,
    bars: list[Bar],
    entries: Sequence[tuple[str, str]],
    axis_label: str = "GiB per GPU",
) -> str:
    """Stacked horizontal bars in GiB, one per row, with their markers and a GiB axis."""
    label_width = min(260, 12 + CHAR * max((len(b.label) for b in bars), default=0))
    left, right, top = label_width, WIDTH - 16, 8
    sums = [sum(max(s.value, 0) for s in b.segments) for b in bars]
    marks = [m.value for b in bars for m in b.markers]
    total = max([*sums, *marks, 1])
    # A bar far past every GPU's memory (a batch 30× too big) would squash the others: the
    # axis stops at 1.5 × the largest memory and such a bar is cut, its total written.
    if marks and total > CLIP * max(marks):
        total = CLIP * max(marks)
    scale = (right - left) / total
    body: list[str] = []
    for row, item in enumerate(bars):
        y = top + row * ROW
        body.append(
            f'<text class="label" x="{left - 6}" y="{y + ROW * 0.68:.1f}" '
            f'text-anchor="end">{escape(item.label)}</text>'
        )
        x = left
        for part in item.segments:
            if part.value <= 0 or x >= right:
                continue
            w = min(part.value * scale, right - x)
            body.append(
                f'<rect class="{escape(part.kind)}" x="{x:.2f}" y="{y + 3}" width="{w:.2f}" '
                f'height="{ROW - 6}"{_attrs(part.path, part.value)}>'
                f"<title>{escape(part.label)}</title></rect>"
            )
            x += w
        body += _bar_end_text(item, sums[row] > total, x, right, y + ROW * 0.68)
        for mark in item.markers:
            mx = left + mark.value * scale
            body.append(
                f'<line class="marker {escape(mark.kind)}" x1="{mx:.2f}" x2="{mx:.2f}" '
                f'y1="{y + 1}" y2="{y + ROW - 1}"{_attrs(mark.path, mark.value)}>'
                f"<title>{escape(mark.label)}</title></line>"
            )
    bottom = top + len(bars) * ROW
    step = nice_step(total / GIB) * GIB
    body += _x_axis(left, right, bottom, scale, step, total, lambda v: f"{v / GIB:,.0f}")
    body.append(
        f'<text class="axis-label" x="{(left + right) / 2:.1f}" y="{bottom + 34}" '
        f'text-anchor="middle">{escape(axis_label)}</text>'
    )
    return _figure(title, bottom + 42, body, legend(entries))


def _bar_end_text(item: Bar, cut: bool, x: float, right: float, y: float) -> list[str]:
    """What a bar says at its end: its total when the axis cuts it (» N GiB), and +N GiB
    when something does not fit (after the bar when there is room, else inside its end)."""
    words = []
    if cut:
        words.append(f"» {sum(max(s.value, 0) for s in item.segments) / GIB:,.0f} GiB")
    if item.overflow_bytes > 0:
        words.append(f"+{item.overflow_bytes / GIB:,.2f} GiB")
    if not words:
        return []
    text = " ".join(words)
    inside = cut or x + 8 + CHAR * len(text) > right
    anchor, at = ("end", right - 4) if inside else ("start", x + 4)
    return [
        f'<text class="beyond" x="{at:.2f}" y="{y:.1f}" text-anchor="{anchor}">'
        f"{escape(text)}</text>"
    ]


def _x_axis(
    left: float,
    right: float,
    y: float,
    scale: float,
    step: float,
    total: float,
    label: Callable[[float], str],
) -> list[str]:
    parts = [f'<line class="axis" x1="{left}" x2="{right}" y1="{y}" y2="{y}"/>']
    tick = 0.0
    while tick <= total * 1.0001:
        x = left + tick * scale
        parts.append(f'<line class="axis" x1="{x:.2f}" x2="{x:.2f}" y1="{y}" y2="{y + 4}"/>')
        parts.append(
            f'<text class="tick" x="{x:.2f}" y="{y + 16}" text-anchor="middle">'
            f"{escape(label(tick))}</text>"
        )
        tick += step
    return parts


def _series_class(index: int) -> str:
    return f"s{index % SERIES_CLASSES}" + (" dashed" if index >= SERIES_CLASSES else "")


def _log_axes(
    box: tuple[float, float, float, float],
    x_powers: tuple[int, int],
    y_powers: int,
    px: Callable[[int], float],
    py: Callable[[int], float],
) -> list[str]:
    """Axes and grid of a log-log chart: powers of two of tokens across, powers of ten of
    requests up, and 0 on the bottom line."""
    left, right, top, bottom = box
    body = [f'<line class="axis" x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}"/>']
    body.append(f'<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{bottom}"/>')
    for power in range(x_powers[0], x_powers[1] + 1):
        x = px(2**power)
        body.append(f'<line class="grid" x1="{x:.2f}" x2="{x:.2f}" y1="{top}" y2="{bottom}"/>')
        body.append(
            f'<text class="tick" x="{x:.2f}" y="{bottom + 16}" text-anchor="middle">'
            f"{tokens_label(2**power)}</text>"
        )
    for power in range(y_powers + 1):
        y = py(10**power)
        body.append(f'<line class="grid" x1="{left}" x2="{right}" y1="{y:.2f}" y2="{y:.2f}"/>')
        body.append(
            f'<text class="tick" x="{left - 6}" y="{y + 4:.2f}" text-anchor="end">'
            f"{10**power:,}</text>"
        )
    body.append(f'<text class="tick" x="{left - 6}" y="{bottom + 4}" text-anchor="end">0</text>')
    return body


def line_chart(title: str, series: list[Series], x_label: str, y_label: str) -> str:
    """Requests held (log10 axis; 0 on the bottom line) against context (log2 axis)."""
    left, right, top, bottom = 64, WIDTH - 16, 10, 250
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points if y > 0] or [1]
    low_x, high_x = math.floor(math.log2(min(xs))), math.ceil(math.log2(max(xs)))
    high_x = max(high_x, low_x + 1)
    high_y = max(1, math.ceil(math.log10(max(ys))))
    zero_band = 22  # 0 requests sits below 1 on its own line

    def px(tokens: int) -> float:
        return left + (math.log2(tokens) - low_x) / (high_x - low_x) * (right - left)

    def py(requests: int) -> float:
        if requests <= 0:
            return bottom
        return bottom - zero_band - math.log10(requests) / high_y * (bottom - zero_band - top)

    body = _log_axes((left, right, top, bottom), (low_x, high_x), high_y, px, py)
    for i, line in enumerate(series):
        kind = _series_class(i)
        points = " ".join(f"{px(x):.2f},{py(y):.2f}" for x, y in line.points)
        body.append(f'<polyline class="series {kind}" points="{points}"/>')
        for x, y in line.points:
            body.append(
                f'<circle class="point {kind}" cx="{px(x):.2f}" cy="{py(y):.2f}" r="2.2" '
                f'data-context="{x}" data-requests="{y}"><title>{escape(line.label)}: '
                f"{plural(y, 'request')} of {x:,} tokens</title></circle>"
            )
        if line.mark is not None:
            x, y = line.mark
            state = "ok" if line.mark_ok else "miss"
            body.append(
                f'<circle class="mark {kind} {state}" cx="{px(x):.2f}" cy="{py(y):.2f}" r="5" '
                f'data-context="{x}" data-requests="{y}"><title>{escape(line.label)}: '
                f"{plural(y, 'request')} of {x:,} tokens asked</title></circle>"
            )
    body.append(
        f'<text class="axis-label" x="{(left + right) / 2:.1f}" y="{bottom + 34}" '
        f'text-anchor="middle">{escape(x_label)}</text>'
    )
    body.append(
        f'<text class="axis-label" transform="translate(14 {(top + bottom) / 2:.1f}) '
        f'rotate(-90)" text-anchor="middle">{escape(y_label)}</text>'
    )
    entries = [(f"line {_series_class(i)}", s.label) for i, s in enumerate(series)]
    return _figure(title, bottom + 42, body, legend(entries))


def time_chart(title: str, series: list[tuple[str, list[tuple[float, int]]]], y_label: str) -> str:
    """Bytes (GiB axis) against time in seconds, one line per series, linear axes."""
    left, right, top, bottom = 64, WIDTH - 16, 10, 220
    points = [p for _, line in series for p in line] or [(0.0, 0)]
    end_s = max(max(t for t, _ in points), 1e-9)
    high = max(max(v for _, v in points), 1)
    y_step = nice_step(high / GIB, 5) * GIB
    high = math.ceil(high / y_step) * y_step
    x_scale, y_scale = (right - left) / end_s, (bottom - top) / high
    body = _x_axis(left, right, bottom, x_scale, nice_step(end_s), end_s, lambda v: f"{v:g}")
    tick = 0.0
    while tick <= high * 1.0001:
        y = bottom - tick * y_scale
        body.append(f'<line class="grid" x1="{left}" x2="{right}" y1="{y:.2f}" y2="{y:.2f}"/>')
        body.append(
            f'<text class="tick" x="{left - 6}" y="{y + 4:.2f}" text-anchor="end">'
            f"{tick / GIB:,.3g}</text>"
        )
        tick += y_step
    for i, (label, line) in enumerate(series):
        drawn = " ".join(f"{left + t * x_scale:.2f},{bottom - v * y_scale:.2f}" for t, v in line)
        body.append(
            f'<polyline class="series {_series_class(i)}" points="{drawn}">'
            f"<title>{escape(label)}</title></polyline>"
        )
    body.append(
        f'<text class="axis-label" x="{(left + right) / 2:.1f}" y="{bottom + 34}" '
        'text-anchor="middle">time (s)</text>'
    )
    body.append(
        f'<text class="axis-label" transform="translate(14 {(top + bottom) / 2:.1f}) '
        f'rotate(-90)" text-anchor="middle">{escape(y_label)}</text>'
    )
    entries = [(f"line {_series_class(i)}", label) for i, (label, _) in enumerate(series)]
    return _figure(title, bottom + 42, body, legend(entries))
