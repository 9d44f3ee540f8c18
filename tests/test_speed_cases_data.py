"""The measured speed references in tests/golden/speed_cases/ and serving_papers/ keep their shape.

Each speed_cases file is one public source (a vendor's table, an MLPerf result, a blog's table);
each case is one measured row with its exact setup, the verbatim lines it was read from and a
fit/test split. These tests check the files against the agreed format, that every measured number
is printed in its quote, and that the collection still covers what the step model is fitted and
judged on (GPU types, models incl. MoE, TP 1-8, throughput and latency), so removing data fails.
No kvplan estimate is involved: the expected values are the sources' own numbers.
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvplan.catalog import Catalog
from kvplan.specs.dtypes import WeightDtypeName

GOLDEN = Path(__file__).parent / "golden"
SPEED = GOLDEN / "speed_cases"
PAPERS = GOLDEN / "serving_papers"

SOURCE_KINDS = {
    "offline-table", "closed-loop-table", "rate-table", "latency-benchmark",
    "nightly", "mlperf", "paper",
}  # fmt: skip
ENGINES = {"vllm", "sglang", "trtllm", "other"}
FILE_KEYS = {"source", "source_kind", "published", "engine", "engine_version", "notes", "cases"}
CASE_REQUIRED = {
    "id", "split", "model", "sku", "gpus", "tp", "weight_dtype", "kv_dtype",
    "workload", "measured", "quote",
}  # fmt: skip
# engine / engine_version on a case: the file's engine is "mixed" and each case names its own.
CASE_OPTIONAL = {"hf_id", "pp", "ep", "dp", "notes", "engine", "engine_version"}
WORKLOAD_KINDS = {"offline", "concurrency", "rate", "latency"}
# total_*_tokens: a run's stated totals (vllm bench serve prints them) where lengths vary.
WORKLOAD_KEYS = {
    "kind", "input_tokens", "output_tokens", "requests", "concurrency", "rate", "batch", "dataset",
    "total_input_tokens", "total_output_tokens",
}  # fmt: skip
# "auto": the engine's default for the checkpoint, where the source does not state the KV dtype.
KV_DTYPES = {"bf16", "fp16", "fp8", "nvfp4", "auto"}
WEIGHT_DTYPES = set(WeightDtypeName.__args__)
# Every measured key names its unit; the statistic (mean / median / p99) is the source's.
THROUGHPUT_KEYS = {
    "output_tokens_per_s", "output_tokens_per_s_per_gpu", "total_tokens_per_s", "requests_per_s",
}  # fmt: skip
# No statistic suffix (ttft_ms): the source does not say which.
LATENCY_KEY = re.compile(r"(ttft|itl|tpot)_ms(_mean|_median|_p99)?|latency_s")
NOT_IN_CATALOGUE = "not in the catalogue"


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


FILES = sorted(SPEED.glob("*.yaml"))
SOURCES = {path.name: _load(path) for path in FILES}
CASES = [(name, case) for name, doc in SOURCES.items() for case in doc["cases"]]
CATALOG = Catalog()
MODELS = {spec.name: spec for spec in CATALOG.models()}
SKUS = {sku.name: sku for sku in CATALOG.skus()}


def _numbers(text: str) -> set[Decimal]:
    """Every number printed in a quote: with thousands separators (1,620) and, for CSV rows, each
    comma-separated field on its own."""
    grouped = re.findall(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d)", text)
    plain = re.findall(r"\d+(?:\.\d+)?", text)
    return {Decimal(m.replace(",", "")) for m in grouped + plain}


def _printed(value: float, printed: set[Decimal]) -> bool:
    """The value is in the quote as printed, or as LoadGen's nanoseconds for a millisecond field."""
    exact = Decimal(str(value))
    return exact in printed or exact * 1_000_000 in printed


def test_there_are_source_files():
    assert len(FILES) >= 5


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_file_header(name):
    doc = SOURCES[name]
    assert set(doc) == FILE_KEYS, f"{name}: keys {sorted(set(doc) ^ FILE_KEYS)}"
    assert doc["source"].startswith("https://"), name
    assert doc["source_kind"] in SOURCE_KINDS, name
    assert doc["engine"] in ENGINES | {"mixed"}, name
    for case in doc["cases"]:
        own = case.get("engine", doc["engine"])
        assert own in ENGINES, f"{name} {case['id']}: engine {own}"
        assert doc["engine"] != "mixed" or case.get("engine_version"), f"{case['id']}: version"
    assert str(doc["published"]).strip() and str(doc["engine_version"]).strip(), name
    assert isinstance(doc["cases"], list) and doc["cases"], name


