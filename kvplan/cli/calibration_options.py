"""`--calibration FILE`: a `kvplan verify --profile` file, as report, simulate, pools and
recommend take it, and how it differs from `--calibrate` and `--step-times`."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

import typer

from kvplan.cli.options import file_path

CALIBRATION_HELP = (
    "a `kvplan verify --profile` calibration file (JSON): the GEMM, decode-attention and "
    "all-reduce efficiencies measured on your GPU replace the speed model's shipped constants "
    "for the SKU it was measured on (other SKUs keep them). --calibrate takes one bandwidth "
    "figure from a plain verify record instead; --step-times replaces the model by measured "
    "whole steps"
)
CalibrationOpt = Annotated[
    Path | None,
    typer.Option("--calibration", help=CALIBRATION_HELP, show_default=False, parser=file_path),
]


@lru_cache(maxsize=8)  # pools and recommend ask once per SKU; the file is read once
def read(path: Path) -> Any:
    """The calibration at `path` (kvplan.perf.calibration.Calibration), checked."""
    from kvplan.perf.calibration import read_calibration

    return read_calibration(path)


def calibrated_efficiency(path: Path | None, sku: Any, default: Any) -> tuple[Any, list[str]]:
    """(efficiency for `sku`, notes): `default` when no file is given."""
    if path is None:
        return default, []
    from kvplan.perf.calibration_map import calibrated_for

    return calibrated_for(read(path), sku, default)


def calibrated_report(
    path: Path | None, skus: list[Any], default: Any, rows_of: Callable[[list[Any], Any], list]
) -> list:
    """`rows_of(skus, efficiency)` for a report, the calibrated SKU at its own efficiency.

    The rows keep the order one call over every SKU gives (model, then SKU, then tp); the
    calibrated SKU's rows carry the calibration's notes; a report without that SKU warns.
    """
    if path is None:
        return rows_of(skus, default)
    from kvplan.cli.common import warn

    calibration = read(path)
    mine = [s for s in skus if s.name == calibration.sku]
    others = [s for s in skus if s.name != calibration.sku]
    if not mine or not calibration.meaningful:
        # Not used at all: one warning line, not a note on every row.
        _, notes = calibrated_efficiency(path, skus[0], default)
        for note in notes:
            warn(note)
        return rows_of(skus, default)
    rows = rows_of(others, default) if others else []
    efficiency, notes = calibrated_efficiency(path, mine[0], default)
    for note in notes:  # the table shows no row notes; JSON carries them on each row
        warn(f"{mine[0].name} rows: {note}")
    rows += [
        row.model_copy(update={"notes": [*row.notes, *notes]}) if hasattr(row, "notes") else row
        for row in rows_of(mine, efficiency)
    ]
    order = {s.name: i for i, s in enumerate(skus)}
    models: dict[str, int] = {}
    for row in rows:
        models.setdefault(row.model, len(models))
    return sorted(rows, key=lambda r: (models[r.model], order[r.sku]))
