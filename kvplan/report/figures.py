"""The HTML report's charts for each command: one GPU's memory split per row, and the
requests each deployment holds against context (kvplan.report.svg draws them).

The bars use the same figures as the table (weights, the KV of the requested batch, what
is left) and tie each segment the JSON holds to its JSON Pointer; the capacity lines draw
each record's `concurrency_by_context` (the API samples it when asked, planning the
deployment afresh at each context), so their point at the asked context is the table's
concurrency.
"""

from __future__ import annotations

from kvplan.api.results import CapacityRow, ContextPoint
from kvplan.api.results_check import CheckReport, ClaimReport
from kvplan.api.results_recommend import RecommendReport
from kvplan.report.memory_split import MemorySplit, memory_split
from kvplan.report.render import gib, tokens_label
from kvplan.report.row_labels import parallel_label
from kvplan.report.svg import (
    Bar,
    Marker,
    Segment,
    Series,
    bar_chart,
    line_chart,
    time_chart,
)

# Past these a chart is unreadable (and a whole-catalogue page would be megabytes of SVG).
MAX_BARS = 60
MAX_LINES = 20

MEMORY_LEGEND = [
    ("weights", "weights"),
    ("kv", "KV of the batch"),
    ("free", "free / engine reserve"),
    ("over", "KV beyond the KV budget"),
    ("memory", "GPU memory"),
    ("budget", "where the KV budget ends"),
]
# The simulated pool's parts (kvplan simulate's JSON keys, less _bytes) and their names.
SIMULATED_KV = [
    ("token_states", "token states"),
    ("partial_blocks", "partial last blocks"),
    ("reserved_unused", "reserved, not yet used"),
    ("fragmentation", "external fragmentation"),
    ("free", "free"),
]
CONTEXT_AXIS = "context per request (tokens, log scale)"
REQUESTS_AXIS = "requests held at once"


def _exact(what: str, value: int) -> str:
    return f"{what} {gib(value)} ({value:,} B)"


def _parts(label: str, split_values: list[tuple[int, str, str | None]]) -> list[Segment]:
    names = {"weights": "weights", "kv": "KV", "free": "free", "over": "KV beyond the budget"}
    names |= {key.replace("_", "-"): name for key, name in SIMULATED_KV}
    return [
        Segment(value, kind, _exact(f"{label}: {names.get(kind, kind)}", value), path)
        for value, kind, path in split_values
    ]


def _memory_bar(label: str, split: MemorySplit, at: str, kv_path: str | None = None) -> Bar:
    """One GPU's memory as a bar: weights, the KV the budget holds, the KV beyond it, free;
    the memory and the end of the KV budget marked, and +N GiB when the batch does not fit.

    Args:
        label: the bar's name.
        split: its figures (kvplan.report.memory_split.memory_split).
        at: the JSON Pointer of the record the bar draws ("/0", "/products/1").
        kv_path: where the JSON holds the batch's KV, if it does.
    """
    segments = _parts(
        label,
        [
            (split.weights_bytes, "weights", f"{at}/weights_bytes_per_gpu"),
            (
                split.kv_inside_bytes,
                "kv",
                kv_path if split.kv_inside_bytes == split.kv_bytes else None,
            ),
            (split.kv_beyond_bytes, "over", None),
            (split.free_bytes, "free", None),
        ],
    )
    markers = [
        Marker(
            split.memory_bytes,
            "memory",
            _exact("GPU memory", split.memory_bytes),
            f"{at}/memory_bytes",
        ),
        Marker(
            max(split.weights_bytes + split.kv_budget_bytes, 0),
            "budget",
            _exact("KV budget ends after the weights: budget", split.kv_budget_bytes),
        ),
    ]
    return Bar(label, segments, markers, split.overflow_bytes)


def _capacity_line(
    label: str, curve: list[ContextPoint], mark: tuple[int, int], ok: bool
) -> Series:
    points = [(p.context_tokens, p.max_concurrency) for p in curve]
    return Series(label, points, mark, ok)


def _too_many(what: str, count: int, most: int) -> str:
    return (
        f'<p class="sub">{what}: drawn for at most {most} rows ({count} here); narrow the '
        "selection to see it.</p>"
    )


def capacity_figures(rows: list[CapacityRow]) -> list[str]:
    """`kvplan report`: memory per GPU per row; requests held against context per row."""
    many_models = len({r.model for r in rows}) > 1

    def label(row: CapacityRow) -> str:
        return (f"{row.model} · " if many_models else "") + f"{row.sku} · {parallel_label(row)}"

    figures = []
    if len(rows) <= MAX_BARS:
        bars = [_memory_bar(label(row), memory_split(row), f"/{i}") for i, row in enumerate(rows)]
        first = rows[0]
        figures.append(
            bar_chart(
                f"Memory per GPU at batch {first.batch} × {first.context:,} tokens",
                bars,
                MEMORY_LEGEND,
            )
        )
    else:
        figures.append(_too_many("Memory per GPU", len(rows), MAX_BARS))
    # Rows whose curve was sampled (the API's `curves=True`) and that hold a request.
    drawn = [r for r in rows if r.max_concurrency > 0 and r.concurrency_by_context is not None]
    if len(drawn) > MAX_LINES:
        figures.append(_too_many("Requests against context", len(drawn), MAX_LINES))
    elif drawn:
        lines = [
            _capacity_line(
                label(r), r.concurrency_by_context or [], (r.context, r.max_concurrency), True
            )
            for r in drawn
        ]
        figures.append(
            line_chart(
                f"Requests held against context (marked: {tokens_label(rows[0].context)})",
                lines,
                CONTEXT_AXIS,
                REQUESTS_AXIS,
            )
        )
    return figures


