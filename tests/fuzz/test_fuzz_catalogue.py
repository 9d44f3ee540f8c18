"""Catalogue YAML: mutations of the shipped files, read through `--catalog`, and odd paths.

Every mutation must end cleanly (fuzz_harness.assert_clean); the ones the documentation
refuses must be refused with one line naming the file, the line and the field.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fuzz_corpus import (
    BOOL_FIELDS,
    INT_FIELD_LIMITS,
    MODEL_FILES,
    SKU_FILES,
    YAML_BOOL_MUTATIONS,
    YAML_INT_MUTATIONS,
    billion_laughs,
    deep_yaml,
    int_mutation_verdict,
    replace_field,
)
from fuzz_harness import assert_accepted, assert_clean, assert_refused, cli, fuzz
from hypothesis import given
from hypothesis import strategies as st

GPT2 = next(p for p in MODEL_FILES if p.stem == "gpt2").read_text()
H100 = next(p for p in SKU_FILES if p.stem == "h100-sxm").read_text()


def _model(**replacements: str) -> str:
    """gpt2.yaml renamed to `fz`, with field values replaced (YAML text)."""
    text = replace_field(GPT2, "name", "fz")
    for key, value in replacements.items():
        text = replace_field(text, key, value)
    return text


def _line(text: str, key: str) -> int:
    """1-based line of the first `key:` in `text`."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.lstrip().startswith(key))


def _size(folder: Path, name: str = "fz") -> tuple[str, ...]:
    return ("size", name, "--catalog", str(folder), "-f", "json")


def _write(folder: Path, text: str, name: str = "entry.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


# --- generated mutations ------------------------------------------------------------


@st.composite
def mutated_files(draw):
    """(file text, is it a model, verdict, label) for one mutation of one shipped file."""
    source = draw(st.sampled_from(MODEL_FILES + SKU_FILES))
    is_model = source in MODEL_FILES
    text = replace_field(source.read_text(), "name", "fz")
    kind = draw(st.sampled_from(["int", "bool", "noise", "truncate", "duplicate"]))
    if kind == "int":
        present = [k for k in INT_FIELD_LIMITS if replace_field(text, k, "0") is not None]
        key = draw(st.sampled_from(present))
        value, always = draw(st.sampled_from(YAML_INT_MUTATIONS))
        return replace_field(text, key, value), is_model, int_mutation_verdict(key, value, always)
    if kind == "bool":
        present = [k for k in BOOL_FIELDS if replace_field(text, k, "x") is not None]
        if not present:
            return text, is_model, "accept"
        value, refused = draw(st.sampled_from(YAML_BOOL_MUTATIONS))
        verdict = "refuse" if refused else "any"
        return replace_field(text, draw(st.sampled_from(present)), value), is_model, verdict
    if kind == "duplicate":
        key = draw(st.sampled_from(["num_layers", "memory_bytes", "family", "source"]))
        return text + f"\n{key}: 7\n", is_model, "refuse"
    if kind == "truncate":
        return text[: draw(st.integers(0, len(text)))], is_model, "any"
    noise = draw(st.lists(st.tuples(st.integers(0, len(text)), st.sampled_from(
        [*":-[]{}&*!|>'\"#%@`\t\n\x00é", "!!int ", "&a ", "*a", "<<: ", "? ", "---\n"]
    )), min_size=1, max_size=4))  # fmt: skip
    for position, chars in sorted(noise, reverse=True):
        text = text[:position] + chars + text[position:]
    return text, is_model, "any"


@fuzz(30)
@given(mutated=mutated_files())
def test_mutated_catalogue_files(tmp_path_factory, mutated):
    text, is_model, verdict = mutated
    folder = tmp_path_factory.mktemp("catalogue")
    (folder / "entry.yaml").write_text(text, encoding="utf-8", errors="surrogatepass")
    argv = _size(folder) if is_model else ("size", "gpt2", "--sku", "fz", "--catalog", str(folder))
    outcome = cli(*argv)
    if verdict == "refuse":
        assert_refused(outcome, str(folder / "entry.yaml"))
    else:
        assert_clean(outcome)


# --- what the documentation refuses, one line each ----------------------------------------


@pytest.mark.parametrize(
    ("replacements", "fragment"),
    [
        # YAML 1.1 would read 1:20 as 80 (sexagesimal) and yes as true: kvplan reads YAML 1.2.
        ({"hidden_size": "1:20"}, "hidden_size: value '1:20': Input should be a valid integer"),
        ({"num_layers": "0x0C"}, "num_layers: value '0x0C': Input should be a valid integer"),
        ({"num_layers": "014"}, "num_layers: value '014': Input should be a valid integer"),
        ({"tie_word_embeddings": "yes"}, "tie_word_embeddings: value 'yes': Input should be a "),
        ({"num_layers": "100000"}, "num_layers: value 100000: Input should be less than or equal"),
        ({"vocab_size": "1" + "0" * 400}, "cannot read '1000"),
        ({"hidden_size": "!!int abc"}, "cannot read 'abc' as !!int"),
        ({"hidden_size": "!!bool on"}, "cannot read 'on' as !!bool"),
        ({"source": "!!python/object/apply:os.system ['true']"}, "could not determine a const"),
        ({"name": '""'}, "name: value '': String should have at least 1 character"),
        ({"name": '"fz "'}, "name: value 'fz ': a name must not start or end"),
        ({"name": '"fz\\n"'}, "a name must not start or end with whitespace"),
        ({"name": '"f\\tz"'}, "a name must not contain line breaks or other control"),
        ({"name": "n" * 300}, "name: value 'nnnn"),
    ],
)
def test_refused_values_name_file_line_and_field(tmp_path, replacements, fragment):
    text = _model(**replacements)
    path = _write(tmp_path, text)
    key = next(iter(replacements))
    outcome = cli(*_size(tmp_path))
    assert_refused(outcome, f"{path}:{_line(text, key + ':')}", fragment)
    if "YAML 1.2" not in fragment and replacements.get(key) in ("1:20", "0x0C", "014"):
        assert "kvplan reads YAML 1.2" in outcome.stderr


def test_duplicate_keys_are_refused_naming_both_lines(tmp_path):
    text = _model() + "num_layers: 400\n"
    path = _write(tmp_path, text)
    first, again = _line(text, "num_layers:"), len(text.splitlines())
    assert_refused(
        cli(*_size(tmp_path)),
        f"{path}:{again}:1: duplicate key 'num_layers': first on line {first}, again on line",
    )


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (billion_laughs(), "more than 100,000 values once aliases are expanded"),
        ("x_deep: " + deep_yaml(100) + "\n", "nested deeper than 64 levels"),
        ("x_deep: " + deep_yaml(5000) + "\n", "nesting depth"),
        ("x_loop: &r [*r]\n", "an alias refers to a value that contains it"),
        ("notes: [" + ", ".join(["a"] * 200_001) + "]\n", "more than 100,000 values"),
        ("# " + "p" * (5 * 2**20) + "\n", "larger than 4,194,304 bytes"),
    ],
)
def test_bombs_are_refused_fast(tmp_path, extra, fragment):
    _write(tmp_path, _model() + extra)
    assert_refused(cli(*_size(tmp_path)), fragment)