def test_split_rule_is_stated():
    for name in SOURCES:
        head = (SPEED / name).read_text().split("\nsource:")[0]
        assert "Split rule" in head, f"{name}: the header comment states the split rule"


@pytest.mark.parametrize("name,case", CASES, ids=[case["id"] for _, case in CASES])
def test_case_shape(name, case):
    keys = set(case)
    assert keys >= CASE_REQUIRED, f"{name} {case.get('id')}: missing {sorted(CASE_REQUIRED - keys)}"
    unknown = keys - CASE_REQUIRED - CASE_OPTIONAL
    assert not unknown, f"{case['id']}: unknown keys {sorted(unknown)}"
    assert re.fullmatch(r"[a-z0-9][a-z0-9.-]*", case["id"]), case["id"]
    assert case["split"] in {"fit", "test"}, case["id"]
    assert case["weight_dtype"] in WEIGHT_DTYPES, case["id"]
    assert case["kv_dtype"] in KV_DTYPES, case["id"]
    assert isinstance(case["quote"], str) and case["quote"].strip(), case["id"]


@pytest.mark.parametrize("name,case", CASES, ids=[case["id"] for _, case in CASES])
def test_case_parallelism(name, case):
    tp, pp, ep, dp = (case.get(key, 1) for key in ("tp", "pp", "ep", "dp"))
    for value in (case["gpus"], tp, pp, ep, dp):
        assert isinstance(value, int) and value >= 1, case["id"]
    assert case["gpus"] % (tp * pp) == 0, f"{case['id']}: {case['gpus']} GPUs, TP {tp} x PP {pp}"
    assert ep <= case["gpus"] and dp <= case["gpus"], case["id"]


@pytest.mark.parametrize("name,case", CASES, ids=[case["id"] for _, case in CASES])
def test_case_model_and_sku_known_or_flagged(name, case):
    flagged = NOT_IN_CATALOGUE in str(case.get("notes", ""))
    where = f"{case['id']}: neither catalogued nor flagged:"
    assert case["model"] in MODELS or flagged, f"{where} model {case['model']}"
    assert case["sku"] in SKUS or flagged, f"{where} sku {case['sku']}"


@pytest.mark.parametrize("name,case", CASES, ids=[case["id"] for _, case in CASES])
def test_case_workload(name, case):
    work = case["workload"]
    assert set(work) <= WORKLOAD_KEYS and work["kind"] in WORKLOAD_KINDS, case["id"]
    needs = {"concurrency": "concurrency", "rate": "rate", "latency": "batch"}.get(work["kind"])
    assert needs is None or work.get(needs, 0) > 0, f"{case['id']}: {work['kind']} needs {needs}"
    counts = ("input_tokens", "output_tokens", "requests", "concurrency", "batch")
    for key in (*counts, "total_input_tokens", "total_output_tokens"):
        value = work.get(key, 1)
        assert isinstance(value, int) and value > 0, f"{case['id']}: {key}"
    lengths = "input_tokens" in work and "output_tokens" in work
    noted = "lengths not stated" in str(case.get("notes", "")).lower()
    assert lengths or noted, f"{case['id']}: input/output lengths, or a note they are not stated"
    printed = _numbers(case["quote"])
    for key in ("total_input_tokens", "total_output_tokens"):
        assert key not in work or _printed(work[key], printed), f"{case['id']}: {key} not quoted"


@pytest.mark.parametrize("name,case", CASES, ids=[case["id"] for _, case in CASES])
def test_case_measured_in_quote(name, case):
    measured = case["measured"]
    assert measured, case["id"]
    printed = _numbers(case["quote"])
    for key, value in measured.items():
        where = f"{case['id']}: {key}"
        assert key in THROUGHPUT_KEYS or LATENCY_KEY.fullmatch(key), f"{where}: no unit"
        assert isinstance(value, (int, float)) and value > 0, where
        assert _printed(value, printed), f"{where} = {value} is not printed in the quote"


def test_ids_unique():
    ids = [case["id"] for _, case in CASES]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


def _is_moe(case: dict) -> bool:
    spec = MODELS.get(case["model"])
    return spec is not None and spec.moe is not None


def _is_latency(case: dict) -> bool:
    timed = any(LATENCY_KEY.fullmatch(key) for key in case["measured"])
    return case["workload"]["kind"] == "latency" or timed


