"""`kvplan simulate` and `kvplan pools` as a user meets them: JSON, --vs, errors, plots."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()
SMALL = ["llama-3.1-8b", "--sku", "h100-sxm", "--max-model-len", "8k", "--requests", "60"]


def run(*args: str, columns: int = 200):
    return runner.invoke(app, list(args), env={"COLUMNS": str(columns)})


def test_simulate_json_contract_at_40_columns():
    result = run(
        "simulate",
        *SMALL,
        "--rate",
        "5",
        "--slo-ttft",
        "1s",
        "--slo-tpot",
        "50ms",
        "-f",
        "json",
        columns=40,
    )
    assert result.exit_code == 0, result.output
    (record,) = json.loads(result.stdout)["runs"]
    assert record["requests"] == 60
    assert record["requests_completed"] + sum(record["requests_rejected"].values()) == 60
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s"):
        assert set(record[key]) == {"mean", "p50", "p90", "p99"}
    assert isinstance(record["kv_pool_bytes"], int) and isinstance(record["kv_blocks"], int)
    assert record["kv_pool_bytes"] == record["kv_blocks"] * record["kv_bytes_per_block"]
    assert 0 <= record["slo_met_fraction"] <= 1
    memory = record["kv_memory_mean"]
    assert set(memory) == {
        "token_states_bytes",
        "partial_blocks_bytes",
        "reserved_unused_bytes",
        "fragmentation_bytes",
        "free_bytes",
    }
    assert record["timeline"] and record["step_times"] == "step-model"


def test_simulate_table_shows_the_percentiles():
    result = run("simulate", *SMALL, "--rate", "5")
    assert result.exit_code == 0, result.output
    for label in ("TTFT p50/p90/p99", "KV mean: token states", "token states ÷ KV taken"):
        assert label in result.stdout


def test_vs_runs_a_second_configuration_on_the_same_workload():
    result = run(
        "simulate",
        *SMALL,
        "--rate",
        "5",
        "--vs",
        "--kv-dtype fp8 --allocator reserve-max",
        "-f",
        "json",
    )
    assert result.exit_code == 0, result.output
    first, second = json.loads(result.stdout)["runs"]
    assert first["workload"] == second["workload"]
    assert (first["kv_dtype"], second["kv_dtype"]) == ("bf16", "fp8_e4m3")
    assert (first["allocator"], second["allocator"]) == ("paged", "reserve-max")
    # fp8 halves the bytes per block, so the same budget buys about twice the blocks.
    assert second["kv_bytes_per_block"] * 2 == first["kv_bytes_per_block"]
    assert second["label"] == "--kv-dtype fp8 --allocator reserve-max"


def test_same_seed_same_answer():
    args = ("simulate", *SMALL, "--rate", "5", "--seed", "4", "-f", "json")
    assert run(*args).stdout == run(*args).stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--rate", "-3"], "--rate: -3 is below kvplan's minimum of 0.000001"),
        (["--rate", "5", "--slo-ttft", "2"], "--slo-ttft: '2' needs a time unit"),
        ([], "give --rate R (requests per second) or --trace FILE"),
        (["--rate", "5", "--prompt-tokens", "9000"], "every request is at least 9,001 tokens"),
        (["--rate", "5", "--scheduler", "orca"], "--scheduler: unknown 'orca'"),
        (["--rate", "5", "--vs", "--rate 9"], "--vs: --rate cannot differ"),
        (["--rate", "5", "--vs", "-f json"], "--vs: --format cannot differ"),
        (["--rate", "5", "--slo-ttft=-2s"], "--slo-ttft: '-2s' must be a positive duration"),
        (["--rate", "5", "--vs", "--speed 2"], "--vs: unknown option '--speed'"),
        (["--rate", "5", "--prompt-tokens", "normal:5"], "unknown distribution 'normal'"),
        (["--rate", "5", "--kv-sinks", "4"], "--kv-sinks needs --kv-window"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, fragment):
    result = run("simulate", *SMALL, *args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty file"),
        ("arrival_s,prompt_tokens,output_tokens,user\n0,1,1,x\n", "unknown column 'user'"),
        ("arrival_s,prompt_tokens,output_tokens\n0,100,0\n", ":2: output_tokens is 0"),
    ],
)
def test_bad_traces_exit_2(tmp_path, text, fragment):
    trace = tmp_path / "trace.csv"
    trace.write_text(text)
    result = run("simulate", "llama-3.1-8b", "--sku", "h100-sxm", "--trace", str(trace))
    assert result.exit_code == 2 and result.stdout == ""
    assert fragment in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_trace_rows_longer_than_the_context_are_counted(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,3000,10\n1,200,20\n")
    result = run("simulate", "opt-13b", "--sku", "a100-80gb", "--trace", str(trace), "-f", "json")
    assert result.exit_code == 0, result.output
    (record,) = json.loads(result.stdout)["runs"]
    assert record["requests_completed"] == 2
    assert record["requests_rejected"] == {"prompt + output longer than max_model_len": 1}


def test_calibrate_without_a_bandwidth_figure_warns_once(tmp_path):
    record = tmp_path / "verify.json"
    record.write_text('{"bandwidth": {"timings_meaningful": false}}')
    result = run("simulate", *SMALL, "--rate", "5", "--calibrate", str(record), "-f", "json")
    assert result.exit_code == 0
    assert result.stderr.count("warning: --calibrate verify.json: no measured bandwidth") == 1


@pytest.mark.parametrize(("sku", "code"), [("h100-sxm", 0), ("b200", 2)])
def test_swap_needs_a_host_link(sku, code):
    # h100-sxm lists its PCIe Gen5 link; b200 has no host link figure in the catalogue.
    args = ["--sku", sku, "--rate", "5", "--requests", "10", "--preemption", "swap"]
    result = run("simulate", "llama-3.1-8b", *args, "--max-model-len", "8k")
    assert result.exit_code == code, result.output
    if code:
        assert "b200 has no host_link_bytes_per_s" in result.stderr


def test_plot_writes_an_svg(tmp_path):
    pytest.importorskip("matplotlib")
    picture = tmp_path / "timeline.svg"
    result = run(
        "simulate",
        *SMALL,
        "--rate",
        "5",
        "--plot",
        str(picture),
        "--vs",
        "--allocator reserve-exact",
    )
    assert result.exit_code == 0, result.output
    assert picture.read_text().startswith("<?xml") and f"wrote {picture}" in result.stderr


POOLS = [
    "pools",
    "llama-3.1-8b",
    "--sku",
    "h100-sxm",
    "--max-model-len",
    "8k",
    "--rate",
    "20",
    "--requests",
    "150",
    "--prompt-tokens",
    "uniform:500-1500",
    "--output-tokens",
    "uniform:50-150",
]


def test_pools_json_and_surge():
    result = run(
        *POOLS,
        "--slo-ttft",
        "500ms",
        "--slo-tpot",
        "30ms",
        "--prompt-scale",
        "2",
        "-f",
        "json",
        columns=40,
    )
    assert result.exit_code == 0, result.output
    base, surge = json.loads(result.stdout)["pools"]
    for pools in (base, surge):
        assert pools["prefill"]["met"] and pools["decode"]["met"] and pools["colocated"]["met"]
        p, d = pools["prefill"]["instances"], pools["decode"]["instances"]
        assert pools["ratio"] == f"{p}P{d}D" and pools["disaggregated_gpus"] == p + d
        assert pools["prefill"]["ttft_s"] <= 0.5 and pools["decode"]["tpot_s"] <= 0.03
    # Twice the prompt tokens never needs fewer prefill instances.
    assert surge["prefill"]["instances"] >= base["prefill"]["instances"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--slo-ttft", "1s"], "pools needs both --slo-ttft and --slo-tpot"),
        (["--slo-ttft", "1s", "--slo-tpot", "20ms", "--slo-percentile", "100"], "--slo-percentile"),
        (["--slo-ttft", "1s", "--slo-tpot", "20ms", "--instances", "2"], "--instances: pools"),
    ],
)
def test_pools_bad_input(args, fragment):
    result = run(*POOLS, *args)
    assert result.exit_code == 2 and result.stdout == ""
    assert fragment in result.stderr


def test_one_request_is_singular():
    result = run("simulate", "gpt2", "--sku", "h100-sxm", "--requests", "1", "--rate", "1")
    assert result.exit_code == 0, result.output
    assert "Poisson 1 req/s, 1 request, prompt" in result.stdout.splitlines()[0]
