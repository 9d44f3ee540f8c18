"""`--format html`: one self-contained page whose numbers are the JSON output's.

The page's table cells and chart parts carry the JSON Pointer and exact value of what they
show (`data-path`, `data-value`). These tests run each command twice, `--format json` and
`--format html`, and check every such element: its value is the JSON's at that pointer, and
the text a reader sees is that value rounded (parsed here with its unit, independently of
kvplan's formatting). Then a real headless Chromium (Debian's package, started by the test
over its DevTools pipe; tests/browser.py) loads each page from a file: no console error, no
request, the same numbers in the rendered DOM, a print layout that fits landscape A4, and a
screenshot (KVPLAN_DOCS_IMAGES=1 writes it to docs/images/ for the docs).
"""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from browser import Browser, chromium
from typer.testing import CliRunner

from kvplan.cli import app

ROOT = Path(__file__).resolve().parent.parent
DOCS_IMAGE = ROOT / "docs" / "images" / "report-html.png"

# The commands whose HTML view the docs show, each with the JSON document it must match.
COMMANDS = {
    "report": [
        "report", "-m", "llama-3.1-70b", "-s", "h200", "-s", "mi300x", "-s", "l4",
        "-c", "32k", "-b", "8", "--kv-dtype", "fp8",
    ],
    "check": ["check", "examples/products.yaml"],
    "claim": ["claim", "llama-3.1-70b", "--sku", "h100-sxm", "--tp", "8", "-c", "128k", "-b", "8"],
    "recommend": ["recommend", "llama-3.1-8b", "-c", "32k", "-n", "64", "-s", "h100", "--top", "3"],
    "size": ["size", "gemma-2-9b", "-c", "32k", "-b", "4", "--sku", "l40s"],
    "show": ["show", "h100-sxm"],
    "simulate": [
        "simulate", "llama-3.1-8b", "-s", "h100-sxm", "--rate", "4", "--requests", "100",
        "--seed", "1", "--vs", "--kv-dtype fp8",
    ],
}  # fmt: skip
UNITS = {
    "B": 1,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
    "GB/s": 10**9,
    "TFLOP/s": 10**12,
    "µs": 1e-6,
}
NUMBER = re.compile(r"(-?[\d,]+(?:\.(\d+))?)\s*(TFLOP/s|GB/s|KiB|MiB|GiB|TiB|µs|B\b)?")


