"""`kvplan simulate`: one run, or two side by side (`--vs`), as a table, JSON, CSV or Markdown."""

from __future__ import annotations

from typing import Any

from kvplan.report.render import Format, Table, emit, human_bytes
from kvplan.simulate import InstanceModel, Latency, SimulationResult
from kvplan.simulate.metrics import MemorySplit
from kvplan.simulate.results import result_fields

MEMORY_KEYS = ("token_states", "partial_blocks", "reserved_unused", "fragmentation", "free")
MEMORY_LABELS = (
    "token states",
    "partial last blocks",
    "reserved, not yet used",
    "external fragmentation",
    "free",
)


def _latency_record(latency: Latency) -> dict[str, float | None]:
    return {
        "mean": latency.mean_s,
        "p50": latency.p50_s,
        "p90": latency.p90_s,
        "p99": latency.p99_s,
    }


def _memory_record(split: MemorySplit | tuple[float, ...]) -> dict[str, int]:
    values = split.values() if isinstance(split, MemorySplit) else split
    return {f"{key}_bytes": round(value) for key, value in zip(MEMORY_KEYS, values, strict=True)}


def simulation_record(result: SimulationResult) -> dict[str, Any]:
    """One run as the JSON contract (docs/commands/simulate.md): units in every key."""
    view, config = result.view, result.view.config
    slo = config.slo
    return {
        "label": result.label,
        **result_fields(result),
        "router": config.router,
        "max_model_len": view.max_model_len,
        "max_num_seqs": view.max_num_seqs,
        "max_num_batched_tokens": view.max_num_batched_tokens,
        "tokens_per_block": view.charge.tokens_per_block,
        "kv_blocks": view.num_blocks,
        "kv_block_unit": view.capacity.layout.unit,
        "kv_bytes_per_block": round(view.bytes_per_block),
        "kv_pool_bytes": round(view.pool_bytes),
        "kv_capacity_tokens": view.capacity_tokens,
        "kv_bytes_factor": config.kv_bytes_factor,
        "step_time_factor": config.step_time_factor,
        "kv_window_tokens": config.kv_window_tokens,
        "kv_sink_tokens": config.kv_sink_tokens,
        "step_times": config.step_table.source if config.step_table else "step-model",
        "bandwidth_fraction": config.efficiency.bandwidth_fraction,
        "compute_fraction": config.efficiency.compute_fraction,
        "workload": result.workload.description,
        "requests": len(result.workload.requests),
        "requests_completed": result.completed,
        "requests_rejected": dict(result.rejected),
        "makespan_s": result.makespan_s,
        "throughput_requests_per_s": result.throughput_requests_per_s,
        "output_tokens_per_s": result.output_tokens_per_s,
        "ttft_s": _latency_record(result.ttft),
        "tpot_s": _latency_record(result.tpot),
        "itl_s": _latency_record(result.itl),
        "e2e_s": _latency_record(result.e2e),
        "slo_ttft_s": slo.ttft_s,
        "slo_tpot_s": slo.tpot_s,
        "slo_met_fraction": result.slo_met_fraction,
        "goodput_requests_per_s": result.goodput_requests_per_s,
        "batch_mean": result.batch_mean,
        "batch_peak": result.batch_peak,
        "steps": result.steps,
        "preemptions": dict(result.preemptions),
        "recomputed_tokens": result.recomputed_tokens,
        "swapped_bytes": round(result.swapped_bytes),
        "padded_prompt_tokens": result.padded_prompt_tokens,
        "padded_decode_tokens": result.padded_decode_tokens,
        "prefill_tokens": result.prefill_tokens,
        "decode_tokens": result.decode_tokens,
        "output_tokens": result.output_tokens,
        "queue_mean": result.queue_mean,
        "queue_peak": result.queue_peak,
        "requests_in_system_mean": result.requests_in_system_mean,
        "kv_memory_mean": _memory_record(result.memory_mean),
        "kv_utilization_fraction": result.kv_utilization_fraction,
        "timeline": [
            {"t_s": t, "queue": queue, "running": running, **_memory_record(split)}
            for t, queue, running, split in result.timeline
        ],
        "notes": list(result.notes),
    }


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value * 1000:,.1f} ms" if value < 1 else f"{value:,.2f} s"


def _percentiles(latency: Latency) -> str:
    return " / ".join(_seconds(v) for v in (latency.p50_s, latency.p90_s, latency.p99_s))


