"""The report layer renders API result records and nothing else: a record read back from its
own JSON renders every format exactly as the record the command computed.

A renderer that reached past the record (to the plan object it was built from) would fail or
print something else for the record read back: the JSON would then not hold what the table
shows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import kvplan
from kvplan.api.results import CapacityRow, SizeReport
from kvplan.api.results_check import CheckReport, ClaimReport
from kvplan.report.capacity_report import render_report
from kvplan.report.check_report import render_check
from kvplan.report.claim_report import render_claim
from kvplan.report.size_report import render_size

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FORMATS = ("table", "json", "csv", "md", "html")


def _read_back(record):
    """The record as a script would rebuild it from `--format json`."""
    return type(record).model_validate_json(record.model_dump_json())


def _printed(capsys, render, *args) -> str:
    render(*args)
    return capsys.readouterr().out


@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")


@pytest.mark.parametrize("fmt", FORMATS)
def test_size_renders_from_its_json(fmt, capsys):
    record = kvplan.size("gemma-2-9b", context="32k", batch=4, sku="h100-sxm")
    assert isinstance(record, SizeReport)
    shown = _printed(capsys, render_size, record, fmt, True)
    assert _printed(capsys, render_size, _read_back(record), fmt, True) == shown
    assert "window 4,096" in shown or fmt in ("csv",)  # --explain's sliding rule is there


@pytest.mark.parametrize("fmt", FORMATS)
def test_report_renders_from_its_json(fmt, capsys):
    rows = kvplan.report(
        ["llama-3.1-8b", "qwen3-30b-a3b"], skus="h100-sxm", tp=[1, 2], context="32k", curves=True
    )
    assert all(isinstance(r, CapacityRow) for r in rows)
    shown = _printed(capsys, render_report, rows, fmt, True)
    back = [_read_back(r) for r in rows]
    assert _printed(capsys, render_report, back, fmt, True) == shown


@pytest.mark.parametrize("fmt", FORMATS)
def test_check_renders_from_its_json(fmt, capsys):
    record = kvplan.check(EXAMPLES / "products.yaml", curves=True)
    assert isinstance(record, CheckReport) and not record.ok
    shown = _printed(capsys, render_check, record, fmt)
    assert _printed(capsys, render_check, _read_back(record), fmt) == shown


@pytest.mark.parametrize("fmt", FORMATS)
def test_claim_renders_from_its_json(fmt, capsys):
    record = kvplan.claim("llama-3.1-70b", sku="h100-sxm", context="128k", batch=8, tp=4)
    assert isinstance(record, ClaimReport)
    shown = _printed(capsys, render_claim, record, fmt)
    assert _printed(capsys, render_claim, _read_back(record), fmt) == shown


def test_the_html_chart_is_drawn_from_the_sampled_curve(capsys):
    # The page's requests-against-context line is the record's `concurrency_by_context`: each
    # point is a whole number of requests at a power-of-two context up to the model's limit,
    # and the point at the asked context is the row's own concurrency.
    (row,) = kvplan.report("llama-3.1-8b", skus="h100-sxm", tp=1, context="32k", curves=True)
    points = {p.context_tokens: p.max_concurrency for p in row.concurrency_by_context or []}
    assert points[32_768] == row.max_concurrency
    assert sorted(points) == [2**k for k in range(10, 18)]  # 1k … 128k, the model's limit
    held = [points[c] for c in sorted(points)]
    assert held == sorted(held, reverse=True)  # longer requests: never more at once
    # Without the curve the record's JSON does not carry the key at all (CSV and JSON of a
    # plain report stay as they were).
    (plain,) = kvplan.report("llama-3.1-8b", skus="h100-sxm", tp=1, context="32k")
    assert "concurrency_by_context" not in plain.model_dump()


def _cli_json(*args: str) -> dict:
    import json

    from typer.testing import CliRunner

    from kvplan.cli import app

    ran = CliRunner().invoke(app, [*args, "--format", "json"], env={"COLUMNS": "200"})
    assert ran.exit_code in (0, 1), ran.output
    return json.loads(ran.stdout)


@pytest.mark.parametrize("fmt", FORMATS)
def test_simulate_renders_from_its_json(fmt, capsys):
    from typer.testing import CliRunner

    from kvplan.api.results_simulate import SimulationRun
    from kvplan.cli import app
    from kvplan.report.simulate_report import render_simulation

    # Two runs side by side, one static (its padded-tokens row), with SLOs (the goodput row).
    args = ["simulate", "llama-3.1-8b", "--sku", "h100-sxm", "--rate", "4", "--requests", "60"]
    args += ["--slo-ttft", "1s", "--slo-tpot", "50ms", "--vs", "--scheduler static"]
    runs = [SimulationRun.model_validate(r) for r in _cli_json(*args)["runs"]]
    printed = CliRunner().invoke(app, [*args, "--format", fmt], env={"COLUMNS": "200"})
    render_simulation(runs, fmt)
    assert capsys.readouterr().out == printed.stdout
    assert "padded tokens" in printed.stdout or fmt in ("json", "csv")


@pytest.mark.parametrize("fmt", FORMATS)
def test_pools_render_from_their_json(fmt, capsys):
    from typer.testing import CliRunner

    from kvplan.api.results_simulate import PoolsRun
    from kvplan.cli import app
    from kvplan.report.pools_report import render_pools

    args = ["pools", "llama-3.1-8b", "--sku", "h100-sxm", "--rate", "20", "--requests", "120"]
    args += ["--max-model-len", "16k", "--slo-ttft", "1s", "--slo-tpot", "40ms"]
    runs = [PoolsRun.model_validate(r) for r in _cli_json(*args)["pools"]]
    printed = CliRunner().invoke(app, [*args, "--format", fmt], env={"COLUMNS": "200"})
    render_pools(runs, fmt)
    assert capsys.readouterr().out == printed.stdout
