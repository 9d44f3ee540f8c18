"""Request traces: CSV or JSONL rows of arrival time, prompt tokens and output tokens.

Column names are kvplan's own (`arrival_s`, `prompt_tokens`, `output_tokens`) or those of the
public Azure LLM inference traces as published (`TIMESTAMP`, `ContextTokens`,
`GeneratedTokens`; github.com/Azure/AzurePublicDataset, AzureLLMInferenceDataset2023/2024),
whose TIMESTAMP is a date and time such as `2023-11-16 18:15:46.6805900`. Arrival times are
taken relative to the earliest row. Every row is checked: a bad one is an error naming the
file, the line and the field, never a row silently skipped.
"""

from __future__ import annotations

import csv
import itertools
import math
from datetime import datetime
from pathlib import Path
from typing import Any

import kvplan.limits as limits
from kvplan.errors import KvplanError
from kvplan.files import parse_json, read_text
from kvplan.simulate.workload import MAX_REQUESTS, RequestSpec, Workload

# field -> the column names accepted for it
COLUMNS = {
    "arrival_s": ("arrival_s", "TIMESTAMP", "timestamp"),
    "prompt_tokens": ("prompt_tokens", "ContextTokens"),
    "output_tokens": ("output_tokens", "GeneratedTokens"),
}
_FIELD_OF = {name: field for field, names in COLUMNS.items() for name in names}


def read_trace(
    path: Path, *, requests: int | None = None, duration_s: float | None = None
) -> Workload:
    """The requests of a CSV or JSONL trace (by suffix: .jsonl/.json lines, else CSV).

    `requests` keeps the first N rows by arrival, `duration_s` the rows arriving before it.

    Raises:
        KvplanError: unreadable file, no rows, an unknown or missing column, or a bad value.
    """
    text = read_text(path, limits.TABLE_FILE_BYTES, "--trace")
    rows = _jsonl_rows(path, text) if path.suffix in (".jsonl", ".json") else _csv_rows(path, text)
    parsed = [_request(path, line, row) for line, row in rows]
    if not parsed:
        raise KvplanError(f"--trace {path}: no requests in the file")
    notes = []
    if any(a[0] > b[0] for a, b in itertools.pairwise(parsed)):
        notes.append("trace rows were not in arrival order: sorted by arrival time")
        parsed.sort(key=lambda item: item[0])
    start = parsed[0][0]
    if parsed[-1][0] - start > limits.DURATION.maximum:  # a clock kvplan's averages can hold
        raise KvplanError(
            f"--trace {path}: arrivals span {parsed[-1][0] - start:g} s, more than "
            f"{limits.DURATION.maximum:,} s ({limits.DURATION.why})"
        )
    made = [RequestSpec(arrival - start, prompt, output) for arrival, prompt, output in parsed]
    if duration_s is not None:
        made = [r for r in made if r.arrival_s < duration_s]
    if requests is not None:
        made = made[:requests]
    if not made:
        raise KvplanError(f"--trace {path}: no request arrives within --duration {duration_s:g} s")
    kept = f"{len(made):,} rows"
    if len(made) < len(parsed):
        kept = f"{len(made):,} of {len(parsed):,} rows"
    return Workload(tuple(made), f"trace {path.name}, {kept}", tuple(notes), kind="trace")


def _csv_rows(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    try:
        return _csv_cells(path, text)
    except csv.Error as error:  # a cell over the csv module's 128 KiB, a NUL byte
        raise KvplanError(f"--trace {path}: not CSV: {error}") from None


def _csv_cells(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if header is None:
        raise KvplanError(f"--trace {path}: empty file")
    names = [name.strip() for name in header]
    _check_columns(path, names)
    rows = []
    for line, cells in enumerate(reader, start=2):
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) != len(names):
            raise KvplanError(
                f"--trace {path}:{line}: {len(cells)} cells, the header has {len(names)}"
            )
        rows.append((line, dict(zip(names, cells, strict=True))))
        _check_count(path, len(rows))
    return rows


def _jsonl_rows(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        row = parse_json(raw, f"--trace {path}:{line}")
        if not isinstance(row, dict):
            raise KvplanError(f"--trace {path}:{line}: each line must be a JSON object")
        _check_columns(path, list(row), line)
        rows.append((line, row))
        _check_count(path, len(rows))
    return rows


def _check_count(path: Path, count: int) -> None:
    if count > MAX_REQUESTS:
        raise KvplanError(f"--trace {path}: more than {MAX_REQUESTS:,} rows")


def _check_columns(path: Path, names: list[str], line: int | None = None) -> None:
    where = f"{path}:{line}" if line else str(path)
    allowed = ", ".join(name for names_ in COLUMNS.values() for name in names_)
    for name in names:
        if name not in _FIELD_OF:
            raise KvplanError(f"--trace {where}: unknown column {name!r} (allowed: {allowed})")
    fields = [_FIELD_OF[name] for name in names]
    for field, accepted in COLUMNS.items():
        count = fields.count(field)
        if count != 1:
            problem = "missing" if count == 0 else "given twice"
            raise KvplanError(
                f"--trace {where}: column for {field} {problem} (one of: {', '.join(accepted)})"
            )


def _request(path: Path, line: int, row: dict[str, Any]) -> tuple[float, int, int]:
    values = {_FIELD_OF[name]: value for name, value in row.items()}
    arrival = _arrival(path, line, values["arrival_s"])
    prompt = _tokens(path, line, "prompt_tokens", values["prompt_tokens"])
    output = _tokens(path, line, "output_tokens", values["output_tokens"])
    return arrival, prompt, output


def _arrival(path: Path, line: int, value: Any) -> float:
    if isinstance(value, str):
        text = value.strip()
        try:  # float() also reads "٣" and "１": ASCII only, as every number kvplan reads
            seconds = float(text if text.isascii() else "not ASCII")
        except ValueError:
            try:
                seconds = datetime.fromisoformat(text).timestamp()
            except ValueError:
                raise KvplanError(
                    f"--trace {path}:{line}: arrival {value!r} is neither seconds nor a date "
                    "and time (2023-11-16 18:15:46.68)"
                ) from None
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise KvplanError(f"--trace {path}:{line}: arrival {value!r} is not a time")
    if not math.isfinite(seconds):
        raise KvplanError(f"--trace {path}:{line}: arrival {value!r} is not a finite time")
    return seconds


def _tokens(path: Path, line: int, field: str, value: Any) -> int:
    text = value.strip() if isinstance(value, str) else value
    if isinstance(text, str) and text.isascii() and text.isdigit():
        text = int(text) if len(text) <= limits.NUMBER_CHARS else limits.CONTEXT.maximum + 1
    if not isinstance(text, int) or isinstance(text, bool) or text < 0:
        raise KvplanError(f"--trace {path}:{line}: {field} {value!r} is not a token count")
    if text == 0:
        what = "generate" if field == "output_tokens" else "send"
        raise KvplanError(
            f"--trace {path}:{line}: {field} is 0; a request must {what} at least one token"
        )
    return limits.CONTEXT.check(text, f"--trace {path}:{line}: {field}")
