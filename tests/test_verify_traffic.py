"""Bytes a decode step moves (unique vs issued by the kernel) and the shortfall's named term.

Head counts from the public configs: Falcon-7B 71 query heads on one KV head (multi_query,
head_dim 64); DeepSeek-V3 128 query heads on one 512 + 64 latent; Llama-3.1-8B 32 on 8.
"""

from __future__ import annotations

import pytest

from kvplan.kernels.splits import heads_per_program
from kvplan.validate.plan import build_plan
from kvplan.validate.shortfall import explain_shortfall
from kvplan.validate.traffic import step_traffic


@pytest.mark.parametrize(
    ("group_size", "head_dim_k", "block_h"),
    [
        (4, 128, 16),  # Llama-3.1-8B: 32 / 8 = 4 heads, padded to the 16 rows tl.dot needs
        (71, 64, 64),  # Falcon-7B: next power of two 128, capped at 64
        (128, 576, 16),  # DeepSeek-V3 TP 1: a 576-wide latent caps the block at 16 heads
        (16, 576, 16),  # DeepSeek-V2-Lite: 16 heads, one block
    ],
)
def test_heads_per_program(group_size, head_dim_k, block_h):
    assert heads_per_program(group_size, head_dim_k) == block_h


def test_falcon_7b_reads_its_kv_twice(catalog):
    plan = build_plan(catalog.model("falcon-7b"), lengths=[100, 60], layers=1)
    traffic = step_traffic(plan, num_splits=1)
    # One KV head of 64, bf16: 2 x 64 x 2 B = 256 B per token; 160 tokens = 40_960 B unique.
    # ⌈71 / 64⌉ = 2 programs per KV head each read it all: 81_920 B issued.
    assert traffic.kv_unique_bytes == 160 * 256 == 40_960
    assert traffic.head_blocks == 2 and traffic.kv_issued_bytes == 81_920
    assert traffic.programs == 2 * 1 * 2 * 1  # B x Hkv x head blocks x S


def test_deepseek_v3_latent_is_read_eight_times(catalog):
    plan = build_plan(catalog.model("deepseek-v3"), lengths=[64], layers=1)
    traffic = step_traffic(plan, num_splits=2)
    # The latent: (512 + 64) x 2 B = 1_152 B per token, 64 tokens = 73_728 B once; 128 heads
    # in blocks of 16 read it ⌈128 / 16⌉ = 8 times.
    assert traffic.kv_unique_bytes == 73_728
    assert traffic.reread_factor == 8 and traffic.kv_issued_bytes == 8 * 73_728
    # q: 128 heads x 576 x 2 B = 147_456 B, loaded by each of the 2 splits.
    assert traffic.q_unique_bytes == 147_456 and traffic.q_issued_bytes == 2 * 147_456
    # Partials: 2 (write, read) x 128 heads x 2 splits x (512 + 1) x 4 B.
    assert traffic.partial_bytes == 2 * 128 * 2 * 513 * 4
    assert traffic.issued_bytes > traffic.unique_bytes


def test_llama_reads_its_kv_once(catalog):
    plan = build_plan(catalog.model("llama-3.1-8b"), lengths=[8192] * 32, layers=32)
    traffic = step_traffic(plan, num_splits=1)
    assert traffic.reread_factor == 1
    # Only the block table is read per KV head: 32 x 512 entries x 4 B + 32 seq_lens x 4 B
    # = 65_664 B, by each of the 8 KV heads' programs.
    assert traffic.table_issued_bytes == 8 * 65_664
    assert traffic.issued_bytes - traffic.unique_bytes == 7 * 65_664


def test_shortfall_names_the_rereads_for_mla(catalog):
    plan = build_plan(catalog.model("deepseek-v3"), lengths=[4096] * 32, layers=4)
    traffic = step_traffic(plan, num_splits=1)
    copy = 4.3e12
    ideal_s = 4 * traffic.unique_bytes / copy
    # As if the kernel fetched all 8 re-reads from DRAM: the step takes the issued bytes'
    # time; the re-reads (7 x the KV) dwarf the rest.
    shortfall = explain_shortfall(
        traffic, layers=4, step_s=4 * traffic.issued_bytes / copy, copy_bytes_per_s=copy,
        sm_count=132,
    )  # fmt: skip
    assert shortfall.responsible == "kv_rereads"
    assert shortfall.terms_s["kv_rereads"] == pytest.approx(4 * 7 * traffic.kv_unique_bytes / copy)
    assert shortfall.terms_s["latency"] == pytest.approx(0, abs=1e-9)
    assert shortfall.ideal_s == pytest.approx(ideal_s)
    assert "8×" in shortfall.statement


def test_shortfall_names_occupancy_for_a_tiny_grid(catalog):
    # One sequence, 8 KV heads, no split: 8 programs for 132 SMs, each streaming alone.
    plan = build_plan(catalog.model("llama-3.1-8b"), lengths=[32768], layers=1)
    traffic = step_traffic(plan, num_splits=1)
    ideal_s = traffic.unique_bytes / 4.3e12
    shortfall = explain_shortfall(
        traffic, layers=1, step_s=5 * ideal_s, copy_bytes_per_s=4.3e12, sm_count=132
    )
    assert shortfall.responsible == "occupancy"
    assert "8 stage-1 programs for 132 SMs" in shortfall.statement
    # With a full grid the same gap is latency, not occupancy.
    busy = step_traffic(build_plan(catalog.model("llama-3.1-8b"), lengths=[1024] * 64, layers=1), 1)
    assert busy.programs == 512
    late = explain_shortfall(
        busy, layers=1, step_s=5 * busy.unique_bytes / 4.3e12, copy_bytes_per_s=4.3e12,
        sm_count=132,
    )  # fmt: skip
    assert late.responsible == "latency"
