"""`kvplan report --plot FILE.svg|png`: longest context per row, and each GPU's memory split.

matplotlib is an optional extra (`kvplan[plot]`), imported only here and only when a plot is
asked for, so `kvplan size` never pays for it. The figure is drawn on a bare `Figure` (no
pyplot, no GUI backend: the Agg canvas renders PNG, the SVG backend SVG) and written to a
temporary name that is renamed when complete, so a failed run leaves no half-written file.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType
from typing import Any

from kvplan.api.results import CapacityRow
from kvplan.errors import KvplanError
from kvplan.files import output_target, write_atomically
from kvplan.report.memory_split import memory_split
from kvplan.report.render import tokens_label
from kvplan.report.row_labels import parallel_label
from kvplan.units import GIB

PLOT_SUFFIXES = (".svg", ".png")
# Beyond this a figure is taller than matplotlib's 2^16-pixel limit and unreadable anyway.
MAX_PLOT_ROWS = 200
ROW_HEIGHT_INCHES = 0.32
WEIGHTS_COLOR, KV_COLOR, FREE_COLOR = "#4c72b0", "#dd8452", "#d9d9d9"
OVERFLOW_COLOR = "#c44e52"
# The context panel's own colours: memory-bound vs capped at the native limit.
MEMORY_BOUND_COLOR, NATIVE_CAPPED_COLOR = "#55a868", "#8172b3"
# Legend entries drawn as ticks across a bar; listed after the bars' colours.
MARKER_LABELS = ("native limit", "GPU memory", "KV budget ends")


def _matplotlib() -> ModuleType:
    """`matplotlib` with `matplotlib.figure` loaded; a KvplanError saying how to install it."""
    try:
        # The package first: a cached `matplotlib.figure` would otherwise hide its absence.
        import matplotlib
        import matplotlib.figure
    except ImportError:
        raise KvplanError("--plot needs matplotlib: pip install 'kvplan[plot]'") from None
    return matplotlib


def _label(row: CapacityRow, many_models: bool) -> str:
    return (f"{row.model} · " if many_models else "") + f"{row.sku} · {parallel_label(row)}"


def _context_panel(axes: Any, rows: list[CapacityRow], labels: list[str]) -> None:
    """Horizontal bars of the longest context (log scale), the native limit marked."""
    positions = list(range(len(rows)))
    contexts = [r.max_context_tokens for r in rows]
    capped = [r.native_limit_binds and r.max_context_tokens > 0 for r in rows]
    colors = [NATIVE_CAPPED_COLOR if cap else MEMORY_BOUND_COLOR for cap in capped]
    # Zero-token rows have no bar on a log axis; they get their verdict as text instead.
    axes.barh(positions, [c if c > 0 else float("nan") for c in contexts], color=colors)
    natives = [r.context_limit for r in rows]
    axes.scatter(
        natives, positions, marker="|", s=220, color="black", label="native limit", zorder=3
    )
    axes.set_xscale("log", base=2)
    low_power = max(int(math.log2(min([c for c in contexts if c > 0] + natives))) - 1, 0)
    high_power = int(math.log2(max(natives))) + 1
    ticks = [2**p for p in range(low_power, high_power + 1)]
    axes.set_xticks(ticks, [tokens_label(t) for t in ticks])
    axes.set_xlim(ticks[0], ticks[-1])
    for position, row in zip(positions, rows, strict=True):
        if row.max_context_tokens <= 0:
            axes.text(ticks[0] * 1.1, position, row.verdict, va="center", fontsize=8)
    for color, label in (
        (MEMORY_BOUND_COLOR, "memory-bound"),
        (NATIVE_CAPPED_COLOR, "capped at the native limit"),
    ):
        axes.barh([0], [float("nan")], color=color, label=label)  # legend entries only
    axes.set_yticks(positions, labels)
    axes.invert_yaxis()
    batch = rows[0].batch
    axes.set_xlabel(f"longest context at batch {batch} (tokens, log scale)")
    _legend_above(axes)
    axes.grid(axis="x", alpha=0.3)


def _memory_panel(axes: Any, rows: list[CapacityRow]) -> None:
    """Stacked bars per GPU in GiB: weights, KV of the requested batch, the rest free.

    KV is the whole requested batch, never clipped: what the KV budget does not hold is
    drawn in its own colour after the part it holds (into the engine's reserve, and past
    the memory mark when it gets that far), so a batch that does not fit never looks as if
    it did.
    """
    positions = list(range(len(rows)))
    splits = [memory_split(r) for r in rows]
    weights = [s.weights_bytes / GIB for s in splits]
    kv_inside = [s.kv_inside_bytes / GIB for s in splits]
    kv_beyond = [s.kv_beyond_bytes / GIB for s in splits]
    free = [s.free_bytes / GIB for s in splits]
    axes.barh(positions, weights, color=WEIGHTS_COLOR, label="weights")
    axes.barh(positions, kv_inside, left=weights, color=KV_COLOR, label="KV (batch × context)")
    lefts = [w + k for w, k in zip(weights, kv_inside, strict=True)]
    axes.barh(positions, kv_beyond, left=lefts, color=OVERFLOW_COLOR, label="KV beyond the budget")
    lefts = [w + k for w, k in zip(lefts, kv_beyond, strict=True)]
    axes.barh(positions, free, left=lefts, color=FREE_COLOR, label="free / engine reserve")
    memory = [s.memory_bytes / GIB for s in splits]
    axes.scatter(memory, positions, marker="|", s=220, color="black", label="GPU memory", zorder=3)
    # Left of the weights' end when the weights and the engine's reserve overrun the memory.
    budget_ends = [max(s.weights_bytes + s.kv_budget_bytes, 0) / GIB for s in splits]
    axes.scatter(
        budget_ends, positions, marker="|", s=220, color=KV_COLOR, label="KV budget ends", zorder=3
    )
    for position, split in zip(positions, splits, strict=True):
        if split.overflow_bytes:
            axes.annotate(
                f"+{split.overflow_bytes / GIB:,.2f} GiB",
                (split.drawn_bytes / GIB, position),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                fontsize=8,
                color=OVERFLOW_COLOR,
            )
    # Room for the +N GiB labels right of the longest bar.
    axes.set_xlim(0, max(s.drawn_bytes for s in splits) / GIB * 1.15)
    # Same rows as the left panel, in the same order; the labels are there.
    axes.set_yticks(positions, [""] * len(rows))
    axes.invert_yaxis()
    first = rows[0]
    axes.set_xlabel(f"GiB per GPU at batch {first.batch} × {first.context:,} tokens")
    _legend_above(axes)
    axes.grid(axis="x", alpha=0.3)


def _legend_above(axes: Any, columns: int = 3) -> None:
    """The legend above its panel, where it never hides a bar.

    `columns` entries a row keep it no wider than the panel, so it never runs into the
    neighbouring panel's (constrained layout makes room above for its rows). matplotlib
    fills a legend column by column: the entries are reordered to read row by row.
    """
    handles, labels = axes.get_legend_handles_labels()
    # matplotlib lists markers (scatter) before bars; the bars' parts read first.
    pairs = sorted(zip(handles, labels, strict=True), key=lambda pair: pair[1] in MARKER_LABELS)
    handles, labels = [h for h, _ in pairs], [label for _, label in pairs]
    rows = -(-len(handles) // columns)
    order = [r * columns + c for c in range(columns) for r in range(rows)]
    order = [i for i in order if i < len(handles)]
    axes.legend(
        [handles[i] for i in order],
        [labels[i] for i in order],
        loc="lower left",
        bbox_to_anchor=(0.0, 1.02),
        ncol=columns,
        fontsize=8,
        frameon=False,
    )


def _checked_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in PLOT_SUFFIXES:
        raise KvplanError(
            f"--plot {path}: unknown picture type {path.suffix or '(no suffix)'!r} "
            f"(allowed: {', '.join(PLOT_SUFFIXES)})"
        )
    return suffix.removeprefix(".")


def ensure_plot_possible(path: Path) -> None:
    """Fail early, before any output, on a bad suffix, a bad path or a missing matplotlib.

    Raises:
        KvplanError: the same messages `plot_report` would raise for these problems.
    """
    _checked_format(path)
    output_target(path, "--plot")
    _matplotlib()


def plot_report(rows: list[CapacityRow], path: Path) -> None:
    """Draw the report's rows to `path` (.svg or .png), atomically.

    Raises:
        KvplanError: an unknown suffix, too many rows, matplotlib missing, or a write error.
    """
    image_format = _checked_format(path)
    figure = report_figure(rows, str(path))
    # A fixed salt for the SVG's element ids: the same report draws the same bytes.
    with _matplotlib().rc_context({"svg.hashsalt": "kvplan"}):
        _save(figure, path, image_format)


def report_figure(rows: list[CapacityRow], name: str = "") -> Any:
    """The report's picture as a matplotlib Figure: longest context and memory per GPU.

    Raises:
        KvplanError: no rows, too many rows, or matplotlib missing (`name` says for which file).
    """
    if not rows:
        raise KvplanError(f"--plot {name}: no rows to draw")
    if len(rows) > MAX_PLOT_ROWS:
        raise KvplanError(
            f"--plot {name}: {len(rows)} rows are too many for one picture (at most "
            f"{MAX_PLOT_ROWS}); narrow --model, --sku or --tp"
        )
    matplotlib = _matplotlib()
    many_models = len({r.model for r in rows}) > 1
    labels = [_label(r, many_models) for r in rows]
    figure = matplotlib.figure.Figure(
        figsize=(13, 1.6 + ROW_HEIGHT_INCHES * len(rows)), layout="constrained"
    )
    context_axes, memory_axes = figure.subplots(1, 2)
    _context_panel(context_axes, rows, labels)
    _memory_panel(memory_axes, rows)
    first = rows[0]
    figure.suptitle(f"kvplan report · engine {first.engine} · KV {first.kv_dtype}", fontsize=11)
    return figure


def _save(figure: Any, path: Path, image_format: str) -> None:
    """Draw `figure` to `path`, atomically (kvplan.files.write_atomically)."""
    # No creation date in the SVG either.
    metadata = {"Date": None} if image_format == "svg" else None
    write_atomically(
        path,
        lambda temporary: figure.savefig(temporary, format=image_format, metadata=metadata),
        "--plot",
    )
