"""Output that pastes and fits: Markdown a real parser renders as a table, tables within
the terminal's width, CSV booleans, grammar, units in `show`, footnotes only when marked."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
import yaml
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.report.render import plural

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()

REPORT = [
    "report", "-m", "llama-3.1-70b", "-s", "h200", "-s", "l4", "-c", "32k", "-b", "8",
    "--kv-dtype", "fp8",
]  # fmt: skip
CHECK = ["check", "examples/products.yaml"]
CLAIM = ["claim", "llama-3.1-8b", "--sku", "l4", "-c", "8k"]  # batch 1, tp 1
RECOMMEND = ["recommend", "llama-3.1-8b", "-c", "32k", "-n", "64", "-s", "h100", "--top", "3"]
SIZE = ["size", "gemma-2-9b", "-c", "32k", "-b", "1", "--sku", "l40s", "--explain"]
COMMANDS = {
    "report": REPORT,
    "check": CHECK,
    "claim": CLAIM,
    "recommend": RECOMMEND,
    "size": SIZE,
    "models": ["models"],
    "skus": ["skus"],
    "show": ["show", "gemma-2-9b"],
    "simulate": ["simulate", "llama-3.1-8b", "-s", "l40s", "--rate", "2", "--requests", "50"],
    "pools": [
        "pools",
        "llama-3.1-8b",
        "--sku",
        "h100-sxm",
        "--rate",
        "5",
        "--requests",
        "100",
        "--max-model-len",
        "8k",
        "--slo-ttft",
        "1s",
        "--slo-tpot",
        "40ms",
    ],
}


def run(args: list[str], columns: int | None = None, code: tuple[int, ...] = (0, 1)):
    env = {"COLUMNS": str(columns) if columns else None}
    result = runner.invoke(app, args, env=env, catch_exceptions=False)
    assert result.exit_code in code, result.output
    return result


def parse_markdown(text: str):
    """Tokens of a GFM table parser: CommonMark plus GFM tables and strikethrough."""
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(text)


def tables(tokens) -> list[list[list[str]]]:
    """Each table as rows of cell texts (the header row first), as a reader sees them."""
    found, rows, cells = [], [], None
    for token in tokens:
        if token.type == "table_open":
            rows = []
        elif token.type == "tr_open":
            cells = []
        elif token.type == "inline" and cells is not None:
            # Only plain text: an emphasis, link or raw HTML would mean a character leaked.
            assert all(child.type == "text" for child in token.children or []), token.content
            cells.append("".join(child.content for child in token.children or []))
        elif token.type == "tr_close":
            rows.append(cells)
            cells = None
        elif token.type == "table_close":
            found.append(rows)
    return found


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_markdown_is_one_table_and_plain_text(name):
    tokens = parse_markdown(run([*COMMANDS[name], "--format", "md"]).stdout)
    [table] = tables(tokens)
    header, *rows = table
    assert rows and all(len(row) == len(header) for row in rows)
    for token in tokens:
        if token.type == "inline":  # headings and notes too: no markup leaks
            assert all(c.type in ("text", "softbreak") for c in token.children or []), token


def test_report_markdown_keeps_pipes_and_stars_as_text():
    text = run([*REPORT, "--format", "md"]).stdout
    document = json.loads(run([*REPORT, "--format", "json"]).stdout)
    [[header, *rows]] = tables(parse_markdown(text))
    assert "weights/KV/free" in header
    # The model's native limit (131,072) binds on some rows: those show 131,072* as text.
    capped = [r for r in document if r["native_limit_binds"]]
    assert capped and sum(row[header.index("max ctx @8")] == "131,072*" for row in rows) == len(
        capped
    )
    # A cell with a literal pipe survives as one cell, not two.
    one = parse_markdown("| a |\n|---|\n| x\\|y |\n")
    assert tables(one) == [[["a"], ["x|y"]]]


def _body_lines(output: str, footer_from: str | None = None) -> list[str]:
    lines = output.splitlines()
    if footer_from is not None and footer_from in output:
        lines = lines[: next(i for i, line in enumerate(lines) if line.startswith(footer_from))]
    return lines


@pytest.mark.parametrize("columns", [80, 40])
def test_report_fits_the_terminal_and_keeps_every_row(columns):
    output = run(REPORT, columns=columns).stdout
    document = json.loads(run([*REPORT, "--format", "json"]).stdout)
    # The vLLM log lines (verbatim, for pasting) are printed only with four rows or fewer.
    assert all(len(line) <= columns for line in _body_lines(output)), output
    # Every row is still there with its SKU, TP and concurrency on one line, numbers whole.
    lines = output.splitlines()
    for record in document:
        wanted = [record["sku"], f"{record['max_concurrency']:,}"]
        assert any(
            all(re.search(rf"(^|[ │]){re.escape(w)}([ │]|$)", line) for w in wanted)
            for line in lines
        ), (record["sku"], record["tp"])
    assert "hidden to fit" in output and "--columns" in output


@pytest.mark.parametrize("columns", [80, 40])
def test_check_fits_the_terminal(columns):
    result = run(CHECK, columns=columns)
    document = json.loads(run([*CHECK, "--format", "json"]).stdout)
    assert all(len(line) <= columns for line in result.stdout.splitlines()), result.stdout
    for product in document["products"]:
        verdict = "ok" if product["ok"] else "FAIL"
        assert any(
            product["name"] in line and f" {verdict} " in f" {line} "
            for line in result.stdout.splitlines()
        ), product["name"]


def test_report_goes_vertical_rather_than_hide_every_number():
    # gpt2 on every SKU: model, sku and tp (the columns that must stay) take the 40 columns,
    # so a table would show names only; each row becomes a block with its numbers instead.
    args = ["report", "--model", "gpt2", "--tp", "1"]
    output = run(args, columns=40).stdout
    document = json.loads(run([*args, "--format", "json"]).stdout)
    lines = output.splitlines()
    assert all(len(line) <= 40 for line in lines), output
    assert "┏" not in output  # no grid
    for record in document:
        start = lines.index(record["sku"])  # tp is 1 on every row: told in a note
        block = lines[start + 1 : start + 9]
        assert [f"{record['max_concurrency']:,}"] in [
            line.split()[-1:] for line in block if line.strip().startswith("max conc")
        ], (record["sku"], block)


def test_a_table_without_priorities_goes_vertical_when_narrow():
    result = run(SIZE, columns=40)
    document = json.loads(run([*SIZE, "--format", "json"]).stdout)
    lines = result.stdout.splitlines()
    assert all(len(line) <= 40 for line in lines), result.stdout
    # The size table's rows become headings with their per-GPU and whole figures below.
    assert "KV per token" in lines
    # gemma-2-9b: 42 layers × 8 KV heads × 256 head_dim × 2 (K, V) × 2 B = 344,064 B per token
    # (sliding and full layers alike store every token's K and V) = 336.00 KiB.
    assert document["kv_bytes_per_token"] == 344_064
    assert any(line.split() == ["whole", "deployment", "336.00", "KiB"] for line in lines)


def test_json_parses_at_any_width():
    for args in (REPORT, CHECK, CLAIM, RECOMMEND, SIZE, ["show", "h100-sxm"]):
        for columns in (20, 40, 300):
            json.loads(run([*args, "--format", "json"], columns=columns).stdout)


def test_columns_picks_the_table_and_is_refused_where_it_cannot_apply():
    picked = run([*REPORT, "--columns", "sku,tp,max_concurrency"]).stdout
    header = next(line for line in picked.splitlines() if "┃" in line)
    assert [cell.strip() for cell in header.strip("┃").split("┃")] == [
        "sku",
        "tp",
        "max conc @32,768",
    ]
    # The native-limit footnote goes with its column.
    assert "native context limit" not in picked
    for bad, message in (
        (["--columns", "sku,nope"], "--columns: unknown column 'nope'"),
        (["--columns", "sku", "--format", "json"], "--columns: picks the columns of"),
        (["--columns", "sku,,tp"], "--columns: empty column name"),
    ):
        result = run([*REPORT, *bad], code=(2,))
        assert result.stdout == "" and message in result.stderr
        assert len(result.stderr.splitlines()) == 1


def test_csv_booleans_are_true_and_false():
    rows = list(csv.DictReader(io.StringIO(run([*REPORT, "--format", "csv"]).stdout)))
    document = json.loads(run([*REPORT, "--format", "json"]).stdout)
    assert [r["native_limit_binds"] for r in rows] == [
        "true" if d["native_limit_binds"] else "false" for d in document
    ]
    assert {r["ep"] for r in rows} == {"false"}
    check_rows = list(csv.DictReader(io.StringIO(run([*CHECK, "--format", "csv"]).stdout)))
    assert [r["ok"] for r in check_rows] == ["true", "true", "false", "false"]


def test_native_limit_footnote_only_when_a_row_is_marked():
    # llama-3.1-70b at 32k on one L4: nothing fits, so the native limit binds nowhere.
    unmarked = ["report", "-m", "llama-3.1-70b", "-s", "l4", "--tp", "1", "-c", "32k"]
    marked = ["report", "-m", "llama-3.1-8b", "-s", "h200", "--tp", "1", "-c", "32k"]
    for args, binds in ((unmarked, False), (marked, True)):
        document = json.loads(run([*args, "--format", "json"]).stdout)
        assert document[0]["native_limit_binds"] is binds
        for fmt in ("table", "md", "html"):
            output = run([*args, "--format", fmt]).stdout
            assert ("native context limit binds" in output) is binds, fmt
            star = "131,072\\*" if fmt == "md" else "131,072*"  # Markdown escapes the star
            assert (star in output) is binds, fmt


def test_plural_helper():
    assert plural(1, "GPU") == "1 GPU"
    assert plural(2, "GPU") == "2 GPUs"
    assert plural(0, "request") == "0 requests"
    assert plural(1_024, "sequence") == "1,024 sequences"
    assert plural(3, "capacity", "capacities") == "3 capacities"


def test_no_one_with_a_plural_noun(tmp_path):
    one = tmp_path / "one.yaml"
    one.write_text(
        "products:\n  - {name: solo, model: llama-3.1-8b, sku: l4, context: 8k, concurrency: 1}\n"
    )
    outputs = [
        run(CLAIM).stdout,  # batch 1 on 1 GPU
        run(SIZE).stdout,  # --explain at tp 1, batch 1
        run(["check", str(one)]).stdout,
        run(["recommend", "llama-3.1-8b", "-c", "8k", "-s", "l4", "--top", "1"]).stdout,
    ]
    wrong = re.compile(r"\b1 (GPUs|requests|sequences|products|models|layers|SKUs|points)\b")
    for output in outputs:
        assert not wrong.search(output), wrong.search(output)
    assert "1 product," in outputs[2] and "× 1 GPU =" in outputs[1]


def test_show_prints_units_not_raw_bytes():
    spec = yaml.safe_load((ROOT / "sku_profiles" / "h100-sxm.yaml").read_text())
    memory = spec["memory_bytes"]
    output = run(["show", "h100-sxm"]).stdout
    # GiB = 2^30 bytes, two decimals, and the exact figure beside it.
    assert f"{memory / 2**30:.2f} GiB ({memory:,} B)" in output
    assert str(memory) not in output.replace(f"{memory:,}", "")
    bandwidth = spec["bandwidth_bytes_per_s"]
    assert f"{bandwidth / 1e9:,.0f} GB/s" in output
    model = run(["show", "llama-3.1-8b"]).stdout
    assert "131,072 tokens" in model and "128.00 KiB (131,072 B)" in model


def test_pools_explains_the_dash_only_when_a_row_shows_it():
    base = ["pools", "llama-3.1-8b", "--sku", "h100-sxm", "--max-model-len", "8k"]
    easy = [*base, "--rate", "5", "--requests", "100", "--slo-ttft", "1s", "--slo-tpot", "40ms"]
    # 5 ms per output token cannot be met by an 8B model on one H100: its weights alone,
    # 16,060,522,496 B read per step at 3.35 TB/s × 0.85 (the roofline's default bandwidth
    # fraction), take 5.64 ms; so the decode pool is "—".
    hard = [*base, "--rate", "50", "--requests", "200", "--slo-ttft", "50ms", "--slo-tpot", "5ms"]
    for args, unmet in ((easy, False), (hard, True)):
        document = json.loads(run([*args, "--max-instances", "2", "--format", "json"]).stdout)
        pools = document["pools"][0]
        assert any(pools[role]["instances"] is None for role in ("prefill", "decode")) is unmet
        output = run([*args, "--max-instances", "2"]).stdout
        assert ("—: no instance count" in output) is unmet
