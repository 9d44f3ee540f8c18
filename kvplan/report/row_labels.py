"""How a report row names its layout in a chart, a plot or a block of log lines."""

from __future__ import annotations

from kvplan.api.results import CapacityRow


def parallel_label(row: CapacityRow) -> str:
    """'tp8', 'tp2×pp2', 'tp1 dp8+ep': a row's layout in a chart's or a log block's label."""
    text = f"tp{row.tp}" + (f"×pp{row.pp}" if row.pp > 1 else "")
    return text + (f" dp{row.dp}" + ("+ep" if row.ep else "") if row.dp > 1 else "")
