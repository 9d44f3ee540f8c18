"""The TensorRT-LLM profile prints the public startup logs in tests/golden/trtllm_logs.

TensorRT-LLM takes free_gpu_memory_fraction of the memory free after the engine loads
("available" in its log, rounded to 0.01 GiB). Where that is logged, every budget within the
rounding is tried, and the logged blocks and GiB must come out for at least one of them.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from factories import pinned_pool

from kvplan.engine import ENGINES, EngineSettings
from kvplan.engine.deployment import Deployment
from kvplan.plan.capacity import Capacity

GOLDEN = Path(__file__).parent / "golden" / "trtllm_logs"
TRTLLM = ENGINES["trtllm"]
GIB = 2**30


def _case(name: str) -> dict:
    return yaml.safe_load((GOLDEN / f"{name}.yaml").read_text())


def _lines_from_available(case: dict, model, version: str, sku) -> set[tuple[str, ...]]:
    """The lines kvplan prints given the log's "total" and "available" readings
    (--total-gpu-memory, --available-memory), for every value within their rounding."""
    inputs = case["inputs"]
    kv_dtype = "fp8_e4m3" if inputs["kv_bytes"] == 1 else "fp16"
    logged = case["expected"]["available_gib"]
    total = int(case["expected"]["total_gib"] * GIB)
    outcomes = set()
    for step in range(-50, 51):  # +-0.005 GiB in steps of 0.0001 GiB
        settings = EngineSettings(
            version=version,
            utilization=inputs["free_gpu_memory_fraction"],
            tokens_per_block=inputs["tokens_per_block"],
            total_gpu_memory_bytes=total,
            available_memory_bytes=int((logged + step / 10_000) * GIB),
        )
        deployment = Deployment(model, TRTLLM, kv_dtype=kv_dtype, settings=settings)
        capacity = Capacity(deployment, sku, 1, inputs.get("max_seq_len", 2048))
        outcomes.add(tuple(capacity.log_lines()))
    return outcomes


def test_memory_md_log(catalog):
    # 262,144 B/token (32 x 32 x 128 x 2 x 1 B); int(0.9 x 70.48 GiB / 262,144) = 259,817;
    # ceil(/64) = 4,060 blocks; 4,060 x 64 x 262,144 B = 63.44 GiB; 32 pages of 64 for 2048.
    case = _case("llama-2-7b-class-fp8kv-h100-memory-md")
    quote = case["quote"].splitlines()
    outcomes = _lines_from_available(
        case, catalog.model("llama-2-7b"), "0.12.0", catalog.sku("h100-sxm")
    )
    assert any(all(line in quote for line in lines) for lines in outcomes)


def test_qwen15_a100_40gb_blocks(catalog):
    # Qwen1.5-7B has Llama-2-7B's KV geometry (32 layers, 32 KV heads x 128, fp16: 524,288 B):
    # int(0.9 x 21.89 GiB / 524,288) = 40,347 -> ceil(/64) = 631 blocks.
    case = _case("qwen1.5-7b-a100-40gb-v0.13-issue2268")
    quote = case["quote"].splitlines()
    outcomes = _lines_from_available(
        case, catalog.model("llama-2-7b"), "0.13.0", catalog.sku("a100-40gb")
    )
    assert any(sum(line in quote for line in lines) == 2 for lines in outcomes)


def test_v08_bytes_and_tokens(catalog):
    # 0.8 logs the pool in bytes and tokens after rounding: 2,072 blocks x 64 x 524,288 B
    # = 69,524,783,104 B, 132,608 tokens. The free memory is not logged: the pool is pinned
    # with max_tokens 132,608 (exactly 2,072 blocks).
    a100 = catalog.sku("a100-80gb")
    settings = pinned_pool(a100, version="0.8.0", max_kv_tokens=132_608)
    deployment = Deployment(catalog.model("llama-2-7b"), TRTLLM, kv_dtype="fp16", settings=settings)
    lines = Capacity(deployment, a100, 1, 4096).log_lines()
    quote = _case("llama-2-7b-class-a100-v0.8-issue1400")["quote"]
    assert lines and all(line in quote for line in lines), lines


def test_v05_logs_tokens_before_rounding(catalog):
    # 0.5.0 printed max_tokens (10,718) before rounding up to 670 blocks of 16 (10,720 tokens).
    a10g = catalog.sku("a10g")
    settings = pinned_pool(a10g, version="0.5.0", tokens_per_block=16, max_kv_tokens=10_718)
    deployment = Deployment(catalog.model("llama-2-7b"), TRTLLM, kv_dtype="fp16", settings=settings)
    capacity = Capacity(deployment, a10g, 1, 4096)
    assert capacity.log_lines() == ["[TensorRT-LLM][INFO] Using 10718 tokens in paged KV cache."]
    assert capacity.pool.num_blocks == 670 and capacity.kv_capacity_tokens == 10_720


def test_pytorch_backend_lines(tmp_path):
    # TinyLlama geometry (22 layers, 4 KV heads x 64, bf16: 22,528 B/token), 116,617 blocks of
    # 32 = 3,731,744 tokens x 22,528 B = 78.30 GiB; ceil(2051 / 32) = 65 blocks per sequence.
    from gguf_files import write_gguf

    from kvplan.catalog import Catalog
    from kvplan.catalog.gguf import read_gguf

    model, _ = read_gguf(write_gguf(tmp_path / "tinyllama.gguf", "llama", {
        "{arch}.block_count": 22, "{arch}.context_length": 2048, "{arch}.embedding_length": 2048,
        "{arch}.feed_forward_length": 5632, "{arch}.attention.head_count": 32,
        "{arch}.attention.head_count_kv": 4, "{arch}.vocab_size": 32000,
    }))  # fmt: skip
    h200 = Catalog().sku("h200")
    settings = pinned_pool(h200, version="1.0.0", max_kv_tokens=116_617 * 32)
    deployment = Deployment(model, TRTLLM, settings=settings)
    lines = Capacity(deployment, h200, 1, 2051).log_lines()
    quote = _case("tinyllama-pytorch-backend-tpb32-triton-tutorials-150")["quote"]
    assert lines and all(line in quote for line in lines), lines


def test_perf_benchmarking_log_does_not_reproduce(catalog):
    # The v0.12 example's lines need 229,376 B/token, not Llama-2-7B FP8's 262,144: no budget
    # within the rounding gives its 4,607 blocks.
    case = _case("llama-2-7b-fp8-h100-v0.12-perf-benchmarking-inconsistent")
    outcomes = _lines_from_available(
        case, catalog.model("llama-2-7b"), "0.12.0", catalog.sku("h100-sxm")
    )
    blocks_line = "[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: 4607"
    assert not any(blocks_line in lines for lines in outcomes)
