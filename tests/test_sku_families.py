"""A SKU family name means the same everywhere: single-SKU commands (size, claim, simulate)
ask which member, reports expand it to every member; no alias shadows a family."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from typer.testing import CliRunner

from kvplan.cli import app

SKU_DIR = Path(__file__).resolve().parents[1] / "sku_profiles"


def _normal(label: str) -> str:
    """How a typed SKU name compares: lower case, one '-' per gap, no vendor word in front."""
    text = re.sub(r"[\s_/]+", "-", label.strip().lower())
    return re.sub(r"^(nvidia|amd|intel|tesla|geforce)-", "", text).strip("-")


def _shipped() -> list[dict]:
    return [yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(SKU_DIR.glob("*.yaml"))]


def test_no_shipped_alias_names_a_family_of_other_skus():
    skus = _shipped()
    families: dict[str, set[str]] = {}
    for sku in skus:
        families.setdefault(_normal(sku["family"]), set()).add(sku["name"])
    for sku in skus:
        for alias in sku.get("aliases", []):
            if _normal(alias) == _normal(sku["name"]):
                continue
            members = families.get(_normal(alias), {sku["name"]})
            assert members == {sku["name"]}, (sku["name"], alias, members)


# The three A100s of the catalogue: 40 GB SXM4, 80 GB SXM4, 80 GB PCIe (one family, a100).
A100S = ["a100-40gb", "a100-80gb", "a100-80gb-pcie"]


def test_a_family_asks_which_in_single_sku_commands():
    for command in (["size", "llama-3.1-8b"], ["claim", "llama-3.1-8b"]):
        result = CliRunner().invoke(app, [*command, "--sku", "a100"])
        assert (result.exit_code, result.stdout) == (2, ""), command
        assert result.stderr.strip() == (
            "error: sku 'a100' is a family of 3 SKUs: " + ", ".join(A100S) + "; name one"
        )


def test_a_family_expands_in_reports():
    result = CliRunner().invoke(
        app, ["report", "-m", "llama-3.1-8b", "--sku", "a100", "--tp", "1", "-f", "json"]
    )
    assert result.exit_code == 0, result.output
    assert sorted(row["sku"] for row in json.loads(result.stdout)) == A100S


def test_a_user_alias_naming_a_family_is_refused(tmp_path):
    text = (SKU_DIR / "a100-40gb.yaml").read_text(encoding="utf-8")
    mine = text.replace("name: a100-40gb", "name: my-a100").replace(
        "aliases: [", 'aliases: ["A100", '
    )
    (tmp_path / "my-a100.yaml").write_text(mine, encoding="utf-8")
    result = CliRunner().invoke(
        app, ["size", "llama-3.1-8b", "--sku", "my-a100", "--catalog", str(tmp_path)]
    )
    assert (result.exit_code, result.stdout) == (2, "")
    assert f"{tmp_path / 'my-a100.yaml'}: alias 'A100' of sku 'my-a100' names the family" in (
        result.stderr
    )


# sku_profiles/h200.yaml and h200-nvl.yaml: both of family h200, so "h200" is a SKU's name and
# its family's. The name is the more specific reading; the family is reached through it only
# when no SKU is called so (a100 above).
def _report_skus(*skus: str) -> list[str]:
    args = ["report", "-m", "llama-3.1-8b", "--tp", "1", "-f", "json"]
    for sku in skus:
        args += ["--sku", sku]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return [row["sku"] for row in json.loads(result.stdout)]


def test_an_exact_sku_name_is_that_sku_not_its_family():
    families = {sku["name"]: sku["family"] for sku in _shipped()}
    assert families["h200"] == families["h200-nvl"] == "h200"
    assert _report_skus("h200") == ["h200"]
    assert _report_skus("NVIDIA H200") == ["h200"]  # an alias is as exact as the name


def test_a_sku_named_twice_is_one_row():
    assert _report_skus("h200", "h200") == ["h200"]
    assert _report_skus("a100", "a100-80gb") == A100S


def test_recommend_searches_the_exact_sku_only():
    args = ["recommend", "llama-3.1-8b", "-c", "8k", "-n", "4", "-s", "h200", "-f", "json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["search"]["skus"] == 1
    assert {row["sku"] for row in payload["ranked"]} == {"h200"}
