"""`kvplan simulate`: one run, or two side by side (`--vs`), as a table, JSON, CSV or Markdown.

Renders the API's SimulationRun records: every figure the table shows is a field of the JSON.
"""

from __future__ import annotations

from kvplan.api.results import dump
from kvplan.api.results_simulate import LatencyPercentiles, SimulationRun
from kvplan.report.render import Format, Table, emit, human_bytes

# The parts of KvMemorySplit, in its order.
MEMORY_LABELS = (
    "token states",
    "partial last blocks",
    "reserved, not yet used",
    "external fragmentation",
    "free",
)


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value * 1000:,.1f} ms" if value < 1 else f"{value:,.2f} s"


def _percentiles(latency: LatencyPercentiles) -> str:
    return " / ".join(_seconds(v) for v in (latency.p50, latency.p90, latency.p99))


def _fraction(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _rows(run: SimulationRun) -> list[tuple[str, str]]:
    """(label, shown value) for the table, in reading order."""
    rejected = sum(run.requests_rejected.values())
    chunked = " · chunked prefill" if run.chunked_prefill and run.scheduler != "static" else ""
    rows = [
        ("model · sku", f"{run.model} · {run.sku} · tp {run.tp}"),
        ("engine · KV", f"{run.engine} · {run.kv_dtype}"),
        ("scheduler · allocator", f"{run.scheduler} · {run.allocator}{chunked}"),
        ("instances", f"{run.instances}" + (f" ({run.router})" if run.instances > 1 else "")),
        ("KV pool / instance", _pool(run)),
        ("requests", f"{run.requests_completed:,} done, {rejected:,} rejected"),
        *_offered_rows(run),
        (
            "throughput",
            f"{run.throughput_requests_per_s:,.2f} req/s · "
            f"{run.output_tokens_per_s:,.0f} output tok/s",
        ),
        ("TTFT p50/p90/p99", _percentiles(run.ttft_s)),
        ("TPOT p50/p90/p99", _percentiles(run.tpot_s)),
        ("ITL p50/p90/p99", _percentiles(run.itl_s)),
        ("E2E p50/p90/p99", _percentiles(run.e2e_s)),
    ]
    if run.goodput_requests_per_s is not None:
        rows.append(
            (
                "goodput (both SLOs)",
                f"{run.goodput_requests_per_s:,.2f} req/s · "
                f"{_fraction(run.slo_met_fraction)} of requests",
            )
        )
    rows += [
        ("batch mean / peak", f"{run.batch_mean:,.1f} / {run.batch_peak:,}"),
        ("queue mean / peak", f"{run.queue_mean:,.1f} / {run.queue_peak:,}"),
        ("preemptions", ", ".join(f"{n:,} {k}" for k, n in run.preemptions.items()) or "0"),
    ]
    if run.scheduler == "static":
        rows.append(
            (
                "padded tokens",
                f"{run.padded_prompt_tokens:,} prompt, {run.padded_decode_tokens:,} decode",
            )
        )
    return rows + _memory_rows(run)


def _offered_rows(run: SimulationRun) -> list[tuple[str, str]]:
    """The offered rate over the arrival window, and what is sustainable when it is more."""
    rows = (
        []
        if run.concurrency is None
        else [("concurrency", f"at most {run.concurrency:,} in flight")]
    )
    if run.offered_requests_per_s is None:
        return rows
    shown = f"{run.offered_requests_per_s:,.2f} req/s over {_seconds(run.arrival_window_s)}"
    if run.overloaded:
        shown += f" · overloaded: about {run.sustainable_requests_per_s:,.2f} req/s sustainable"
    return [*rows, ("offered", shown)]


def _pool(run: SimulationRun) -> str:
    """The pool in the engine's own terms: blocks and tokens, or tokens alone for a byte pool."""
    tokens = f"{run.kv_capacity_tokens:,} tokens"
    if run.kv_block_unit == "byte":  # requests take exactly their bytes: told in tokens
        return f"{tokens} = {human_bytes(run.kv_pool_bytes)}"
    name = "slots" if run.kv_block_unit == "slot" else "blocks"
    blocks = f"{run.kv_blocks:,} {name} × {human_bytes(run.kv_bytes_per_block)}"
    return f"{blocks} = {human_bytes(run.kv_pool_bytes)} ({tokens})"


def _bytes_share(value: int, pool: int) -> str:
    return f"{human_bytes(value)} ({_share(value, pool)})"


def _memory_rows(run: SimulationRun) -> list[tuple[str, str]]:
    """The pool's time-averaged split, each part with its share of the pool."""
    pool, mean = run.kv_pool_bytes, dump(run.kv_memory_mean)
    rows = [
        (f"KV mean: {label}", f"{human_bytes(value)} ({_share(value, pool)})")
        for label, value in zip(MEMORY_LABELS, mean.values(), strict=True)
    ]
    if run.allocator != "paged":  # reservations: the paper's Fig. 2 split
        split = run.kv_reserved_split_mean
        rows += [
            ("KV mean: reserved, will be used", _bytes_share(split.reserved_bytes, pool)),
            (
                "KV mean: internal fragmentation",
                _bytes_share(split.internal_fragmentation_bytes, pool),
            ),
        ]
    # Of the memory taken, not of the pool (the rows above): a label that says which, beside
    # "token states 3.3 %", keeps 99.5 % from reading as a contradiction.
    rows.append(("token states ÷ KV taken", _fraction(run.kv_utilization_fraction)))
    return rows


def _share(value: float, total: float) -> str:
    return f"{value / total:.1%}" if total > 0 else "—"


def simulation_table(runs: list[SimulationRun]) -> Table:
    """Metrics down the side, one column per run."""
    labels = [
        r.label or ("value" if len(runs) == 1 else f"run {i + 1}") for i, r in enumerate(runs)
    ]
    table = Table(
        f"kvplan simulate · {runs[0].workload}",
        ["metric", *labels],
        ["metric", *labels],
        # Each run's column is words (figures joined by · and /): on a narrow terminal they
        # wrap inside the grid, which keeps the runs side by side, instead of a block per
        # metric.
        wrap=tuple(labels),
    )
    columns = [dict(_rows(r)) for r in runs]
    labels_in_order: list[str] = []
    for column in columns:
        labels_in_order += [label for label in column if label not in labels_in_order]
    for label in labels_in_order:
        shown = [column.get(label, "—") for column in columns]
        table.add([label, *shown], [label, *shown])
    seen: list[str] = []
    for run in runs:
        seen += [note for note in run.notes if note not in seen]
    table.notes += seen
    if any(sum(r.requests_rejected.values()) for r in runs):
        for run in runs:
            for reason, count in run.requests_rejected.items():
                prefix = f"{run.label}: " if run.label else ""
                table.notes.append(f"{prefix}{count:,} rejected: {reason}")
    return table


def render_simulation(runs: list[SimulationRun], fmt: Format) -> None:
    """Print one or more runs."""
    from kvplan.report.figures import simulate_figures

    records = [dump(r) for r in runs]
    flat = [
        {k: v for k, v in record.items() if k not in ("timeline", "notes")} for record in records
    ]
    emit(
        fmt,
        {"runs": records},
        flat,
        lambda: simulation_table(runs),
        figures=lambda: simulate_figures(records),
    )
