"""RoPE context extension: the native and the extended limit, what is served, and declaring
an extension a model card recommends but config.json omits (Qwen3's YaRN ×4)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvplan.catalog import Catalog
from kvplan.catalog.hf import import_hf
from kvplan.catalog.resolve import declare_rope_scaling, resolve_model
from kvplan.cli import app
from kvplan.engine import engine
from kvplan.engine.deployment import Deployment
from kvplan.plan.capacity import Capacity

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
CATALOG = Catalog()


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_llama3_scaling_in_config_is_inside_max_position_embeddings():
    # Llama 3.1 config: rope_scaling llama3 factor 8 over 8,192; max_position_embeddings 131,072.
    spec = import_hf(FIXTURES / "llama-3.1-8b").spec
    assert (spec.rope_scaling.rope_type, spec.rope_scaling.factor) == ("llama3", 8.0)
    assert spec.rope_scaling.original_max_context == 8192 and spec.rope_scaling.applied
    assert spec.extended_context is None and spec.context_limit == 131_072


def test_yarn_in_config_is_original_times_factor():
    # DeepSeek-V3: yarn factor 40 over 4,096 = 163,840 = max_position_embeddings.
    spec = import_hf(FIXTURES / "deepseek-v3").spec
    assert spec.rope_scaling.extended_context(spec.max_context) == 40 * 4096 == 163_840
    # Ministral 3 (rope_parameters, transformers 5): yarn 16 over 16,384 = 262,144.
    ministral = import_hf(FIXTURES / "ministral-3-3b-reasoning-2512").spec
    assert ministral.context_limit == 16 * 16_384 == 262_144


def test_linear_scaling_in_a_config_is_no_extension():
    # Gemma 3: linear ×8 beside max_position_embeddings 131,072, the model card's 128k.
    imported = import_hf(FIXTURES / "gemma-3-4b-it")
    assert imported.spec.rope_scaling is None and imported.spec.context_limit == 131_072
    assert any("linear ×8 read as already inside" in w for w in imported.warnings)


def test_qwen3_card_extension_is_shown_but_served_only_when_declared():
    spec = CATALOG.model("qwen3-8b")
    assert spec.max_context == 40_960 and spec.extended_context == 4 * 32_768
    assert spec.context_limit == 40_960  # the card's YaRN is not applied by the config
    declared = declare_rope_scaling(spec, "yarn:4")
    assert declared.context_limit == 131_072  # original 32,768 from the card's advice
    # Without the card's original, vLLM multiplies max_position_embeddings: 40,960 × 2.
    assert declare_rope_scaling(spec, "dynamic:2").context_limit == 81_920
    # 16k × 2 = 32,768 is below the native 40,960: kvplan never lowers the limit (vLLM would).
    assert declare_rope_scaling(spec, "yarn:2:16k").context_limit == 40_960
    assert declare_rope_scaling(spec, "yarn:2:16k").extended_context is None


def test_capacity_caps_the_longest_context_at_the_served_limit():
    spec = CATALOG.model("qwen3-8b")
    sku = CATALOG.sku("h200")
    native = Capacity(Deployment(spec, engine("vllm")), sku)
    extended = Capacity(Deployment(declare_rope_scaling(spec, "yarn:4"), engine("vllm")), sku)
    assert native.max_context_tokens == 40_960
    assert extended.max_context_tokens == 131_072  # 8B bf16 on 141 GB: one request fits


def test_size_notes_the_extension_and_the_option():
    result = run("size", "qwen3-8b", "--context", "100k", "--format", "json")
    record = json.loads(result.stdout)
    assert record["max_context"] == 40_960 and record["extended_context"] == 131_072
    assert record["context_limit"] == 40_960
    assert any("declare it with --rope-scaling yarn:4" in n for n in record["notes"])
    assert any("not served until declared" in n for n in record["notes"])
    args = ("size", "qwen3-8b", "--context", "100k", "--rope-scaling", "yarn:4", "-f", "json")
    declared = json.loads(run(*args).stdout)
    assert declared["context_limit"] == 131_072
    assert any("within the RoPE extension (131,072): served" in n for n in declared["notes"])


def test_bad_rope_scaling_is_one_line():
    for value, message in [
        ("yarn", "expected TYPE:FACTOR[:ORIGINAL_TOKENS]"),
        ("yarn:x", "factor: 'x' is not a number"),
        ("ntk:2", "rope_type"),
        ("yarn:0.5", "factor"),
    ]:
        result = run("size", "qwen3-8b", "--rope-scaling", value)
        assert result.exit_code == 2
        assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_check_serves_an_extended_context_only_when_the_product_declares_it(tmp_path):
    base = "products:\n  - name: long\n    model: qwen3-8b\n    sku: h200\n    context: 100k\n"
    base += "    concurrency: 1\n"
    path = tmp_path / "p.yaml"
    path.write_text(base)
    undeclared = json.loads(run("check", str(path), "--format", "json").stdout)
    assert undeclared["products"][0]["failure"] == "native_limit"
    path.write_text(base + "    rope_scaling: yarn:4\n")
    declared = run("check", str(path), "--format", "json")
    assert declared.exit_code == 0, declared.stdout
    path.write_text(base + "    rope_scaling: yarn\n")
    bad = run("check", str(path))
    assert bad.exit_code == 2 and "rope_scaling" in bad.stderr


def test_hub_alias_resolves_to_the_catalogue_entry_without_the_network():
    resolved = resolve_model(CATALOG, "meta-llama/Llama-3.1-8B")
    assert resolved.origin == "catalogue" and resolved.spec.name == "llama-3.1-8b"


def _one_error(result) -> str:
    assert result.exit_code == 2 and result.stdout == "", result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_declared_factors_are_ascii_decimals_up_to_the_stated_maximum():
    # The factor multiplies the context: 1024 (kvplan.limits.ROPE_FACTOR) is ~25× the
    # largest shipped (DeepSeek-V3's 40); inf, 1e400, ４ and 10^26 are refused in one line.
    for factor, fragment in (
        ("inf", "'inf' is not a number"),
        ("1e400", "'1e400' is not a number"),
        ("４", "'４' is not an ASCII digit"),
        ("99999999999999999999999999", "above kvplan's limit of 1,024"),
        ("1025", "1025 is above kvplan's limit of 1,024"),
        ("0.5", "0.5 is below kvplan's minimum of 1"),
    ):
        line = _one_error(run("size", "llama-3.1-8b", "--rope-scaling", f"yarn:{factor}"))
        assert line.startswith("error: --rope-scaling") and fragment in line, line
    assert declare_rope_scaling(CATALOG.model("gpt2"), "yarn:1024").context_limit == 1024 * 1024


def test_a_products_file_factor_is_read_the_same_way(tmp_path):
    path = tmp_path / "products.yaml"
    path.write_text(
        "products:\n  - name: p\n    model: llama-3.1-8b\n    sku: h100-sxm\n"
        "    context: 8k\n    concurrency: 1\n    rope_scaling: yarn:inf\n"
    )
    line = _one_error(run("check", str(path)))
    assert str(path) in line and "rope_scaling" in line and "'inf' is not a number" in line


def test_a_catalogue_factor_must_be_finite(tmp_path):
    text = (Path(__file__).parents[1] / "model_specs" / "qwen3-8b.yaml").read_text()
    assert "factor: 4.0" in text
    text = text.replace("name: qwen3-8b", "name: qwen3-inf").replace("factor: 4.0", "factor: .inf")
    (tmp_path / "q.yaml").write_text(
        text.replace("aliases: [Qwen/Qwen3-8B, Qwen/Qwen3-8B-Base]", "aliases: []")
    )
    line = _one_error(run("size", "qwen3-inf", "--catalog", str(tmp_path)))
    assert "factor" in line and "finite" in line, line
