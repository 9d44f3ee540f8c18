"""The workloads people benchmark with: closed loop, offline and rate; overload and goodput.

Step times come from a one-row measured table (every step 10 ms), so a request's service
time is hand arithmetic: with max_num_seqs 1, a request of O output tokens takes one prefill
step (which samples the first token) and O − 1 decode steps, O steps of 10 ms in all, and the
next queued request is admitted on the step after it returns.
"""

from __future__ import annotations

import itertools
import json

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engine import engine
from kvplan.engine.deployment import Deployment
from kvplan.engine.settings import EngineSettings
from kvplan.simulate import (
    SimConfig,
    Slo,
    offline_workload,
    parse_distribution,
    poisson_workload,
    simulate,
)
from kvplan.simulate.step_table import StepTable

STEP_S = 0.010
TABLE = StepTable("one row", ((1,), (0,), (0,)), {(1, 0, 0): STEP_S})
PROMPT = parse_distribution("100", "--prompt-tokens")


@pytest.fixture
def run():
    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args), env={"COLUMNS": "200"})


def _deployment(catalog, max_num_seqs: int | None = None) -> Deployment:
    settings = EngineSettings(max_num_seqs=max_num_seqs)
    return Deployment(catalog.model("llama-3.1-8b"), engine("vllm"), settings=settings)


def _config(**changes) -> SimConfig:
    return SimConfig(max_model_len=4096, step_table=TABLE, **changes)


def _in_flight_peak(records) -> int:
    """The most requests between send and return at once (a return frees before a send)."""
    events = sorted([(r.finish_s, -1) for r in records] + [(r.arrival_s, 1) for r in records])
    peak = current = 0
    for _, change in events:
        current += change
        peak = max(peak, current)
    return peak


@pytest.mark.parametrize(("instances", "router"), [(1, "round-robin"), (2, "least-loaded")])
def test_closed_loop_keeps_n_in_flight_and_sends_on_each_return(catalog, instances, router):
    output = parse_distribution("uniform:2-40", "--output-tokens")
    workload = offline_workload(PROMPT, output, requests=60, seed=3, max_concurrency=4)
    config = _config(instances=instances, router=router)
    result = simulate(_deployment(catalog), catalog.sku("h100-sxm"), workload, config)
    records = result.requests
    assert len(records) == 60
    assert _in_flight_peak(records) == 4
    sends = sorted(r.arrival_s for r in records)
    finishes = sorted(r.finish_s for r in records)
    # The first four go at t = 0; request 4 + k goes when the k-th of those in flight returns.
    assert sends[:4] == [0.0] * 4
    assert sends[4:] == pytest.approx(finishes[:-4], abs=1e-12)
    assert result.saturation.window_s is None and not result.saturation.overloaded


def test_a_capped_rate_sends_at_the_later_of_its_time_and_a_free_place(catalog):
    output = parse_distribution("20", "--output-tokens")  # 20 steps: 0.2 s a request
    workload = poisson_workload(50.0, PROMPT, output, requests=40, seed=1).capped(1)
    result = simulate(_deployment(catalog), catalog.sku("h100-sxm"), workload, _config())
    records = sorted(result.requests, key=lambda r: r.order)
    scheduled = [spec.arrival_s for spec in workload.requests]
    for previous, record in itertools.pairwise(records):
        assert record.arrival_s == pytest.approx(
            max(scheduled[record.order], previous.finish_s), abs=1e-12
        )


def test_offline_sends_every_request_at_zero(catalog):
    output = parse_distribution("uniform:1-30", "--output-tokens")
    workload = offline_workload(PROMPT, output, requests=50, seed=2)
    assert workload.kind == "offline" and workload.max_concurrency is None
    result = simulate(_deployment(catalog), catalog.sku("h100-sxm"), workload, _config())
    assert {r.arrival_s for r in result.requests} == {0.0}
    assert result.saturation.window_s is None
    # No arrival window: throughput is over the makespan, as trtllm-bench reports it.
    assert result.throughput_requests_per_s == pytest.approx(50 / result.makespan_s)


@pytest.mark.parametrize(("rate", "overloaded"), [(8.0, False), (15.0, True)])
def test_overload_line_iff_offered_is_above_the_service_rate(catalog, rate, overloaded):
    # Output 10 tokens, max_num_seqs 1: 10 steps × 10 ms = 0.1 s a request, so the instance
    # serves 10 req/s; 8 req/s is below it, 15 above (one within noise of it is not judged).
    output = parse_distribution("10", "--output-tokens")
    workload = poisson_workload(rate, PROMPT, output, requests=1500, seed=0)
    slo = Slo(ttft_s=1e6, tpot_s=1e6)  # every request meets it
    result = simulate(_deployment(catalog, 1), catalog.sku("h100-sxm"), workload, _config(slo=slo))
    verdict = result.saturation
    lines = [note for note in result.notes if note.startswith("overloaded:")]
    assert verdict.overloaded is overloaded and len(lines) == int(overloaded)
    window = workload.requests[-1].arrival_s
    assert verdict.offered_requests_per_s == pytest.approx(1500 / window)
    if overloaded:
        assert verdict.sustainable_requests_per_s == pytest.approx(10.0, rel=0.02)
        assert "about 10.0" in lines[0] or "about 9.9" in lines[0]
        # Goodput over the window is the sustainable rate, not the offered 15 req/s.
        assert result.goodput_requests_per_s == pytest.approx(verdict.sustainable_requests_per_s)
    else:
        assert verdict.sustainable_requests_per_s is None
        # Every request met the SLO: goodput is the offered rate over the arrival window,
        # not requests ÷ a makespan that includes the drain after the last arrival.
        assert result.goodput_requests_per_s == pytest.approx(1500 / window)
        assert result.goodput_requests_per_s > 1500 / result.makespan_s


