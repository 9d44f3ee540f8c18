"""Why a timed step missed the bandwidth bar: each term's cost at the measured copy bandwidth.

The ideal step moves its unique bytes at the copy bandwidth measured in the same run. Every
extra byte the kernel issues (KV re-read by sibling head blocks, q reloaded by each split,
split-K partials written and read back) costs at most its size over that bandwidth; what the
bytes cannot explain is latency: too few programs to keep the memory system busy, or the
gaps between launches. The term with the largest cost is named responsible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvplan.validate.traffic import StepTraffic

# Two resident programs per SM is what the split choice aims for (kvplan.kernels.splits).
PROGRAMS_PER_SM_TARGET = 2


@dataclass(frozen=True)
class Shortfall:
    """Seconds per verified step: measured, ideal, and the cost of each term beyond ideal."""

    measured_s: float
    ideal_s: float
    """unique bytes / copy bandwidth."""
    terms_s: dict[str, float]
    """kv_rereads, q_reloads, split_partials, table_rereads (upper bounds at copy bandwidth)
    and latency (what the bytes leave unexplained; ≥ 0)."""
    responsible: str
    statement: str

    def as_record(self) -> dict[str, Any]:
        return {
            "measured_s": self.measured_s,
            "ideal_s": self.ideal_s,
            "gap_s": self.measured_s - self.ideal_s,
            "terms_s": self.terms_s,
            "responsible": self.responsible,
            "statement": self.statement,
        }


def explain_shortfall(
    traffic: StepTraffic,
    *,
    layers: int,
    step_s: float,
    copy_bytes_per_s: float,
    sm_count: int | None,
) -> Shortfall:
    """Split the gap between a measured step and the copy-speed ideal into named terms.

    Args:
        traffic: one layer's bytes, unique and issued.
        layers: layers in the timed step (each reads its own pool).
        step_s: the median step time, in seconds.
        copy_bytes_per_s: the device-to-device copy measured in the same run.
        sm_count: the device's SMs (None: occupancy not judged).
    """
    byte_terms = {
        "kv_rereads": traffic.kv_issued_bytes - traffic.kv_unique_bytes,
        "q_reloads": traffic.q_issued_bytes - traffic.q_unique_bytes,
        "split_partials": traffic.partial_bytes,
        "table_rereads": traffic.table_issued_bytes - traffic.table_unique_bytes,
    }
    terms_s = {name: layers * value / copy_bytes_per_s for name, value in byte_terms.items()}
    ideal_s = layers * traffic.unique_bytes / copy_bytes_per_s
    terms_s["latency"] = max(0.0, step_s - ideal_s - sum(terms_s.values()))
    responsible = max(terms_s, key=lambda name: terms_s[name])
    gap_s = step_s - ideal_s
    if responsible == "latency":
        busy = sm_count is None or traffic.programs >= PROGRAMS_PER_SM_TARGET * sm_count
        cause = (
            "latency with enough programs (launch gaps, tile loop overhead)"
            if busy
            else f"occupancy: {traffic.programs} stage-1 programs for {sm_count} SMs "
            f"(the split rule aims for {PROGRAMS_PER_SM_TARGET} per SM)"
        )
        responsible = "latency" if busy else "occupancy"
    else:
        cause = {
            "kv_rereads": f"KV read {traffic.head_blocks}× (⌈G / BLOCK_H⌉ head blocks per KV "
            "head; an upper bound, sibling re-reads mostly hit L2)",
            "q_reloads": f"q loaded by each of {traffic.num_splits} splits",
            "split_partials": f"split-K partials of {traffic.num_splits} splits written and "
            "read back",
            "table_rereads": "block-table entries read by every KV head's programs",
        }[responsible]
    statement = (
        f"the step took {step_s * 1e3:.3f} ms against {ideal_s * 1e3:.3f} ms for its unique "
        f"bytes at copy bandwidth (gap {gap_s * 1e3:.3f} ms); largest term: {cause}, "
        f"{terms_s[max(terms_s, key=lambda n: terms_s[n])] * 1e3:.3f} ms"
    )
    return Shortfall(step_s, ideal_s, terms_s, responsible, statement)
