"""Engine release numbers as users type them ('0.5.3', 'v1.0.0rc2', 'b6100'), parsed once.

Each profile keeps its own table of which rules a release follows; this module only turns
the text into a comparable tuple and refuses what no table covers.
"""

from __future__ import annotations

import re

from kvplan.errors import KvplanError

_DOTTED = re.compile(
    r"v?([0-9]{1,3})\.([0-9]{1,3})(?:\.([0-9]{1,4}))?(?:[.+-]?[0-9A-Za-z.+-]{0,20})"
)
_BUILD = re.compile(r"b?([0-9]{1,6})")


def parse_release(
    text: str, engine: str, oldest: tuple[int, int, int], newest: tuple[int, int, int]
) -> tuple[int, int, int]:
    """(major, minor, patch) of a release such as '0.5.3', 'v1.0' or '1.1.0rc2'.

    Raises:
        KvplanError: not a release number, or outside [oldest, newest] (whose rules kvplan
            has read).
    """
    match = _DOTTED.fullmatch(text.strip())
    if not match:
        raise KvplanError(f"--engine-version: {text!r} is not a {engine} release like 0.5.3")
    release = (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))
    if not oldest <= release[: len(oldest)] <= newest:
        low, high = (".".join(map(str, v)) for v in (oldest, newest))
        raise KvplanError(
            f"--engine-version: {text!r} is outside the {engine} releases kvplan follows "
            f"({low} – {high})"
        )
    return release


def parse_build(text: str, engine: str, oldest: int, newest: int) -> int:
    """A llama.cpp build number from 'b6100' or '6100' (as `llama-server --version` prints).

    Raises:
        KvplanError: not a build number, or outside [oldest, newest].
    """
    match = _BUILD.fullmatch(text.strip())
    if not match:
        raise KvplanError(f"--engine-version: {text!r} is not a {engine} build like b6100")
    build = int(match.group(1))
    if not oldest <= build <= newest:
        raise KvplanError(
            f"--engine-version: {text!r} is outside the {engine} builds kvplan follows "
            f"(b{oldest} – b{newest})"
        )
    return build
