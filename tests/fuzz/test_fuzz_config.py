"""Hugging Face config.json: mutations of the test fixtures, and odd config paths.

Mutations come from the real configs in tests/fixtures/hf. A used field with a hostile
value is refused in one line naming the file and field; garbage in a field no family reads
is tolerated; nothing crashes, hangs or builds a list from an unbounded number.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fuzz_corpus import HF_FIXTURES
from fuzz_harness import assert_accepted, assert_clean, assert_refused, cli, fuzz
from hypothesis import given
from hypothesis import strategies as st

FIXTURES = {path.name: path for path in HF_FIXTURES}
_USED_INTS = (
    "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
    "vocab_size", "intermediate_size", "max_position_embeddings",
)  # fmt: skip
_HOSTILE = (1e5, 10**30, -1, 0, "32", True, 1.5, float("nan"), [], {}, [32])


def _config(name: str) -> dict:
    return json.loads((FIXTURES[name] / "config.json").read_text())


def _write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(text)
    return folder / "config.json"


def _with(config: dict, **fields: object) -> dict:
    """`config` with `fields` set where the family reads them (text_config for wrappers)."""
    if isinstance(config.get("text_config"), dict):
        return {**config, "text_config": {**config["text_config"], **fields}}
    return {**config, **fields}


@st.composite
def mutated_configs(draw):
    """(config.json text, must it be refused) for one mutation of one fixture."""
    config = _config(draw(st.sampled_from(sorted(FIXTURES))))
    target = config["text_config"] if isinstance(config.get("text_config"), dict) else config
    kind = draw(st.sampled_from(["used", "unused", "layer_types", "text", "model_type"]))
    if kind == "used":
        present = [k for k in _USED_INTS if isinstance(target.get(k), int)]
        key, value = draw(st.sampled_from(present)), draw(st.sampled_from(_HOSTILE))
        return json.dumps(_with(config, **{key: value})), True
    if kind == "unused":
        value = draw(st.sampled_from(["7" * 5000, "[" * 999 + "]" * 999, '"\\u0000"', "1e999"]))
        return json.dumps(config)[:-1] + f', "kvplan_fuzz_unused": {value}}}', None
    if kind == "layer_types":
        layers = target.get("num_hidden_layers", 4)
        garbage = draw(st.sampled_from([[[]] * layers, [1, "x"] * layers, "full", {}, [None]]))
        return json.dumps(_with(config, layer_types=garbage)), None
    if kind == "model_type":
        value = draw(st.sampled_from([5, [], "LLAMA", "", None, "llama\n", "x" * 300]))
        return json.dumps({**config, "model_type": value}), True
    text = json.dumps(config, indent=2)
    cut = draw(st.integers(0, len(text) - 1))
    return text[:cut], True


@fuzz(30)
@given(mutated=mutated_configs(), command=st.sampled_from(["size", "import-hf"]))
def test_mutated_configs(tmp_path_factory, mutated, command):
    text, refused = mutated
    path = _write(tmp_path_factory.mktemp("hf"), text)
    outcome = cli(command, str(path.parent))
    if refused:
        assert_refused(outcome, str(path))
    else:
        assert_clean(outcome)


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"num_hidden_layers": 100_000}, "field 'num_hidden_layers': 100,000 is above kvplan's"),
        ({"num_hidden_layers": 1e5}, "field 'num_hidden_layers' is 100000.0; expected a positive"),
        ({"num_hidden_layers": 10**30}, "a number of 31 digits is above kvplan's limit of 4,096"),
        ({"num_hidden_layers": True}, "field 'num_hidden_layers' is True; expected a positive"),
        ({"vocab_size": 10**9}, "vocab_size 1000000000: Input should be less than or equal"),
        ({"num_attention_heads": -4}, "field 'num_attention_heads' is -4"),
    ],
)
def test_used_fields_refused_in_one_line(tmp_path, fields, fragment):
    path = _write(tmp_path, json.dumps(_with(_config("llama-3.1-8b"), **fields)))
    assert_refused(cli("size", str(tmp_path)), str(path), fragment)


def test_a_key_given_twice_is_refused(tmp_path):
    # json.loads would keep the last: a 3,000-layer model from a 32-layer config.
    text = json.dumps(_config("llama-3.1-8b")).replace(
        '"num_hidden_layers": 32', '"num_hidden_layers": 32, "num_hidden_layers": 3000'
    )
    path = _write(tmp_path, text)
    for command in ("size", "import-hf"):
        assert_refused(
            cli(command, str(tmp_path)),
            f"{path}: key 'num_hidden_layers' appears twice in one JSON object",
        )


@pytest.mark.parametrize(
    ("factor", "fragment"),
    [
        (float("inf"), "is inf: above kvplan's limit of 1,024"),
        (1e308, "is 1e+308: above kvplan's limit of 1,024"),
        (1025, "is 1025: above kvplan's limit of 1,024"),
        (float("nan"), "is nan; expected a number >= 1"),
        (0.5, "is 0.5; expected a number >= 1"),
    ],
)
def test_rope_factor_is_finite_and_bounded(tmp_path, factor, fragment):
    rope = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": 8192}
    path = _write(tmp_path, json.dumps(_with(_config("llama-3.1-8b"), rope_scaling=rope)))
    for command in ("size", "import-hf"):
        assert_refused(cli(command, str(tmp_path)), str(path), "rope_scaling.factor", fragment)


def test_the_largest_rope_factor_is_read(tmp_path):
    rope = {"rope_type": "yarn", "factor": 1024, "original_max_position_embeddings": 8192}
    _write(tmp_path, json.dumps(_with(_config("llama-3.1-8b"), rope_scaling=rope)))
    outcome = cli("size", str(tmp_path), "-f", "json")
    assert_accepted(outcome)


def test_huge_integer_in_a_used_field(tmp_path):
    text = json.dumps(_config("llama-3.1-8b")).replace(
        '"num_hidden_layers": 32', '"num_hidden_layers": ' + "3" * 5000
    )
    assert_refused(
        cli("size", str(_write(tmp_path, text))),
        "field 'num_hidden_layers' is <an integer of 5,000 digits>; expected a positive integer",
    )


@pytest.mark.parametrize("value", ["7" * 5000, "1e999", "NaN", '"x"', "[" * 60 + "]" * 60])
def test_garbage_in_unused_fields_is_tolerated(tmp_path, value):
    text = json.dumps(_config("llama-3.1-8b"))[:-1] + f', "unused": {value}}}'
    assert_accepted(cli("size", str(_write(tmp_path, text).parent), "-f", "json"))


@pytest.mark.parametrize("depth", [65, 999, 100_000])
def test_deep_json_is_refused(tmp_path, depth):
    text = json.dumps(_config("llama-3.1-8b"))[:-1] + f', "unused": {"[" * depth + "]" * depth}}}'
    assert_refused(cli("size", str(_write(tmp_path, text).parent)), "nested deeper than 64")


@pytest.mark.parametrize(
    ("fixture", "garbage", "fragment"),
    [
        ("mistral-7b-v0.1", [[]] * 32, "layer_types has unknown value(s) []"),
        ("gemma-2-9b-it", [1, "x"] * 21, "layer_types has unknown value(s) 'x', 1"),
        ("gemma-2-9b-it", "full", "layer_types must list 42 entries"),
        ("qwen3-next-tiny-test", [None] * 4, "layer_types must list"),
    ],
)
def test_layer_types_garbage(tmp_path, fixture, garbage, fragment):
    path = _write(tmp_path, json.dumps(_with(_config(fixture), layer_types=garbage)))
    assert_refused(cli("size", str(tmp_path)), str(path), fragment)


@pytest.mark.parametrize("top", ["[]", '"x"', "5", "null"])
def test_top_level_not_an_object(tmp_path, top):
    assert_refused(cli("import-hf", str(_write(tmp_path, top))), "expected a JSON object")


def test_odd_config_paths(tmp_path):
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    (tmp_path / "empty").mkdir()
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "config.json").write_text('{"model_type": "llama"}' + " " * (65 * 2**20))
    for path, fragment in (
        (tmp_path / "fifo.json", "not a regular file"),
        (tmp_path / "zero.json", "not a regular file"),
        (tmp_path / "empty", "no config.json in this folder"),
        (tmp_path / "big", "larger than 67,108,864 bytes"),
        (tmp_path / ("x" * 300 + ".json"), "File name too long"),
    ):
        for command in ("size", "import-hf"):
            assert_refused(cli(command, str(path)), fragment)
