"""Notes as the command line shows them: each setting a note names, named by its flag.

Below the CLI a note names a setting by its declared name in backticks (`cudagraph_bytes`),
which is what the Python API shows; the CLI prints that setting's flag (--cudagraph-memory)
in every format, as its errors do (SettingError).
"""

from __future__ import annotations

import re
from functools import cache
from typing import TypeVar, get_args

from kvplan.api.results import Result
from kvplan.engine.settings import ALIASES, BY_NAME, flag_of

R = TypeVar("R", bound=Result)
_MENTION = re.compile(r"`([a-z][a-z0-9_]*)`")


def _flagged(note: str) -> str:
    """`note` with each declared setting name in backticks replaced by its flag."""
    return _MENTION.sub(
        lambda m: flag_of(m[1]) if m[1] in BY_NAME or m[1] in ALIASES else m[0], note
    )


@cache
def _fields_with_notes(kind: type[Result]) -> tuple[str, ...]:
    """The fields of a record type that are its notes or hold records that have notes."""
    return tuple(
        name
        for name, info in kind.model_fields.items()
        if name == "notes" or any(_fields_with_notes(r) for r in _records_in(info.annotation))
    )


def _records_in(annotation: object) -> list[type[Result]]:
    """The record types an annotation names (`X`, `list[X]`, `X | None`, …)."""
    if isinstance(annotation, type) and issubclass(annotation, Result):
        return [annotation]
    return [r for arg in get_args(annotation) for r in _records_in(arg)]


def with_flags(record: R) -> R:
    """`record` (and the records inside it) with every note's settings named by their flags;
    the record itself when no note names one."""
    changes = {}
    for name in _fields_with_notes(type(record)):
        value = getattr(record, name)
        if name == "notes":
            if any("`" in note for note in value):
                changes[name] = [_flagged(note) for note in value]
        elif isinstance(value, Result):
            flagged = with_flags(value)
            if flagged is not value:
                changes[name] = flagged
        elif isinstance(value, list) and any(isinstance(v, Result) for v in value):
            items = [with_flags(v) if isinstance(v, Result) else v for v in value]
            if any(a is not b for a, b in zip(items, value, strict=True)):
                changes[name] = items
    return record.model_copy(update=changes) if changes else record
