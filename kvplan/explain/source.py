"""The log's text: a file or standard input, bounded, refused in one line when it is no log.

Startup lines come first in a log, so only its first LOG_BYTES are read: a server log of
weeks is explained from its head, and 100 MB of junk costs a bounded read. A file with NUL
bytes, or that is mostly not UTF-8, is binary; one with no line under MAX_LINE_CHARS is not
a log either.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import BinaryIO

from kvplan.errors import KvplanError, shown
from kvplan.files import open_regular

LOG_BYTES = 16 * 2**20  # the head read; vLLM's startup is ~200 lines, llama.cpp's ~300
MAX_LINE_CHARS = 8_192  # longer lines are cut (a config echo is ~3,000 characters)
STDIN = "-"


def _head(stream: BinaryIO) -> bytes:
    return stream.read(LOG_BYTES)


def log_lines(path: str) -> list[str]:
    """The lines of the log at `path` ('-': standard input), each cut to MAX_LINE_CHARS.

    Raises:
        KvplanError: missing, unreadable, empty, binary, or not text lines.
    """
    label = "standard input" if path == STDIN else f"LOGFILE {shown(path)}"
    if not path:  # Path('') is the working folder: say what was given
        raise KvplanError("LOGFILE: an empty path; give a log file or '-'")
    if path == STDIN:
        data = _head(sys.stdin.buffer)
    else:
        with open_regular(Path(path), "LOGFILE") as stream:
            data = _head(stream)
    if not data.strip():
        raise KvplanError(f"{label}: empty; give an engine's startup log")
    if b"\x00" in data[:65_536]:
        raise KvplanError(f"{label}: binary data, not a text log")
    text = data.decode("utf-8", errors="replace")
    if text.count("\ufffd") > len(text) // 10:
        raise KvplanError(f"{label}: mostly not UTF-8 text, not a log")
    return [line[:MAX_LINE_CHARS] for line in text.splitlines()]
