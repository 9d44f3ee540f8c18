"""Counts of the catalogue that the docs state ("107 models", "28 SKUs") match the catalogue's
files, counted here without kvplan: one YAML file per model and per SKU."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
COUNTS = {
    "models": len(list((ROOT / "model_specs").glob("*.yaml"))),
    "SKUs": len(list((ROOT / "sku_profiles").glob("*.yaml"))),
}
# "107 models", "28 SKUs", "107 models × 28 SKUs"; not "4 rows" or "a few models".
STATED = re.compile(r"\b(\d[\d,]*) (models|SKUs)\b")


def test_the_catalogue_has_entries():
    assert COUNTS["models"] > 50 and COUNTS["SKUs"] > 20


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_stated_counts_match_the_catalogue(page):
    text = page.read_text(encoding="utf-8")
    for match in STATED.finditer(text):
        stated, what = int(match[1].replace(",", "")), match[2]
        line = text.count("\n", 0, match.start()) + 1
        assert stated == COUNTS[what], (
            f"{page.name}:{line}: {match[0]!r}, catalogue has {COUNTS[what]}"
        )
