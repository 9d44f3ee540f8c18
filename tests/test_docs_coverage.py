"""The docs test reaches every page a user reads, and what it lets through is said to the reader."""

from __future__ import annotations

from docs_examples import PAGES, ROOT, differences, examples
from typer.testing import CliRunner

from kvplan.cli import app


def test_examples_outside_the_command_pages_are_run():
    # docs/vllm-log-lines.md's two examples and getting-started's went stale unchecked.
    for page, least in (("vllm-log-lines.md", 2), ("getting-started.md", 4), ("formulas.md", 1)):
        assert ROOT / "docs" / page in PAGES, page
        run = [example for example in examples(ROOT / "docs" / page) if not example.skipped]
        assert len(run) >= least, page
    assert ROOT / "README.md" in PAGES


def test_an_abridged_example_must_show_a_leaving_out_line(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- abridged -->\n```\n$ kvplan size llama-3.1-8b --context 8k\n"
        "llama-3.1-8b · engine vllm · KV bf16 · 1 × 8,192 tokens · tp 1 × pp 1\n```\n"
    )
    (example,) = examples(page)
    problems = differences(example, tmp_path)
    assert len(problems) == 1 and "no `…` line" in problems[0]


def _lines(*args: str, columns: int) -> list[str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns)})
    assert result.exit_code in (0, 1), result.output
    return result.stdout.splitlines()


def test_wrapped_notes_and_titles_end_without_a_space():
    # At 80 columns the size table's bar note and the models note wrap onto more lines.
    for args in (
        ("size", "llama-3.1-8b", "--context", "128k", "--batch", "8", "--sku", "h100-sxm"),
        ("models",),
    ):
        lines = _lines(*args, columns=80)
        assert [line for line in lines if line != line.rstrip()] == [], args


def test_show_keeps_a_url_whole_at_any_width():
    # The Llama-3.1-8B entry's source URL (68 characters) was folded mid-word at 100 columns
    # and at 60; it must appear whole on one line, however narrow the terminal.
    url = "https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json"
    for columns in (60, 100, 160):
        lines = _lines("show", "llama-3.1-8b", columns=columns)
        assert any(url in line for line in lines), columns
        assert [line for line in lines if line != line.rstrip()] == [], columns
