"""`kvplan simulate --plot FILE.svg|png`: the KV pool and the queue over time, one panel a run.

matplotlib (the `plot` extra) is imported only here and only when a plot is asked for; the
figure is written atomically as `kvplan report --plot` writes its own (report/plot.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvplan.api.results_simulate import KvMemorySplit, SimulationRun
from kvplan.errors import KvplanError
from kvplan.report.plot import _checked_format, _matplotlib, _save
from kvplan.report.simulate_report import MEMORY_LABELS
from kvplan.units import GIB

# token states, partial blocks, reserved, fragmentation, free
MEMORY_COLORS = ("#dd8452", "#c9a227", "#8172b3", "#c44e52", "#d9d9d9")
QUEUE_COLOR, RUNNING_COLOR = "#222222", "#4c72b0"


def plot_simulation(runs: list[SimulationRun], path: Path) -> None:
    """Draw each run's timeline to `path` (.svg or .png), atomically.

    Raises:
        KvplanError: an unknown suffix, matplotlib missing, nothing to draw, or a write error.
    """
    image_format = _checked_format(path)
    if not any(r.timeline for r in runs):
        raise KvplanError(f"--plot {path}: the run has no timeline to draw (no request served)")
    matplotlib = _matplotlib()
    figure = matplotlib.figure.Figure(figsize=(11, 3.6 * len(runs)), layout="constrained")
    panels = figure.subplots(len(runs), 1, squeeze=False)
    for axes, run in zip(panels[:, 0], runs, strict=True):
        _panel(axes, run)
    with matplotlib.rc_context({"svg.hashsalt": "kvplan"}):
        _save(figure, path, image_format)


def _panel(axes: Any, run: SimulationRun) -> None:
    """Stacked KV memory split in GiB, with queue and running requests on a second axis."""
    times = [point.t_s for point in run.timeline]
    layers = [[getattr(p, key) for p in run.timeline] for key in KvMemorySplit.model_fields]
    axes.stackplot(
        times,
        [[value / GIB for value in layer] for layer in layers],
        labels=MEMORY_LABELS,
        colors=MEMORY_COLORS,
        step="post",
    )
    axes.set_ylabel("KV pool, GiB")
    axes.set_xlabel("time, s")
    title = run.label or f"{run.scheduler} · {run.allocator}"
    axes.set_title(f"{title} · {run.model} on {run.sku}", fontsize=10)
    counts = axes.twinx()
    counts.step(
        times,
        [point.queue for point in run.timeline],
        where="post",
        color=QUEUE_COLOR,
        label="queued requests",
    )
    counts.step(
        times,
        [point.running for point in run.timeline],
        where="post",
        color=RUNNING_COLOR,
        label="running requests",
    )
    counts.set_ylabel("requests")
    handles, labels = axes.get_legend_handles_labels()
    more_handles, more_labels = counts.get_legend_handles_labels()
    axes.legend(
        handles + more_handles,
        labels + more_labels,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.08),
        ncol=4,
        fontsize=8,
        frameon=False,
    )
