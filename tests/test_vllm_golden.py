"""Reproduce published vLLM startup logs (tests/golden/vllm_logs/*.yaml, each with its source).

A log prints "Available KV cache memory" rounded to 0.01 GiB, so the true budget lies
within ±0.005 GiB of it. For every budget in that interval (stepping by less than one
block) we compute vLLM's numbers; the logged tokens, concurrency, blocks and length
estimate must all come out together for at least one of them. Nothing here is taken
from kvplan's own output: the expected values are the logged lines.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kvplan.engine import EngineSettings
from kvplan.engine.deployment import Deployment
from kvplan.engine.vllm import VLLM, startup
from kvplan.plan.capacity import Capacity

GOLDEN = Path(__file__).parent / "golden" / "vllm_logs"
GIB = 2**30

# case file -> (catalogue model, vLLM version whose accounting it follows, draft layers)
CASES = {
    "llama31-8b-rtx3090-v0-mml20k": ("llama-3.1-8b", "0.6.4", 0),
    "llama31-8b-rtx3090-v0-mml29k": ("llama-3.1-8b", "0.6.4", 0),
    # EAGLE's draft layer joins the target's cache group: 32 + 1 layers.
    "llama31-8b-eagle-h100-v0.9.1": ("llama-3.1-8b", "0.9.1", 1),
    # dev build between 0.9.1 and 0.9.2 ("0.1.dev7548"): V1 accounting.
    "deepseek-v2-lite-l4-tp2-pp2": ("deepseek-v2-lite", "0.9.2", 0),
    "gemma3-1b-it-v0.13-mml2k": ("gemma-3-1b", "0.13.0", 0),
    "gpt-oss-120b-a100-tp4-v0.10.1": ("gpt-oss-120b", "0.10.1", 0),
    "mistral-small-3.2-24b-h100-bs128-v0.11": ("mistral-small-24b", "0.11.0", 0),
    # Qwen3-30B-A3B geometry (48 layers, 4 KV heads, head_dim 128), fp8 KV; version ~0.10.
    "qwen3-30b-a3b-fp8kv-mml100k": ("qwen3-30b-a3b", "0.10.0", 0),
    "qwen3-30b-a3b-fp8kv-mml221k-error": ("qwen3-30b-a3b", "0.10.0", 0),
}


def _load(name: str) -> dict:
    return yaml.safe_load((GOLDEN / f"{name}.yaml").read_text())


def _outcomes(case: dict, model_name: str, version_text: str, draft: int, catalog) -> set[tuple]:
    """Every startup figure set the budgets within the logged line's rounding produce."""
    model = catalog.model(model_name)
    mml = case["max_model_len"]

    def deployment(available: int) -> Deployment:
        settings = EngineSettings(
            version=version_text,
            tokens_per_block=case.get("block_size"),
            draft_layers=draft,
            kv_memory_bytes=available,
            max_num_batched_tokens=case.get("max_num_batched_tokens") or 8192,
        )
        return Deployment(
            model,
            VLLM,
            kv_dtype="fp8" if case["kv_cache_dtype"] == "fp8" else "bf16",
            tp=case["tp"],
            pp=case.get("pp") or 1,
            settings=settings,
        )

    # A fixed KV budget ignores the GPU's memory: any SKU serves.
    sku = catalog.sku("h100-sxm")
    layout = VLLM.layout(deployment(1), sku)
    smallest_block = min(stage.bytes_per_block for stage in layout.stages)
    low = int((case["available_kv_gib"] - 0.005) * GIB)
    high = int((case["available_kv_gib"] + 0.005) * GIB)
    outcomes = set()
    for available in range(low, high + 1, max(smallest_block // 2, 1)):
        capacity = Capacity(deployment(available), sku, context_tokens=mml)
        figures = startup(capacity.budget, capacity.pool, mml)
        assert figures is not None
        outcomes.add(
            (
                figures.num_blocks,
                figures.gpu_kv_cache_tokens,
                round(figures.max_concurrency, 2),
                figures.estimated_max_model_len,
                round(figures.needed_bytes / GIB, 2),
                figures.padding_layers,
            )
        )
    return outcomes


@pytest.mark.parametrize("name", sorted(CASES))
def test_reproduces_published_vllm_log(name, catalog):
    case = _load(name)
    assert case["reproducible"] is True
    outcomes = _outcomes(case, *CASES[name], catalog)
    expected = case["expected"]

    def matches(outcome: tuple) -> bool:
        blocks, tokens, concurrency, estimate, needed_gib, padding = outcome
        checks = [
            ("num_gpu_blocks", blocks),
            ("gpu_kv_cache_tokens", tokens),
            ("max_concurrency", concurrency),
            ("estimated_max_model_len", estimate),
            ("needed_kv_gib", needed_gib),
            ("padding_layers", padding),
        ]
        return all(expected.get(key) is None or expected[key] == value for key, value in checks)

    assert any(matches(o) for o in outcomes), (expected, sorted(outcomes)[:5])


def test_covers_required_kinds():
    # The issue asks for >= 6 distinct models/GPUs incl. a sliding-window hybrid and an MoE.
    models = {CASES[n][0] for n in CASES}
    assert len(models) >= 6
    assert {"gpt-oss-120b", "gemma-3-1b"} & models
    assert {"qwen3-30b-a3b", "deepseek-v2-lite"} & models


def test_draft_layer_is_needed_for_the_eagle_log(catalog):
    # Without EAGLE's layer the same budget gives 422,944 tokens, not the logged 410,128.
    case = _load("llama31-8b-eagle-h100-v0.9.1")
    tokens = {o[1] for o in _outcomes(case, "llama-3.1-8b", "0.9.1", 0, catalog)}
    assert 410_128 not in tokens
