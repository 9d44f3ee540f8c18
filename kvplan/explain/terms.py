"""The term that accounts for a budget that differs from the log's.

A budget is the requested memory less the terms the engine subtracts (vLLM: weights, the
activation peak, non-torch memory and, from 0.20, CUDA graphs). Each logged term's
difference moves kvplan's budget by the opposite amount, the requested memory's by the
same; the terms are named by how much of the budget's difference they carry, largest first.
A logged term the logged budget does not subtract (the log's own arithmetic says so: vLLM
0.19 prints its CUDA-graph memory but leaves it in the headroom) carries none.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from kvplan.explain.pool_terms import pool_term
from kvplan.explain.reading import GPU, POOL, READINGS, Reading
from kvplan.explain.result import ExplainRow

NO_TERM = "a reading the engine model does not take yet"


def value_at(record: dict[str, Any], path: str | None) -> float | None:
    """The number at `path` ('a/b', or 'a+b/c' for a sum) in a record; None if absent."""
    if path and "+" in path:
        parts = [value_at(record, part) for part in path.split("+")]
        return None if None in parts else sum(p for p in parts if p is not None)
    value: Any = record
    for part in (path or "").split("/") if path else ():
        if isinstance(value, list) and part.isdigit():
            value = value[int(part)] if int(part) < len(value) else None
        else:
            value = value.get(part) if isinstance(value, dict) else None
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def budget_key(reader: ModuleType) -> str:
    """The reader's first budget figure ('' for an engine that allocates cells)."""
    return reader.BUDGETS[0] if reader.BUDGETS else ""


def _not_subtracted(rows: dict[str, ExplainRow], reader: ModuleType) -> set[str]:
    """Logged terms the logged budget leaves in: requested − the others = the budget."""
    subtracted = getattr(reader, "SUBTRACTED", ())
    requested, budget = rows.get("requested_bytes"), rows.get(budget_key(reader))
    logged = [rows[k] for k in subtracted if k in rows]
    if requested is None or budget is None or not logged:
        return set()
    residual = requested.logged - sum(r.logged for r in logged) - budget.logged
    tolerance = requested.step + budget.step + sum(r.step for r in logged)
    return {r.key for r in logged if abs(residual + r.logged) <= tolerance < r.logged}


def _carried(
    rows: dict[str, ExplainRow], reader: ModuleType, given: frozenset[str] = frozenset()
) -> list[tuple[str, float]]:
    """(term, share of the budget's difference), largest first, of the differing terms
    (those in `given`, readings the engine model was handed, carry none)."""
    left_in = _not_subtracted(rows, reader)
    shares = []
    for compared in reader.COMPARED:
        row = rows.get(compared.key)
        if not compared.in_budget or row is None or row.matches or row.difference is None:
            continue
        if compared.key in given:
            continue
        if compared.key in left_in or (compared.key == "total_bytes" and "requested_bytes" in rows):
            continue  # left in the headroom; the total counted through the requested memory
        sign = 1 if compared.key in getattr(reader, "ADDED", ()) else -1
        # (the total's share is its difference × utilization; taken whole here, an upper bound)
        shares.append((compared.term, sign * row.difference))
    return sorted(shares, key=lambda share: -abs(share[1]))


def _budget_term(rows: dict[str, ExplainRow], reader: ModuleType, predicted: dict) -> str:
    budget = rows[budget_key(reader)]
    stated = [c for c in reader.COMPARED if c.in_budget and c.key in rows]
    if not stated:
        every = ", ".join(c.term for c in reader.COMPARED if c.in_budget)
        return f"unknown: the log states no term of the budget ({every})"
    carried = _carried(rows, reader)
    difference = budget.difference or 0
    # a term whose difference moves the budget the other way does not account for it
    named = ", ".join(term for term, share in carried if share * difference > 0)
    rest = difference - sum(share for _, share in carried)
    unstated = [
        c.term
        for c in reader.COMPARED
        # a sum of other terms (0.6.4's peak torch memory) is not a term of its own
        if c.in_budget and c.key not in rows and "+" not in (c.path or "")
        and value_at(predicted, c.path)
        # the requested memory is the total times the utilization: one of the two is named
        and not (c.key == "total_bytes" and "requested_bytes" not in rows)
    ]  # fmt: skip
    if abs(rest) > budget.step and unstated:
        tail = f"terms the log does not state ({', '.join(unstated)})"
        return f"{named}; the rest in {tail}" if named else tail
    return named or "the budget's other terms (each logged term matches)"


def _readings_term(rows: dict[str, ExplainRow], reader: ModuleType) -> str:
    """What still differs once the logged readings are given: the other differing terms."""
    given = frozenset(reader.READINGS) | (
        {"requested_bytes"} if "total_bytes" in reader.READINGS else set()
    )  # the requested memory follows from the total
    carried = _carried(rows, reader, given)
    named = ", ".join(term for term, _ in carried)
    return f"the engine model's estimate of {named or 'a term the log does not state'}"


def _pool_row(row: ExplainRow, reading: Reading, predicted: dict[str, Any]) -> ExplainRow:
    """A pool figure that differs, with the one fact the log lacks (kvplan.explain.pool_terms)."""
    smaller = row.kvplan is not None and row.logged < row.kvplan
    term = pool_term(reading, predicted, row.basis == POOL, smaller)
    return row.model_copy(update={"term": term})


def name_terms(
    rows: list[ExplainRow], reader: ModuleType, predicted: dict[str, Any], reading: Reading
) -> list[ExplainRow]:
    """The rows with the budget's term named, a logged term its budget leaves in said so,
    and a pool that differs given the one fact the log lacks (or called a missing rule)."""
    by_key = {row.key: row for row in rows if row.basis == GPU}
    left_in = _not_subtracted(by_key, reader)
    pool_keys = {compared.key for compared in reader.COMPARED if compared.basis == POOL}
    fixed = []
    for row in rows:
        if row.key == budget_key(reader) and row.basis == GPU and not row.matches:
            row = row.model_copy(update={"term": _budget_term(by_key, reader, predicted)})
        elif row.key == budget_key(reader) and row.basis == READINGS and not row.matches:
            row = row.model_copy(update={"term": _readings_term(by_key, reader)})
        elif row.key in left_in and not row.matches:
            row = row.model_copy(
                update={"term": f"{row.term} (the logged budget does not subtract them)"}
            )
        elif row.key in pool_keys and not row.matches and row.kvplan is not None:
            row = _pool_row(row, reading, predicted)
        fixed.append(row)
    return fixed
