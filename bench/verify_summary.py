"""One Markdown table from the verify records of a GPU run (bench/verify_gpu.sh).

Per record: memory (planned bytes, and the allocator's and driver's measured bytes with their
difference from the plan), blocks (predicted vs the allocator's; for --capacity the planner's
count vs the largest that allocated), bandwidth (unique and issued, against the copy) and the
verdicts. The decode-bench CSVs add the kernel's bar at 32 × 8k bf16.

Usage:
    python bench/verify_summary.py docs/examples
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

MIB = 2**20
TARGET = ("32", "8192", "bf16")
TARGET_FRACTION_OF_COPY = 0.85
TERMS = ("requested", "allocated", "reserved", "driver")


def _mib(value: int | None) -> str:
    return "—" if value is None else f"{value / MIB:,.1f}"


def _delta_mib(value: int | None, base: int) -> str:
    return "—" if value is None else f"{(value - base) / MIB:+,.1f}"


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value / 1e9:,.0f}"


def _row(name: str, record: dict[str, Any]) -> str:
    memory, bandwidth = record["memory"], record.get("bandwidth") or {}
    device = memory.get("device") or {}
    terms = device.get("terms", {})
    planned = memory.get("predicted_pool_bytes", 0)

    def measured(term: str) -> int | None:
        return terms.get(term, {}).get("measured_bytes")

    capacity = record.get("capacity")
    if capacity:
        blocks = (
            f"{capacity['predicted_blocks']:,} → {capacity['largest_blocks_within_ceiling']:,} "
            f"(terms {capacity['difference_explained_blocks']:+,.1f})"
            if capacity["largest_blocks_within_ceiling"] is not None
            else f"{capacity['predicted_blocks']:,} → —"
        )
    else:
        blocks = (
            f"{memory.get('predicted_blocks_per_layer')} / "
            f"{memory.get('allocator_blocks_per_layer')}"
        )
    copy = bandwidth.get("copy_bytes_per_s")
    fraction = bandwidth.get("achieved_fraction_of_copy")
    verdicts = ", ".join(f"{k} {v}" for k, v in record["verdict"].items())
    where = record["environment"].get("gpu_name") or "CPU"
    cells = [
        f"{name} ({where})",
        _mib(planned),
        *(_delta_mib(measured(term), planned) for term in TERMS),
        blocks,
        _rate(bandwidth.get("achieved_bytes_per_s")),
        _rate(bandwidth.get("achieved_issued_bytes_per_s")),
        _rate(copy),
        "—" if fraction is None else f"{fraction:.1%}",
        verdicts,
    ]
    return "| " + " | ".join(cells) + " |"


def _bench_line(folder: Path) -> str:
    rows = []
    for path in sorted(folder.glob("decode-bench*.csv")):
        with path.open() as file:
            rows += [
                row
                for row in csv.DictReader(file)
                if row["kernel"] == "triton"
                and (row["batch"], row["context_tokens"], row["kv_dtype"]) == TARGET
            ]
    best = max(rows, key=lambda row: float(row["fraction_of_copy"]), default=None)
    if best is None:
        return "decode bench: the 32 x 8192 bf16 case was not run"
    fraction = float(best["fraction_of_copy"])
    verdict = "meets" if fraction >= TARGET_FRACTION_OF_COPY else "misses"
    return (
        f"decode bench, 32 x 8192 bf16: best {fraction:.1%} of copy at warps "
        f"{best['num_warps']}, stages {best['num_stages']}, tile {best['tokens_per_tile']}, "
        f"S {best['num_splits']} ({float(best['useful_bytes_per_s']) / 1e9:,.0f} GB/s): "
        f"{verdict} the {TARGET_FRACTION_OF_COPY:.0%} bar"
    )


def main(argv: list[str]) -> int:
    folder = Path(argv[1] if len(argv) > 1 else "docs/examples")
    print(
        "| run | planned MiB | requested Δ MiB | allocated Δ MiB | reserved Δ MiB | driver Δ MiB "
        "| blocks predicted / measured | unique GB/s | issued GB/s | copy GB/s | of copy "
        "| verdict |"
    )
    print("|" + "---|" * 12)
    for path in sorted(folder.glob("verify-*.json")):
        record = json.loads(path.read_text())
        print(_row(path.stem.removeprefix("verify-"), record))
    print()
    print(_bench_line(folder))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
