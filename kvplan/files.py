"""Reading input files and writing output files: bounded, total, and never half-written.

Reads take regular files only, up to a stated size: a named pipe would block forever, and
`/dev/zero` (a symlink to it passes `is_file()` checks on some systems) never ends. Writes go
to a temporary file beside the target and are renamed over it once complete, so a failed
write leaves the old file, or none. Every failure is one KvplanError line naming the path.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import kvplan.limits as limits
from kvplan.errors import KvplanError, shown


def _reason(error: OSError | ValueError) -> str:
    """The OS's words for `error` ("File name too long"), or the ValueError's own."""
    if isinstance(error, OSError):
        return error.strerror or type(error).__name__
    return str(error)


def _label(path: Path | str, what: str) -> str:
    return f"{what} {shown(path)}" if what else shown(path)


def _open_regular(path: Path, label: str) -> int:
    """A read-only descriptor of the regular file `path`; a one-line KvplanError otherwise."""
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise KvplanError(f"{label}: no such file") from None
    except (OSError, ValueError) as error:
        raise KvplanError(f"{label}: cannot read: {_reason(error)}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        what = "is a folder, not a file" if stat.S_ISDIR(mode) else "not a regular file"
        raise KvplanError(
            f"{label}: {what}{'' if stat.S_ISDIR(mode) else ' (a pipe, device or socket)'}"
        )
    return fd


def open_regular(path: Path, what: str = "") -> BinaryIO:
    """The regular file `path` opened for binary reading (see `read_text` for what is refused).

    Raises:
        KvplanError: missing, a folder, not a regular file, or unreadable.
    """
    return os.fdopen(_open_regular(path, _label(path, what)), "rb")


def check_regular(path: Path, what: str = "") -> None:
    """Refuse `path` unless it is a readable regular file (for readers that take a path).

    Raises:
        KvplanError: missing, a folder, not a regular file, or unreadable.
    """
    os.close(_open_regular(path, _label(path, what)))


def read_text(path: Path, max_bytes: int, what: str = "") -> str:
    """The UTF-8 text of the regular file `path`, at most `max_bytes` bytes long.

    Args:
        path: the file to read.
        max_bytes: the largest file accepted, in bytes (kvplan.limits).
        what: the option or role that named the file ("--catalog"), put before the path.

    Raises:
        KvplanError: missing, a folder, not a regular file, too large, unreadable or not UTF-8.
    """
    label = _label(path, what)
    fd = _open_regular(path, label)
    try:
        data = _read_at_most(fd, max_bytes + 1, label)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise KvplanError(f"{label}: larger than {max_bytes:,} bytes, the most kvplan reads")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise KvplanError(f"{label}: not UTF-8 text (byte {error.start:,})") from None


class HugeInt(str):
    """A JSON integer too long to be a real value, kept as its digits (see `parse_json`)."""

    def __repr__(self) -> str:
        return f"<an integer of {len(self.lstrip('-')):,} digits>"


def _int(text: str) -> int | HugeInt:
    # Python refuses to convert integers over 4,300 digits at all (ValueError); none is real.
    return int(text) if len(text) <= limits.NUMBER_CHARS else HugeInt(text)


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict, refusing a key given twice (json.loads keeps the last)."""
    built = dict(pairs)
    if len(built) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKeyError(key)
            seen.add(key)
    return built