def test_per_layer_lists_are_bounded(tmp_path):
    kinds = "[" + ", ".join(["full"] * 5000) + "]"
    text = _model(num_layers="5000").replace("pattern: [full]", f"kinds: {kinds}")
    _write(tmp_path, text)
    assert_refused(
        cli(*_size(tmp_path)),
        "layers.kinds: value [",
        "should have at most 4096 items",
        "num_layers: value 5000: Input should be less than or equal to 4096",
    )


def test_five_thousand_aliases(tmp_path):
    aliases = ", ".join(f"org/alias-{i}" for i in range(5000))
    _write(tmp_path, _model(aliases=f"[{aliases}]"))
    assert_refused(cli(*_size(tmp_path)), "aliases: value [", "at most 64 items")


def test_duplicate_names_across_files_name_both_files(tmp_path):
    first = _write(tmp_path, _model(), "a.yaml")
    second = _write(tmp_path / "more", _model(), "b.yaml")
    assert_refused(
        cli("models", "--catalog", str(tmp_path)),
        f"{second}: model 'fz' is also defined in {first}",
    )


def test_one_folder_named_twice_is_read_once(tmp_path):
    _write(tmp_path, _model(aliases="[]"), "a.yaml")
    (tmp_path.parent / f"{tmp_path.name}-link").symlink_to(tmp_path)
    twice = cli("models", "--catalog", str(tmp_path), "--catalog", f"{tmp_path}/", "-f", "json")
    assert_accepted(twice)
    assert [m["model"] for m in json.loads(twice.stdout)].count("fz") == 1
    through_env = cli(
        "models", "--catalog", f"{tmp_path}-link", env={"KVPLAN_CATALOG": str(tmp_path)}
    )
    assert_accepted(through_env)


