"""docs/verify.md's worked --capacity budget is the planner's: the page cannot go stale.

The page writes the budget out term by term; the terms must add up (checked here by
hand-free arithmetic on the page's own numbers) and equal what `kvplan.report` plans for
Llama-3.1-8B on an H200, and the block counts must be the budget over the page size.
"""

from __future__ import annotations

import re
from pathlib import Path

import kvplan

PAGE = Path(__file__).resolve().parents[1] / "docs" / "verify.md"
# "⌊149,860,384,768 × 0.9⌋ − W − A − N = K B,\nB1 blocks of 2 MiB in bf16, B2 of 1 MiB in fp8"
BUDGET = re.compile(
    r"⌊([\d,]+) × ([\d.]+)⌋ − ([\d,]+) − ([\d,]+) − ([\d,]+) = ([\d,]+) B,\s*"
    r"([\d,]+) blocks of 2 MiB in bf16, ([\d,]+) of 1 MiB in fp8"
)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def test_the_worked_capacity_budget_is_the_planners():
    match = BUDGET.search(PAGE.read_text())
    assert match, "the worked budget is missing from docs/verify.md"
    total, weights, activation, non_torch, kv, bf16_blocks, fp8_blocks = (
        _int(match[i]) for i in (1, 3, 4, 5, 6, 7, 8)
    )
    utilization = float(match[2])
    assert int(total * utilization) - weights - activation - non_torch == kv
    # Llama-3.1-8B: a 16-token block of K and V over one layer is 2 x 16 x 8 x 128 x 2 B =
    # 64 KiB in bf16, 32 layers: 2 MiB a block (1 MiB in fp8).
    assert bf16_blocks == kv // 2**21 and fp8_blocks == kv // 2**20
    bf16, fp8 = (
        kvplan.report("llama-3.1-8b", skus="h200", tp=1, kv_dtype=dtype)[0]
        for dtype in ("bf16", "fp8")
    )
    assert (bf16.memory_bytes, bf16.weights_bytes_per_gpu) == (total, weights)
    assert bf16.kv_budget_bytes_per_gpu == kv and (bf16.kv_blocks, fp8.kv_blocks) == (
        bf16_blocks,
        fp8_blocks,
    )