def _depth(value: Any) -> int:
    """Nesting depth of parsed JSON, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def parse_json(text: str | bytes, where: str) -> Any:
    """Parsed JSON, nested at most kvplan.limits.NESTING_DEPTH deep.

    An integer longer than kvplan.limits.NUMBER_CHARS digits becomes a `HugeInt` (its digits
    as a str) instead of a ValueError: harmless where nobody reads it, refused as "not an
    integer" where someone does.

    Raises:
        KvplanError: not JSON (line and column), not UTF-8, nested too deep, or a key given
            twice in one object; naming `where`.
    """
    too_deep = f"{where}: JSON nested deeper than {limits.NESTING_DEPTH} levels (kvplan's limit)"
    try:
        data = json.loads(text, parse_int=_int, object_pairs_hook=_unique_keys)
    except _DuplicateKeyError as error:
        raise KvplanError(
            f"{where}: key {error.key[:40]!r} appears twice in one JSON object (JSON readers "
            "keep the last, silently; remove one)"
        ) from None
    except json.JSONDecodeError as error:
        raise KvplanError(
            f"{where}: not valid JSON (line {error.lineno} column {error.colno}: {error.msg})"
        ) from None
    except UnicodeDecodeError as error:
        raise KvplanError(f"{where}: not UTF-8 text (byte {error.start:,})") from None
    except RecursionError:  # the C decoder stops near Python's recursion limit
        raise KvplanError(too_deep) from None
    if _depth(data) > limits.NESTING_DEPTH:
        raise KvplanError(too_deep)
    return data


def _read_at_most(fd: int, limit_bytes: int, label: str) -> bytes:
    """Up to `limit_bytes` bytes of `fd`, read in chunks (the file may grow while read)."""
    chunks: list[bytes] = []
    remaining = limit_bytes
    try:
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    except OSError as error:
        raise KvplanError(f"{label}: cannot read: {_reason(error)}") from None
    return b"".join(chunks)


_KINDS = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def output_target(path: Path, what: str = "") -> Path:
    """The regular file a write to `path` replaces: `path`, or the file its symlink names.

    Called before a command does any work, so that a bad path is refused with empty stdout,
    and again by `write_atomically`. Only a regular file (or nothing) is ever replaced: the
    rename would otherwise put a plain file where a device, a named pipe or a folder was
    (`-o /dev/null` run as root). A symlink to a regular file is written through, so the
    link stays; a read-only file is refused rather than silently replaced.

    Raises:
        KvplanError: an empty name, a folder, a missing or non-folder parent, a broken
            symlink, something other than a regular file, a read-only file, or a path the
            system refuses (too long, a symlink loop); naming the path.
    """
    label = _label(path, what)
    if path.name in ("", ".", ".."):
        raise KvplanError(f"{label}: not a file name")
    try:
        info = os.stat(path)  # follows symlinks: what a write would reach
    except FileNotFoundError:
        if os.path.islink(path):
            raise KvplanError(f"{label}: a symlink to a missing file; kvplan does not follow "
                              "it") from None  # fmt: skip
        _check_folder(path.parent, label)
        return path
    except NotADirectoryError:
        raise KvplanError(f"{label}: {shown(path.parent)} is not a folder") from None
    except (OSError, ValueError) as error:
        raise KvplanError(f"{label}: cannot write: {_reason(error)}") from None
    if stat.S_ISDIR(info.st_mode):
        raise KvplanError(f"{label}: is a folder; give a file name")
    if not stat.S_ISREG(info.st_mode):
        raise KvplanError(f"{label}: is {_kind(info.st_mode)}; kvplan writes only regular files")
    # Root passes os.access whatever the mode: a file nobody may write is refused too.
    if not info.st_mode & 0o222 or not os.access(path, os.W_OK):
        raise KvplanError(
            f"{label}: not writable (mode {stat.S_IMODE(info.st_mode):o}); kvplan does not "
            "replace a read-only file"
        )
    return Path(os.path.realpath(path))


def _check_folder(folder: Path, label: str) -> None:
    try:
        info = os.stat(folder)
    except FileNotFoundError:
        raise KvplanError(f"{label}: no folder {shown(folder)}") from None
    except NotADirectoryError:
        raise KvplanError(f"{label}: {shown(folder)} is not a folder") from None
    except (OSError, ValueError) as error:
        raise KvplanError(f"{label}: cannot write: {_reason(error)}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise KvplanError(f"{label}: {shown(folder)} is not a folder")


def write_atomically(path: Path, content: str | Callable[[Path], None], what: str = "") -> None:
    """Write `content` to `path` through a temporary file beside it, renamed when complete.

    Args:
        path: the file to create or replace (see `output_target` for what is refused).
        content: the text (UTF-8), or a function that writes the file it is given.
        what: the option that named the file ("-o", "--plot"), put before the path.

    Raises:
        KvplanError: `path` is refused by `output_target`, or the write fails (no space, no
            permission, a name too long); nothing is left behind.
    """
    label = _label(path, what)
    target = output_target(path, what)
    existing = target.exists()
    mode = stat.S_IMODE(target.stat().st_mode) if existing else 0o666 & ~_umask()
    try:
        fd, temporary_name = tempfile.mkstemp(dir=target.parent, prefix=".kvplan-", suffix=".tmp")
    except (OSError, ValueError) as error:
        raise KvplanError(f"{label}: cannot write: {_reason(error)}") from None
    temporary = Path(temporary_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            if isinstance(content, str):
                file.write(content)
        if not isinstance(content, str):
            content(temporary)
        # mkstemp makes the file private (0600): give it the replaced file's mode, or the
        # mode a plain open() would.
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise KvplanError(f"{label}: cannot write: {_reason(error)}") from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process's file-creation mask (reading it means setting it, then restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
