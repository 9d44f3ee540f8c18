"""`kvplan verify --capacity` on CPU: the planner's vLLM budget, reproduced by allocation.

A one-layer model and a made-up small SKU (docs/examples/tiny-catalog, the documented
example, loaded with --catalog) keep the proof under the CPU cap and the kernel run to a few
tiles. Every expected figure is derived by hand
below from vLLM 0.11's budget rule as kvplan documents it (docs/engines.md):
    budget = ⌊total × 0.9⌋ − weights − activation − non-torch (0.15 GiB at TP 1).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.validate.capacity import capacity_lengths, largest_true

# vLLM 0.11's budget as kvplan's engine model states it (kvplan/engine/vllm_memory.py):
# Weights (bf16, 2 B): embeddings 256 x 64 = 16_384 and an untied head 16_384; q 64 x 64 =
# 4_096, k and v 64 x (2 x 16) = 2_048 each, o 4_096; gated MLP 3 x 64 x 128 = 24_576; three
# RMSNorms of 64. 69_824 parameters = 139_648 B, and vLLM's RoPE table: 256 positions x 16
# dims x 2 B = 8_192 B, 147_840 B in all.
WEIGHTS_BYTES = 147_840
# Activation: a < 70 GiB SKU gets max_num_batched_tokens 2048, max_num_seqs 256. Sampler
# 39 B x 256 x 256 = 2_555_904; forward 2048 tokens x 2 B x (2 x 64 + (4 + 2 x 2) x 16 +
# 3 x 128 = 640) = 2_621_440: the larger.
ACTIVATION_BYTES = 2_621_440
NON_TORCH_BYTES = 161_061_274  # round(0.15 x 2^30), TP 1
CEILING_BYTES = 163_913_478  # ⌊182_126_087 x 0.9⌋
BUDGET_BYTES = CEILING_BYTES - WEIGHTS_BYTES - ACTIVATION_BYTES - NON_TORCH_BYTES  # 82_924
PAGE_BYTES = 16 * 2 * 16 * 2 * 2  # 16 tokens x 2 KV heads x 16 x (K, V) x 2 B = 2_048


CATALOG_DIR = Path(__file__).resolve().parents[1] / "docs" / "examples" / "tiny-catalog"


def test_capacity_proof_on_cpu(tmp_path):
    path = tmp_path / "capacity.json"
    result = CliRunner().invoke(
        app,
        [
            *["verify", "tiny-verify", "--sku", "tiny-gpu", "--capacity", "--context", "64"],
            *["--device", "cpu", "--repeats", "1"],
            *["--catalog", str(CATALOG_DIR), "--json", str(path)],
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    record = json.loads(path.read_text())
    capacity = record["capacity"]
    prediction = capacity["prediction"]
    assert BUDGET_BYTES == 82_924
    assert prediction["weights_bytes_per_gpu"] == WEIGHTS_BYTES
    assert prediction["activation_bytes"] == ACTIVATION_BYTES
    assert prediction["non_torch_bytes"] == NON_TORCH_BYTES
    assert prediction["kv_budget_bytes"] == BUDGET_BYTES
    assert prediction["num_blocks"] == BUDGET_BYTES // PAGE_BYTES == 40
    # 40 blocks = the null block + 39 for requests: 9 of 64 tokens (4 blocks each) and one
    # of the 3 blocks left (48 tokens); the kernel read every one of them.
    assert record["inputs"]["lengths_tokens"] == [64] * 9 + [48]
    assert record["memory"]["allocator_blocks_per_layer"] == 40
    assert record["numerics"]["all_outputs_finite"]
    assert record["verdict"] == {
        "blocks": "pass",
        "memory": "not-measured",
        "numerics": "pass",
        "bandwidth": "not-measured",
        "capacity": "pass",
    }
    # Used with the pool: the placeholders and the 40-block pool, nothing else on a CPU.
    assert capacity["placeholders"]["used_after_bytes"] == WEIGHTS_BYTES + ACTIVATION_BYTES
    assert capacity["pool"]["used_after_bytes"] == WEIGHTS_BYTES + ACTIVATION_BYTES + 40 * 2048
    assert capacity["fits"] is True
    # Largest by allocation: ⌊(163_913_478 − 2_769_280) / 2_048⌋ = 78_683 within the ceiling,
    # ⌊(182_126_087 − 2_769_280) / 2_048⌋ = 87_576 at all. The 0.15 GiB non-torch estimate,
    # absent on a CPU, is 78_643.2 blocks of the difference; the budget's floor remainder
    # (82_924 − 40 x 2_048 = 1_004 B) the rest.
    assert capacity["largest_blocks_within_ceiling"] == 78_683
    assert capacity["largest_blocks_allocatable"] == 87_576
    terms = capacity["difference_terms_bytes"]
    assert terms["non_torch_estimated_minus_measured"] == NON_TORCH_BYTES
    assert terms["planner_budget_remainder"] == 1_004
    assert abs(capacity["difference_explained_blocks"] - capacity["blocks_difference"]) < 1
    assert "CPU run" in " ".join(record["notes"])
    # On a CPU the two counts are not a planner error: the statement says what they show,
    # and names the non-torch bytes that make the gap.
    assert "on CPU this shows that the planner's pool allocates" in capacity["statement"]
    assert f"{NON_TORCH_BYTES:,} B" in capacity["statement"]
    assert "capacity pass" in result.stdout


def test_capacity_lengths_cover_every_block_but_the_null_page():
    # 40 blocks of 16 at 64 tokens: 39 usable, 4 per sequence: 9 x 64 and 3 x 16 = 48.
    assert capacity_lengths(40, 16, 64) == [64] * 9 + [48]
    # 100 tokens take ⌈100 / 16⌉ = 7 blocks: 21 usable blocks are 3 whole sequences.
    assert capacity_lengths(22, 16, 100) == [100] * 3
    with pytest.raises(Exception, match="none beyond the null block"):
        capacity_lengths(1, 16, 64)


@given(limit=st.integers(0, 100_000), start=st.integers(1, 200_000))
def test_largest_true_finds_the_boundary_by_doubling_then_bisection(limit, start):
    calls = []

    def holds(n: int) -> bool:
        calls.append(n)
        return n <= limit

    assert largest_true(holds, start) == limit
    # Doubling then bisection: about 2 log2(distance) + a few calls, never a linear scan.
    assert len(calls) <= 2 * (abs(limit - start) + 1).bit_length() + 4
