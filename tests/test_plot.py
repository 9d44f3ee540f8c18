"""`kvplan report --plot`: SVG and PNG written whole, clear errors otherwise.

Drawing needs matplotlib (the `plot` extra) and skips without it; the errors do not.
"""

from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner

from kvplan.api.build import capacity_row
from kvplan.cli import app
from kvplan.engine import engine
from kvplan.engine.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.plan.capacity import capacity_grid
from kvplan.report.plot import MAX_PLOT_ROWS, ensure_plot_possible, plot_report

MISSING = "--plot needs matplotlib: pip install 'kvplan[plot]'"


@pytest.fixture(scope="module")
def rows(catalog):
    """Llama-3.1-8B and 70B on an H100 and an L4, TP 1 and 8: fits, capped and too big."""
    deployments = [
        Deployment(catalog.model(name), engine("vllm"))
        for name in ("llama-3.1-8b", "llama-3.1-70b")
    ]
    skus = [catalog.sku("h100-sxm"), catalog.sku("l4")]
    rows = capacity_grid(deployments, skus, batch=4, context_tokens=32_768, tps=(1, 8))
    return [capacity_row(row) for row in rows]


@pytest.mark.parametrize("suffix, magic", [(".svg", b"<?xml"), (".png", b"\x89PNG")])
def test_draws_svg_and_png(rows, tmp_path, suffix, magic):
    pytest.importorskip("matplotlib")
    path = tmp_path / f"report{suffix}"
    plot_report(rows, path)
    assert path.read_bytes().startswith(magic)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary left behind


def test_svg_is_reproducible(rows, tmp_path):
    pytest.importorskip("matplotlib")
    first, second = tmp_path / "a.svg", tmp_path / "b.svg"
    plot_report(rows, first)
    plot_report(rows, second)
    assert first.read_bytes() == second.read_bytes()


def test_unknown_suffix_names_the_allowed_ones(rows, tmp_path):
    path = tmp_path / "report.pdf"
    with pytest.raises(KvplanError) as info:
        plot_report(rows, path)
    assert str(info.value) == f"--plot {path}: unknown picture type '.pdf' (allowed: .svg, .png)"
    assert not path.exists()


def test_too_many_rows(rows, tmp_path):
    many = rows * (MAX_PLOT_ROWS // len(rows) + 1)
    with pytest.raises(KvplanError, match="too many for one picture"):
        plot_report(many, tmp_path / "big.svg")


def test_without_matplotlib_says_how_to_install(rows, tmp_path, monkeypatch):
    # None in sys.modules makes `import matplotlib` raise ImportError, as if not installed.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    path = tmp_path / "report.svg"
    with pytest.raises(KvplanError) as info:
        plot_report(rows, path)
    assert str(info.value) == MISSING
    assert not path.exists()


def test_early_check_without_matplotlib(tmp_path, monkeypatch):
    with pytest.raises(KvplanError, match="unknown picture type"):
        ensure_plot_possible(tmp_path / "report.jpg")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(KvplanError) as info:
        ensure_plot_possible(tmp_path / "report.svg")
    assert str(info.value) == MISSING


def test_cli_without_matplotlib_exits_2(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    path = tmp_path / "report.png"
    result = CliRunner().invoke(
        app,
        [
            "report",
            "--model",
            "llama-3.1-8b",
            "--sku",
            "h100-sxm",
            "--tp",
            "1",
            "--plot",
            str(path),
        ],
    )
    assert result.exit_code == 2
    assert result.stderr == f"error: {MISSING}\n"
    assert not path.exists()


def test_cli_writes_the_plot(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "report.svg"
    result = CliRunner().invoke(
        app,
        [
            "report",
            "--model",
            "llama-3.1-8b",
            "--sku",
            "h100",
            "--tp",
            "1",
            "--plot",
            str(path),
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert path.read_bytes().startswith(b"<?xml")
    assert result.stderr == f"wrote {path}\n"
