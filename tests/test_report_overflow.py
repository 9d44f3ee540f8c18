"""`kvplan report` draws what does not fit: the batch's KV beyond the KV budget is overflow in
the table's bar, the --plot picture and the HTML page's chart, whether the budget or the
GPU's memory binds; and the picture's legends never overlap anything."""

from __future__ import annotations

import itertools
import re

import pytest

import kvplan
from kvplan.report.capacity_report import capacity_table
from kvplan.report.figures import capacity_figures
from kvplan.report.render import gib
from kvplan.units import GIB

SCOUT = "llama-4-scout-instruct"
# Scout at TP 8 on an H100: 1 of its 8 KV heads per GPU, head_dim 128, bf16: a token takes
# 2 (K and V) x 1 x 128 x 2 B = 512 B per layer. vLLM keeps its hybrid allocator off for
# chunked local attention, so each of the 48 layers holds the whole 131,072 tokens:
# 48 x 131,072 x 512 B = 3 GiB per request, 36 GiB for 12.
SCOUT_BATCH_KV_BYTES = 12 * 48 * 131_072 * 512


@pytest.fixture(scope="module")
def scout_row():
    (row,) = kvplan.report(SCOUT, skus="h100-sxm", tp=8, context="128k", batch=12)
    return row


def _expected_overflow(row) -> int:
    """KV of the batch less the room for KV: the budget, within what the weights leave."""
    per_replica = -(-row.batch // row.dp)
    kv = per_replica * row.kv_bytes_per_request_per_gpu
    room = min(row.kv_budget_bytes_per_gpu, row.memory_bytes - row.weights_bytes_per_gpu)
    return max(kv - room, 0)


def test_kv_beyond_the_budget_is_overflow_in_the_bar(scout_row):
    row = scout_row
    assert row.kv_bytes_per_request_per_gpu * 12 == SCOUT_BATCH_KV_BYTES
    # The GPU's memory would hold weights + KV: only the budget (the engine's reserve beside
    # them) makes the 12th request not fit.
    assert row.weights_bytes_per_gpu + SCOUT_BATCH_KV_BYTES < row.memory_bytes
    assert row.verdict == "fits 11 of 12"
    over = SCOUT_BATCH_KV_BYTES - row.kv_budget_bytes_per_gpu
    assert 0 < over < GIB
    table = capacity_table([row])
    (shown,) = table.display_rows
    picture = shown[table.keys.index("bar")]
    # Less than one of the 12 cells, and still drawn: one "!" and the exact figure.
    assert picture.count("!") == 1
    assert picture.endswith(f"+{gib(over)}")
    assert "! KV of the batch the KV budget does not hold" in table.footnotes["bar"]


@pytest.fixture(scope="module")
def grid_rows():
    """Fits, fits some, KV too small and weights that overrun the budget or the memory."""
    rows = []
    for batch, context in ((1, "8k"), (12, "128k"), (64, "32k")):
        rows += kvplan.report(
            ["llama-3.1-8b", "llama-3.1-70b", SCOUT],
            skus=["h100-sxm", "l4"],
            tp=[1, 8],
            context=context,
            batch=batch,
        )
    return rows


def test_the_bar_marks_overflow_exactly_when_the_batch_does_not_fit(grid_rows):
    table = capacity_table(grid_rows)
    column = table.keys.index("bar")
    verdicts = {row.verdict.split(" ")[0] for row in grid_rows}
    assert {"fits", "weights", "KV"} <= verdicts  # every kind of row is in the grid
    for row, shown in zip(grid_rows, table.display_rows, strict=True):
        picture = shown[column]
        over = _expected_overflow(row)
        assert (over > 0) == (row.verdict != "fits"), (row.model, row.sku, row.tp, row.verdict)
        assert ("!" in picture) == (over > 0), picture
        if over:
            assert picture.endswith(f"+{gib(over)}")


def test_the_html_chart_draws_the_kv_beyond_the_budget(scout_row):
    memory_chart = capacity_figures([scout_row])[0]
    over = SCOUT_BATCH_KV_BYTES - scout_row.kv_budget_bytes_per_gpu
    drawn = r'<rect class="over" x="[\d.]+" y="\d+" width="[\d.]*[1-9][\d.]*"'
    assert re.search(drawn, memory_chart)
    assert f"+{over / GIB:,.2f} GiB</text>" in memory_chart
    budget_end = scout_row.weights_bytes_per_gpu + scout_row.kv_budget_bytes_per_gpu
    assert f"KV budget ends after the weights: budget {gib(scout_row.kv_budget_bytes_per_gpu)}" in (
        memory_chart
    )
    assert budget_end < scout_row.memory_bytes


def _figure(rows):
    pytest.importorskip("matplotlib")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from kvplan.report.plot import report_figure

    figure = report_figure(rows)
    FigureCanvasAgg(figure).draw()  # what a PNG is drawn with: constrained layout runs
    return figure


def test_the_plot_draws_the_kv_beyond_the_budget(scout_row):
    from kvplan.report.plot import OVERFLOW_COLOR

    pytest.importorskip("matplotlib")
    from matplotlib.colors import to_rgba

    figure = _figure([scout_row])
    memory_axes = figure.axes[1]
    red = [p for p in memory_axes.patches if p.get_facecolor() == to_rgba(OVERFLOW_COLOR)]
    over = SCOUT_BATCH_KV_BYTES - scout_row.kv_budget_bytes_per_gpu
    assert [round(p.get_width() * GIB) for p in red if p.get_width() > 0] == [over]
    texts = [t.get_text() for t in memory_axes.texts]
    assert f"+{over / GIB:,.2f} GiB" in texts


@pytest.mark.parametrize("count", [1, 12])
def test_the_plot_legends_overlap_nothing(grid_rows, count):
    figure = _figure(grid_rows[:count])
    renderer = figure.canvas.get_renderer()
    boxes = {"title": figure._suptitle.get_window_extent(renderer)}
    for side, axes in zip(("context", "memory"), figure.axes, strict=True):
        boxes[f"{side} legend"] = axes.get_legend().get_window_extent(renderer)
        boxes[f"{side} panel"] = axes.get_window_extent(renderer)
        labels = [t for t in axes.get_yticklabels() if t.get_text()]
        for i, label in enumerate(labels):
            boxes[f"{side} label {i}"] = label.get_window_extent(renderer)
    for (a, box_a), (b, box_b) in itertools.combinations(boxes.items(), 2):
        assert not box_a.overlaps(box_b), f"{a} overlaps {b}"
