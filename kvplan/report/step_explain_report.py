"""`--explain`: each operation's share of a step, as a table or as the JSON records."""

from __future__ import annotations

import sys

from kvplan.api.results import dump
from kvplan.api.step_explain import StepExplanation
from kvplan.report.render import Format, Table, emit


def explanation_table(explanation: StepExplanation) -> Table:
    """One step's operations: seconds and share, largest first as the model lists them."""
    e = explanation
    band = f" ±{e.band_fraction:.0%}" if e.band_fraction is not None else ""
    prefill = f" + {e.prefill_tokens:,} prefill tokens" if e.prefill_tokens else ""
    table = Table(
        f"{e.model} · {e.sku} · tp {e.tp} · one step: {e.decode_batch:,} decoding at "
        f"{e.context_tokens:,} tokens{prefill} = {e.step_s * 1e3:,.3f} ms{band}",
        ["operation", "ms", "share"],
        ["operation", "seconds", "share_fraction"],
    )
    for op in e.operations:
        table.add(
            [op.operation, op.seconds, op.share_fraction],
            [op.operation, f"{op.seconds * 1e3:,.3f}", f"{op.share_fraction:.1%}"],
        )
    table.notes.append(f"constants: {e.constants}")
    return table


def render_explanations(explanations: list[StepExplanation], fmt: Format) -> None:
    """Print the explained steps: one JSON list of records, or one table each."""
    payload = [dump(e) for e in explanations]
    records = [
        {"model": e.model, "sku": e.sku, "tp": e.tp, **dump(op)}
        for e in explanations
        for op in e.operations
    ]
    if fmt in ("json", "csv"):
        emit(fmt, payload, records, lambda: explanation_table(explanations[0]))
        return
    for index, explanation in enumerate(explanations):
        if index:
            sys.stdout.write("\n")
        emit(fmt, payload, records, lambda e=explanation: explanation_table(e))
