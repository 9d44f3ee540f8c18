"""The resolved record: one per deployment × SKU × engine, built once and read by every rule."""

from __future__ import annotations

import kvplan
import kvplan.engine.vllm as vllm
from kvplan.catalog import Catalog
from kvplan.engine import EngineSettings, engine
from kvplan.engine.deployment import Deployment
from kvplan.engine.resolved import resolve
from kvplan.engine.vllm_version import parse_version


def test_one_size_call_parses_the_version_and_resolves_the_scheduler_once(monkeypatch):
    # `kvplan size` asks the engine for its layout, budget, pool, notes and startup lines;
    # each used to parse --engine-version again and resolve the scheduler defaults again.
    parsed, scheduled = [], []
    monkeypatch.setattr(
        vllm, "parse_version", lambda text: parsed.append(text) or parse_version(text)
    )
    defaults = vllm.vllm_memory.scheduler_defaults
    monkeypatch.setattr(
        vllm.vllm_memory,
        "scheduler_defaults",
        lambda *args: scheduled.append(args) or defaults(*args),
    )
    report = kvplan.size(
        "llama-3.1-70b", context="128k", batch=8, tp=8, sku="h100-sxm", version="0.11"
    )
    assert report.engine == "vllm"
    assert parsed == ["0.11"]
    assert len(scheduled) == 1


def test_the_record_is_kept_per_deployment_and_sku():
    catalog = Catalog()
    h100, l4 = catalog.sku("h100-sxm"), catalog.sku("l4")
    deployment = Deployment(
        catalog.model("llama-3.1-8b"), engine("vllm"), settings=EngineSettings(version="0.20")
    )
    record = resolve(deployment, h100)
    assert resolve(deployment, h100) is record
    assert resolve(deployment, l4) is not record
    assert record.release is resolve(deployment).release  # parsed once for every SKU
    assert record.release.major_minor == (0, 20)
    # vLLM V1 defaults (arg_utils.py): 8192 / 1024 on a ≥ 70 GiB GPU that is not an A100,
    # 2048 / 256 on the 24 GB L4.
    assert (record.scheduler().max_num_batched_tokens, record.scheduler().max_num_seqs) == (
        8192,
        1024,
    )
    assert resolve(deployment, l4).scheduler().max_num_seqs == 256
    # A changed deployment is a new object with its own record.
    changed = deployment.replace(settings=EngineSettings(version="0.11"))
    assert resolve(changed, h100).release.major_minor == (0, 11)


def test_k_and_v_dtypes_are_resolved_together():
    # llama.cpp stores K and V in their own ggml types (-ctk q8_0 -ctv q4_0).
    deployment = Deployment(
        Catalog().model("llama-3.1-8b"),
        engine("llama.cpp"),
        kv_dtype="q8_0",
        settings=EngineSettings(v_dtype="q4_0", flash_attention=True),
    )
    record = resolve(deployment)
    assert (record.k_dtype.name, record.v_dtype.name) == ("q8_0", "q4_0")
    assert deployment.v_dtype == "q4_0"
