"""The `$ kvplan …` examples of docs/*.md, docs/commands/*.md and README.md: found, run
in-process, compared, rewritten.

An example is a fenced block whose first line starts with `$ `. Each `$ ` line is a command;
the lines after it, up to the next `$ ` line, are what a terminal shows (stdout and stderr).
Commands understood:

- `kvplan ARGS`, optionally after NAME=VALUE environment settings (`COLUMNS=80 kvplan …`)
  and before `| head -N` (the first N lines). Without COLUMNS the output is piped: no
  terminal width, every table whole.
- `echo $?`: the previous kvplan command's exit code.
- `cat FILE`: the lines after it are FILE's contents, written before the next command.

A command may go on over more lines, each but the last ending in a backslash.

Commands run in a scratch folder that links the checkout's `examples/` and `docs/`, so the
paths the pages show work as written. A marker, an HTML comment on the line before the fence:

- `<!-- abridged -->`: the lines shown (less `…` lines) appear in the real output, in order;
  at least one `…` line shows the reader where lines are left out;
- `<!-- not run: REASON -->`: the block is not run (its output depends on the machine).

`python tests/docs_examples.py` rewrites every block that is neither with real output.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMAND_PAGES = sorted((ROOT / "docs" / "commands").glob("*.md"))
# Every page a user reads: a `$ kvplan` example anywhere runs, not only on the command pages.
PAGES = [*COMMAND_PAGES, *sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
FENCE = re.compile(r"^(`{3,})[\w+-]*\s*$")  # an opening fence may name a language
MARKER = re.compile(r"^<!--\s*(abridged|not run:\s*(?P<reason>.+?))\s*-->\s*$")
ELISION = ("…", "...")


@dataclass
class Step:
    """One `$ ` line and the lines the page shows after it."""

    command: str
    shown: list[str] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)  # the page's lines of the command


@dataclass
class Example:
    page: Path
    line: int  # 1-based line of the first `$ ` line
    steps: list[Step]
    abridged: bool
    skipped: str | None  # the reason it is not run
    span: tuple[int, int]  # lines (0-based) inside the fence, end exclusive

    @property
    def name(self) -> str:
        inside = self.page.is_relative_to(ROOT)
        return f"{self.page.relative_to(ROOT) if inside else self.page.name}:{self.line}"


def examples(page: Path) -> list[Example]:
    """The page's examples, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        end = next(
            (j for j in range(i + 1, len(lines)) if lines[j].strip() == opening.group(1)), None
        )
        if end is None:
            raise ValueError(f"{page.name}:{i + 1}: fence never closed")
        body = lines[i + 1 : end]
        if body and body[0].startswith("$ "):
            marker = MARKER.match(lines[i - 1]) if i > 0 else None
            steps: list[Step] = []
            for text in body:
                last = steps[-1] if steps else None
                if last is not None and not last.shown and last.raw[-1].endswith("\\"):
                    # A command continued with a backslash, as a shell reads it.
                    last.command = last.command[:-1].rstrip() + " " + text.strip()
                    last.raw.append(text)
                elif text.startswith("$ "):
                    steps.append(Step(text[2:], raw=[text]))
                else:
                    steps[-1].shown.append(text)
            found.append(
                Example(
                    page,
                    i + 2,
                    steps,
                    abridged=marker is not None and marker.group(1) == "abridged",
                    skipped=marker.group("reason") if marker else None,
                    span=(i + 1, end),
                )
            )
        i = end + 1
    return found


@dataclass
class Ran:
    """What a step printed (as a terminal shows it) and its exit code."""

    lines: list[str]
    exit_code: int
    # Lines the command printed with trailing whitespace (stripped in `lines`): a wrapped
    # note that keeps the space it broke at, a padded cell; a page shows them stripped.
    trailing: list[str] = field(default_factory=list)


