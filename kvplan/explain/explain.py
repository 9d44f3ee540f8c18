"""Read a log, rebuild its deployment, compare: the ExplainReport `kvplan explain` renders."""

from __future__ import annotations

from types import ModuleType

from kvplan.catalog import Catalog
from kvplan.errors import KvplanError, SettingError
from kvplan.explain.compare import compare
from kvplan.explain.pool_terms import cannot_know
from kvplan.explain.readers import read_lines, reader_for
from kvplan.explain.reading import Reading
from kvplan.explain.rebuild import Given, Rebuilt, rebuild
from kvplan.explain.result import ExplainReport
from kvplan.explain.terms import NO_TERM

VERSION_SETTINGS = ("version", "vllm_version")
# Facts readers keep for themselves (wording that dates a log, a table's header).
INTERNAL_FACTS = (
    "era",
    "era_since",
    "prefix",
    "ranks_differ",
    "table_columns",
    "printed_dtype",
    "release_since",
    "release_until",
)


def read_log(lines: list[str], engine: str | None = None) -> tuple[Reading, ModuleType]:
    """The reading of `lines` and the reader that made it.

    Raises:
        KvplanError: no engine recognised, or no line of it read.
    """
    reader = reader_for(lines, engine)
    reading = read_lines(lines, reader)
    if not reading.figures:
        raise KvplanError(
            f"the log has no {reader.ENGINE} line with a number kvplan reads (memory, blocks, "
            "tokens); give the startup part of the log"
        )
    return reading, reader


def _versions(reading: Reading, given: Given, reader: ModuleType) -> list[tuple[str | None, str]]:
    """The releases to try, best first: given, logged, dated by wording, the default."""
    tries: list[tuple[str | None, str]] = []
    if given.version is not None:
        tries.append((given.version, "given (--engine-version)"))
    if reading.version is not None:
        tries.append((reading.version, reading.version_basis))
    worded = reader.release_by_wording(reading)
    if worded is not None:
        tries.append(worded)
    tries.append((None, f"not in the log: kvplan's default {reader.ENGINE} release"))
    return tries


def _rebuilt(reading: Reading, given: Given, reader: ModuleType, catalog: Catalog):
    """The deployment and comparison at the first release the engine model follows."""
    tries = _versions(reading, given, reader)
    notes = []
    for index, version in enumerate(tries):
        try:
            built = rebuild(reading, given, catalog, version)
            return built, compare(reading, built, reader), notes
        except SettingError as error:
            last = index == len(tries) - 1
            if error.setting not in VERSION_SETTINGS or last or given.version is not None:
                raise  # a release the user gave is theirs to mend
            notes.append(f"release {version[0]!r} is not one kvplan follows: {error}")
    raise AssertionError("unreachable: the last try raises")


def explain_log(
    lines: list[str],
    given: Given | None = None,
    catalog: Catalog | None = None,
    engine: str | None = None,
    target: tuple[int, int] | None = None,
) -> ExplainReport:
    """The log `lines` read back: its facts, each number beside kvplan's, the notes; with
    `target` (tokens, requests), the smallest change that serves it.

    Raises:
        KvplanError: a log kvplan cannot place (the missing fact and its option named).
    """
    given = given or Given()
    catalog = catalog or Catalog()
    reading, reader = read_log(lines, engine)
    built, rows, notes = _rebuilt(reading, given, reader, catalog)
    report = _report(reading, built, rows, notes)
    if target is None:
        return report
    from kvplan.explain.target import answer

    return report.model_copy(
        update={"target": answer(built, target, catalog, _logged_model(reading))}
    )


def _report(reading: Reading, built: Rebuilt, rows, notes: list[str]) -> ExplainReport:
    planned = built.deployment
    unknown = [r.quantity for r in rows if r.term == NO_TERM] + cannot_know([r.term for r in rows])
    differ = sorted(reading.facts.get("ranks_differ", ()))
    if differ:  # a budget per rank: the engine model takes one for all of them
        unknown.append("a budget per rank (" + ", ".join(differ) + ")")
        notes = [
            *notes,
            "ranks print different " + ", ".join(differ) + ": kvplan's engine "
            "model takes one budget for every rank, so the largest is given",
        ]
    return ExplainReport(
        engine=reading.engine,
        version=built.version,
        version_basis=built.version_basis,
        model=planned.model.name,
        sku=built.sku.name,
        tp=planned.tp,
        pp=planned.pp,
        dp=planned.dp,
        kv_dtype=planned.kv_dtype,
        context_tokens=built.context_tokens,
        lines_read=reading.lines_read,
        facts={k: v for k, v in reading.facts.items() if k not in INTERNAL_FACTS},
        arguments=reading.arguments,
        rows=rows,
        unknown_terms=unknown,
        notes=[*notes, *built.notes],
    )


def _logged_model(reading: Reading) -> str | None:
    """The model as the log names it (a Hub id or path), for the launch line; None when the
    name is not one a command line takes."""
    name = reading.facts.get("model")
    return name if isinstance(name, str) and name.isprintable() and " " not in name else None
