"""Engine release numbers as users type them ('0.5.3', 'v1.0.0rc2', 'b6100'), parsed once.

Each profile keeps its own table of which rules a release follows; this module only turns
the text into a comparable tuple and refuses what no table covers.
"""

from __future__ import annotations

import re

from kvplan.errors import SettingError

# One grammar for every engine's release: up to four numeric parts, then PEP 440 pre, post
# and dev tags and a local part, as `pip show` and the engines' --version print them (0.11,
# 0.10.1.1, v1.0.0rc2, 0.6.6.post2.dev, 0.8.5.dev169+gce17db808). No spaces: "0.11 " and
# "0.11.0.0.0.0" are refused for every engine alike.
_DOTTED = re.compile(
    r"v?([0-9]{1,3})\.([0-9]{1,3})(?:\.([0-9]{1,4}))?(?:\.[0-9]{1,4})?"
    r"(?:[.-]?(?:rc|a|b|post|dev)[0-9]{0,10})*(?:\+[0-9A-Za-z.]{1,20})?"
)
_BUILD = re.compile(r"b?([0-9]{1,6})")
MAX_RELEASE_CHARS = 40
# (major, minor, patch), compared as tuples by each profile's rules.
Release = tuple[int, int, int]


def match_release(text: str, example: str, setting: str = "version") -> re.Match[str]:
    """The match of `text` against the one release grammar (groups: major, minor, patch).

    Raises:
        SettingError: not a release number; naming `setting` and an `example` of one.
    """
    match = _DOTTED.fullmatch(text) if len(text) <= MAX_RELEASE_CHARS else None
    if not match:
        raise SettingError(setting, f"{text[:MAX_RELEASE_CHARS]!r} is not {example}")
    return match


def parse_release(text: str, engine: str, oldest: Release, newest: Release) -> Release:
    """(major, minor, patch) of a release such as '0.5.3', 'v1.0' or '1.1.0rc2'.

    Raises:
        KvplanError: not a release number, or outside [oldest, newest] (whose rules kvplan
            has read).
    """
    match = match_release(text, f"a {engine} release like 0.5.3")
    release = (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))
    if not oldest <= release[: len(oldest)] <= newest:
        low, high = (".".join(map(str, v)) for v in (oldest, newest))
        raise SettingError(
            "version", f"{text!r} is outside the {engine} releases kvplan follows ({low} – {high})"
        )
    return release


def parse_build(text: str, engine: str, oldest: int, newest: int) -> int:
    """A llama.cpp build number from 'b6100' or '6100' (as `llama-server --version` prints).

    Raises:
        KvplanError: not a build number, or outside [oldest, newest].
    """
    match = _BUILD.fullmatch(text)
    if not match:
        raise SettingError("version", f"{text!r} is not a {engine} build like b6100")
    build = int(match.group(1))
    if not oldest <= build <= newest:
        raise SettingError(
            "version",
            f"{text!r} is outside the {engine} builds kvplan follows (b{oldest} – b{newest})",
        )
    return build
