"""vLLM's hybrid KV-cache manager with Llama 4's chunked local attention, by release.

0.11.0's config turns the manager off for chunked local attention (one 48-layer group);
the vLLM 0.19.0 Llama-4-Scout log in tests/golden/vllm_memory (TP 4, "kv cache memory in use
16.75 GiB", num_gpu_blocks 91,495) holds 4 groups of 12 layers: a block is 12 layers x 2 KV
heads x 128 x 2 (K, V) x 2 B x 16 tokens = 196,608 B, so 16.75 GiB +/- 0.005 buys
91,450 - 91,504 blocks (one 48-layer group: 22,862 - 22,876).
"""

from __future__ import annotations

from kvplan.engine import ENGINES, EngineSettings
from kvplan.engine.deployment import Deployment
from kvplan.engine.vllm import uses_hybrid_allocator

VLLM = ENGINES["vllm"]
GIB = 1 << 30


def _deployment(catalog, version: str, budget: int = GIB) -> Deployment:
    settings = EngineSettings(version=version, kv_memory_bytes=budget)
    return Deployment(
        catalog.model("llama-4-scout"), VLLM, kv_dtype="bf16", tp=4, settings=settings
    )


def test_chunked_local_attention_keeps_the_hybrid_manager_from_0_19(catalog):
    assert not uses_hybrid_allocator(_deployment(catalog, "0.11.0"))
    assert uses_hybrid_allocator(_deployment(catalog, "0.19.0"))


def test_scout_blocks_from_the_logged_budget_are_four_groups_of_twelve(catalog):
    sku = catalog.sku("h100-sxm")
    budget = int(16.75 * GIB)
    layout = VLLM.layout(_deployment(catalog, "0.19.0", budget), sku)
    assert {stage.bytes_per_block for stage in layout.stages} == {196_608}
    assert budget // 196_608 == 91_477  # within the log's rounding of 91,495
    old = VLLM.layout(_deployment(catalog, "0.11.0", budget), sku)
    assert {stage.bytes_per_block for stage in old.stages} == {4 * 196_608}
