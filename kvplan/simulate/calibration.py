"""`--calibrate RECORD.json`: a `kvplan verify` record's measured bandwidth as the efficiency.

The record's `bandwidth.achieved_fraction_of_datasheet` is what the Triton paged-decode
kernel reached on that GPU: the fraction of datasheet bandwidth a decode step's reads run at,
in place of the step model's fitted bandwidth fractions (every one of them: GEMM weight reads,
attention, elementwise).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import kvplan.limits as limits
from kvplan.errors import KvplanError
from kvplan.files import parse_json, read_text
from kvplan.perf.efficiency import Efficiency

FIELD = "bandwidth.achieved_fraction_of_datasheet"


def calibrated_efficiency(
    path: Path, efficiency: Efficiency, sku_name: str
) -> tuple[Efficiency, list[str]]:
    """`efficiency` with the record's measured bandwidth fraction, and notes for the user.

    A record without the figure (a CPU run, or an older record) leaves `efficiency` as it is
    and says so in one note.

    Raises:
        KvplanError: the file cannot be read or is not a JSON object.
    """
    text = read_text(path, limits.JSON_FILE_BYTES, "--calibrate")
    record = parse_json(text, f"--calibrate {path}")
    if not isinstance(record, dict):
        raise KvplanError(f"--calibrate {path}: not a kvplan verify record (a JSON object)")
    bandwidth = record.get("bandwidth")
    fraction = (
        bandwidth.get("achieved_fraction_of_datasheet") if isinstance(bandwidth, dict) else None
    )
    if not isinstance(fraction, (int, float)) or not math.isfinite(fraction) or fraction <= 0:
        return efficiency, [
            f"--calibrate {path.name}: no measured bandwidth ({FIELD}); "
            + (
                f"the bandwidth efficiency {efficiency.bandwidth_fraction:g} is used"
                if efficiency.bandwidth_fraction is not None
                else "the step model's fitted bandwidth fractions are used"
            )
        ]
    notes = [
        f"bandwidth efficiency {min(fraction, 1.0):.3f} measured by kvplan verify ({path.name})"
    ]
    inputs = record.get("inputs")
    measured_on = inputs.get("sku") if isinstance(inputs, dict) else None
    if measured_on and measured_on != sku_name:
        notes.append(f"--calibrate: the record was measured on {measured_on}, not {sku_name}")
    if fraction > 1:
        notes.append(f"--calibrate: measured fraction {fraction:.3f} above 1 taken as 1")
    return replace(efficiency, bandwidth_fraction=min(float(fraction), 1.0)), notes