def check_figures(report: CheckReport) -> list[str]:
    """`kvplan check`: each product's memory with its KV budget marked; its capacity line
    with the promise marked (hollow when it fails)."""
    bars, lines = [], []
    for i, product in enumerate(report.products):
        at = f"/products/{i}"
        split = MemorySplit.of(
            product.memory_bytes,
            product.weights_bytes_per_gpu,
            product.kv_bytes_needed_per_gpu,
            product.kv_budget_bytes_per_gpu,
        )
        bars.append(_memory_bar(product.name, split, at, f"{at}/kv_bytes_needed_per_gpu"))
        if product.concurrency_by_context is not None:
            mark = (product.promised_context, product.promised_concurrency)
            curve = product.concurrency_by_context
            lines.append(_capacity_line(product.name, curve, mark, product.ok))
    figures = [bar_chart("Memory per GPU at the promised load", bars[:MAX_BARS], MEMORY_LEGEND)]
    if lines:
        figures.append(
            line_chart(
                "Requests held against context (circles: the promises; hollow: broken)",
                lines[:MAX_LINES],
                CONTEXT_AXIS,
                REQUESTS_AXIS,
            )
        )
    return figures


def claim_figures(report: ClaimReport) -> list[str]:
    """`kvplan claim`: one GPU's memory (weights, KV, engine reserve, free); the deployment's
    capacity line with the claim marked."""
    free = report.free_bytes_per_gpu
    parts = [
        (report.weights_bytes_per_gpu, "weights", "/weights_bytes_per_gpu"),
        (report.kv_bytes_batch_per_gpu, "kv", "/kv_bytes_batch_per_gpu"),
        (report.engine_reserve_bytes_per_gpu, "reserve", "/engine_reserve_bytes_per_gpu"),
        (max(free, 0), "free", "/free_bytes_per_gpu" if free >= 0 else None),
    ]
    memory = Marker(
        report.memory_bytes, "memory", _exact("GPU memory", report.memory_bytes), "/memory_bytes"
    )
    legend = [
        ("weights", "weights"),
        ("kv", "KV of the batch"),
        ("reserve", "engine reserve"),
        ("free", "free"),
        ("memory", "GPU memory"),
    ]
    label = f"{report.sku} · tp{report.tp}"
    figures = [
        bar_chart(
            f"One GPU at batch {report.batch} × {report.context:,} tokens",
            [Bar(label, _parts(label, parts), [memory])],
            legend,
        )
    ]
    if report.concurrency_by_context is not None:
        mark = (report.context, report.batch)
        line = _capacity_line(label, report.concurrency_by_context, mark, report.fits)
        figures.append(
            line_chart(
                "Requests held against context (circle: the claim)",
                [line],
                CONTEXT_AXIS,
                REQUESTS_AXIS,
            )
        )
    return figures


def recommend_figures(report: RecommendReport) -> list[str]:
    """`kvplan recommend`: each candidate's weights and KV budget per GPU."""
    candidates = report.ranked or ([report.closest_miss] if report.closest_miss else [])
    at = "/ranked" if report.ranked else ""
    bars = []
    for i, c in enumerate(candidates[:MAX_BARS]):
        label = (
            f"#{i + 1} {c.gpus}× {c.sku} {c.tp}×{c.pp}×{c.dp}"
            if report.ranked
            else f"miss {c.gpus}× {c.sku}"
        )
        where = f"{at}/{i}" if report.ranked else "/closest_miss"
        segments = _parts(
            label,
            [
                (c.weights_bytes_per_gpu, "weights", f"{where}/weights_bytes_per_gpu"),
                (max(c.kv_budget_bytes_per_gpu, 0), "kv", f"{where}/kv_budget_bytes_per_gpu"),
            ],
        )
        bars.append(Bar(label, segments))
    legend = [("weights", "weights per GPU"), ("kv", "KV budget per GPU")]
    return [bar_chart("Weights and KV budget per GPU", bars, legend)] if bars else []


def simulate_figures(records: list[dict]) -> list[str]:
    """`kvplan simulate`: each run's KV pool per instance, time-averaged, split into its
    parts; the KV in use over time. Drawn from the JSON records themselves."""
    bars, lines = [], []
    for i, record in enumerate(records):
        label = record["label"] or (f"run {i + 1}" if len(records) > 1 else record["sku"])
        at = f"/runs/{i}"
        mean = record["kv_memory_mean"]
        parts = [
            (mean[f"{key}_bytes"], key.replace("_", "-"), f"{at}/kv_memory_mean/{key}_bytes")
            for key, _ in SIMULATED_KV
        ]
        pool = Marker(
            record["kv_pool_bytes"],
            "memory",
            _exact("KV pool", record["kv_pool_bytes"]),
            f"{at}/kv_pool_bytes",
        )
        bars.append(Bar(label, _parts(label, parts), [pool]))
        used = [
            (point["t_s"], sum(point[f"{key}_bytes"] for key, _ in SIMULATED_KV[:-1]))
            for point in record["timeline"]
        ]
        lines.append((label, used))
    legend = [(key.replace("_", "-"), name) for key, name in SIMULATED_KV] + [("memory", "KV pool")]
    figures = [bar_chart("KV pool per instance, time-averaged", bars, legend, "GiB per instance")]
    if any(line for _, line in lines):
        figures.append(time_chart("KV in use per instance over time", lines, "GiB in use"))
    return figures
