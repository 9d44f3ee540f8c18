"""Hostile values for the options and files this release added: one line naming the flag and
the value, exit 2, no traceback, nothing written."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

SIMULATE = ["simulate", "llama-3.1-8b", "--sku", "h100-sxm", "--requests", "5", "--rate", "5"]


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def assert_refused(result, flag: str) -> None:
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1, result.output
    assert flag in lines[0] and "internal error" not in lines[0], lines[0]


# A fraction of 1e-300 made every step time infinite: the run ended in an OverflowError.
# simulate's efficiencies are read as report's are, a fraction in (0, 1] of at least 10^-6.
@pytest.mark.parametrize("flag", ["--bandwidth-efficiency", "--compute-efficiency"])
@pytest.mark.parametrize("value", ["1e-300", "0.0000001", "１２", "nan", "", "9" * 400])
def test_simulate_efficiencies_are_fractions(flag, value):
    assert_refused(run(*SIMULATE, flag, value), flag)


EXPLAIN = ["explain", "examples/vllm-qwen2-7b-a100.log", "--sku", "a100-80gb", "-m", "qwen2.5-7b"]


# --set flash_attn=maybe was read as false, and a value left empty was called an unknown name.
@pytest.mark.parametrize(
    ("pair", "shown"),
    [
        ("flash_attn=maybe", "--set flash_attn: 'maybe' is not true or false"),
        ("kv_unified=", "--set kv_unified: an empty value"),
        ("max_num_batched_tokens=-1", "--set max_num_batched_tokens: -1 must be between 1 and"),
        ("utilization=nan", "--set utilization: 'nan' is not a fraction"),
    ],
)
def test_explain_set_names_the_pair_as_typed(pair, shown):
    result = run(*EXPLAIN, "--set", pair)
    assert_refused(result, "--set")
    assert shown in result.output


# typer reads '' as Path('') == '.', so an empty --calibration or LOGFILE was "a folder".
@pytest.mark.parametrize(
    ("args", "shown"),
    [
        ([*SIMULATE, "--calibration", ""], "--calibration: an empty path"),
        ([*SIMULATE, "--calibrate", ""], "--calibrate: an empty path"),
        ([*SIMULATE, "--step-times", ""], "--step-times: an empty path"),
        ([*SIMULATE[:-2], "--trace", ""], "--trace: an empty path"),
        (
            ["report", "-m", "llama-3.1-8b", "--sku", "h100-sxm", "--calibration", ""],
            "--calibration: an empty path",
        ),
        (
            ["verify", "llama-3.1-8b", "--device", "cpu", "--profile", ""],
            "--profile: an empty path",
        ),
        (["explain", ""], "LOGFILE: an empty path"),
    ],
)
def test_an_empty_path_is_called_empty(args, shown):
    result = run(*args)
    assert_refused(result, shown.split(":")[0])
    assert shown in result.output


# recommend's dtype lists skipped the name check: '' reached the dtype table, and a 300-character
# value was printed whole.
@pytest.mark.parametrize("flag", ["--kv-dtype", "--weight-dtype"])
@pytest.mark.parametrize("value", ["", "x" * 300])
def test_recommend_dtype_lists_check_each_name(flag, value):
    result = run("recommend", "llama-3.1-8b", "-s", "h100-sxm", "-c", "4k", flag, value)
    assert_refused(result, flag)
    assert len(result.output) < 200


# A 400-character --placement / --scheduler was printed whole in its one line.
@pytest.mark.parametrize("flag", ["--placement", "--scheduler", "--allocator"])
def test_simulate_choices_cut_a_long_value(flag):
    result = run(*SIMULATE, flag, "9" * 400)
    assert_refused(result, flag)
    assert "unknown '" + "9" * 40 + "'…" in result.output
    assert len(result.output) < 300


# --explain printed its step and dropped --plot without a word (no file, exit 0).
def test_simulate_explain_refuses_plot(tmp_path):
    target = tmp_path / "x.svg"
    result = run(*SIMULATE, "--explain", "--plot", str(target))
    assert_refused(result, "--plot")
    assert not target.exists()


def test_check_an_empty_file_name_is_called_empty():
    result = run("check", "")
    assert_refused(result, "an empty path")
