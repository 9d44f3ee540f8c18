"""`kvplan explain`: verbatim public startup logs read back and reproduced (expected values are
the logged numbers themselves, never kvplan's output)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kvplan.cli import app

GOLDEN = Path(__file__).parent / "golden"
runner = CliRunner()


def _quote(tmp_path: Path, relative: str) -> Path:
    """The `quote:` of a golden file (a verbatim log excerpt, cited there) as a log file."""
    path = tmp_path / "startup.log"
    path.write_text(yaml.safe_load((GOLDEN / relative).read_text())["quote"])
    return path


def test_vllm_log_end_to_end(tmp_path):
    # vLLM 0.10.1.1, Qwen2-7B-Instruct on an A100 80GB, utilization 0.5 (source in the file):
    # "Available KV cache memory: 24.83 GiB", "GPU KV cache size: 464,848 tokens",
    # "Maximum concurrency for 16,384 tokens per request: 28.37x", "num_gpu_blocks is: 29053".
    log = _quote(tmp_path, "vllm_memory/qwen2-7b-a100-80gb-tp1-v0.10-util050.yaml")
    result = runner.invoke(
        app,
        ["explain", str(log), "--sku", "a100-80gb", "--model", "qwen2.5-7b", "-f", "json"],
        env={"COLUMNS": "40"},  # JSON never wraps
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["engine"], report["version"], report["context_tokens"]) == (
        "vllm",
        "0.10.1.1",
        16384,
    )
    assert report["facts"]["utilization"] == 0.5
    rows = {row["key"]: row for row in report["rows"]}
    assert rows["num_gpu_blocks"]["logged"] == 29053
    assert rows["gpu_kv_cache_tokens"]["logged"] == 464848
    assert rows["max_concurrency"]["logged"] == 28.37
    for key in ("num_gpu_blocks", "gpu_kv_cache_tokens", "max_concurrency"):
        assert rows[key]["matches"], rows[key]
        assert rows[key]["basis"] == "logged budget"
    assert isinstance(rows["num_gpu_blocks"]["kvplan"], int)  # counts are exact integers
    # The budget is predicted: where it differs, the term behind it is named.
    budget = rows["available_kv_bytes"]
    assert budget["logged"] == 24.83 * 2**30
    assert budget["matches"] or budget["term"]


def test_a_log_without_the_model_names_the_option(tmp_path):
    log = _quote(tmp_path, "vllm_memory/qwen2-7b-a100-80gb-tp1-v0.10-util050.yaml")
    result = runner.invoke(app, ["explain", str(log), "--sku", "a100-80gb"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "Qwen2-7B-Instruct" in result.stderr and "--model" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def _explain(relative: str, **given):
    from kvplan.explain import Given, explain_log

    case = yaml.safe_load((GOLDEN / relative).read_text())
    report = explain_log(case["quote"].splitlines(), Given(**given))
    return {row.key: row for row in report.rows}


def test_llamacpp_buffers_exact():
    # LLamaSharp log (source in the file): "CUDA0 KV buffer size = 144.00 MiB", "KV self size =
    # 144.00 MiB, K (f16): 72.00 MiB, V (f16): 72.00 MiB" at n_ctx 4096, one sequence.
    rows = _explain(
        "llamacpp_logs/qwen2.5-3b-class-f16-llamasharp-1099.yaml",
        model="qwen2.5-3b",
        sku="rtx-4090",
        settings={"context_size_tokens": 4096, "parallel": 1},
    )
    assert rows["kv_bytes"].logged == 144 * 2**20
    assert all(row.matches for row in rows.values())


def test_trtllm_blocks_from_the_logged_free_memory():
    # TensorRT-LLM memory.md: "available: 70.48 GiB", "primary pool: 4060", "pages per sequence:
    # 32", "Allocated 63.44 GiB for max tokens in paged KV cache (259840)".
    rows = _explain(
        "trtllm_logs/llama-2-7b-class-fp8kv-h100-memory-md.yaml",
        model="llama-2-7b",
        sku="h100-sxm",
        kv_dtype="fp8",
        weight_dtype="fp8",
        context_tokens=2048,
    )
    for key, logged in (("primary_blocks", 4060), ("max_tokens", 259840)):
        assert rows[key].logged == logged and rows[key].matches
    assert rows["max_blocks_per_sequence"].matches


def test_sglang_pool_from_the_logged_sizes():
    # SGLang on 2 GPUs, TP 2 (PR 27537): "#tokens: 1106304, K size: 25.32 GB, V size: 25.32 GB".
    rows = _explain(
        "sglang_logs/qwen3-30b-a3b-fp8-musa-s5000-tp2-pr27537.yaml",
        model="qwen3-30b-a3b",
        sku="h100-sxm",
        tp=2,
    )
    assert rows["max_total_num_tokens"].logged == 1106304
    assert rows["max_total_num_tokens"].matches and rows["k_size_bytes"].matches
    # No term of the budget is logged: the output says so rather than guess.
    assert rows["kv_size_bytes"].matches or "unknown" in (rows["kv_size_bytes"].term or "")


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "empty"),
        (b"\x00\x01\x02binary" * 100, "binary"),
        (b"junk line without any engine\n" * 200_000, "no startup line"),
        (("x" * 300 + "\n").encode(), "no startup line"),
    ],
    ids=["empty", "binary", "junk", "long-name"],
)
def test_hostile_input_is_one_line(tmp_path, content, words):
    path = tmp_path / "bad.log"
    path.write_bytes(content)
    result = runner.invoke(app, ["explain", str(path)])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_300_character_model_name_is_one_line(tmp_path):
    path = tmp_path / "long.log"
    path.write_text(
        f"non-default args: {{'model': '{'m' * 300}'}}\nAvailable KV cache memory: 1.00 GiB\n"
    )
    result = runner.invoke(app, ["explain", str(path), "--sku", "h100-sxm"])
    assert result.exit_code == 2 and result.stdout == ""
    assert "--model" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_target_answers_with_a_launch_line(tmp_path):
    log = _quote(tmp_path, "vllm_memory/qwen2-7b-a100-80gb-tp1-v0.10-util050.yaml")
    args = ["explain", str(log), "--sku", "a100-80gb", "--model", "qwen2.5-7b"]
    result = runner.invoke(app, [*args, "--target", "32kx64", "-f", "json"])
    assert result.exit_code == 0, result.output
    target = json.loads(result.stdout)["target"]
    # 64 requests of 32,768 tokens at 57,344 B per token (28 layers × 4 KV heads × 128 × 2 × 2)
    # need 112 GiB of KV: more than the 24.83 GiB logged, so the answer changes something.
    assert target["context_tokens"] == 32768 and target["concurrency"] == 64
    assert target["holds_now"] < 64
    assert target["meets"] and target["max_concurrency"] >= 64
    assert target["launch_command"].startswith("vllm serve Qwen2-7B-Instruct ")
    assert runner.invoke(app, [*args, "--target", "32k×"]).exit_code == 2


def test_llamacpp_target_sizes_the_slots(tmp_path):
    # The LLamaSharp log allocates -c 4096 for one sequence: 4 requests of 32,768 tokens need
    # 4 slots of 32,768 cells, -c 131072 -np 4 (llama.cpp divides -c among -np slots).
    log = _quote(tmp_path, "llamacpp_logs/qwen2.5-3b-class-f16-llamasharp-1099.yaml")
    args = ["explain", str(log), "--model", "qwen2.5-3b", "--sku", "rtx-4090"]
    args += ["--set", "ctx_size=4096", "--set", "parallel=1", "--target", "32k×4", "-f", "json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    target = json.loads(result.stdout)["target"]
    assert target["holds_now"] == 0 and target["meets"]
    assert " -c 131072 -np 4" in target["launch_command"]
    assert target["launch_command"].startswith("llama-server ")


def test_a_term_the_logged_budget_leaves_in_is_not_named():
    # vLLM 0.19 on an H100 (source in the file) prints "Desired GPU memory utilization is
    # (0.95, 75.23 GiB). Actual usage is 14.99 GiB for weight, 1.89 GiB for peak activation,
    # 0.25 GiB for non-torch memory, and 0.91 GiB for CUDAGraph memory" and "Current kv cache
    # memory in use is 58.11 GiB": 75.23 − 14.99 − 1.89 − 0.25 = 58.10, so the 0.91 GiB of
    # CUDA graphs is left in the headroom and cannot account for the budget's difference.
    rows = _explain(
        "vllm_memory/llama31-8b-h100-tp1-v0.19-mml16k.yaml",
        model="llama-3.1-8b",
        sku="h100-sxm",
        version="0.19.0",
    )
    assert "does not subtract" in rows["cudagraph_bytes"].term
    budget = rows["available_kv_bytes"]
    assert budget.logged == 58.11 * 2**30
    assert budget.matches or "CUDA graphs" not in (budget.term or "")


def test_standard_input_and_the_log_naming_its_model():
    # The vLLM 0.19 log names meta-llama/Llama-3.1-8B-Instruct in its non-default args (an
    # alias of the catalogue's llama-3.1-8b) and dates itself by its wording.
    case = yaml.safe_load(
        (GOLDEN / "vllm_memory/llama31-8b-h100-tp1-v0.19-mml16k.yaml").read_text()
    )
    result = runner.invoke(
        app, ["explain", "-", "--sku", "h100-sxm", "-f", "json"], input=case["quote"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["model"], report["version"]) == ("llama-3.1-8b", "0.19.0")
    assert "Free memory on device" in report["version_basis"]
