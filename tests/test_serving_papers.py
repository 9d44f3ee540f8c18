"""Two serving papers' own figures, run through the CLI (bench/serving_papers.py says how).

Expected numbers come from tests/golden/serving_papers/*.yaml only (the papers' figures).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from serving_papers import DISTSERVE, distserve_pools, fig13_rows, goodput_per_gpu, load

TOLERANCE = 0.25  # Fig. 13 within 25 %, the gain within 25 %


@pytest.fixture(scope="module")
def fig13() -> list[tuple[str, str, float, float]]:
    return fig13_rows()


@pytest.fixture(scope="module")
def distserve() -> tuple[dict, dict]:
    return distserve_pools(), load(DISTSERVE)["measured"]


def test_fig13_mean_batched_requests_within_25_percent(fig13):
    for dataset, system, predicted, measured in fig13:
        assert abs(predicted / measured - 1) <= TOLERANCE, (dataset, system, predicted, measured)


def test_fig13_vllm_batches_more_than_orca_max_by_the_papers_factor(fig13):
    by = {(dataset, system): (p, m) for dataset, system, p, m in fig13}
    for dataset in ("sharegpt", "alpaca"):
        (ours_v, paper_v), (ours_o, paper_o) = by[dataset, "vllm"], by[dataset, "orca_max"]
        assert abs((ours_v / ours_o) / (paper_v / paper_o) - 1) <= TOLERANCE, dataset


def test_distserve_pools_picks_disaggregation(distserve):
    pools, _ = distserve
    assert pools["disaggregated_gpus"] < pools["colocated_gpus"]


@pytest.mark.xfail(
    strict=True,
    reason="speed model: one prefill GPU serves 512-token OPT-13B prompts at >= 12 req/s within "
    "P90 TTFT 0.4 s (DistServe: 5.6) and one decode GPU >= 14 req/s within P90 TPOT 0.04 s "
    "(DistServe: 10), so 1P1D covers 10 req/s; the prefill-to-decode speed ratio is the "
    "step model's, not the search's",
)
def test_distserve_split_is_the_papers(distserve):
    pools, paper = distserve
    assert pools["ratio"] == paper["disaggregated"]["split"]["label"]


def test_distserve_goodput_gain_per_gpu_within_25_percent(distserve):
    _, paper = distserve
    colocated, disaggregated, _ = goodput_per_gpu()
    theirs = (
        paper["disaggregated"]["goodput_rps_per_gpu"] / paper["colocated"]["goodput_rps_per_gpu"]
    )
    assert abs((disaggregated / colocated) / theirs - 1) <= TOLERANCE


@pytest.mark.xfail(
    strict=True,
    reason="follows from the 1P1D split: at 10 req/s kvplan needs 2 GPUs disaggregated against "
    "3 colocated (1.5x per GPU); DistServe 3 against 6.25 (2.06x)",
)
def test_distserve_gpus_at_the_papers_rate_within_25_percent(distserve):
    pools, paper = distserve
    ours = pools["disaggregated_requests_per_s_per_gpu"] / pools["colocated_requests_per_s_per_gpu"]
    theirs = (
        paper["disaggregated"]["goodput_rps_per_gpu"] / paper["colocated"]["goodput_rps_per_gpu"]
    )
    assert abs(ours / theirs - 1) <= TOLERANCE


def test_distserve_goodput_of_the_layouts_at_the_papers_rate_within_25_percent(distserve):
    # DistServe's own measure at its own rate: the layouts pools picks at 10 req/s (1P1D and
    # 3 colocated GPUs), each at the highest rate with 90 % of requests inside both SLOs.
    _, paper = distserve
    colocated, disaggregated, _ = goodput_per_gpu(paper["disaggregated"]["goodput_rps"])
    theirs = (
        paper["disaggregated"]["goodput_rps_per_gpu"] / paper["colocated"]["goodput_rps_per_gpu"]
    )
    assert abs((disaggregated / colocated) / theirs - 1) <= TOLERANCE