def test_goodput_window_excludes_the_drain(catalog):
    # One request every ~2 s, each 1 s of service (100 steps): the last one returns about a
    # second after it arrives, a drain the makespan includes and the window does not.
    output = parse_distribution("100", "--output-tokens")
    workload = poisson_workload(0.5, PROMPT, output, requests=30, seed=4)
    slo = Slo(ttft_s=1e6, tpot_s=1e6)
    result = simulate(_deployment(catalog, 1), catalog.sku("h100-sxm"), workload, _config(slo=slo))
    window = workload.requests[-1].arrival_s
    assert result.makespan_s > window + 0.99
    assert result.goodput_requests_per_s == pytest.approx(30 / window)


def test_static_batching_past_saturation_says_so(run):
    result = run(
        "simulate", "llama-3.1-8b", "--sku", "h100-sxm", "--rate", "5", "--requests", "500",
        "--scheduler", "static", "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)["runs"][0]
    assert record["overloaded"] is True
    assert record["sustainable_requests_per_s"] < record["offered_requests_per_s"]
    assert any(note.startswith("overloaded:") for note in record["notes"])


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--offline", "--rate", "5"], "give --offline or --rate, not both"),
        (["--offline", "--concurrency", "4"], "give --offline or --concurrency, not both"),
        (["--concurrency", "4", "--duration", "10s"], "--duration: --concurrency has no"),
        (["--concurrency", "0"], "--concurrency"),
    ],
)
def test_workload_kind_conflicts_are_one_line(run, args, fragment):
    result = run("simulate", "llama-3.1-8b", "--sku", "h100-sxm", *args)
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr


def test_concurrency_and_offline_reach_the_json(run):
    closed = run(
        "simulate", "llama-3.1-8b", "--sku", "h100-sxm", "--concurrency", "8",
        "--requests", "40", "--format", "json",
    )  # fmt: skip
    record = json.loads(closed.stdout)["runs"][0]
    assert record["workload_kind"] == "closed-loop" and record["concurrency"] == 8
    assert record["arrival_window_s"] is None and record["overloaded"] is False
    offline = run(
        "simulate", "llama-3.1-8b", "--sku", "h100-sxm", "--offline", "--requests", "40",
        "--format", "json",
    )  # fmt: skip
    record = json.loads(offline.stdout)["runs"][0]
    assert record["workload_kind"] == "offline" and record["concurrency"] is None


def test_pools_refuses_a_closed_loop(run, catalog):
    # pools has no --concurrency option: one usage line naming it, exit 2.
    result = run(
        "pools", "llama-3.1-8b", "--sku", "h100-sxm", "--concurrency", "8",
        "--slo-ttft", "1s", "--slo-tpot", "50ms",
    )  # fmt: skip
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "error: No such option: --concurrency (see `kvplan pools --help`)"
    ]
    # The Python API refuses a capped workload the same way, with the reason.
    from kvplan.engine import engine
    from kvplan.engine.deployment import Deployment
    from kvplan.errors import KvplanError
    from kvplan.simulate import Slo, parse_distribution, poisson_workload
    from kvplan.simulate.pools import size_pools

    workload = poisson_workload(
        1.0, parse_distribution("64", "p"), parse_distribution("8", "o"), requests=10
    ).capped(8)
    deployment = Deployment(catalog.model("llama-3.1-8b"), engine("vllm"))
    with pytest.raises(KvplanError, match="a closed loop couples"):
        size_pools(deployment, catalog.sku("h100-sxm"), workload, Slo(1.0, 0.05))


def test_recommend_takes_concurrency_with_an_slo_as_a_closed_loop(run):
    result = run(
        "recommend", "llama-3.1-8b", "--sku", "h100-sxm", "--concurrency", "16",
        "--requests", "50", "--slo-tpot", "50ms", "--context", "8k", "--max-gpus", "1",
        "--format", "json",
    )  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    target = json.loads(result.stdout)["throughput"]
    assert target["workload"].startswith("closed loop, 16 clients, 50 requests")
    assert target["offered_requests_per_s"] is None  # no arrival window


def test_pools_sizes_an_offline_burst(run):
    result = run(
        "pools", "llama-3.1-8b", "--sku", "h100-sxm", "--offline", "--requests", "40",
        "--prompt-tokens", "512", "--output-tokens", "64", "--slo-ttft", "5s",
        "--slo-tpot", "50ms", "--max-model-len", "8k",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "40 requests all sent at t = 0" in result.stdout
