"""`recommend` with a throughput target: rates one deployment clearly serves within the SLOs
and rates it clearly cannot, reasoned from datasheet figures and the roofline by hand."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.cli import app
from kvplan.errors import KvplanError
from kvplan.simulate import SimConfig, Slo, parse_distribution, poisson_workload

runner = CliRunner()


def workload(rate: float, prompt: int, output: int, requests: int = 200):
    return poisson_workload(
        rate,
        parse_distribution(str(prompt), "--prompt-tokens"),
        parse_distribution(str(output), "--output-tokens"),
        requests=requests,
    )


def goodput(model: str, skus, load, slo: Slo, **options):
    return kvplan.recommend(
        model,
        context="8k",
        skus=skus,
        kv_dtypes=["bf16"],
        quantization=False,
        workload=load,
        simulation=SimConfig(slo=slo),
        **options,
    )


# Llama-3.1-8B: 8,030,261,248 parameters (model card), 16.06 GB in bf16. H100 SXM: 3.35 TB/s;
# at the default 85 % of it a decode step of a few sequences reads the weights in about
# 16.06e9 / 2.85e12 = 5.6 ms, and a 128-token prefill is 2 x 8.03e9 x 128 = 2.1 TFLOP, about
# 4 ms at half the 989 TFLOP/s dense bf16 peak. At 0.5 requests/s (one every 2 s) a request of
# 128 + 64 tokens is done in well under a second: every request meets TTFT 1 s and TPOT 50 ms
# on one GPU, the least the search can offer.
def test_a_rate_one_gpu_clearly_serves_needs_one_gpu():
    result = goodput("llama-3.1-8b", "h100-sxm", workload(0.5, 128, 64), Slo(1.0, 0.05))
    first = result.ranked[0]
    assert result.meets and (first.sku, first.gpus) == ("h100-sxm", 1)
    assert first.slo_met_fraction == 1.0
    assert result.throughput.slo_attainment_fraction == 0.9
    assert result.search.simulations >= 1
    assert first.launch_command.startswith("vllm serve meta-llama/Llama-3.1-8B")


# 8000-token prompts (8016 tokens with the output: within the 8k context): each prefill is at
# least 2 x 8.03e9 x 8000 = 1.28e14 FLOP, 0.13 s even at the full 989 TFLOP/s dense bf16 peak,
# so one H100 prefills at most 7.7 prompts/s and four at most 30.9. At 40 requests/s the queue
# of four GPUs (in any tp x pp x dp split) grows by over 9 requests/s and most requests wait
# far beyond TTFT 2 s: more than 4 GPUs are needed.
def test_a_rate_four_gpus_clearly_cannot_serve_needs_more():
    load = workload(40, 8000, 16)
    result = goodput("llama-3.1-8b", "h100-sxm", load, Slo(2.0, None), max_gpus=8)
    if result.meets:
        assert result.ranked[0].gpus > 4
    else:
        assert result.closest_miss.slo_met_fraction < 0.9
    assert result.search.simulations >= 1
    capped = goodput("llama-3.1-8b", "h100-sxm", load, Slo(2.0, None), max_gpus=4)
    assert not capped.meets
    assert capped.closest_miss.slo_met_fraction < 0.9


# L4: 300 GB/s; 85 % of it reads the 16.06 GB of bf16 weights in 16.06e9 / 2.55e11 = 63 ms,
# longer than a 50 ms TPOT target whatever the batch: one L4 is ruled out without a run.
def test_a_decode_step_slower_than_tpot_is_ruled_out_without_simulating():
    load = workload(0.5, 128, 64)
    result = goodput("llama-3.1-8b", "l4", load, Slo(None, 0.05), max_gpus=1)
    assert not result.meets
    assert result.closest_miss.slo_met_fraction == 0.0
    assert result.search.simulations == 0


@pytest.mark.parametrize("slo", [Slo(2.0, None), Slo(2.0, 0.1)])
def test_a_sku_without_peak_flops_is_a_miss_whatever_the_slo(slo):
    # The A10G's file lists no peak FLOP/s: the roofline cannot time it, so it is not
    # simulated and counts as a miss, with a TTFT-only target as with a TPOT one; the L4
    # (121 TFLOP/s dense bf16) still serves 0.5 req/s of 128 + 64 tokens.
    result = goodput("llama-3.1-8b", ("a10g", "l4"), workload(0.5, 128, 64), slo, max_gpus=1)
    assert result.meets and result.ranked[0].sku == "l4"
    assert any(note.startswith("a10g: not simulated") for note in result.throughput.notes)


def test_a_throughput_target_needs_an_slo():
    with pytest.raises(KvplanError, match="--slo-ttft, --slo-tpot or both"):
        goodput("llama-3.1-8b", "h100-sxm", workload(1, 128, 64), Slo())


def test_attainment_out_of_range_is_refused():
    with pytest.raises(KvplanError, match="--slo-attainment"):
        goodput("llama-3.1-8b", "h100-sxm", workload(1, 128, 64), Slo(1.0), slo_attainment="120%")


RATE = (
    "recommend",
    "llama-3.1-8b",
    "--sku",
    "h100-sxm",
    "-c",
    "8k",
    "--kv-dtype",
    "bf16",
    "--no-quantization",
    "--rate",
    "0.5",
    "--requests",
    "100",
    "--prompt-tokens",
    "128",
    "--output-tokens",
    "64",
)


def test_cli_json_for_a_throughput_target():
    result = runner.invoke(
        app, [*RATE, "--slo-ttft", "1s", "--slo-tpot", "50ms", "-f", "json"], env={"COLUMNS": "40"}
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["throughput"]["slo_ttft_s"] == 1.0
    assert payload["throughput"]["slo_tpot_s"] == 0.05
    assert payload["throughput"]["requests"] == 100
    assert payload["concurrency"] is None
    assert payload["ranked"][0]["gpus"] == 1
    assert payload["ranked"][0]["slo_met_fraction"] == 1.0


def test_cli_table_shows_slo_and_goodput():
    result = runner.invoke(app, [*RATE, "--slo-ttft", "1s"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "≥ 90% of requests within TTFT 1 s" in result.stdout
    assert "SLO met" in result.stdout and "goodput req/s" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--slo-ttft", "1s"], "--slo-ttft needs a throughput target"),
        (["--rate", "1"], "needs --slo-ttft, --slo-tpot or both"),
        (["--rate", "1", "--slo-ttft", "1s", "-n", "4"], "--concurrency"),
        (["--rate", "1", "--slo-ttft", "1s", "--instances", "2"], "--instances"),
        (["--rate", "1", "--slo-ttft", "1s", "--max-model-len", "4k"], "--max-model-len"),
        (["--rate", "1", "--slo-ttft", "1s", "--engine", "llama.cpp"], "give --ctx-size and"),
    ],
)
def test_cli_refuses_options_that_do_not_fit_the_target(args, message):
    base = ["recommend", "llama-3.1-8b", "--sku", "h100-sxm", "-c", "8k"]
    result = runner.invoke(app, [*base, *args])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("rate", ["2", "60"])  # a light load, and one where some requests miss
def test_the_recommended_command_simulates_to_the_same_figures(rate):
    # The first's `vllm serve` flags, fed to `kvplan simulate` with the same workload and
    # SLOs (no headroom, so the pool is the launched one), give the same share and goodput.
    from tests.test_recommend_cli import report_args

    workload_args = ["--rate", rate, "--requests", "100", "--prompt-tokens", "512"]
    workload_args += ["--output-tokens", "64", "--slo-ttft", "500ms", "--slo-tpot", "20ms"]
    asked = ["-s", "h100-sxm", "-c", "4k", "--max-gpus", "2", "--headroom", "0"]
    result = runner.invoke(
        app, ["recommend", "llama-3.1-8b", *asked, *workload_args, "--top", "1", "-f", "json"]
    )
    assert result.exit_code in (0, 1), result.output
    payload = json.loads(result.stdout)
    first = (payload["ranked"] or [payload["closest_miss"]])[0]
    args = report_args(first["launch_command"])
    model, flags = args[1], args[2:]
    flags[flags.index("--context")] = "--max-model-len"
    simulated = runner.invoke(
        app, ["simulate", model, "-s", "h100-sxm", *flags, *workload_args, "-f", "json"]
    )
    assert simulated.exit_code == 0, (flags, simulated.output)
    (run,) = json.loads(simulated.stdout)["runs"]
    assert run["instances"] == first["dp"]
    assert run["slo_met_fraction"] == first["slo_met_fraction"]
    assert run["goodput_requests_per_s"] == first["goodput_requests_per_s"]


def test_the_pruned_search_agrees_with_every_memory_fraction_searched_alone():
    # vLLM 0.11's default fraction is 0.9; the search also tries 0.92 and 0.95 (highest first,
    # then the lowest that meets). Fixing each fraction in turn and searching the rest is the
    # brute force over fractions: the same shapes meet, and each listed one is at the lowest
    # fraction at which its layout meets.
    load = workload(40, 2048, 512, requests=150)
    slo = Slo(1.0, 0.03)
    common = {"max_gpus": 2, "top": 999, "headroom": 0}
    free = goodput("llama-3.1-8b", "h100-sxm", load, slo, **common)
    alone = {
        u: goodput("llama-3.1-8b", "h100-sxm", load, slo, utilization=u, **common)
        for u in (0.9, 0.92, 0.95)
    }

    def layout(c):
        return (c.sku, c.tp, c.pp, c.dp)

    lowest: dict[tuple, float] = {}
    for u, result in sorted(alone.items(), reverse=True):
        lowest |= {layout(c): u for c in result.ranked}
    shapes = {(c.sku, c.gpus) for r in alone.values() for c in r.ranked}
    assert {(c.sku, c.gpus) for c in free.ranked} == shapes
    for c in free.ranked:
        assert c.gpu_memory_utilization == lowest[layout(c)]
