"""`kvplan pools` judges each pool as `simulate` judges goodput: rejected requests are misses.

The expected rejections are worked out here from the request lengths and the pool's block
count; agreement with `simulate` is checked on the very same workload and instance count.
"""

from __future__ import annotations

import json
import math
import shlex

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engine import engine
from kvplan.engine.deployment import Deployment
from kvplan.simulate import (
    SimConfig,
    Slo,
    instance_model,
    meets_percentile,
    parse_distribution,
    poisson_workload,
)
from kvplan.simulate import simulate as run_simulation
from kvplan.simulate.instance import TOO_LARGE, TOO_LONG
from kvplan.simulate.pools import size_pools

runner = CliRunner()
VLLM = engine("vllm")
# Llama-3.1-8B config.json: max_position_embeddings 131,072; vLLM's blocks hold 16 tokens.
LLAMA_8B_CONTEXT_TOKENS = 131_072
TOKENS_PER_BLOCK = 16


def run(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


def poisson(rate: float, prompt: str, output: str, requests: int):
    """Poisson arrivals at `rate` req/s with the written length distributions (seed 0)."""
    return poisson_workload(
        rate,
        parse_distribution(prompt, "--prompt-tokens"),
        parse_distribution(output, "--output-tokens"),
        requests=requests,
        seed=0,
    )


def test_requests_a_pool_cannot_hold_are_counted_not_a_crash(catalog):
    llama, l4 = Deployment(catalog.model("llama-3.1-8b"), VLLM), catalog.sku("l4")
    # A heavy tail of prompts: some need more KV than an L4 holds, one exceeds the context.
    workload = poisson(1.0, "lognormal:mean=8000,sigma=1.5", "lognormal:mean=256,sigma=1", 100)
    result = size_pools(llama, l4, workload, Slo(ttft_s=5.0, tpot_s=0.1))
    blocks = instance_model(llama, l4, SimConfig()).num_blocks
    # Colocated, a request keeps prompt + output − 1 tokens of KV at its last step (the last
    # token is sampled, never stored): ceil(that / 16) blocks must fit the whole pool.
    too_long = sum(
        r.prompt_tokens + r.output_tokens > LLAMA_8B_CONTEXT_TOKENS for r in workload.requests
    )
    too_large = sum(
        r.prompt_tokens + r.output_tokens <= LLAMA_8B_CONTEXT_TOKENS
        and math.ceil((r.prompt_tokens + r.output_tokens - 1) / TOKENS_PER_BLOCK) > blocks
        for r in workload.requests
    )
    assert too_large > 0 and too_long > 0  # the workload exercises both reasons
    assert result.colocated.rejected == {TOO_LARGE: too_large, TOO_LONG: too_long}
    # The prefill pool holds only the prompt: it rejects no more than colocated does.
    assert result.prefill.rejected[TOO_LONG] == too_long
    assert result.prefill.rejected.get(TOO_LARGE, 0) <= too_large
    assert result.served + result.rejected == 100
    assert result.rejected >= too_long + too_large
    # Rejections are misses: no pool can claim more than the requests it returned.
    assert result.colocated.slo_met_fraction <= (100 - too_long - too_large) / 100


def test_pools_command_with_rejections_exits_0_and_reports_them():
    result = run(
        "pools",
        "llama-3.1-8b",
        "--sku",
        "l4",
        "--rate",
        "1",
        "--requests",
        "100",
        "--prompt-tokens",
        "lognormal:mean=8000,sigma=1.5",
        "--slo-ttft",
        "5s",
        "--slo-tpot",
        "100ms",
        "-f",
        "json",
    )
    assert result.exit_code == 0, result.output
    (record,) = json.loads(result.stdout)["pools"]
    assert record["requests"] == 100
    assert record["requests_served"] + record["requests_rejected"] == 100
    rejected = record["colocated"]["requests_rejected"]
    assert set(rejected) == {TOO_LARGE, TOO_LONG}
    assert record["requests_rejected"] >= sum(rejected.values())


@pytest.fixture(scope="module")
def llama_70b_tp2(catalog):
    return Deployment(catalog.model("llama-3.1-70b"), VLLM).replace(tp=2)


def test_colocated_is_not_met_when_rejections_alone_miss_the_percentile(llama_70b_tp2, catalog):
    h100 = catalog.sku("h100-sxm")
    workload = poisson(5.0, "lognormal:mean=1024,sigma=1", "lognormal:mean=256,sigma=1", 300)
    slo = Slo(ttft_s=1.0, tpot_s=0.04)
    pools = size_pools(llama_70b_tp2, h100, workload, slo)
    config = SimConfig(instances=16, router="least-loaded", slo=slo)
    alone = run_simulation(llama_70b_tp2, h100, workload, config)
    rejected = sum(alone.rejected.values())
    # p90 of 300 requests allows 30 misses; this pool rejects more than that at any count.
    assert rejected > 30
    assert alone.meets_slo(90) is False
    assert pools.colocated.instances is None and pools.colocated.gpus is None
    assert sum(pools.colocated.rejected.values()) == rejected
    # More instances reject the same requests, so the search stops at the first count.
    assert pools.colocated.tried == ((2, 1, False),)


def test_a_colocated_count_found_is_one_simulate_agrees_with(catalog):
    llama, h100 = Deployment(catalog.model("llama-3.1-8b"), VLLM), catalog.sku("h100-sxm")
    workload = poisson(20.0, "uniform:500-1500", "uniform:50-150", 150)
    slo = Slo(ttft_s=0.15, tpot_s=0.02)
    pools = size_pools(llama, h100, workload, slo, config=SimConfig(max_model_len=8192))
    count = pools.colocated.instances
    assert count is not None and count > 1  # the case has a count below it that fails

    def at(instances: int):
        config = SimConfig(max_model_len=8192, instances=instances, router="least-loaded", slo=slo)
        return run_simulation(llama, h100, workload, config)

    found, fewer = at(count), at(count - 1)
    assert found.meets_slo(90) and not fewer.meets_slo(90)
    assert pools.colocated.slo_met_fraction == found.slo_met_fraction


SEARCH_70B = shlex.split(
    "pools llama-3.1-70b --sku h100-sxm --rate 5 --requests 100 --slo-ttft 1s --slo-tpot 40ms "
    "--search-tp"
)


def test_search_tp_skips_degrees_whose_weights_do_not_fit():
    # Llama-3.1-70B: about 70 B parameters (model card) × 2 bytes in bf16 = 140 GB, more
    # than one H100 SXM's 80 GB (85,520,809,984 bytes), so tp 1 cannot run; tp 2 and up can.
    result = run(*SEARCH_70B, "-f", "json")
    assert result.exit_code == 0, result.output
    (record,) = json.loads(result.stdout)["pools"]
    assert "skipped llama-3.1-70b on h100-sxm (tp 1, pp 1): weights don't fit" in record["notes"]
    for pool in ("prefill", "decode", "colocated"):
        assert record[pool]["tp"] >= 2
        assert all(tried["tp"] >= 2 for tried in record[pool]["tried"])


def test_search_tp_exits_2_when_no_degree_holds_the_weights():
    # Llama-3.1-405B: about 405 B parameters × 2 bytes = 810 GB, beyond 8 L4s (8 × 24 GB).
    args = ["pools", "llama-3.1-405b", "--sku", "l4", "--rate", "1", "--requests", "10"]
    result = run(*args, "--slo-ttft", "1s", "--slo-tpot", "40ms", "--search-tp")
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "weights don't fit; nothing to simulate at tp 1, 2, 4, 8" in lines[0]


# ollama's default KV cache type is f16 (OLLAMA_KV_CACHE_TYPE, docs/faq.md "How can I set the
# quantization type for the K/V cache?": "The default is f16"); llama.cpp's -ctk default too.
@pytest.mark.parametrize("command", ["simulate", "pools"])
def test_ollama_runs_with_its_own_default_kv_dtype(command):
    args = [command, "llama-3.1-8b", "-s", "h100-sxm", "-e", "ollama", "--rate", "2"]
    args += ["--requests", "20", "--prompt-tokens", "512", "--output-tokens", "128"]
    if command == "pools":
        args += ["--slo-ttft", "2s", "--slo-tpot", "100ms"]
    result = run(*args, "-f", "json")
    assert result.exit_code == 0, result.output
    if command == "simulate":
        (record,) = json.loads(result.stdout)["runs"]
        assert record["kv_dtype"] == "fp16"


def test_a_llama_cpp_pool_is_told_in_tokens():
    args = ["simulate", "llama-3.1-8b", "-s", "h100-sxm", "-e", "llama.cpp", "--rate", "2"]
    args += ["--requests", "20", "--prompt-tokens", "512", "--output-tokens", "128"]
    record = json.loads(run(*args, "-f", "json").stdout)["runs"][0]
    # f16 K and V: 2 × 32 layers × 8 KV heads × 128 × 2 bytes = 131,072 bytes per token.
    assert record["kv_dtype"] == "fp16"
    assert record["kv_capacity_tokens"] == record["kv_pool_bytes"] // 131_072
    table = run(*args).stdout
    (row,) = [line for line in table.splitlines() if "KV pool / instance" in line]
    assert f"{record['kv_capacity_tokens']:,} tokens" in row and "blocks" not in row


def test_the_percentile_is_compared_exactly():
    # p90 of 300 requests: 270 meeting is exactly 90 %, 269 is 89.67 %.
    assert meets_percentile(270, 300, 90) and not meets_percentile(269, 300, 90)
    assert meets_percentile(9, 10, 90) and not meets_percentile(8, 10, 90)


def test_a_run_without_an_slo_has_no_verdict(catalog):
    llama, h100 = Deployment(catalog.model("llama-3.1-8b"), VLLM), catalog.sku("h100-sxm")
    workload = poisson(5.0, "512", "64", 10)
    assert (
        run_simulation(llama, h100, workload, SimConfig(max_model_len=4096)).meets_slo(90) is None
    )


def test_a_pool_that_cannot_hold_a_request_is_no_candidate(catalog):
    llama = Deployment(catalog.model("llama-3.1-70b"), VLLM, kv_dtype="fp8")
    h100 = catalog.sku("h100-sxm")
    workload = poisson(5.0, "lognormal:mean=1024,sigma=1", "lognormal:mean=256,sigma=1", 500)
    config = SimConfig(max_model_len=16_384)
    slo = Slo(ttft_s=2.0, tpot_s=0.05)
    result = size_pools(llama, h100, workload, slo, config=config, tps=(2, 4, 8))
    # At tp 2 the 70B weights leave the prefill pool so few blocks that the longest prompts
    # (plus the one token the prefill pool samples) do not fit: ceil((prompt + 1 − 1) / 16)
    # blocks of 16 tokens each, against the blocks one tp-2 instance has.
    blocks_at_tp2 = instance_model(llama.replace(tp=2), h100, config).num_blocks
    fits = [r for r in workload.requests if r.prompt_tokens + r.output_tokens <= 16_384]
    assert any(math.ceil(r.prompt_tokens / TOKENS_PER_BLOCK) > blocks_at_tp2 for r in fits)
    # Such a pool is no candidate however small the share it drops: the one chosen holds all.
    for pool in (result.prefill, result.decode, result.colocated):
        assert pool.tp != 2 and TOO_LARGE not in pool.rejected
    assert any(note.startswith("prefill at tp 2 is no candidate") for note in result.notes)
    # The colocated rate per GPU counts the requests the colocated pool returned: every one
    # that fits max_model_len (none is too large for it at the degree chosen).
    too_long = len(workload.requests) - len(fits)
    assert result.colocated_served == len(workload.requests) - too_long
    assert result.colocated_requests_per_s == pytest.approx(
        result.colocated_served / workload.duration_s
    )


def test_pools_help_names_only_the_workloads_pools_takes():
    help_text = " ".join(runner.invoke(app, ["pools", "--help"]).stdout.split())
    assert "(or give --offline or --trace)" in help_text
    assert "--concurrency" not in help_text
    missing = runner.invoke(
        app,
        ["pools", "llama-3.1-8b", "--sku", "h100-sxm", "--slo-ttft", "1s", "--slo-tpot", "40ms"],
    )
    assert missing.exit_code == 2
    assert missing.stderr.strip() == (
        "error: give --rate R (requests per second), --offline or --trace FILE"
    )
    # simulate keeps its closed loop, and says so.
    simulate_help = " ".join(runner.invoke(app, ["simulate", "--help"]).stdout.split())
    assert "(or give --concurrency, --offline or --trace)" in simulate_help
