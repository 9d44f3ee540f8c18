"""`kvplan claim`: the bytes behind a long-context claim, added up exactly.

Hand figures: Llama-3.1-70B has 80 layers, 8 KV heads, head_dim 128 (config.json); fp8 KV is
1 byte per element. At TP 4 each GPU holds 8 / 4 = 2 KV heads, so one token costs
2 (K, V) × 80 × 2 × 128 × 1 B = 40,960 B per GPU, 163,840 B over the 4 GPUs.
H100 SXM: the memory an engine sees is the runtime figure of the catalogue's h100-sxm entry
(its basis cites the public log it was read from); the datasheet figure stands in without one.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan.catalog import Catalog
from kvplan.cli import app

GIB = 2**30
_H100 = Catalog().sku("h100-sxm")
H100_SXM_BYTES = _H100.runtime_memory_bytes or _H100.memory_bytes
CLAIM_70B = [
    "llama-3.1-70b",
    "--sku",
    "h100-sxm",
    "--context",
    "128k",
    "--batch",
    "8",
    "--kv-dtype",
    "fp8",
    "--tp",
    "4",
]


def _claim(*args: str, columns: int | None = None):  # -> click Result
    env = {"COLUMNS": str(columns)} if columns else None
    return CliRunner().invoke(app, ["claim", *args], env=env)


def _record(*args: str) -> dict:
    result = _claim(*args, "--format", "json", columns=40)
    record = json.loads(result.stdout)
    # A claim that does not fit is a failed check: the sheet is printed, then exit 1.
    assert result.exit_code == (0 if record["fits"] else 1), result.stderr
    return record


def test_llama_70b_fp8_128k_batch_8_on_four_h100():
    record = _record(*CLAIM_70B, "--engine", "exact")
    assert (record["context"], record["batch"], record["kv_dtype"]) == (131_072, 8, "fp8_e4m3")
    assert (record["tp"], record["pp"], record["gpus"], record["engine"]) == (4, 1, 4, "exact")
    assert record["kv_bytes_per_token_per_gpu"] == 40_960
    assert record["kv_bytes_per_token"] == 163_840
    # One request: 40,960 B × 131,072 tokens = 5 GiB per GPU, 20 GiB over 4 GPUs.
    assert record["kv_bytes_per_request_per_gpu"] == 5 * GIB
    assert record["kv_bytes_per_request"] == 20 * GIB
    # The batch of 8: 40 GiB per GPU, 160 GiB in all.
    assert record["kv_bytes_batch_per_gpu"] == 40 * GIB
    assert record["kv_bytes_batch"] == 160 * GIB
    # exact: no engine reserve, so the total is weights + KV and the memory is the whole GPU.
    assert record["engine_reserve_bytes_per_gpu"] == 0
    assert record["memory_bytes"] == H100_SXM_BYTES
    assert record["total_bytes_per_gpu"] == record["weights_bytes_per_gpu"] + 40 * GIB
    assert record["free_bytes_per_gpu"] == H100_SXM_BYTES - record["total_bytes_per_gpu"]
    # 70.6e9 params × 2 B / 4 ≈ 35.3 GB of weights per GPU + 42.9 GB of KV < 85.5 GB.
    assert record["fits"] is True
    assert record["max_context_tokens_at_batch"] == 131_072  # the native limit binds
    assert record["max_concurrency_at_context"] >= 8
    assert any("131,072 tokens and batch 8" in q for q in record["questions"])
    assert any(
        line.startswith("full × 80 layers: 2 (K and V) × 2 (kv heads per GPU)")
        for line in record["formula"]
    )


def test_vllm_adds_its_reserve_term_by_term():
    record = _record(*CLAIM_70B, "--engine", "vllm")
    reserve = record["engine_reserve"]
    # vLLM 0.11 default gpu_memory_utilization 0.9: the other 10 % is never touched.
    assert reserve["utilization"] == 0.9
    assert reserve["headroom_bytes"] == H100_SXM_BYTES - int(H100_SXM_BYTES * 0.9)
    assert record["engine_reserve_bytes_per_gpu"] == (
        reserve["headroom_bytes"]
        + reserve["activation_bytes"]
        + reserve["non_torch_bytes"]
        + reserve["cudagraph_bytes"]
    )
    assert reserve["activation_bytes"] > 0 and reserve["non_torch_bytes"] > 0
    assert record["total_bytes_per_gpu"] == (
        record["weights_bytes_per_gpu"]
        + record["kv_bytes_batch_per_gpu"]
        + record["engine_reserve_bytes_per_gpu"]
    )
    assert record["fits"] == (record["total_bytes_per_gpu"] <= H100_SXM_BYTES)


def test_a_claim_that_does_not_fit_is_still_a_sheet():
    # Llama-3.1-8B, 8 × 128k in bf16 on one L4: 8 × 131,072 × 131,072 B = 128 GiB of KV
    # against a 22.49 GiB card.
    record = _record("llama-3.1-8b", "--sku", "l4", "--context", "128k", "--batch", "8")
    assert record["kv_bytes_batch_per_gpu"] == 128 * GIB
    assert record["fits"] is False
    assert record["free_bytes_per_gpu"] < 0
    assert record["max_concurrency_at_context"] == 0


def test_context_past_the_native_limit_asks_how():
    record = _record("llama-3.1-8b", "--sku", "h100-sxm", "--context", "256k")
    # 256k × 128 KiB = 32 GiB of KV + 14.96 GiB of weights fits an H100's memory, but
    # Llama-3.1-8B was trained to 131,072 tokens (config.json max_position_embeddings) and
    # vLLM refuses a longer max_model_len: the claim fails on the limit, not on memory.
    assert record["free_bytes_per_gpu"] > 0
    assert record["fits"] is False
    assert record["verdict"] == "exceeds the native limit of 131,072 tokens"
    assert record["within_native_limit"] is False
    assert any("native limit is 131,072 tokens" in q for q in record["questions"])
    assert any("exceeds llama-3.1-8b's native limit" in n for n in record["notes"])


def test_table_shows_verdict_formula_and_questions():
    result = _claim(*CLAIM_70B, "--engine", "exact")
    assert result.exit_code == 0
    assert "verdict" in result.stdout and "fits" in result.stdout
    assert "note: formula: full × 80 layers" in result.stdout
    assert "note: ask: At 131,072 tokens and batch 8" in result.stdout


def test_bad_input_exits_2_with_one_line():
    result = _claim("llama-3.1-70b", "--sku", "h100-sxn")
    assert (result.exit_code, result.stdout) == (2, "")
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        "error: unknown sku 'h100-sxn'; did you mean one of h100-nvl, h100-pcie, h100-sxm?"
    )
    result = _claim("llama-3.1-70b", "--sku", "h100-sxm", "--context", "12q")
    assert (result.exit_code, result.stdout) == (2, "")
    assert len(result.stderr.splitlines()) == 1


def test_sku_is_required():
    result = _claim("llama-3.1-70b")
    assert result.exit_code == 2
    assert result.stdout == ""
