"""vLLM's MLA support by release: what a DeepSeek layer caches, and which KV dtypes it takes.

MLA (one latent per token) arrived in vLLM 0.7.1 (`model_executor/models/deepseek_v2.py`
DeepseekV2MLAAttention). Before, DeepSeek ran as plain attention with a K and a V row per
head: 256 wide through 0.6.6.post1 (q, k, v padded to 256), qk_head_dim (192) in 0.7.0 (PyPI
wheels of 0.6.4.post1, 0.6.6.post1, 0.7.0 and 0.7.1).
"""

from __future__ import annotations

import pytest

from kvplan.engine import ENGINES, EngineSettings
from kvplan.engine.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.plan.capacity import Capacity
from kvplan.units import parse_bytes

VLLM = ENGINES["vllm"]


def _capacity(catalog, version: str, context: int = 8192) -> Capacity:
    settings = EngineSettings(version=version, kv_memory_bytes=parse_bytes("35.42GiB"))
    deployment = Deployment(
        catalog.model("deepseek-v2-lite"), VLLM, kv_dtype="fp16", settings=settings
    )
    return Capacity(deployment, catalog.sku("h100-sxm"), 1, context)


def test_pre_mla_log_of_pr_10927(catalog):
    # vllm-project/vllm PR #10927 ("[WIP] Deepseek V2 MLA", 2024-12-05), the "Before" run on
    # main (0.6.4.post1-era) of DeepSeek-V2-Lite-Chat, fp16, H100, --max-model-len 8192:
    #   "Memory profiling results: ... kv_cache_size=35.42GiB, gpu_memory_utilization=0.90."
    #   "# GPU blocks: 5373, # CPU blocks: 606"
    #   "Maximum concurrency for 8192 tokens per request: 10.49x"
    # 27 layers x 16 heads x (256 + 256) x 2 B = 442,368 B a token, 16-token blocks:
    # int(35.42 GiB / 7,077,888 B) = 5,373; 5,373 x 16 / 8,192 = 10.49.
    capacity = _capacity(catalog, "0.6.4")
    assert capacity.pool.num_blocks == 5373
    assert capacity.layout.tokens_per_block == 16
    assert any(line.endswith("per request: 10.49x") for line in capacity.log_lines())


@pytest.mark.parametrize(
    ("version", "token_bytes"),
    [
        ("0.6.6", 27 * 16 * 2 * 256 * 2),  # padded to 256
        ("0.7.0", 27 * 16 * 2 * 192 * 2),  # qk_head_dim 128 + 64, v padded to it
        ("0.7.1", 27 * (512 + 64) * 2),  # the latent: kv_lora_rank + qk_rope_head_dim
    ],
)
def test_what_a_token_costs_by_release(catalog, version, token_bytes):
    capacity = _capacity(catalog, version)
    assert capacity.layout.kv_bytes_per_token == token_bytes


def _fp8_capacity(catalog, version: str, sku: str) -> Capacity:
    deployment = Deployment(
        catalog.model("deepseek-v2-lite"),
        VLLM,
        kv_dtype="fp8_e4m3",
        settings=EngineSettings(version=version),
    )
    return Capacity(deployment, catalog.sku(sku), 1, 8192)


@pytest.mark.parametrize(
    ("version", "sku", "backend"),
    [
        # vllm#18888: 0.8.5 on an H100 raises "FlashMLA V1 with FP8 KV cache not yet
        # supported" (v1/attention/backends/mla/flashmla.py of 0.8.5 - 0.10.1).
        ("0.8.5", "h100-sxm", "FlashMLA"),
        ("0.10.1", "h100-sxm", "FlashMLA"),
        # 0.11 has no V0 to fall back to: Triton MLA (GPUs other than Hopper and Blackwell)
        # raises "TritonMLA V1 with FP8 KV cache not yet supported" (triton_mla.py).
        ("0.11.0", "a100-80gb", "TritonMLA"),
    ],
)
def test_fp8_kv_with_mla_is_refused(catalog, version, sku, backend):
    with pytest.raises(KvplanError, match=f"{backend} V1 with FP8 KV cache not yet supported"):
        _ = _fp8_capacity(catalog, version, sku).budget


@pytest.mark.parametrize(
    ("version", "sku"),
    [
        ("0.11.0", "h100-sxm"),  # FlashMLA takes fp8 in 0.11 (no refusal in flashmla.py)
        ("0.8.5", "a100-80gb"),  # no FA3 fp8 off Hopper: V0, which accepts it
        ("0.7.3", "h100-sxm"),  # V0 default
    ],
)
def test_fp8_kv_with_mla_is_accepted(catalog, version, sku):
    assert _fp8_capacity(catalog, version, sku).budget.kv_bytes > 0
