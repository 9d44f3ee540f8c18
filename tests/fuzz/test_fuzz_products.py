"""Deployment (products) files: mutations of examples/products.yaml, checked by `kvplan check`.

Every field of a product gets hostile values; each refusal names the file, the line and the
dotted field. `check` exits 1 on this example (two products fail their promise), so a
mutation that is not refused must still exit 0 or 1.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fuzz_corpus import PRODUCTS_FILE, billion_laughs
from fuzz_harness import assert_accepted, assert_clean, assert_refused, cli, fuzz
from hypothesis import given
from hypothesis import strategies as st

# The first two products (a concurrency and a rate promise): every field is there, and a
# check of two products costs half as much as one of four.
TEXT = PRODUCTS_FILE.read_text().split("\n\n  # Fails")[0] + "\n"
# (field, value, refused?) for the first product (chat-8k: a concurrency promise) or, for
# requests_per_s and duration_s, the second (assistant-32k: a rate × duration promise).
MUTATIONS = (
    ("requests_per_s", "inf", True), ("requests_per_s", ".inf", True),
    ("requests_per_s", ".nan", True), ("requests_per_s", "1e308", True),
    ("requests_per_s", "-1", True), ("requests_per_s", "yes", True),
    ("duration_s", "1e308", True), ("duration_s", "1:20", True), ("duration_s", "!!float x", True),
    ("requests_per_s", "1e9", True),  # 10⁹ req/s × 30 s: 3 × 10¹⁰ requests at once
    ("requests_per_s", "0." + "1" * 400, True), ("requests_per_s", "2.0000000000000001", True),
    ("requests_per_s", "0.0000001", True), ("requests_per_s", "1e-400", True),
    ("utilization", "1e-300", True), ("utilization", "0.000001", False),
    ("tp", "99999999999999999999", True), ("tp", "0", True), ("tp", "yes", True),
    ("tp", "0x2", True), ("tp", "2.0", True), ("tp", "010", True), ("pp", "100000", True),
    ("context", "1:20", True), ("context", "８k", True), ("context", "0x10", True),
    ("context", "1" + "0" * 400, True), ("context", '"1' + "0" * 400 + '"', True),
    ("context", "1.0000000000000001k", True), ("context", "-5", True), ("context", "0", True),
    ("context", "!!int abc", True), ("context", "[8k]", True), ("context", "1.5k", False),
    ("concurrency", "10000000000", True), ("concurrency", "1:20", True),
    ("concurrency", "on", True), ("concurrency", "3", False),
    ("name", '""', True), ("name", '"chat "', True), ("name", '"a\\nb"', True),
    ("name", "n" * 300, True), ("model", '""', True), ("model", '"llama-3.1-8b\\n"', True),
    ("model", "m" * 300, True), ("sku", '""', True), ("sku", '" h100-sxm"', True),
    ("engine", '""', True), ("kv_dtype", '""', True), ("weight_dtype", '""', True),
    ("kv_memory", "1" + "0" * 400, True), ("kv_memory", "1:20", True),
    ("kv_memory", "５GiB", True), ("kv_memory", "2.01GB", False), ("utilization", "2", True),
    ("utilization", ".nan", True), ("utilization", "yes", True),
    ("vllm_version", '"0.' + "9" * 400 + '"', True), ("vllm_version", "0.11", True),
    ("vllm_version", '"0.11"', False), ("max_num_seqs", "1" + "0" * 30, True),
    ("max_num_batched_tokens", "1" + "0" * 30, True), ("nonsense", "1", True),
)  # fmt: skip


def _mutate(key: str, value: str) -> tuple[str, int]:
    """The products file with `key: value` in one product, and the 1-based line it is on."""
    product = "assistant-32k" if key in ("requests_per_s", "duration_s") else "chat-8k"
    lines = TEXT.splitlines()
    start = lines.index(f"  - name: {product}")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("  - ")), None)
    end = end if end is not None else len(lines)
    for index in range(start, end):
        if re.match(rf"\s*(- )?{key}:", lines[index]):
            prefix = lines[index][: lines[index].index(f"{key}:")]
            lines[index] = f"{prefix}{key}: {value}"
            return "\n".join(lines) + "\n", index + 1
    lines.insert(start + 1, f"    {key}: {value}")
    return "\n".join(lines) + "\n", start + 2


def _check(tmp_path: Path, text: str):
    path = tmp_path / "products.yaml"
    path.write_text(text)
    return path, cli("check", str(path), "-f", "json")


@fuzz(15)
@given(mutation=st.sampled_from(MUTATIONS))
def test_mutated_products(tmp_path_factory, mutation):
    key, value, refused = mutation
    text, _ = _mutate(key, value)
    path, outcome = _check(tmp_path_factory.mktemp("products"), text)
    if refused:
        assert_refused(outcome, f"{path}:")
    else:
        assert_accepted(outcome)


@pytest.mark.parametrize(
    ("key", "value"), [m[:2] for m in MUTATIONS if m[2] and m[1] != "1e9"][::3]
)
def test_refusals_name_the_line_and_field(tmp_path, key, value):
    text, line = _mutate(key, value)
    path, outcome = _check(tmp_path, text)
    assert_refused(outcome, f"{path}:{line}")
    assert f"{key}: " in outcome.stderr or f".{key}: " in outcome.stderr, outcome.describe()


@fuzz(10)
@given(st.data())
def test_noise_in_products_files(tmp_path_factory, data):
    text = TEXT
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text)))
        chars = data.draw(
            st.sampled_from([*":-[]{}&*!|>'\"#%`\t\n", "!!int ", "*a", "&a ", "<<: "])
        )
        text = text[:at] + chars + text[at:]
    _, outcome = _check(tmp_path_factory.mktemp("products"), text)
    assert_clean(outcome)


def test_duplicate_key_names_both_lines(tmp_path):
    text = TEXT.replace("concurrency: 4\n", "concurrency: 4\n    concurrency: 400\n")
    first = text.splitlines().index("    concurrency: 4") + 1
    path, outcome = _check(tmp_path, text)
    assert_refused(
        outcome,
        f"{path}:{first + 1}:5: duplicate key 'concurrency': first on line {first}, "
        f"again on line {first + 1}",
    )


def test_billion_laughs_refused_fast(tmp_path):
    _, outcome = _check(tmp_path, billion_laughs() + TEXT)
    assert_refused(outcome, "more than 100,000 values once aliases are expanded")


def test_too_many_values_without_aliases_says_so(tmp_path):
    # 15,000 products of 7 values each: 105,000 values, over the 100,000 a YAML file may hold;
    # no alias anywhere, so no alias-bomb wording.
    product = "  - {name: p%d, model: gpt2, sku: h100-sxm, context: 1k, concurrency: 1}\n"
    text = "products:\n" + "".join(product % i for i in range(15_000))
    path, outcome = _check(tmp_path, text)
    assert_refused(
        outcome, str(path), "more than 100,000 values (kvplan's limit for one YAML file)"
    )
    assert "alias" not in outcome.stderr


def test_deep_products_list_refused(tmp_path):
    _, outcome = _check(tmp_path, "products:\n" + "  - " * 2000 + "x\n")
    assert_refused(outcome, "nested deeper than 64 levels")


def test_rate_times_duration_above_the_batch_limit(tmp_path):
    # 10⁶ requests/s × 10⁶ s = 10¹² requests at once, above kvplan's 1,048,576 sequences.
    text, _ = _mutate("duration_s", "1000000")
    text = text.replace("requests_per_s: 2.0", "requests_per_s: 1000000")
    _, outcome = _check(tmp_path, text)
    assert_refused(outcome, "requests_per_s × duration_s = 1,000,000,000,000 requests at once")


@pytest.mark.parametrize(
    ("rate", "duration", "concurrency"),
    [
        # ceil of the exact product of the decimals written: 0.1 × 30 = 3 (floats give
        # 3.0000000000000004, so 4); 2.5 × 30 = 75; 0.333 × 3 = 0.999, so 1.
        ("0.1", "30", 3),
        ("2.5", "30", 75),
        ("0.333", "3", 1),
    ],
)
def test_little_law_is_exact(tmp_path, rate, duration, concurrency):
    text, _ = _mutate("requests_per_s", rate)
    text = text.replace("duration_s: 30", f"duration_s: {duration}")
    _, outcome = _check(tmp_path, text)
    assert_accepted(outcome)
    rows = json.loads(outcome.stdout)["products"]
    assert next(r for r in rows if r["name"] == "assistant-32k")["promised_concurrency"] == (
        concurrency
    )


def test_a_float_that_cannot_hold_the_number_written_is_refused(tmp_path):
    # 2.0000000000000001 reads as the float 2.0: 2.0 × 30 = 60 where the text says 61.
    text, line = _mutate("requests_per_s", "2.0000000000000001")
    path, outcome = _check(tmp_path, text)
    assert_refused(
        outcome, f"{path}:{line}", "requests_per_s", "more significant digits than a float holds"
    )


def test_odd_products_paths(tmp_path):
    (tmp_path / "folder").mkdir()
    assert_refused(cli("check", str(tmp_path / "folder")), "is a folder, not a file")
    assert_refused(cli("check", "/dev/zero"), "not a regular file")
    assert_refused(cli("check", str(tmp_path / ("p" * 300))), "File name too long")
