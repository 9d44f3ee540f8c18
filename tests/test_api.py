"""The Python API gives the typed results the CLI renders: the same numbers, exact integers."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.api import CapacityRow, ClaimReport, SizeReport
from kvplan.cli import app
from kvplan.errors import KvplanError


def _cli_json(*args: str) -> dict | list:
    result = CliRunner().invoke(app, [*args, "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_size_is_typed_and_matches_the_cli():
    # Llama-3.1-8B: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B per token;
    # one request of 128k in 16-token vLLM blocks is 131,072 x 131,072 B = 16 GiB exactly.
    report = kvplan.size("llama-3.1-8b", context="128k", batch=8, sku="h100-sxm")
    assert isinstance(report, SizeReport)
    assert report.kv_bytes_per_token == 131_072
    assert report.kv_bytes_per_request_per_gpu == 131_072 * 131_072
    cli = _cli_json("size", "llama-3.1-8b", "-c", "128k", "-b", "8", "--sku", "h100-sxm")
    assert report.model_dump(mode="json") == cli


def test_engine_settings_are_keywords():
    # A fixed KV budget of 16 GiB holds exactly one 128k request of 16 GiB.
    report = kvplan.size("llama-3.1-8b", context="128k", sku="h100-sxm", kv_memory_bytes=16 * 2**30)
    assert report.kv_budget_bytes_per_gpu == 16 * 2**30
    assert report.max_concurrency == 1 and report.fits is True
    sglang = kvplan.size("llama-3.1-8b", sku="h100-sxm", engine="sglang", utilization=0.5)
    assert sglang.engine == "sglang" and sglang.budget is not None
    assert sglang.budget.utilization == 0.5


def test_report_rows_and_a_deployment_object():
    rows = kvplan.report("llama-3.1-70b", skus="h100-sxm", context="32k", batch=64)
    assert [row.tp for row in rows] == [1, 2, 4, 8]
    assert all(isinstance(row, CapacityRow) for row in rows)
    cli = _cli_json("report", "-m", "llama-3.1-70b", "--sku", "h100-sxm", "-c", "32k", "-b", "64")
    assert [row.model_dump(mode="json") for row in rows] == cli
    deployment = kvplan.deployment("llama-3.1-70b", tp=8)
    single = kvplan.capacity(deployment, "h100-sxm", batch=64, context="32k")
    assert single == rows[-1]


def test_claim_and_check(tmp_path):
    claim = kvplan.claim("qwen2.5-7b", sku="l4", context="32k", engine="sglang")
    assert isinstance(claim, ClaimReport) and claim.sku == "l4"
    products = tmp_path / "products.yaml"
    products.write_text(
        "products:\n  - name: p\n    model: qwen2.5-7b\n    sku: l4\n"
        "    engine: sglang\n    context: 32k\n    concurrency: 1\n"
    )
    checked = kvplan.check(products)
    assert checked.ok is claim.fits
    assert checked.products[0].supported_concurrency == claim.max_concurrency_at_context


def test_load_model_by_alias_and_load_sku_by_device_name():
    assert kvplan.load_model("meta-llama/Llama-3.1-8B").name == "llama-3.1-8b"
    assert kvplan.load_sku("NVIDIA H100 80GB HBM3").name == "h100-sxm"
    assert len(kvplan.models()) >= 90 and len(kvplan.skus()) >= 20


def test_bad_input_raises_the_cli_message():
    with pytest.raises(KvplanError, match=r"unknown model 'llama-3.1-8c'"):
        kvplan.size("llama-3.1-8c")
    with pytest.raises(KvplanError, match=r"unknown engine setting\(s\) \['utilisation'\]"):
        kvplan.size("llama-3.1-8b", utilisation=0.9)
    with pytest.raises(KvplanError, match=r"^--context: 'lots' is not a token count"):
        kvplan.size("llama-3.1-8b", context="lots")


def test_import_kvplan_is_cheap():
    # The CLI imports the package on every start; the API and its planning code load lazily.
    code = "import sys, kvplan; print(sorted(m for m in sys.modules if m.startswith('kvplan')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['kvplan']"


def test_the_lazy_names_are_the_apis():
    import kvplan.api

    assert set(kvplan.api._HOMES) == kvplan.API_NAMES == set(kvplan.api.__all__)
    for name in kvplan.API_NAMES:
        value = getattr(kvplan.api, name)
        assert not inspect.ismodule(value)
        assert hasattr(kvplan, name)


def test_size_loads_neither_the_guardrail_nor_the_search_nor_other_engines():
    # `kvplan size` imports kvplan.api on every start: the API's other questions (check,
    # claim, recommend) and the engines it does not ask about load only when used.
    code = (
        "import sys, kvplan\n"
        "kvplan.size('llama-3.1-8b', context='8k', sku='h100-sxm')\n"
        "print(sorted(m for m in sys.modules if m.startswith('kvplan')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(eval(done.stdout))
    assert "kvplan.engine.vllm" in loaded
    for lazy in ("kvplan.plan.guardrail", "kvplan.plan.recommend", "kvplan.api.calls_check"):
        assert lazy not in loaded
    for other in ("sglang", "trtllm", "llamacpp", "ollama", "analytic"):
        assert f"kvplan.engine.{other}" not in loaded


def test_deployment_takes_engine_like_every_other_call():
    # The same keyword as kvplan.size / report / claim: engine=.
    deployment = kvplan.deployment("llama-3.1-8b", engine="sglang", tp=2)
    assert deployment.engine.name == "sglang" and deployment.tp == 2
    sized = kvplan.size(deployment, sku="h100-sxm")
    assert sized == kvplan.size("llama-3.1-8b", sku="h100-sxm", engine="sglang", tp=2)
    with pytest.raises(KvplanError, match=r"unknown engine setting\(s\) \['engine_name'\]"):
        kvplan.deployment("llama-3.1-8b", engine_name="sglang")
