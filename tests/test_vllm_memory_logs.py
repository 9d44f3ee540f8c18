"""Public vLLM startup logs with their memory terms (golden/vllm_memory), and SKU runtime totals.

Each log file holds its `source:`, the quoted lines and the logged budget terms in GiB as printed
(null where the log does not print them). These tests check the data itself, never kvplan's
output: the terms a log prints must add up to the KV budget it prints, within the rounding of
the printed figures (every GiB figure is printed to 0.01, so each carries +/-0.005 GiB):

    V0 0.6.5+, V1:  total x util - weights - activation - non_torch [- CUDA graphs] = available
    V0 0.6.4:       total x util - peak_torch - non_torch = available  (peak_torch has weights)

vLLM 0.11+ also prints `--kv-cache-memory` suggestions in exact bytes; they equal
requested - weights - activation - non_torch - CUDA graphs - 150 MiB (the fixed
`redundancy_buffer_memory = 150 * (1 << 20)` of vLLM v1/worker/gpu_worker.py).
Quotes keep each line's message; process prefixes and hard wraps of the stored logs may be dropped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

GOLDEN = Path(__file__).parent / "golden" / "vllm_memory"
GIB = 2**30
MIB = 2**20
HALF_ULP_GIB = 0.005  # a figure printed to 0.01 GiB
EPS = 1e-9
REDUNDANCY_BUFFER_GIB = 150 * MIB / GIB  # vLLM gpu_worker.py redundancy_buffer_memory

REQUIRED = {
    "source": str,
    "quote": str,
    "vllm_version": str,
    "vllm_version_basis": str,
    "engine": str,
    "gpu_basis": str,
    "tp": int,
    "pp": int,
    "dp": int,
    "model": str,
    "weights_dtype": str,
    "kv_cache_dtype": str,
    "max_model_len": int,
    "gpu_memory_utilization": float,
    "enforce_eager": bool,
    "settings_basis": dict,
    "cudagraph_subtracted": bool,
    "memory_gib": dict,
    "kv": dict,
    "inferred": dict,
}
NULLABLE = ("gpu", "sku", "catalog_model", "max_num_seqs", "max_num_batched_tokens")
MEMORY_TERMS = (
    "total",
    "requested",
    "free_at_start",
    "weights",
    "peak_torch",
    "activation_peak",
    "non_torch",
    "cudagraph_estimate",
    "cudagraph_actual",
    "available_kv",
)
KV_TERMS = ("block_size", "num_gpu_blocks", "gpu_kv_cache_tokens", "max_concurrency")


def _cases() -> dict[str, dict]:
    return {p.stem: yaml.safe_load(p.read_text()) for p in sorted(GOLDEN.glob("*.yaml"))}


CASES = _cases()


def _budget_residual(case: dict, rank: dict) -> tuple[float, float] | None:
    """(logged available - sum of the logged terms, tolerance) in GiB; None: a term is missing."""
    mem, util = case["memory_gib"], case["gpu_memory_utilization"]
    if mem["requested"] is not None:
        start, tol = mem["requested"], HALF_ULP_GIB
    elif mem["total"] is not None:
        start, tol = mem["total"] * util, HALF_ULP_GIB * util
    else:
        return None
    if rank.get("peak_torch") is not None:
        terms = [rank["peak_torch"], rank["non_torch"]]
    else:
        terms = [rank.get("weights"), rank.get("activation_peak"), rank.get("non_torch")]
    if case["cudagraph_subtracted"]:
        terms.append(mem["cudagraph_estimate"])
    if rank.get("available_kv") is None or any(t is None for t in terms):
        return None
    tol += HALF_ULP_GIB * (len(terms) + 1)
    return rank["available_kv"] - (start - sum(terms)), tol


@pytest.mark.parametrize("name", sorted(CASES))
def test_required_keys_and_types(name):
    case = CASES[name]
    for key, kind in REQUIRED.items():
        assert isinstance(case.get(key), kind), f"{name}: {key} = {case.get(key)!r}"
    for key in NULLABLE:
        assert key in case, f"{name}: {key} missing (use null)"
    assert case["source"].startswith("https://"), name
    assert case["quote"].strip(), name
    assert case["engine"] in ("v0", "v1"), name
    assert min(case["tp"], case["pp"], case["dp"]) >= 1, name
    assert 0 < case["gpu_memory_utilization"] <= 1, name
    assert set(case["memory_gib"]) == set(MEMORY_TERMS), name
    assert set(case["kv"]) == set(KV_TERMS), name


@pytest.mark.parametrize("name", sorted(CASES))
def test_catalogue_names_exist(name, catalog):
    case = CASES[name]
    if case["sku"] is not None:
        assert catalog.sku(case["sku"]).name == case["sku"]
    for key in ("catalog_model", "catalog_geometry"):
        if case.get(key) is not None:
            assert catalog.model(case[key]).name == case[key]


@pytest.mark.parametrize("name", sorted(CASES))
def test_logged_terms_add_up_to_the_logged_budget(name):
    case = CASES[name]
    ranks = [case["memory_gib"], *case.get("other_ranks", [])]
    checked = 0
    for rank in ranks:
        result = _budget_residual(case, rank)
        if result is None:
            continue
        residual, tol = result
        assert abs(residual) <= tol + EPS, (name, rank, residual, tol)
        checked += 1
    mem = case["memory_gib"]
    if mem["total"] is not None and mem["requested"] is not None:
        # vLLM prints both; requested = total x util (each printed to 0.01 GiB).
        slack = HALF_ULP_GIB * (1 + case["gpu_memory_utilization"]) + EPS
        assert abs(mem["total"] * case["gpu_memory_utilization"] - mem["requested"]) <= slack, name
    if checked == 0:
        # A partial log: it must say why (an inferred note) and still log the budget or the weights.
        assert case["inferred"], f"{name}: a partial log needs an inferred note"
        assert mem["available_kv"] is not None or mem["weights"] is not None, name


@pytest.mark.parametrize(
    "name", sorted(n for n, c in CASES.items() if "kv_cache_memory_suggestion" in c)
)
def test_kv_cache_memory_suggestions(name):
    case = CASES[name]
    mem, sug = case["memory_gib"], case["kv_cache_memory_suggestion"]
    for kind in ("fit", "full"):
        # The exact byte count rounds to the GiB figure printed beside it.
        printed = sug[f"{kind}_gib"]
        assert abs(sug[f"{kind}_bytes"] / GIB - printed) <= HALF_ULP_GIB + EPS, (name, kind)
    used = mem["weights"] + mem["activation_peak"] + mem["non_torch"] + mem["cudagraph_actual"]
    tol = HALF_ULP_GIB * 6 + EPS  # start, four terms, the printed suggestion
    fit = mem["requested"] - used - REDUNDANCY_BUFFER_GIB
    assert abs(fit - sug["fit_gib"]) <= tol, (name, fit, sug["fit_gib"])
    if mem["free_at_start"] is not None:
        full = mem["free_at_start"] - used - REDUNDANCY_BUFFER_GIB
        assert abs(full - sug["full_gib"]) <= tol, (name, full, sug["full_gib"])


def test_log_set_is_broad():
    # The budget model is fitted and tested on these: many logs, several GPUs, versions, TP degrees.
    assert len(CASES) >= 25
    skus = {c["sku"] for c in CASES.values() if c["sku"]}
    assert {"h100-sxm", "a100-80gb", "a100-40gb", "rtx-3090", "rtx-4090", "rtx-5090"} <= skus
    assert {c["engine"] for c in CASES.values()} == {"v0", "v1"}
    assert {1, 2, 4, 16} <= {c["tp"] for c in CASES.values()}
    complete = [n for n, c in CASES.items() if _budget_residual(c, c["memory_gib"]) is not None]
    assert len(complete) >= 20


def test_arithmetic_check_can_fail():
    # The same check rejects a budget that is 0.05 GiB off (the tolerance is a few rounding steps).
    case = dict(CASES["llama31-8b-h100-tp1-v0.11"])
    mem = case["memory_gib"]
    case["memory_gib"] = dict(mem, available_kv=mem["available_kv"] + 0.05)
    residual, tol = _budget_residual(case, case["memory_gib"])
    assert abs(residual) > tol


# ---- runtime-visible memory of the shipped SKUs ----------------------------------------------

PRINTED = re.compile(r"printed (\d+\.(\d+)) GiB")
EXACT = re.compile(r"\((\d+) bytes\)")
TRUNCATED_MIB = re.compile(r"(\d+) MiB \(truncated\)")
INTERVAL = re.compile(r"in \[(\d+\.\d+), (\d+\.\d+)\) GiB")
RULE = re.compile(r"rule: (?:nvidia-smi|hl-smi) total (\d+) MiB x (0\.\d+)")
KFD_RULE = re.compile(r"rule: (\d+) GiB - 16 MiB")  # AMD: capacity less the KFD reservation


def test_runtime_memory_below_datasheet_memory(catalog):
    for sku in catalog.skus():
        if sku.runtime_memory_bytes is None:
            assert any("runtime_memory_bytes not set" in note for note in sku.notes), sku.name
            continue
        assert sku.runtime_memory_bytes <= sku.memory_bytes, sku.name
        assert sku.runtime_memory_basis, sku.name


def _check_basis(name: str, runtime: int, basis: str) -> int:
    """Assert runtime lies inside every figure the basis cites; return how many it cites."""
    checks = 0
    if (m := PRINTED.search(basis)) is not None:
        half = 0.5 * 10 ** -len(m.group(2))
        assert float(m.group(1)) - half - EPS <= runtime / GIB < float(m.group(1)) + half, name
        checks += 1
    if (m := EXACT.search(basis)) is not None:
        assert runtime == int(m.group(1)), name
        checks += 1
    if (m := TRUNCATED_MIB.search(basis)) is not None:
        assert int(m.group(1)) * MIB <= runtime < (int(m.group(1)) + 1) * MIB, name
        checks += 1
    if (m := INTERVAL.search(basis)) is not None:
        assert float(m.group(1)) - 1e-4 <= runtime / GIB < float(m.group(2)), name
        checks += 1
    if (m := RULE.search(basis)) is not None:
        # nvidia-smi MiB x the measured sibling's ratio, floored to whole MiB.
        expected_mib = int(int(m.group(1)) * float(m.group(2)))
        assert runtime == expected_mib * MIB, (name, runtime / MIB, expected_mib)
        checks += 1
    if (m := KFD_RULE.search(basis)) is not None:
        assert runtime == int(m.group(1)) * GIB - 16 * MIB, name
        checks += 1
    return checks


def test_runtime_memory_lies_in_its_cited_rounding_interval(catalog):
    for sku in catalog.skus():
        if sku.runtime_memory_bytes is None:
            continue
        cited = _check_basis(sku.name, sku.runtime_memory_bytes, sku.runtime_memory_basis)
        assert cited >= 1, f"{sku.name}: the basis cites no checkable figure or rule"


def test_basis_check_can_fail():
    # A runtime figure one MiB above a printed 79.18 GiB interval is rejected.
    with pytest.raises(AssertionError):
        _check_basis("probe", int(79.185 * GIB) + MIB, "total printed 79.18 GiB")
    with pytest.raises(AssertionError):
        _check_basis("probe", 42298834944 + 1, "deviceQuery 40339 MBytes (42298834944 bytes)")