def run(*args: str):
    runner = CliRunner()
    result = runner.invoke(app, list(args), env={"COLUMNS": None}, catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return result.stdout


def pointer(document, path: str):
    """RFC 6901, written here again so the test does not trust kvplan's resolver."""
    for token in path.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        document = document[int(token)] if isinstance(document, list) else document[token]
    return document


def shown_matches(value, text: str, in_chart: bool) -> bool:
    """Whether `text` (what the page shows) says `value` (the JSON's)."""
    text = text.strip()
    if in_chart:  # a chart part's tooltip gives the exact bytes
        return f"({value:,} B)" in text
    if value is None:
        return text == "—"
    if isinstance(value, bool):
        yes, no = ("ok", "fits", "true"), ("FAIL", "does NOT fit", "false")
        return text.startswith(yes if value else no)
    if isinstance(value, str):
        return text == value or value in text.split()
    match = NUMBER.search(text)
    if match is None:
        return False
    number = float(match.group(1).replace(",", ""))
    unit = UNITS[match.group(3)] if match.group(3) else 1
    # Shown with d decimals: off by at most half the last digit, in the unit shown.
    tolerance = 0.5 * 10 ** -len(match.group(2) or "") * unit
    return abs(number * unit - value) <= tolerance * 1.0001


class TiedElements(HTMLParser):
    """Every element with a data-path: (tag, path, data-value, its text)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str, str, str]] = []
        self._open: list[list] = []
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag in ("circle", "line", "rect") and "data-path" not in attributes:
            return
        if "data-path" in attributes:
            self._open.append([tag, attributes["data-path"], attributes["data-value"], ""])
        elif tag in ("td", "th"):
            self._open.append([tag, None, None, ""])

    def handle_endtag(self, tag):
        if self._open and self._open[-1][0] == tag:
            element = self._open.pop()
            if element[1] is not None:
                self.found.append(tuple(element))

    def handle_data(self, data):
        for element in self._open:
            element[3] += data


def _leaves(document: dict) -> list:
    found = []
    for value in document.values():
        found += _leaves(value) if isinstance(value, dict) else [value]
    return found


def html_and_json(name: str):
    args = COMMANDS[name]
    return run(*args, "--format", "html"), json.loads(run(*args, "--format", "json"))


def check_tied(elements, document) -> int:
    """Assert every tied element against the JSON; the number of table cells checked."""
    cells = 0
    for tag, path, value_text, text in elements:
        value = pointer(document, path)
        assert json.loads(value_text) == value, path
        assert shown_matches(value, text, tag != "td"), (path, value, text)
        cells += tag == "td"
    return cells


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_page_says_what_the_json_says(name):
    page, document = html_and_json(name)
    parser = TiedElements()
    parser.feed(page)
    cells = check_tied(parser.found, document)
    rows = page.count("<tr>") - 1  # less the header row
    # Every row shows at least one value from the JSON (simulate's rows join several values
    # in a sentence; its charts carry them).
    assert cells >= rows > 0 or name in ("show", "simulate")
    if name == "simulate":
        # Per run: each part of the pool that is not empty (an empty one has no bar) and the
        # pool's size.
        drawn = [v for run in document["runs"] for v in run["kv_memory_mean"].values() if v > 0]
        assert len(parser.found) - cells == len(drawn) + len(document["runs"])
    if name == "show":
        # One row per field; every field but the lists (aliases, notes) is tied.
        leaves = [v for v in _leaves(document) if not isinstance(v, list)]
        assert cells == len(leaves) == rows - (len(_leaves(document)) - len(leaves))
    if name == "report":
        assert rows == len(document)
        # 3 SKUs × TP 1, 2, 4, 8 (L4: a node of 8) = 12 rows; each shows 9 tied columns:
        # model, sku, tp, weights, KV budget, KV tokens, max ctx, max conc, decode, KV/token,
        # verdict (11) — all of them.
        assert cells == rows * 11


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_page_is_self_contained(name):
    page, _ = html_and_json(name)
    parser = TiedElements()
    parser.feed(page)
    for tag, attributes in parser.tags:
        assert tag not in ("script", "img", "iframe", "object", "embed"), tag
        assert "src" not in attributes, (tag, attributes)
        if "href" in attributes:
            assert attributes["href"].startswith("data:"), attributes
    policy = [
        a["content"] for _, a in parser.tags if a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert policy == ["default-src 'none'; style-src 'unsafe-inline'; img-src data:"]
    assert "@media print" in page and page.startswith("<!DOCTYPE html>")
    if name in ("report", "check", "claim", "simulate"):
        # Two charts: memory per GPU and requests against context, both inline SVG.
        assert page.count("<svg ") == 2


def test_charts_sample_capacity_at_the_asked_context():
    page, document = html_and_json("report")
    points = re.findall(r'<circle class="mark [^"]*" cx="[^"]*" cy="[^"]*" r="5" '
                        r'data-context="(\d+)" data-requests="(\d+)"', page)  # fmt: skip
    # One marked point per row that holds a request: the JSON's concurrency at 32k.
    expected = sorted((32768, r["max_concurrency"]) for r in document if r["max_concurrency"])
    assert sorted((int(c), int(n)) for c, n in points) == expected


needs_chromium = pytest.mark.skipif(
    chromium() is None,
    reason="Chromium is not installed (scripts/test.sh installs Debian's chromium package)",
)


@pytest.fixture(scope="module")
def browser():
    with Browser() as running:
        yield running


@needs_chromium
def test_the_browser_sees_a_blocked_load(browser, tmp_path):
    """The watcher itself: a page that asks for an image is reported (else the next test
    could pass on a browser that reports nothing)."""
    page = tmp_path / "bad.html"
    page.write_text(
        '<!DOCTYPE html><meta http-equiv="Content-Security-Policy" content="default-src '
        '\'none\'"><title>t</title><img src="http://127.0.0.1:9/x.png">'
    )
    assert browser.open(page).problems


@needs_chromium
@pytest.mark.parametrize("name", ["report", "check", "claim", "recommend", "simulate"])
def test_chromium_renders_the_numbers_without_errors(browser, tmp_path, name):
    html, document = html_and_json(name)
    path = tmp_path / f"{name}.html"
    path.write_text(html)
    page = browser.open(path, width=1400, height=900)
    assert page.problems == []
    # What the browser rendered: each tied element's value and visible text (a chart
    # part's text is its tooltip title).
    rendered = page.evaluate(
        "[...document.querySelectorAll('[data-path]')].map(e => "
        "[e.tagName.toLowerCase(), e.dataset.path, e.dataset.value, e.textContent])"
    )
    check_tied(rendered, document)
    assert len(rendered) >= 6
    # Printed on landscape A4 (277 mm between 10 mm margins = 1047 CSS px at 96 px/inch),
    # the table and every chart fit the paper's width.
    page.resize(1047, 740)
    page.emulate("print")
    widths = page.evaluate(
        "[...document.querySelectorAll('table, svg')].map(e => e.getBoundingClientRect().right)"
    )
    assert widths and max(widths) <= 1047
    assert page.pdf().startswith(b"%PDF-")
    if name == "report":
        page.emulate("screen")
        page.resize(1400, 900)
        shot = DOCS_IMAGE if os.environ.get("KVPLAN_DOCS_IMAGES") else tmp_path / "report.png"
        page.screenshot(shot)
        png = shot.read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        assert 1300 <= width <= 1400 and height >= 600  # less a scrollbar, if any