def _fraction(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _rows(result: SimulationResult) -> list[tuple[str, str]]:
    """(label, shown value) for the table, in reading order."""
    fields, view, config = result_fields(result), result.view, result.view.config
    rejected = sum(result.rejected.values())
    rows = [
        ("model · sku", f"{fields['model']} · {fields['sku']} · tp {fields['tp']}"),
        ("engine · KV", f"{fields['engine']} · {fields['kv_dtype']}"),
        (
            "scheduler · allocator",
            f"{config.scheduler} · {config.allocator}"
            + (
                " · chunked prefill"
                if config.chunked_prefill and config.scheduler != "static"
                else ""
            ),
        ),
        (
            "instances",
            f"{result.instances}" + (f" ({config.router})" if result.instances > 1 else ""),
        ),
        ("KV pool / instance", _pool(view)),
        ("requests", f"{result.completed:,} done, {rejected:,} rejected"),
        (
            "throughput",
            f"{result.throughput_requests_per_s:,.2f} req/s · "
            f"{result.output_tokens_per_s:,.0f} output tok/s",
        ),
        ("TTFT p50/p90/p99", _percentiles(result.ttft)),
        ("TPOT p50/p90/p99", _percentiles(result.tpot)),
        ("ITL p50/p90/p99", _percentiles(result.itl)),
        ("E2E p50/p90/p99", _percentiles(result.e2e)),
    ]
    if result.goodput_requests_per_s is not None:
        rows.append(
            (
                "goodput (both SLOs)",
                f"{result.goodput_requests_per_s:,.2f} req/s · "
                f"{_fraction(result.slo_met_fraction)} of requests",
            )
        )
    rows += [
        ("batch mean / peak", f"{result.batch_mean:,.1f} / {result.batch_peak:,}"),
        ("queue mean / peak", f"{result.queue_mean:,.1f} / {result.queue_peak:,}"),
        ("preemptions", ", ".join(f"{n:,} {k}" for k, n in result.preemptions.items()) or "0"),
    ]
    if config.scheduler == "static":
        rows.append(
            (
                "padded tokens",
                f"{result.padded_prompt_tokens:,} prompt, {result.padded_decode_tokens:,} decode",
            )
        )
    return rows + _memory_rows(result)


def _pool(view: InstanceModel) -> str:
    """The pool in the engine's own terms: blocks and tokens, or tokens alone for a byte pool."""
    tokens = f"{view.capacity_tokens:,} tokens"
    if view.is_byte_pool:
        return f"{tokens} = {human_bytes(view.pool_bytes)}"
    name = "slots" if view.capacity.layout.unit == "slot" else "blocks"
    blocks = f"{view.num_blocks:,} {name} × {human_bytes(view.bytes_per_block)}"
    return f"{blocks} = {human_bytes(view.pool_bytes)} ({tokens})"


def _memory_rows(result: SimulationResult) -> list[tuple[str, str]]:
    """The pool's time-averaged split, each part with its share of the pool."""
    pool = result.view.pool_bytes
    rows = [
        (f"KV mean: {label}", f"{human_bytes(round(value))} ({_share(value, pool)})")
        for label, value in zip(MEMORY_LABELS, result.memory_mean.values(), strict=True)
    ]
    # Of the memory taken, not of the pool (the rows above): a label that says which, beside
    # "token states 3.3 %", keeps 99.5 % from reading as a contradiction.
    rows.append(("token states ÷ KV taken", _fraction(result.kv_utilization_fraction)))
    return rows


def _share(value: float, total: float) -> str:
    return f"{value / total:.1%}" if total > 0 else "—"


def simulation_table(results: list[SimulationResult]) -> Table:
    """Metrics down the side, one column per run."""
    labels = [
        r.label or ("value" if len(results) == 1 else f"run {i + 1}") for i, r in enumerate(results)
    ]
    table = Table(
        f"kvplan simulate · {results[0].workload.description}",
        ["metric", *labels],
        ["metric", *labels],
        # Each run's column is words (figures joined by · and /): on a narrow terminal they
        # wrap inside the grid, which keeps the runs side by side, instead of a block per
        # metric.
        wrap=tuple(labels),
    )
    columns = [dict(_rows(r)) for r in results]
    labels_in_order: list[str] = []
    for column in columns:
        labels_in_order += [label for label in column if label not in labels_in_order]
    for label in labels_in_order:
        shown = [column.get(label, "—") for column in columns]
        table.add([label, *shown], [label, *shown])
    seen: list[str] = []
    for result in results:
        seen += [note for note in result.notes if note not in seen]
    table.notes += seen
    if any(sum(r.rejected.values()) for r in results):
        for result in results:
            for reason, count in result.rejected.items():
                prefix = f"{result.label}: " if result.label else ""
                table.notes.append(f"{prefix}{count:,} rejected: {reason}")
    return table


def render_simulation(results: list[SimulationResult], fmt: Format) -> None:
    """Print one or more runs."""
    from kvplan.report.figures import simulate_figures

    records = [simulation_record(r) for r in results]
    flat = [
        {k: v for k, v in record.items() if k not in ("timeline", "notes")} for record in records
    ]
    emit(
        fmt,
        {"runs": records},
        flat,
        lambda: simulation_table(results),
        figures=lambda: simulate_figures(records),
    )
