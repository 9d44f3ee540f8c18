"""The common record every engine's log reader fills: what a startup log states.

A reader turns lines into two kinds of readings: *facts* (the launch inputs the log echoes:
model, GPU, TP, utilization, max model length, block size, dtypes) and *figures* (the numbers
the engine computed: free memory, weights, the pool, blocks, tokens, concurrency). A figure
keeps the text it was printed as and the rounding of that text, so a comparison can tell a
difference from the last printed digit.

Readers are tables of `Rule`s (a pattern and what it reads); lines no rule matches are
skipped. Units: bytes for memory, tokens, requests, blocks; fractions from 0 to 1.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

GIB = 2**30
MIB = 2**20
GB = 10**9


@dataclass(frozen=True)
class Logged:
    """One number a log printed, in kvplan's unit, with the rounding of its text."""

    name: str  # what it is (available_kv_bytes, gpu_kv_cache_tokens, …)
    value: float  # in `unit`
    unit: str  # bytes, tokens, requests, blocks, fraction
    step: float  # one unit of the last printed digit, in `unit` (0.01 GiB = 10,737,418 B)
    text: str  # as printed ("12.13 GiB")
    line: int  # 1-based line number in the log


@dataclass
class Reading:
    """What one log states, as a reader found it."""

    engine: str
    version: str | None = None
    version_basis: str = ""  # the line or the wording the release was read from
    facts: dict[str, Any] = field(default_factory=dict)
    fact_lines: dict[str, int] = field(default_factory=dict)
    figures: dict[str, Logged] = field(default_factory=dict)
    ranks: dict[str, list[Logged]] = field(default_factory=dict)  # each rank's, when they differ
    arguments: dict[str, str] = field(default_factory=dict)  # the engine's echo of its args
    lines_read: int = 0  # lines some rule matched

    def fact(self, name: str, value: Any, line: int, overwrite: bool = False) -> None:
        """Record a launch input (the first statement wins unless `overwrite`)."""
        if value is None or (name in self.facts and not overwrite):
            return
        self.facts[name] = value
        self.fact_lines[name] = line

    def figure(self, logged: Logged, keep: str = "first") -> None:
        """Record a figure; of several ranks' lines `keep` 'max' keeps the largest (and notes
        that the ranks differ), 'min' the smallest, 'last' the last, 'first' the first."""
        old = self.figures.get(logged.name)
        if old is not None and keep == "max" and old.value != logged.value:
            self.facts.setdefault("ranks_differ", set()).add(logged.name)
            seen = self.ranks.setdefault(logged.name, [old])
            if all(other.value != logged.value for other in seen):
                seen.append(logged)
        larger = old is not None and logged.value > old.value
        smaller = old is not None and logged.value < old.value
        if (
            old is None
            or keep == "last"
            or (keep, larger, smaller)
            in (
                ("max", True, False),
                ("min", False, True),
            )
        ):
            self.figures[logged.name] = logged


# A rule reads one kind of line: (pattern, reader(match, line number, reading)).
Reader = Callable[[re.Match[str], int, Reading], None]


@dataclass(frozen=True)
class Rule:
    """A line pattern and what it reads; `needle` is a plain substring tested first (fast)."""

    needle: str
    pattern: re.Pattern[str]
    read: Reader


def rule(needle: str, pattern: str) -> Callable[[Reader], Rule]:
    """Decorator: the function becomes the reader of lines containing `needle` and matching
    `pattern` (searched, not anchored: logs prefix lines with dates, ranks and pids)."""

    def make(read: Reader) -> Rule:
        return Rule(needle, re.compile(pattern), read)

    return make


def apply(rules: Iterable[Rule], lines: list[str], reading: Reading) -> Reading:
    """Run every rule over every line; a line may feed several rules."""
    table = tuple(rules)
    any_needle = re.compile("|".join(re.escape(one.needle) for one in table))
    for number, line in enumerate(lines, start=1):
        if not any_needle.search(line):
            continue
        matched = False
        for one in table:
            if one.needle in line:
                match = one.pattern.search(line)
                if match:
                    one.read(match, number, reading)
                    matched = True
        reading.lines_read += matched
    return reading


def count(text: str) -> int:
    """'807,792' → 807792."""
    return int(text.replace(",", ""))


def amount(text: str, unit_bytes: int, name: str, line: int, label: str | None = None) -> Logged:
    """A printed amount ('12.13' in units of `unit_bytes`, printed as `label`) as bytes with
    its rounding."""
    digits = text.split(".")[1] if "." in text else ""
    step = unit_bytes * 10 ** -len(digits)
    shown = label or {GIB: "GiB", MIB: "MiB", GB: "GB"}.get(unit_bytes, "")
    return Logged(name, float(text) * unit_bytes, "bytes", step, f"{text} {shown}".strip(), line)


def number(text: str, name: str, line: int, unit: str) -> Logged:
    """A printed count or ratio ('807,792', '788.86') with the step of its last digit."""
    plain = text.replace(",", "")
    digits = plain.split(".")[1] if "." in plain else ""
    value: float = int(plain) if not digits else float(plain)  # counts stay exact integers
    return Logged(name, value, unit, 10.0 ** -len(digits), text, line)


def gib(text: str, name: str, line: int, label: str = "GiB") -> Logged:
    """A figure printed in GiB (SGLang labels them "GB": `label`)."""
    return amount(text, GIB, name, line, label)


GPU = "GPU and settings"  # kvplan predicts the figure from the GPU, model and settings
POOL = "logged budget"  # kvplan computes the figure from the budget the log printed
READINGS = "logged free memory"  # kvplan's budget with the log's free-memory readings given


@dataclass(frozen=True)
class Compared:
    """A logged figure and where kvplan's figure for it is in a capacity row's JSON."""

    key: str  # the Logged name
    quantity: str  # in words
    path: str | None  # 'budget/total_bytes', 'startup/gpu_kv_cache_tokens'; None: no term
    basis: str  # GPU or POOL
    term: str  # the term this figure is, named in differences
    in_budget: bool = False  # a term of the budget: it explains the budget's difference
    given_as: str | None = None  # a reading kvplan takes as this setting, with no figure of its own
