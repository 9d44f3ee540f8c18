"""Each logged number beside kvplan's, with the difference and the term behind it.

kvplan's figures come from capacity rows of kvplan's API (kvplan.api.capacity): one
predicted from the GPU, model and settings (the budget and its terms); one with the log's
free-memory readings given to the engine model as settings (the budget again); and one bought
with the budget the log printed (the pool: blocks, tokens, concurrency). A printed figure is
rounded, so each is computed at the ends of its rounding and a logged figure matches when it
lies between them. kvplan.explain.terms names what accounts for a difference.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import product
from types import ModuleType
from typing import Any

from kvplan.api import capacity
from kvplan.api.results import dump
from kvplan.explain.arithmetic import logged_terms_row
from kvplan.explain.reading import GPU, POOL, READINGS, Compared, Logged, Reading
from kvplan.explain.rebuild import Rebuilt
from kvplan.explain.result import ExplainRow, row_beside
from kvplan.explain.terms import NO_TERM, budget_key, name_terms, value_at


def row_for(rebuilt: Rebuilt, **settings: int) -> dict[str, Any]:
    """The capacity row (JSON) of the rebuilt deployment, with engine `settings` replaced
    (declared names: kv_memory_bytes, avail_mem_before_load_bytes, …)."""
    planned = rebuilt.deployment
    if settings:
        fixed = {name: max(value, 0) for name, value in settings.items()}
        planned = replace(planned, settings=replace(planned.settings, **fixed))
    return dump(capacity(planned, rebuilt.sku, context=rebuilt.context_tokens))


def pool_records(
    reading: Reading, rebuilt: Rebuilt, reader: ModuleType, predicted: dict[str, Any]
) -> list[list[dict]] | None:
    """Per logged budget (each rank's, when they differ), capacity rows at the low end, middle
    and high end of its rounding; None when the log prints no budget (the first of the
    reader's BUDGETS it prints)."""
    key = next((k for k in reader.BUDGETS if k in reading.figures), None)
    if key is None:
        return None
    groups = []
    for logged in reading.ranks.get(key, [reading.figures[key]]):
        ends = (logged.value - logged.step / 2, logged.value, logged.value + logged.step / 2)
        budgets = [reader.kv_memory_bytes(key, value, predicted) for value in ends]
        groups.append([row_for(rebuilt, kv_memory_bytes=int(budget)) for budget in budgets])
    return groups


def _within(logged: Logged, values: list[float | None]) -> bool:
    found = [v for v in values if v is not None]
    if not found:
        return False
    low, high = min(found) - logged.step / 2, max(found) + logged.step / 2
    return low - 1e-9 <= logged.value <= high + 1e-9


def _row(logged: Logged, compared: Compared, groups: list[list[dict]], basis: str) -> ExplainRow:
    """The row of `logged`: kvplan's figure from the group (a budget's rounding ends) it lies
    within, else from the first."""
    values = [[value_at(r, compared.path) for r in group] for group in groups]
    chosen = next((v for v in values if _within(logged, v)), values[0])
    shown = chosen[len(chosen) // 2]
    matches = shown is not None and _within(logged, chosen)
    return row_beside(logged, compared.quantity, shown, matches, basis, _term(compared, shown))


def _term(compared: Compared, shown: float | None) -> str:
    if shown is not None:
        return compared.term
    if compared.given_as:
        return f"{compared.term}: given to the engine model as {compared.given_as}, not predicted"
    return NO_TERM


def compare(reading: Reading, rebuilt: Rebuilt, reader: ModuleType) -> list[ExplainRow]:
    """A row per logged figure the reader compares, in the reader's order."""
    predicted = [[row_for(rebuilt)]]
    pool = pool_records(reading, rebuilt, reader, predicted[0][0])
    rows = []
    for compared in reader.COMPARED:
        logged = reading.figures.get(compared.key)
        if logged is None:
            continue
        from_pool = compared.basis == POOL and pool is not None
        groups = pool if from_pool and pool is not None else predicted
        rows.append(_row(logged, compared, groups, POOL if from_pool else GPU))
        if compared.key == budget_key(reader):
            rows += _with_readings(reading, rebuilt, reader, compared)
            from_terms = logged_terms_row(
                reading, reader, predicted[0][0], logged, compared.quantity
            )
            rows += [from_terms] if from_terms is not None else []
    return name_terms(rows, reader, predicted[0][0], reading)


def _with_readings(
    reading: Reading, rebuilt: Rebuilt, reader: ModuleType, compared: Compared
) -> list[ExplainRow]:
    """The budget again, with the free-memory readings the log printed given to the engine
    model as settings (each at both ends of its rounding): [] when it printed none."""
    records = reading_records(reading, rebuilt, reader.READINGS)
    if not records:
        return []
    row = _row(reading.figures[compared.key], compared, [records], READINGS)
    return [row.model_copy(update={"quantity": f"{compared.quantity} (logged readings)"})]


def reading_records(
    reading: Reading, rebuilt: Rebuilt, settings: dict[str, str]
) -> list[dict[str, Any]]:
    """Capacity rows with each logged reading of `settings` ({figure: setting}) given, at
    every combination of the ends of their rounding; [] when none is logged."""
    logged = [
        (name, reading.figures[key]) for key, name in settings.items() if key in reading.figures
    ]
    if not logged:
        return []
    records = []
    for ends in product((-0.5, 0.5), repeat=len(logged)):
        given = {
            name: int(f.value + end * f.step) for (name, f), end in zip(logged, ends, strict=True)
        }
        records.append(row_for(rebuilt, **given))
    return records