class Session:
    """Runs an example's steps in one scratch folder, remembering the last exit code."""

    def __init__(self, parent: Path) -> None:
        import tempfile

        # Its own folder: a file one example writes is never another's.
        self.folder = Path(tempfile.mkdtemp(dir=parent))
        self.exit_code = 0
        for shared in ("examples", "docs"):  # paths the pages show, relative to the checkout
            (self.folder / shared).symlink_to(ROOT / shared, target_is_directory=True)

    def run(self, step: Step) -> Ran:
        words = shlex.split(step.command)
        if words[:1] == ["cat"]:
            (self.folder / words[1]).write_text("\n".join(step.shown) + "\n", encoding="utf-8")
            return Ran(list(step.shown), 0)
        if words == ["echo", "$?"]:
            return Ran([str(self.exit_code)], 0)
        env: dict[str, str | None] = {"COLUMNS": None}
        while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
            key, value = words.pop(0).split("=", 1)
            env[key] = value
        head = None
        if len(words) >= 3 and words[-3:-1] == ["|", "head"]:
            head = int(words[-1].lstrip("-"))
            words = words[:-3]
        if words[:1] != ["kvplan"]:
            raise ValueError(f"not a kvplan command: {step.command!r}")
        from typer.testing import CliRunner

        from kvplan.cli import app

        here = Path.cwd()
        os.chdir(self.folder)
        try:
            result = CliRunner().invoke(app, words[1:], env=env)
        finally:
            os.chdir(here)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        self.exit_code = result.exit_code
        printed = result.output.splitlines()
        lines = [line.rstrip() for line in printed]
        while lines and not lines[-1]:
            lines.pop()
        if head is not None:
            printed, lines = printed[:head], lines[:head]
        trailing = [line for line in printed if line != line.rstrip()]
        return Ran(lines, result.exit_code, trailing)


def differences(example: Example, folder: Path) -> list[str]:
    """Why the page and the real output differ (empty when they agree)."""
    session = Session(folder)
    problems = []
    if example.abridged and not any(
        line.strip() in ELISION for step in example.steps for line in step.shown
    ):
        # The marker is an HTML comment a reader never sees: the `…` line tells them.
        problems.append(f"{example.name}: abridged, but no `…` line shows where lines are left out")
    for step in example.steps:
        ran = session.run(step)
        real = ran.lines
        if ran.trailing:
            problems.append(f"$ {step.command}: a line ends in whitespace: {ran.trailing[0]!r}")
        shown = [line.rstrip() for line in step.shown]
        if example.abridged:
            missing = _missing_in_order([s for s in shown if s.strip() not in ELISION], real)
            if missing is not None:
                problems.append(f"$ {step.command}: not in the output (in order): {missing!r}")
        elif shown != real:
            problems.append(_diff(step.command, shown, real))
    return problems


def _missing_in_order(shown: list[str], real: list[str]) -> str | None:
    position = 0
    for line in shown:
        try:
            position = real.index(line, position) + 1
        except ValueError:
            return line
    return None


def _diff(command: str, shown: list[str], real: list[str]) -> str:
    import difflib

    diff = difflib.unified_diff(shown, real, "page", "real", lineterm="", n=1)
    return f"$ {command}:\n" + "\n".join(diff)


def rewrite(page: Path, folder: Path) -> int:
    """Rewrite `page`'s examples (not abridged, not skipped) with real output; how many."""
    lines = page.read_text(encoding="utf-8").splitlines()
    changed = 0
    for example in reversed(examples(page)):
        if example.abridged or example.skipped:
            continue
        session = Session(folder)
        body = []
        for step in example.steps:
            body += [*step.raw, *session.run(step).lines]
        start, end = example.span
        if lines[start:end] != body:
            lines[start:end] = body
            changed += 1
    page.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return changed


if __name__ == "__main__":
    import tempfile

    for path in [Path(p) for p in sys.argv[1:]] or PAGES:
        with tempfile.TemporaryDirectory() as scratch:
            print(f"{path.name}: {rewrite(path.resolve(), Path(scratch))} rewritten")
