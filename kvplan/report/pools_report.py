"""`kvplan pools`: prefill and decode pools against colocated instances, per workload.

Renders the API's PoolsRun records: every figure the table and its notes show is a field of
the JSON.
"""

from __future__ import annotations

from kvplan.api.results import dump
from kvplan.api.results_simulate import LayoutGoodputRecord, PoolChoiceRecord, PoolsRun
from kvplan.report.render import Format, Table, emit, plural


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value * 1000:,.1f} ms"


def _count(choice: PoolChoiceRecord, limit_note: str) -> str:
    return f"{choice.instances:,}" if choice.instances is not None else limit_note


def pools_table(runs: list[PoolsRun]) -> Table:
    first = runs[0]
    p = first.slo_percentile
    table = Table(
        f"kvplan pools · TTFT ≤ {_ms(first.slo_ttft_s)} and TPOT ≤ {_ms(first.slo_tpot_s)} at p{p}",
        [
            "workload",
            "pool",
            "tp",
            "instances",
            "GPUs",
            f"TTFT p{p}",
            f"TPOT p{p}",
            "SLO met",
            "req/s per GPU",
        ],
        [
            "workload",
            "pool",
            "tp",
            "instances",
            "gpus",
            "ttft_s",
            "tpot_s",
            "slo_met_fraction",
            "per_gpu",
        ],
    )
    for run in runs:
        for role, choice in (("prefill", run.prefill), ("decode", run.decode)):
            _add(table, run.label, role, choice, None)
        gpus = run.disaggregated_gpus
        per_gpu = run.disaggregated_requests_per_s_per_gpu
        summary = f"{run.ratio}, {gpus} GPUs" if gpus else "not met"
        table.add(
            [run.label, "disaggregated", None, run.ratio, gpus, None, None, None, per_gpu],
            [
                run.label,
                "disaggregated",
                "",
                summary,
                f"{gpus or '—'}",
                "",
                "",
                "",
                f"{per_gpu:,.2f}" if per_gpu else "—",
            ],
        )
        _add(table, run.label, "colocated", run.colocated, run.colocated_requests_per_s_per_gpu)
        for found in run.goodput:
            _add_goodput(table, run.label, found)
        table.notes += _workload_notes(run)
    table.notes += [n for n in first.notes if n not in table.notes]
    choices = [c for r in runs for c in (r.prefill, r.decode, r.colocated)]
    if any(choice.instances is None for choice in choices):  # the mark is on some row
        table.notes.append(
            "—: no instance count up to --max-instances meets the target, or the requests the "
            "pool rejects already miss it, or it cannot hold a request of the workload (more "
            "instances reject the same ones)"
        )
    return table


def _add_goodput(table: Table, label: str, found: LayoutGoodputRecord) -> None:
    """A goodput row: the layout kept, its attainment and goodput per GPU at its best rate."""
    per_gpu, pool = found.goodput_requests_per_s_per_gpu, f"goodput {found.layout}"
    met = found.slo_met_fraction
    table.add(
        [label, pool, None, found.split, found.gpus, None, None, met, per_gpu],
        [
            label,
            pool,
            "",
            found.split,
            f"{found.gpus:,}",
            "",
            "",
            f"{met:.1%}",
            f"{per_gpu:,.2f}" if per_gpu else "—",
        ],
    )


def _goodput_notes(run: PoolsRun) -> list[str]:
    """The rate each goodput row was found at, and what it means."""
    if not run.goodput:
        return []
    rates = "; ".join(
        f"{g.layout} {g.split}: {g.goodput_requests_per_s:,.2f} req/s"
        + (" or more (met at 1,024 × the workload's rate)" if g.capped else "")
        for g in run.goodput
    )
    return [
        f"{run.label}: goodput (the highest rate at which {run.slo_percentile} % of the "
        f"requests meet both SLOs, the same requests at other rates, layouts kept): {rates}"
    ]


def _workload_notes(run: PoolsRun) -> list[str]:
    """What one workload offered, what the pools rejected, and the KV copy."""
    p, total, label = run.slo_percentile, run.requests, run.label
    served = (
        plural(run.requests_served, "request")
        if not run.requests_rejected
        else (f"{run.requests_served:,} of {total:,} requests served by both disaggregated pools")
    )
    if run.colocated_requests_served != run.requests_served:
        served += f" (colocated: {run.colocated_requests_served:,})"
    rate = (
        f"at {run.offered_requests_per_s:,.2f} req/s"
        if run.arrival_window_s is not None
        else "all sent at t = 0"  # offline: no arrival window to divide by
    )
    notes = [
        f"{label}: {served} {rate}; KV copy "
        f"{_ms(run.kv_transfer_mean_s)} mean, {_ms(run.kv_transfer_percentile_s)} p{p} over "
        f"{run.link_bytes_per_s / 1e9:,.0f} GB/s links"
    ]
    for role, choice in (
        ("prefill", run.prefill),
        ("decode", run.decode),
        ("colocated", run.colocated),
    ):
        # The decode pool's share also misses what the prefill pool rejected: said once, there.
        own = choice.requests_rejected_here
        if own:
            reasons = ", ".join(f"{reason}: {n:,}" for reason, n in own.items())
            notes.append(
                f"{label}: {role} (tp {choice.tp}) rejects {sum(own.values()):,} "
                f"({reasons}), each an SLO miss"
            )
    return notes + _goodput_notes(run)


def _add(
    table: Table, label: str, role: str, choice: PoolChoiceRecord, per_gpu: float | None
) -> None:
    table.add(
        [
            label,
            role,
            choice.tp,
            choice.instances,
            choice.gpus,
            choice.ttft_s,
            choice.tpot_s,
            choice.slo_met_fraction,
            per_gpu,
        ],
        [
            label,
            role,
            f"{choice.tp}",
            _count(choice, "—"),
            f"{choice.gpus:,}" if choice.gpus is not None else "—",
            _ms(choice.ttft_s),
            _ms(choice.tpot_s),
            "—" if choice.slo_met_fraction is None else f"{choice.slo_met_fraction:.1%}",
            f"{per_gpu:,.2f}" if per_gpu else "",
        ],
    )


def render_pools(runs: list[PoolsRun], fmt: Format) -> None:
    """Print the pools of each workload (the base one, then any surge)."""
    records = [dump(run) for run in runs]
    flat = [{k: v for k, v in record.items() if k != "notes"} for record in records]
    emit(fmt, {"pools": records}, flat, lambda: pools_table(runs))
