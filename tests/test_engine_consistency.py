"""Every command gives one answer: size, report, check and claim agree for every catalogue model,
engine and TP degree, because they all ask the same engine profile.

Nothing here checks a number against kvplan's own formula; it checks that two commands never
disagree (the bytes one request is charged, how many requests fit, the verdict).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvplan.api.build import capacity_row, size_report
from kvplan.catalog import Catalog
from kvplan.cli import app
from kvplan.plan.batch import Batch
from kvplan.plan.capacity import Capacity, tp_degrees
from kvplan.plan.deployment import Deployment
from kvplan.plan.engines import ENGINES
from kvplan.plan.guardrail import ProductSpec, check_product, claim_sheet
from kvplan.plan.sizing import size

CATALOG = Catalog()
SKU = CATALOG.sku("h100-sxm")
BATCH = 8


def _context(model) -> int:
    return min(model.max_context, 32_768)


def _cases():
    for model in CATALOG.models():
        for name, profile in ENGINES.items():
            base = Deployment(model, profile)
            for tp in tp_degrees(base, SKU):
                yield pytest.param(model, name, tp, id=f"{model.name}-{name}-tp{tp}")


@pytest.mark.parametrize(("model", "engine_name", "tp"), list(_cases()))
def test_size_and_report_agree(model, engine_name, tp):
    deployment = Deployment(model, ENGINES[engine_name], tp=tp)
    context = _context(model)
    sized = size_report(size(deployment, Batch.uniform(context, BATCH), SKU)).model_dump()
    reported = capacity_row(Capacity(deployment, SKU, BATCH, context)).model_dump()
    assert sized["kv_bytes_per_request_per_gpu"] == reported["kv_bytes_per_request_per_gpu"]
    assert sized["max_concurrency"] == reported["max_concurrency"]
    assert sized["max_context_tokens"] == reported["max_context_tokens"]
    assert sized["kv_budget_bytes_per_gpu"] == reported["kv_budget_bytes_per_gpu"]
    assert sized["verdict"] == reported["verdict"]
    assert sized["fits"] == (reported["verdict"] == "fits")
    # The batch's bytes are the per-request charge added up.
    assert sized["kv_bytes_per_gpu"] == BATCH * sized["kv_bytes_per_request_per_gpu"]


@pytest.mark.parametrize("engine_name", sorted(ENGINES))
@pytest.mark.parametrize(
    ("model_name", "tp", "context", "batch"),
    [
        ("qwen2.5-7b", 1, 131_072, 1),
        ("llama-3.1-70b", 4, 32_768, 64),
        ("gemma-2-9b", 1, 8192, 32),
        ("deepseek-v2-lite", 1, 32_768, 16),
        ("llama-4-scout", 8, 131_072, 4),
    ],
)
def test_check_and_claim_agree_with_capacity(engine_name, model_name, tp, context, batch):
    model = CATALOG.model(model_name)
    if ENGINES[engine_name].tp_refusal(model, tp):
        pytest.skip(f"{engine_name} refuses tp {tp} (its own test covers the refusal)")
    sku = CATALOG.sku("l4") if model_name == "qwen2.5-7b" else SKU
    product = ProductSpec.model_validate(
        {
            "name": "p",
            "model": model_name,
            "sku": sku.name,
            "tp": tp,
            "engine": engine_name,
            "context": context,
            "concurrency": batch,
        }
    )
    checked = check_product(product, model, sku)
    deployment = Deployment(model, ENGINES[engine_name], tp=tp)
    sheet = claim_sheet(deployment, sku, context, batch)
    capacity = Capacity(deployment, sku, batch, context)
    assert checked.supported_concurrency == sheet.capacity.max_concurrency()
    assert checked.kv_bytes_per_request_per_gpu == sheet.kv_bytes_per_request_per_gpu
    if context <= model.max_context:
        assert checked.ok == sheet.fits == capacity.fits


def _json(*args: str) -> dict | list:
    result = CliRunner().invoke(app, [*args, "--format", "json"], env={"COLUMNS": "60"})
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from([m.name for m in CATALOG.models()]),
    engine_name=st.sampled_from(sorted(ENGINES)),
    tp=st.sampled_from([1, 2, 4, 8]),
    context=st.sampled_from(["4k", "32k", "128k"]),
    batch=st.integers(1, 64),
)
def test_commands_agree_end_to_end(model, engine_name, tp, context, batch):
    common = ["--sku", "h100-sxm", "--tp", str(tp), "-e", engine_name]
    common += ["--context", context, "--batch", str(batch)]
    result = CliRunner().invoke(app, ["size", model, *common, "--format", "json"])
    uneven = CATALOG.model(model).attention.num_heads % tp != 0
    if uneven or result.exit_code == 2:  # vLLM also refuses tp against the KV heads
        assert result.exit_code == 2
        for command in (["report", "-m", model], ["claim", model]):
            refused = CliRunner().invoke(app, [*command, *common, "--format", "json"])
            assert (refused.exit_code, refused.stdout) == (2, "")
        return
    sized = json.loads(result.stdout)
    (reported,) = _json("report", "-m", model, *common)
    claimed = _json("claim", model, *common)
    assert sized["kv_bytes_per_request_per_gpu"] == reported["kv_bytes_per_request_per_gpu"]
    assert sized["kv_bytes_per_request_per_gpu"] == claimed["kv_bytes_per_request_per_gpu"]
    assert sized["max_concurrency"] == reported["max_concurrency"]
    assert sized["max_concurrency"] == claimed["max_concurrency_at_context"]
    assert sized["fits"] == claimed["fits"] == (reported["verdict"] == "fits")
    assert (result.exit_code == 1) == (not sized["fits"])
