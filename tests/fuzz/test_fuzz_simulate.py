"""The simulator's inputs: traces, token-count samples and its numbers.

`simulate` reads files the user collected elsewhere (a CSV or JSONL request trace, a column
of prompt lengths): each is a regular file under kvplan.limits.TABLE_FILE_BYTES, every JSON
line goes through the bounded JSON reader, and every token count is ASCII digits up to the
context maximum.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fuzz_harness import assert_clean, assert_refused, cli, fuzz
from hypothesis import given
from hypothesis import strategies as st

SIMULATE = ("simulate", "gpt2", "-s", "h100-sxm", "-f", "json")
HEADER = "arrival_s,prompt_tokens,output_tokens\n"
HUGE_ROW = '{"arrival_s": 0, "prompt_tokens": ' + "9" * 5000 + ', "output_tokens": 5}\n'


def _trace(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("name", "text", "fragment"),
    [
        ("deep.jsonl", "[" * 100_000 + "]" * 100_000 + "\n", "nested deeper than 64"),
        ("huge.jsonl", HUGE_ROW, "prompt_tokens"),
        ("huge.csv", HEADER + "0," + "9" * 22 + ",5\n", "above kvplan's limit of 1,073,741,824"),
        ("cell.csv", HEADER + "0," + "1" * 200_000 + ",5\n", "not CSV: field larger"),
        ("digits.csv", HEADER + "0,٣٣,5\n", "is not a token count"),
        ("nan.csv", HEADER + "nan,10,10\n", "is not a finite time"),
        ("nul.csv", HEADER + "0,1\x000,5\n", "--trace"),
    ],
)  # fmt: skip
def test_hostile_traces(tmp_path, name, text, fragment):
    assert_refused(cli(*SIMULATE, "--trace", _trace(tmp_path, name, text)), fragment)


def test_traces_that_are_not_files(tmp_path):
    os.mkfifo(tmp_path / "pipe.csv")
    for path, fragment in (
        (str(tmp_path / "pipe.csv"), "not a regular file"),
        ("/dev/zero", "not a regular file"),
        (str(tmp_path), "is a folder"),
        (str(tmp_path / ("t" * 300 + ".csv")), "File name too long"),
    ):
        assert_refused(cli(*SIMULATE, "--trace", path), fragment)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("1" * 5000 + "\n", "no token counts"), ("tokens\n5\n٣\n", "is not a token count"),
     ("tokens\n5\n" + "9" * 40 + "\n", "is not a token count")],
)  # fmt: skip
def test_hostile_token_samples(tmp_path, text, fragment):
    path = _trace(tmp_path, "sample.txt", text)
    argv = (*SIMULATE, "--rate", "1", "--requests", "5", "--prompt-tokens", f"empirical:{path}")
    assert_refused(cli(*argv), fragment)


_NUMBERS = st.sampled_from(["1", "0", "-1", "nan", "inf", "1e308", "9" * 40, "８", "0.5", ""])
_OPTIONS = st.sampled_from(["--rate", "--requests", "--duration", "--seed", "--instances",
                            "--step-time-factor", "--kv-sinks", "--concurrency"])  # fmt: skip


@fuzz(15)
@given(option=_OPTIONS, value=_NUMBERS)
def test_simulator_numbers(option, value):
    argv = [*SIMULATE, "--requests", "20", option, value]
    if option != "--rate":
        argv += ["--rate", "2"]
    assert_clean(cli(*argv))


def test_simulated_requests_have_a_stated_maximum(tmp_path):
    # docs/limits.md: 250,000 simulated requests (about 20 s on a 2-core machine).
    assert_refused(cli(*SIMULATE, "--rate", "2", "--requests", "250001"),
                   "--requests: 250001 must be between 1 and 250,000")  # fmt: skip
    assert_refused(cli(*SIMULATE, "--rate", "2", "--duration", "200000s"),
                   "is over 250,000 requests")  # fmt: skip
    trace = _trace(tmp_path, "t.csv", HEADER + "0,5,5\n" * 250_001)
    assert_refused(cli(*SIMULATE, "--trace", trace), "more than 250,000 rows")
