"""--gpus-per-node: the GPUs in one node, when a cluster's nodes hold fewer than the SKU's board.

The public case: Qwen2-7B-Instruct at TP 2 over two Ray nodes of one A100 40GB each, vLLM
0.10.1.1, gpu_memory_utilization 0.5, max_model_len 16384 (dennislee22/vLLM-benchmarking,
tests/golden/vllm_memory/qwen2-7b-a100-40gb-tp2-v0.10-2nodes.yaml). Its log prints
"Custom allreduce is disabled because this process group spans across nodes" and
"Available KV cache memory: 11.03 GiB". kvplan's budget is good within max(0.35 GiB, 3 % of
the logged figure) = 0.35 GiB (tests/test_vllm_budget_fit.py); on the shipped 8-GPU A100
profile the TP group fits one node, so only the setting tells kvplan that it does not.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.cli import app
from kvplan.errors import SettingError

GIB = 2**30
LOGGED_KV_BYTES = 11.03 * GIB
TOLERANCE_BYTES = 0.35 * GIB
PLAN = {"sku": "a100-40gb", "tp": 2, "context": 16384, "version": "0.10.1.1", "utilization": 0.5}
ARGV = [
    "size", "qwen2.5-7b", "--sku", "a100-40gb", "--tp", "2", "-c", "16384",
    "--engine-version", "0.10.1.1", "--utilization", "0.5", "-f", "json",
]  # fmt: skip


def _api_budget(**settings: int) -> int:
    budget = kvplan.size("qwen2.5-7b", **PLAN, **settings).kv_budget_bytes_per_gpu
    assert budget is not None
    return budget


def test_two_nodes_of_one_gpu_match_the_logged_budget():
    two_nodes = _api_budget(gpus_per_node=1)
    assert abs(two_nodes - LOGGED_KV_BYTES) <= TOLERANCE_BYTES
    # Read as one 8-GPU node, the same plan promises more KV than vLLM had, past the band.
    assert _api_budget() - LOGGED_KV_BYTES > TOLERANCE_BYTES
    # A node at least as large as the TP group changes nothing.
    assert _api_budget(gpus_per_node=2) == _api_budget()


def test_the_flag_the_products_key_and_the_keyword_plan_the_same(tmp_path):
    runner = CliRunner()
    cli = runner.invoke(app, [*ARGV, "--gpus-per-node", "1"])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.stdout)["kv_budget_bytes_per_gpu"] == _api_budget(gpus_per_node=1)
    products = tmp_path / "products.yaml"
    products.write_text(
        "products:\n  - name: chat\n    model: qwen2.5-7b\n    sku: a100-40gb\n    tp: 2\n"
        "    context: 16384\n    concurrency: 1\n    engine_version: '0.10.1.1'\n"
        "    utilization: 0.5\n    gpus_per_node: 1\n"
    )
    checked = kvplan.check(products)
    (product,) = checked.products
    assert product.kv_budget_bytes_per_gpu == _api_budget(gpus_per_node=1)


@pytest.mark.parametrize(("value", "message"), [("0", "must be between 1 and 4,096")])
def test_a_node_of_no_gpus_is_refused(value, message):
    result = CliRunner().invoke(app, [*ARGV, "--gpus-per-node", value])
    assert result.exit_code == 2 and result.stdout == ""
    assert f"--gpus-per-node: {value} {message}" in result.stderr
    with pytest.raises(SettingError, match=f"^gpus_per_node: {value} {message}"):
        _api_budget(gpus_per_node=0)


def _report(*argv: str) -> list[dict]:
    result = CliRunner().invoke(
        app,
        [
            "report",
            "--model",
            "qwen2.5-7b",
            "--sku",
            "a100-40gb",
            "-c",
            "4096",
            "-f",
            "json",
            *argv,
        ],
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_every_engine_reads_the_one_node_size():
    # The shipped A100 40GB profile is an 8-GPU board: by default the report's TP degrees go
    # to 4 on one node (28 heads do not split over 8). With 2 GPUs per node they stop at 2.
    assert [r["tp"] for r in _report("-e", "trtllm")] == [1, 2, 4]
    assert [r["tp"] for r in _report("-e", "trtllm", "--gpus-per-node", "2")] == [1, 2]
    # A stated tp 4 on nodes of 2 spans 2 nodes (the row's † and nodes field), and the note
    # says which traffic crosses.
    (row,) = _report("-e", "sglang", "--tp", "4", "--gpus-per-node", "2")
    assert row["nodes"] == 2
    notes = kvplan.size("qwen2.5-7b", sku="a100-40gb", tp=4, engine="sglang", gpus_per_node=2)
    assert "tp 4 × pp 1 spans 2 nodes of 2 a100-40gb: TP traffic crosses the network" in (
        notes.notes
    )
