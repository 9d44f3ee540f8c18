"""vLLM's startup check of the free memory it finds (`free_memory_at_start_bytes`).

A public vLLM 0.11+ run refused with "Free memory on device (61.05/119.7 GiB) on startup is
less than desired GPU memory utilization (0.52, 62.24 GiB)": 119.7 GiB x 0.52 = 62.244 GiB.
"""

from __future__ import annotations

import pytest
import yaml
from test_explain_golden import GOLDEN, given_for

from kvplan.engine import ENGINES, EngineSettings
from kvplan.engine.deployment import Deployment
from kvplan.errors import SettingError
from kvplan.explain import explain_log

GIB = 1 << 30
VLLM = ENGINES["vllm"]


def _budget(catalog, version: str, free_gib: float):
    settings = EngineSettings(
        version=version,
        utilization=0.52,
        total_gpu_memory_bytes=int(119.7 * GIB),
        free_memory_at_start_bytes=int(free_gib * GIB),
    )
    deployment = Deployment(catalog.model("llama-3.1-8b"), VLLM, settings=settings)
    return VLLM.budget(deployment, catalog.sku("gh200"))


def test_free_memory_below_the_requested_memory_is_refused_as_vllm_does(catalog):
    with pytest.raises(SettingError) as refused:
        _budget(catalog, "0.11.0", 61.05)
    assert refused.value.setting == "free_memory_at_start_bytes"
    assert "(61.05/119.70 GiB)" in str(refused.value)
    assert "(0.52, 62.24 GiB)" in str(refused.value)


def test_enough_free_memory_or_an_unread_release_starts(catalog):
    assert _budget(catalog, "0.11.0", 62.30).total_bytes == int(119.7 * GIB)
    assert _budget(catalog, "0.10.1", 61.05).total_bytes == int(119.7 * GIB)


def test_explain_gives_the_logged_free_memory_to_the_engine_model():
    path = GOLDEN / "vllm_memory" / "granite31-8b-h100-tp1-v0.19.yaml"
    case = yaml.safe_load(path.read_text())
    given, engine = given_for(path.stem, case)
    report = explain_log(case["quote"].splitlines(), given, engine=engine)
    row = next(r for r in report.rows if r.key == "free_at_start_bytes")
    assert "free_memory_at_start_bytes" in (row.term or "")
    assert "free memory at startup" not in report.unknown_terms
