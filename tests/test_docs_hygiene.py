"""The project speaks of itself only, and the README's headline example is real.

Docs, comments and tests never point at files outside the repository or at kvplan's own
issue numbers: a reader has neither. And the first example a reader sees runs within its
model's native context and prints what the README shows.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from kvplan.catalog import Catalog
from kvplan.cli import app
from kvplan.units import parse_tokens

ROOT = Path(__file__).resolve().parent.parent
# Outside the repository ("../shared/…", "reference §4") or kvplan's own tracker ("issue 5").
# Public trackers cited with their repository ("vllm-project/vllm issue #21348") stay allowed.
FORBIDDEN = re.compile(r"\.\./shared|shared/reference|reference §|\bissue \d", re.IGNORECASE)
SOURCES = ("kvplan", "kernels", "validate", "bench", "tests", "docs", "scripts", "examples")


def _project_files():
    yield ROOT / "README.md"
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".md", ".sh", ".yaml") and path != Path(__file__):
                yield path


def test_no_references_outside_the_repository():
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}"
        for path in _project_files()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if FORBIDDEN.search(line)
    ]
    assert found == []


def _headline() -> tuple[list[str], list[str]]:
    """The README's first example: the command's arguments and the output lines shown."""
    block = re.search(r"```\n\$ kvplan (.*?)\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block is not None
    return shlex.split(block.group(1)), block.group(2).splitlines()


def test_readme_headline_runs_within_native_context():
    argv, _ = _headline()
    assert argv[0] == "size"
    model = Catalog().model(argv[1])
    context = parse_tokens(argv[argv.index("--context") + 1])
    assert context <= model.max_context, (argv, model.max_context)


def test_readme_headline_output_is_real():
    argv, shown = _headline()
    result = CliRunner().invoke(app, argv, env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == shown
