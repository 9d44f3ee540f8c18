"""A report row written as JSON by the fast road (`json_text`: the python-mode dump) is the
same text as by the json-mode dump, for plain rows and for values the json mode converts."""

from __future__ import annotations

import json
import math

import pytest

from kvplan.api import report
from kvplan.api.results import dump, json_text


@pytest.fixture(scope="module")
def rows():
    # Rows that fit, rows whose weights do not, DP + EP rows of an MoE model (the default
    # degrees), and a TP degree the engine refuses (12 heads over tp 8).
    models = ["llama-3.1-8b", "deepseek-r1-distill-qwen-1.5b", "mixtral-8x7b"]
    skus = ["h100-sxm", "a10"]
    return report(models, skus=skus) + report(models, skus=skus, tp=(1, 8))


def test_plain_rows_are_the_json_mode_text(rows):
    assert {"refused" in dump(row) for row in rows} == {True, False}
    assert any(row.dp > 1 for row in rows if "refused" not in dump(row))
    for row in rows:
        assert json_text(row) == json.dumps(dump(row))


def test_a_row_with_infinity_in_a_dict_of_any_is_written_as_the_json_mode_writes_it(rows):
    # The json-mode dump writes a NaN or an infinity inside a dict of Any as null (a float
    # field keeps it); json.dumps of the python-mode dump would write Infinity.
    row = rows[0].model_copy(update={"startup": {"max_concurrency": math.inf, "pair": (1, 2)}})
    text = json_text(row)
    assert text == json.dumps(dump(row))
    assert json.loads(text)["startup"] == {"max_concurrency": None, "pair": [1, 2]}