def test_coverage_the_step_model_needs():
    cases = [case for _, case in CASES]
    assert len(cases) >= 40
    families = {SKUS[c["sku"]].family for c in cases if c["sku"] in SKUS}
    assert len(families) >= 3, families
    assert len({c["model"] for c in cases}) >= 3
    assert len({c["model"] for c in cases if _is_moe(c)}) >= 3
    engines = {case.get("engine", SOURCES[name]["engine"]) for name, case in CASES}
    assert {"vllm", "sglang", "trtllm"} <= engines, engines
    assert {1, 2, 4, 8} <= {c["tp"] for c in cases}
    assert {"bf16", "fp8"} <= {c["weight_dtype"] for c in cases}
    kinds = {c["workload"]["kind"] for c in cases}
    assert {"offline", "concurrency", "latency"} <= kinds, kinds
    assert any(THROUGHPUT_KEYS & set(c["measured"]) for c in cases)
    assert sum(_is_latency(c) for c in cases) >= 10


def test_splits_balanced_and_moe_in_both():
    cases = [case for _, case in CASES]
    for split in ("fit", "test"):
        assert any(c["split"] == split for c in cases), split
        assert any(c["split"] == split and _is_moe(c) for c in cases), f"no MoE case in {split}"
        assert any(c["split"] == split and _is_latency(c) for c in cases), f"no latency in {split}"
    fit = sum(c["split"] == "fit" for c in cases)
    assert 0.4 <= fit / len(cases) <= 0.6, f"{fit} of {len(cases)} in fit"


@pytest.mark.parametrize("kind", sorted(SOURCE_KINDS))
def test_each_source_kind_is_split_about_evenly(kind):
    splits = [c["split"] for name, c in CASES if SOURCES[name]["source_kind"] == kind]
    if len(splits) >= 4:
        fit = splits.count("fit")
        assert 0.3 <= fit / len(splits) <= 0.7, f"{kind}: {fit} of {len(splits)} in fit"


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_split_follows_the_stated_rule(name):
    """Fit, test, fit, ... down each file (README.md), so no case was placed by its error."""
    splits = [case["split"] for case in SOURCES[name]["cases"]]
    assert splits == [("fit", "test")[i % 2] for i in range(len(splits))], name


# ---- serving papers -------------------------------------------------------------------------


def test_pagedattention_fig13_and_fig2():
    doc = _load(PAPERS / "pagedattention_fig13_fig2.yaml")
    assert doc["source"].startswith("https://") and doc["how_read"].strip() and doc["quote"].strip()
    assert doc["setup"]["catalogue_model"] in MODELS and doc["setup"]["sku"] in SKUS
    fig13 = doc["fig13_mean_batched_requests"]
    assert (fig13["sharegpt_rate_rps"], fig13["alpaca_rate_rps"]) == (2, 30)
    systems = {"orca_max", "orca_pow2", "orca_oracle", "vllm"}
    for trace in ("sharegpt", "alpaca"):
        batches = fig13[trace]
        assert set(batches) == systems, trace
        order = [batches[s] for s in ("orca_max", "orca_pow2", "orca_oracle", "vllm")]
        assert order == sorted(order) and len(set(order)) == 4, trace
    # The paper's text: vLLM batches 2.2x Orca (Oracle) and 4.3x Orca (Max) on ShareGPT (Fig. 13a).
    share = fig13["sharegpt"]
    assert round(share["vllm"] / share["orca_oracle"], 1) == 2.2
    assert round(share["vllm"] / share["orca_max"], 1) == 4.3
    shares = doc["fig2_memory_shares_percent"]
    for system in systems:
        assert abs(sum(shares[system].values()) - 100) <= 0.2, system
    # The paper's text: "only 20.4%-38.2%" of KV memory holds token states in the existing systems.
    states = [shares[s]["token_states"] for s in ("orca_max", "orca_pow2", "orca_oracle")]
    assert (min(states), max(states)) == (20.4, 38.2)


def test_distserve_example():
    doc = _load(PAPERS / "distserve_goodput_example.yaml")
    assert doc["source"].startswith("https://") and doc["quote"].strip()
    setup, measured = doc["setup"], doc["measured"]
    assert setup["sku"] in SKUS and setup["gpus_colocated"] == 1
    assert setup["slo"]["ttft_p90_s"] == 0.4 and setup["slo"]["tpot_p90_s"] == 0.04
    assert (setup["workload"]["input_tokens"], setup["workload"]["output_tokens"]) == (512, 64)
    split = measured["disaggregated"]["split"]
    assert (split["prefill_gpus"], split["decode_gpus"], split["label"]) == (2, 1, "2P1D")
    colocated = measured["colocated"]["goodput_rps_per_gpu"]
    disaggregated = measured["disaggregated"]["goodput_rps_per_gpu"]
    assert 1.8 <= disaggregated / colocated <= 2.2  # "yields 2x goodput improvement"
    for value in (colocated, disaggregated, measured["disaggregated"]["prefill_worker_rps"]):
        assert str(value) in doc["quote"]
