"""`kvplan pools`: prefill and decode pools against colocated instances, per workload."""

from __future__ import annotations

from typing import Any

from kvplan.report.render import Format, Table, emit, plural
from kvplan.simulate.pools import PREFILL_REJECTED, PoolChoice, PoolsResult


def _choice_record(choice: PoolChoice) -> dict[str, Any]:
    return {
        "tp": choice.tp,
        "pp": choice.pp,
        "instances": choice.instances,
        "gpus": choice.gpus,
        "ttft_s": choice.ttft_s,
        "tpot_s": choice.tpot_s,
        "met": choice.instances is not None,
        "slo_met_fraction": choice.slo_met_fraction,
        "requests_rejected": dict(choice.rejected),
        "tried": [{"tp": tp, "instances": n, "met": met} for tp, n, met in choice.tried],
    }


def _per_gpu(result: PoolsResult, gpus: int | None, colocated: bool = False) -> float | None:
    """Requests/s per GPU of what that setup itself returns."""
    served = result.colocated_requests_per_s if colocated else result.offered_requests_per_s
    return served / gpus if gpus else None


def pools_record(label: str, result: PoolsResult) -> dict[str, Any]:
    """One workload's pools as the JSON contract (docs/commands/pools.md)."""
    disaggregated = result.disaggregated_gpus
    return {
        "label": label,
        "workload": result.workload.description,
        "requests": len(result.workload.requests),
        "requests_served": result.served,
        "requests_rejected": result.rejected,
        "offered_requests_per_s": result.offered_requests_per_s,
        "slo_ttft_s": result.slo.ttft_s,
        "slo_tpot_s": result.slo.tpot_s,
        "slo_percentile": result.percentile,
        "link_bytes_per_s": result.link_bytes_per_s,
        "kv_transfer_mean_s": result.transfer_mean_s,
        "kv_transfer_percentile_s": result.transfer_percentile_s,
        "prefill": _choice_record(result.prefill),
        "decode": _choice_record(result.decode),
        "colocated": _choice_record(result.colocated),
        "ratio": result.ratio,
        "disaggregated_gpus": disaggregated,
        "disaggregated_requests_per_s_per_gpu": _per_gpu(result, disaggregated),
        "colocated_gpus": result.colocated.gpus,
        "colocated_requests_served": result.colocated_served,
        "colocated_requests_per_s_per_gpu": _per_gpu(result, result.colocated.gpus, True),
        "notes": list(result.notes),
    }


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value * 1000:,.1f} ms"


def _count(choice: PoolChoice, limit_note: str) -> str:
    return f"{choice.instances:,}" if choice.instances is not None else limit_note


def pools_table(results: list[tuple[str, PoolsResult]]) -> Table:
    first = results[0][1]
    p = first.percentile
    table = Table(
        f"kvplan pools · TTFT ≤ {_ms(first.slo.ttft_s)} and TPOT ≤ {_ms(first.slo.tpot_s)} at p{p}",
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
    for label, result in results:
        for choice in (result.prefill, result.decode):
            _add(table, label, choice.role, choice, result)
        gpus = result.disaggregated_gpus
        per_gpu = _per_gpu(result, gpus)
        summary = f"{result.ratio}, {gpus} GPUs" if gpus else "not met"
        table.add(
            [label, "disaggregated", None, result.ratio, gpus, None, None, None, per_gpu],
            [
                label,
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
        _add(table, label, "colocated", result.colocated, result)
        table.notes += _workload_notes(label, result)
    table.notes += [n for n in first.notes if n not in table.notes]
    choices = [c for _, r in results for c in (r.prefill, r.decode, r.colocated)]
    if any(choice.instances is None for choice in choices):  # the mark is on some row
        table.notes.append(
            "—: no instance count up to --max-instances meets the target, or the requests the "
            "pool rejects already miss it, or it cannot hold a request of the workload (more "
            "instances reject the same ones)"
        )
    return table


def _workload_notes(label: str, result: PoolsResult) -> list[str]:
    """What one workload offered, what the pools rejected, and the KV copy."""
    p, total = result.percentile, len(result.workload.requests)
    served = (
        plural(result.served, "request")
        if not result.rejected
        else (f"{result.served:,} of {total:,} requests served by both disaggregated pools")
    )
    if result.colocated_served != result.served:
        served += f" (colocated: {result.colocated_served:,})"
    rate = (
        f"at {result.offered_requests_per_s:,.2f} req/s"
        if result.workload.arrival_window_s is not None
        else "all sent at t = 0"  # offline: no arrival window to divide by
    )
    notes = [
        f"{label}: {served} {rate}; KV copy "
        f"{_ms(result.transfer_mean_s)} mean, {_ms(result.transfer_percentile_s)} p{p} over "
        f"{result.link_bytes_per_s / 1e9:,.0f} GB/s links"
    ]
    for choice in (result.prefill, result.decode, result.colocated):
        # The decode pool's share also misses what the prefill pool rejected: said once, there.
        own = {k: n for k, n in choice.rejected.items() if k != PREFILL_REJECTED}
        if own:
            reasons = ", ".join(f"{reason}: {n:,}" for reason, n in own.items())
            notes.append(
                f"{label}: {choice.role} (tp {choice.tp}) rejects {sum(own.values()):,} "
                f"({reasons}), each an SLO miss"
            )
    return notes


def _add(table: Table, label: str, role: str, choice: PoolChoice, result: PoolsResult) -> None:
    per_gpu = _per_gpu(result, choice.gpus, True) if role == "colocated" else None
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


def render_pools(results: list[tuple[str, PoolsResult]], fmt: Format) -> None:
    """Print the pools of each workload (the base one, then any surge)."""
    records = [pools_record(label, result) for label, result in results]
    flat = [{k: v for k, v in record.items() if k != "notes"} for record in records]
    emit(fmt, {"pools": records}, flat, lambda: pools_table(results))
