"""`pools --goodput`: the highest rate each layout serves at the SLO attainment.

DistServe (OSDI 2024) defines goodput as the highest rate at which at least the target share
of requests (90 %) meet both TTFT and TPOT; a request rejected counts as a miss.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engine import engine
from kvplan.engine.deployment import Deployment
from kvplan.simulate import SimConfig, Slo, Workload, simulate
from kvplan.simulate.pools.goodput import highest_rate
from kvplan.simulate.workload import RequestSpec

runner = CliRunner()
# Ten requests, one a second from t = 1 s: 10 over a 10 s window, 1 req/s.
TEN = Workload(tuple(RequestSpec(float(t), 8, 8) for t in range(1, 11)), "one a second")


def _until(limit: float):
    """Every request met up to `limit` req/s, none above."""

    def attained(workload: Workload) -> tuple[int, int]:
        met = workload.offered_requests_per_s <= limit
        return (10 if met else 0), 10

    return attained


def test_the_rate_is_bracketed_by_doubling_then_found_on_a_grid():
    # 1, 2, 4 met, 8 missed: the bracket [4, 8] in steps of 4/32 = 0.125 req/s; the
    # largest grid rate at most 7.3 is 4 + 26 × 0.125 = 7.25.
    rate, fraction, capped, tried = highest_rate(TEN, _until(7.3), 90)
    assert rate == pytest.approx(7.25) and fraction == 1.0 and not capped
    assert [r for r, _ in tried[:4]] == pytest.approx([1.0, 2.0, 4.0, 8.0])
    assert len(tried) == 4 + 5  # five bisection steps over 31 grid rates


def test_a_layout_missing_at_the_workload_rate_is_searched_downwards():
    # 1 missed, 0.5 missed, 0.25 met: the bracket [0.25, 0.5]; the largest grid rate at most
    # 0.3 is 0.25 + 6 × 0.25 / 32 = 0.296875.
    rate, _, _, _ = highest_rate(TEN, _until(0.3), 90)
    assert rate == pytest.approx(0.296875)


def test_never_met_is_0_and_always_met_is_a_capped_lower_bound():
    assert highest_rate(TEN, _until(0.0), 90)[0] == 0.0
    rate, _, capped, _ = highest_rate(TEN, _until(1e9), 90)
    assert rate == pytest.approx(1024.0) and capped


def test_the_attainment_is_the_share_of_all_requests_against_the_percentile():
    # 9 of 10 met is 90 %: enough at p90, not at p95. Grid [2, 4] by 1/16: 3.0 is on it.
    def nine(workload: Workload) -> tuple[int, int]:
        return (9 if workload.offered_requests_per_s <= 3.01 else 0), 10

    assert highest_rate(TEN, nine, 90)[0] == pytest.approx(3.0)
    assert highest_rate(TEN, nine, 95)[0] == 0.0


def test_at_rate_keeps_the_requests_and_scales_their_arrivals():
    faster = TEN.at_rate(4.0)
    assert faster.offered_requests_per_s == pytest.approx(4.0)
    assert [r.arrival_s for r in faster.requests] == pytest.approx([t / 4 for t in range(1, 11)])
    assert [r.prompt_tokens for r in faster.requests] == [8] * 10


POOLS = ["pools", "opt-13b", "-s", "a100-80gb", "--rate", "4", "--requests", "300",
         "--prompt-tokens", "512", "--output-tokens", "64",
         "--slo-ttft", "0.4s", "--slo-tpot", "0.04s"]  # fmt: skip


@pytest.fixture(scope="module")
def found() -> dict:
    result = runner.invoke(app, [*POOLS, "--goodput", "-f", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["pools"][0]


def test_simulate_agrees_the_colocated_goodput_is_met_and_the_next_rate_tried_above_is_not(
    found, catalog
):
    colocated = next(g for g in found["goodput"] if g["layout"] == "colocated")
    instances = found["colocated"]["instances"]
    assert colocated["split"] == f"{instances} × tp 1"
    assert colocated["gpus"] == instances
    rate = colocated["goodput_requests_per_s"]
    assert colocated["goodput_requests_per_s_per_gpu"] == pytest.approx(rate / instances)
    above = min(t["requests_per_s"] for t in colocated["tried"] if t["requests_per_s"] > rate)
    from kvplan.simulate import parse_distribution, poisson_workload

    workload = poisson_workload(
        4.0, parse_distribution("512", "p"), parse_distribution("64", "o"), requests=300
    )
    config = SimConfig(instances=instances, router="least-loaded", slo=Slo(ttft_s=0.4, tpot_s=0.04))
    deployment = Deployment(catalog.model("opt-13b"), engine("vllm"))
    sku = catalog.sku("a100-80gb")
    at = simulate(deployment, sku, workload.at_rate(rate), config)
    assert at.slo_met_fraction >= 0.9
    assert simulate(deployment, sku, workload.at_rate(above), config).slo_met_fraction < 0.9


def test_the_disaggregated_goodput_is_for_the_split_chosen(found):
    disaggregated = next(g for g in found["goodput"] if g["layout"] == "disaggregated")
    assert disaggregated["split"] == found["ratio"]
    assert disaggregated["gpus"] == found["disaggregated_gpus"]
    assert disaggregated["slo_met_fraction"] >= 0.9


def test_the_table_shows_a_goodput_row_per_layout():
    result = runner.invoke(app, [*POOLS, "--goodput"])
    assert result.exit_code == 0, result.output
    assert "goodput colocated" in result.stdout and "goodput disaggregated" in result.stdout
    assert "the highest rate at which 90 % of the requests meet both SLOs" in result.stdout


def test_without_goodput_the_json_list_is_empty():
    result = runner.invoke(app, [*POOLS, "-f", "json"])
    assert json.loads(result.stdout)["pools"][0]["goodput"] == []


def test_goodput_needs_arrival_times():
    args = [a if a != "--rate" else "--offline" for a in POOLS]
    args.remove("4")
    result = runner.invoke(app, [*args, "--goodput"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip() == (
        "error: --goodput: searches a rate, so the workload needs arrival times "
        "(give --rate or --trace)"
    )
