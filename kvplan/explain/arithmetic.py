"""The logged budget from the logged terms, by the engine model's rule of which it subtracts.

vLLM prints the memory it requests (utilization × total) and each term it measured (weights,
the activation peak, non-torch memory, CUDA graphs) beside the KV budget. The engine model's
rule for the release says which of them the budget subtracts: before 0.20 the CUDA-graph memory
stays in the headroom, from 0.20 the budget subtracts it (the engine model's CUDA-graph term is
zero where it does not). The requested memory less those logged terms is the logged budget when
the rule is the engine's: a log that prints every term of the rule checks it number for number,
where the terms themselves are measurements kvplan only estimates.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from kvplan.explain.pool_terms import NO_TOTAL
from kvplan.explain.reading import Logged, Reading
from kvplan.explain.result import ExplainRow, row_beside

LOGGED_TERMS = "logged terms"  # kvplan's rule applied to the terms the log printed
RULE_TERM = (
    "the terms the budget subtracts: the logged ones do not add up to it by the engine model's rule"
)


def _subtracted(reader: ModuleType, predicted: dict[str, Any]) -> tuple[str, ...]:
    """The logged terms the engine model's budget subtracts at this release."""
    graphs = (predicted.get("budget") or {}).get("cudagraph_bytes")
    return tuple(
        key for key in getattr(reader, "SUBTRACTED", ()) if key != "cudagraph_bytes" or graphs
    )


def logged_terms_row(
    reading: Reading, reader: ModuleType, predicted: dict[str, Any], budget: Logged, quantity: str
) -> ExplainRow | None:
    """The budget row once more, kvplan's figure the requested memory less the logged terms
    the engine model subtracts (each at both ends of its rounding); None when the log does not
    print the requested memory and every one of them."""
    keys = _subtracted(reader, predicted)
    figures = reading.figures
    requested = _requested(figures, predicted)
    if not keys or requested is None or any(k not in figures for k in keys):
        return None
    value = requested[0] - sum(figures[k].value for k in keys)
    slack = requested[1] + sum(figures[k].step / 2 for k in keys) + budget.step / 2
    matches = abs(value - budget.value) <= slack + 1e-9
    term = requested[2] or RULE_TERM
    return row_beside(budget, f"{quantity} (logged terms)", value, matches, LOGGED_TERMS, term)


def _requested(figures: dict[str, Logged], predicted: dict[str, Any]):
    """(the requested memory in bytes, half its rounding, the term it stands for when the log
    does not print it) from the log: its requested line, else its total × the utilization,
    else the SKU's runtime-visible memory × the utilization; None without a utilization."""
    budget = predicted.get("budget") or {}
    if "requested_bytes" in figures:
        logged = figures["requested_bytes"]
        return logged.value, logged.step / 2, None
    utilization = budget.get("utilization")
    if not utilization:
        return None
    if "total_bytes" in figures:
        logged = figures["total_bytes"]
        return logged.value * utilization, logged.step / 2 * utilization, None
    return budget["requested_bytes"], 0.0, f"{NO_TOTAL}: the SKU's is taken"