def test_a_file_name_with_control_characters_stays_one_escaped_line(tmp_path):
    _write(tmp_path, "name: [unclosed\n", "a\nb\x1b[31m.yaml")
    outcome = cli("models", "--catalog", str(tmp_path))
    assert_refused(outcome, f"{tmp_path}/a\\nb\\x1b[31m.yaml:2:1: malformed YAML")
    assert len(outcome.stderr_lines) == 1 and "\x1b" not in outcome.stderr


def test_a_broken_catalogue_file_is_not_an_unknown_model(tmp_path):
    # The Hugging Face hint belongs to "unknown model" only, and an org/name id must not go
    # to the Hub because a catalogue file is broken.
    _write(tmp_path, "name: [unclosed\n", "bad.yaml")
    for name in ("gpt2", "openai-community/gpt2"):
        outcome = cli("size", name, "--catalog", str(tmp_path), env={"HF_HUB_OFFLINE": "1"})
        assert_refused(outcome, f"{tmp_path}/bad.yaml:2:1: malformed YAML")
        assert "Hugging Face" not in outcome.stderr and len(outcome.stderr_lines) == 1
    unknown = cli("size", "no-such-model", env={"HF_HUB_OFFLINE": "1"})
    assert_refused(unknown, "unknown model 'no-such-model'", "or give a Hugging Face id")


def test_replacing_a_shipped_model_drops_its_old_aliases(tmp_path):
    # gpt2 ships with the alias openai-community/gpt2; the replacement has none.
    _write(tmp_path, GPT2.replace("aliases: [openai-community/gpt2, gpt2]", "aliases: []"))
    assert_accepted(cli("size", "gpt2", "--catalog", str(tmp_path)))
    assert_refused(
        cli("size", "openai-community/gpt2", "--catalog", str(tmp_path)), "openai-community/gpt2"
    )


def test_a_user_file_may_replace_a_shipped_one(tmp_path):
    _write(tmp_path, GPT2.replace("max_context: 1024", "max_context: 2048"))
    assert_accepted(cli("size", "gpt2", "--catalog", str(tmp_path), "--context", "2k"))


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda p: os.mkfifo(p), "not a regular file (a pipe, device or socket)"),
        (lambda p: p.symlink_to("/dev/zero"), "not a regular file (a pipe, device or socket)"),
        (lambda p: p.symlink_to(p), "cannot read: Too many levels of symbolic links"),
        (lambda p: p.write_bytes(b"name: \xff\n"), "not UTF-8 text (byte 6)"),
        (lambda p: p.write_text(""), "neither a model (needs num_layers) nor a SKU"),
        (
            lambda p: p.write_text(GPT2 + "---\n" + GPT2),
            "malformed YAML: but found another document",
        ),
        (lambda p: p.write_text("name: [unclosed\n"), "malformed YAML"),
    ],
)
def test_odd_catalogue_files(tmp_path, make, fragment):
    make(tmp_path / "entry.yaml")
    assert_refused(
        cli("models", "--catalog", str(tmp_path)), str(tmp_path / "entry.yaml"), fragment
    )


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("/", "more than 10,000 entries"),
        ("/nonexistent-kvplan-catalogue", "not a folder (no such path)"),
        ("c" * 300, "cannot read: File name too long"),
        (str(Path(__file__)), "not a folder"),
    ],
)
def test_odd_kvplan_catalog_values(value, fragment):
    outcome = cli("size", "gpt2", env={"KVPLAN_CATALOG": value})
    assert_refused(outcome, f"$KVPLAN_CATALOG {value}: {fragment}")


def test_empty_kvplan_catalog_entries_are_skipped():
    assert_accepted(cli("size", "gpt2", env={"KVPLAN_CATALOG": os.pathsep}))


@pytest.mark.parametrize(
    "name", ["", " gpt2", "gpt2 ", "gpt2\n", "g\tpt2", "x" * 300, "gpt2\x00", "a" * 129]
)
def test_bad_names_on_the_command_line(name):
    for argv in (
        ("size", name),
        ("show", name),
        ("size", "gpt2", "--sku", name),
        ("claim", "gpt2", "--sku", name),
        ("size", "gpt2", "--weight-dtype", name),
    ):
        assert_refused(cli(*argv))  # fmt: skip


def test_h100_mutation_keeps_its_line(tmp_path):
    text = replace_field(replace_field(H100, "name", "fz"), "memory_bytes", "1:20")
    path = _write(tmp_path, text)
    outcome = cli("size", "gpt2", "--sku", "fz", "--catalog", str(tmp_path))
    assert_refused(
        outcome,
        f"{path}:{_line(text, 'memory_bytes:')}: memory_bytes: value '1:20'",
        "kvplan reads YAML 1.2",
    )
