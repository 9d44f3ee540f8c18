"""`kvplan explain`: verbatim public startup logs read back and reproduced (expected values are
the logged numbers themselves, never kvplan's output)."""

from __future__ import annotations

import json
from pathlib import Path

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
        app, ["explain", str(log), "--sku", "a100-80gb", "--model", "qwen2.5-7b", "-f", "json"]
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
