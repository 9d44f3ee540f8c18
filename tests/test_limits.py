"""docs/limits.md states the same maxima as kvplan.limits, and the limits describe themselves."""

from __future__ import annotations

from pathlib import Path

import pytest

import kvplan.limits as limits
from kvplan.errors import KvplanError

DOC = (Path(__file__).resolve().parent.parent / "docs" / "limits.md").read_text()


@pytest.mark.parametrize("limit", limits.NUMBERS, ids=lambda limit: limit.what)
def test_every_number_limit_is_documented(limit):
    unit = f" {limit.unit}" if limit.unit else ""
    assert f"| {limit.what} | {limit.maximum:,}{unit} | {limit.why} |" in DOC


@pytest.mark.parametrize(("what", "maximum"), limits.FILES)
def test_every_file_limit_is_documented(what, maximum):
    assert f"| {what} | {maximum} |" in DOC


def test_a_limit_refuses_one_above_and_names_the_place():
    assert limits.LAYERS.check(4096, "num_layers") == 4096
    with pytest.raises(KvplanError) as caught:
        limits.LAYERS.check(4097, "x.yaml:3: num_layers")
    assert str(caught.value) == (
        "x.yaml:3: num_layers: 4,097 is above kvplan's limit of 4,096 layers "
        "(the deepest shipped model, Llama 3.1 405B, has 126)"
    )


def test_huge_values_are_described_by_their_length():
    # 10^400 has 401 digits: printing it would be a 400-character error line.
    assert limits.CONTEXT.describe(10**400).startswith("a number of 401 digits is above")


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "a name must not be empty"),
        (" gpt2", "a name must not start or end with whitespace"),
        ("gpt2\n", "a name must not start or end with whitespace"),
        ("g\tpt2", "a name must not contain line breaks or other control characters"),
        ("x" * 129, "a name has at most 128 characters (this one has 129)"),
        ("gpt2", None),
        ("meta-llama/Llama-3.1-8B", None),
        ("模型", None),
    ],
)
def test_name_rules(name, problem):
    assert limits.name_problem(name) == problem
