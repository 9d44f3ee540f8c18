"""`kvplan models`: a list that fits the terminal, and the filters people reach for."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from kvplan.cli import app

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


def run(*args: str, columns: int | None = None):
    return runner.invoke(app, list(args), env={"COLUMNS": str(columns) if columns else None})


def _shipped() -> list[dict]:
    """The shipped model YAML files, read without kvplan."""
    return [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "model_specs").glob("*.yaml"))]


def test_models_at_100_columns_is_one_line_per_model():
    # One line per model plus the title, the table's 4 rules and header, and the note naming
    # the hidden columns (two lines at most): every row stays a row, none goes vertical.
    count = len(_shipped())
    result = run("models", columns=100)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) <= count + 8, len(lines)
    assert max(len(line) for line in lines) <= 100
    assert "hidden to fit 100 columns" in result.stdout
    assert "│ llama-3.1-8b " in result.stdout


def test_models_columns_picks_the_columns():
    result = run("models", "--family", "gemma2", "--columns", "model,max_context")
    assert result.exit_code == 0, result.output
    header = result.stdout.splitlines()[2]
    assert "model" in header and "max context" in header and "family" not in header


def test_models_family_filter_matches_the_yaml_files():
    expected = sorted(m["name"] for m in _shipped() if m["family"] == "gemma2")
    result = run("models", "--family", "GEMMA2", "-f", "json")
    assert result.exit_code == 0, result.output
    assert [m["model"] for m in json.loads(result.stdout)] == expected


def test_models_name_pattern_and_min_context():
    # A shell pattern against names and aliases, and a native context of at least 128k
    # (131,072 tokens): llama-3-8b's 8,192 is left out.
    shipped = _shipped()
    expected = sorted(
        m["name"]
        for m in shipped
        if any(label.lower().startswith("llama-3") for label in [m["name"], *m.get("aliases", [])])
        and m["max_context"] >= 131_072
    )
    result = run("models", "llama-3*", "--min-context", "128k", "-f", "json")
    assert result.exit_code == 0, result.output
    names = [m["model"] for m in json.loads(result.stdout)]
    assert names == expected and "llama-3.1-8b" in names


def test_models_part_of_a_name_matches_aliases_too():
    # Without a wildcard, any part of a name or alias: an HF repo id's org matches.
    expected = sorted(
        m["name"]
        for m in _shipped()
        if any("deepseek-ai/" in a.lower() for a in m.get("aliases", []))
        or "deepseek-ai/" in m["name"]
    )
    result = run("models", "deepseek-ai/", "-f", "json")
    assert result.exit_code == 0, result.output
    assert [m["model"] for m in json.loads(result.stdout)] == expected and expected


def test_models_unknown_family_is_one_error_line():
    result = run("models", "--family", "qwen3moe")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "did you mean qwen3_moe" in result.stderr


def test_models_matching_nothing_says_so():
    result = run("models", "no-such-model-anywhere")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "no model matches name 'no-such-model-anywhere'" in result.stderr


def test_models_empty_or_overlong_pattern_is_one_error_line():
    # '' would match every name (a pattern held by any name); a value that went missing in a
    # script should not list the whole catalogue. Names are at most 128 characters (limits).
    for pattern, problem in (("", "must not be empty"), ("x" * 300, "at most 128 characters")):
        result = run("models", pattern)
        assert (result.exit_code, result.stdout) == (2, ""), result.output
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("error: pattern:") and problem in line
