"""The record `kvplan explain` returns: each logged number beside kvplan's, and the answer.

Exact values in kvplan's units (bytes, tokens, requests, blocks); the report layer rounds.
"""

from __future__ import annotations

from typing import Any

from kvplan.api.results import Result
from kvplan.explain.reading import Logged


class ExplainRow(Result):
    """One number the log printed, beside kvplan's figure for it."""

    quantity: str  # what it is, in words
    key: str  # the figure's name (available_kv_bytes, gpu_kv_cache_tokens, …)
    unit: str  # bytes, tokens, requests, blocks
    line: int  # where the log printed it (1-based)
    logged_text: str  # as printed
    logged: int | float  # in `unit` (a count as an integer)
    step: float  # one unit of the printed figure's last digit, in `unit`
    kvplan: int | float | None  # kvplan's figure; None where the engine model has no such term
    difference: int | float | None  # kvplan − logged
    matches: bool  # equal within the printed rounding
    basis: str  # "GPU and settings" (predicted) or "logged budget" (the pool it buys)
    term: str | None  # what accounts for the difference; None when it matches


def row_beside(
    logged: Logged, quantity: str, kvplan: float | None, matches: bool, basis: str, term: str
) -> ExplainRow:
    """The row of `logged` with kvplan's figure beside it (`term` kept only if it differs)."""
    return ExplainRow(
        quantity=quantity,
        key=logged.name,
        unit=logged.unit,
        line=logged.line,
        logged_text=logged.text,
        logged=logged.value,
        step=logged.step,
        kvplan=kvplan,
        difference=None if kvplan is None else kvplan - logged.value,
        matches=matches,
        basis=basis,
        term=None if matches else term,
    )


class TargetAnswer(Result):
    """The smallest change of settings that serves `concurrency` requests of `context_tokens`."""

    context_tokens: int
    concurrency: int
    holds_now: int | None  # requests of that length the logged deployment holds
    meets: bool
    change: str  # in words: what differs from the logged launch
    sku: str | None
    gpus: int | None
    tp: int | None
    pp: int | None
    kv_dtype: str | None
    weight_dtype: str | None
    max_concurrency: int | None
    launch_command: str | None


class ExplainReport(Result):
    """A startup log read back: what it states, kvplan's figures beside it, what differs."""

    engine: str
    version: str | None
    version_basis: str
    model: str
    sku: str
    tp: int
    pp: int
    dp: int
    kv_dtype: str
    context_tokens: int
    lines_read: int
    facts: dict[str, Any]
    arguments: dict[str, str]
    rows: list[ExplainRow]
    unknown_terms: list[str]  # facts the log lacks, readings the engine model does not take yet
    notes: list[str]
    target: TargetAnswer | None = None
