"""`--explain`: a step's operations add up to the step, in the table and in JSON alike."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

RUNNER = CliRunner()


def _json(*args: str):
    result = RUNNER.invoke(app, [*args, "-f", "json"], env={"COLUMNS": "40"})
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_report_explain_shares_add_up_and_match_the_report():
    args = ("report", "-m", "llama-3.1-70b", "-s", "h100-sxm", "--tp", "4", "-b", "64", "-c", "4k")
    [explained] = _json(*args, "--explain")
    [row] = _json(*args)
    assert explained["decode_batch"] == row["decode_batch"] == 64
    assert explained["context_tokens"] == row["decode_context_tokens"] == 4096
    # One replica decoding 64 sequences: the report's tokens/s is 64 / the explained step.
    assert row["decode_tokens_per_s"] == pytest.approx(64 / explained["step_s"], rel=1e-12)
    shares = [op["share_fraction"] for op in explained["operations"]]
    assert sum(shares) == pytest.approx(1.0, rel=1e-12)
    seconds = sum(op["seconds"] for op in explained["operations"])
    assert seconds == pytest.approx(explained["step_s"], rel=1e-12)
    names = {op["operation"] for op in explained["operations"]}
    # TP 4: the all-reduces are a term of their own; a dense model has no routed experts.
    assert {"mlp", "attention_decode", "tp_all_reduce", "engine_overhead"} <= names
    assert "routed_experts" not in names
    assert row["decode_tokens_per_s_band_fraction"] == explained["band_fraction"]


def test_simulate_explain_is_the_runs_mean_step():
    args = ("simulate", "llama-3.1-8b", "-s", "h100-sxm", "--rate", "5", "--requests", "50")
    [explained] = _json(*args, "--explain", "--prompt-tokens", "512", "--output-tokens", "64")
    assert explained["prefill_tokens"] > 0 and explained["decode_batch"] >= 1
    # Prompts of 512 and outputs of 64: the mean context is 512 + 64 / 2 = 544 tokens.
    assert explained["context_tokens"] == 544
    assert sum(op["share_fraction"] for op in explained["operations"]) == pytest.approx(1.0)


def test_report_explain_refuses_a_whole_catalogue():
    result = RUNNER.invoke(app, ["report", "-m", "all", "--explain"])
    assert result.exit_code == 2
    assert "--explain:" in result.stderr and "at most 64" in result.stderr
    assert result.stdout == ""
