"""Safetensors headers: every tensor's name, dtype, shape and exact byte length, no weights.

A safetensors file starts with an 8-byte little-endian header length and a JSON header
mapping each tensor to {dtype, shape, data_offsets} (https://huggingface.co/docs/safetensors,
"Format"). Reading those bytes alone gives a checkpoint's exact size per dtype, scales and
zero points of quantised formats included, without reading a byte of weights. The Hub
client fetches the same bytes with an HTTP Range request (`catalog/hub.py`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanError
from kvplan.files import open_regular, parse_json

# The safetensors library refuses headers past 100 MB (safetensors/src/tensor.rs MAX_HEADER_SIZE).
MAX_HEADER_BYTES = 100_000_000


@dataclass(frozen=True)
class TensorHeader:
    """One tensor as its file's header states it."""

    name: str
    dtype: str  # safetensors spelling: BF16, F8_E4M3, I32, U8, ...
    shape: tuple[int, ...]
    nbytes: int  # data_offsets end - begin: the exact bytes in the file


def _entry(name: str, value: Any, where: str) -> TensorHeader:
    if not isinstance(value, dict):
        raise KvplanError(f"{where}: tensor {name!r} header is not an object")
    dtype, shape, offsets = value.get("dtype"), value.get("shape"), value.get("data_offsets")
    if (
        not isinstance(dtype, str)
        or not isinstance(shape, list)
        or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
        or not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in offsets)
        or not 0 <= offsets[0] <= offsets[1]
    ):
        raise KvplanError(
            f"{where}: tensor {name!r} needs dtype, shape and data_offsets [begin, end]; "
            f"got {json.dumps(value)[:120]}"
        )
    return TensorHeader(name, dtype, tuple(shape), offsets[1] - offsets[0])


def parse_header(header: Any, where: str) -> tuple[TensorHeader, ...]:
    """The tensors of one parsed safetensors JSON header (`__metadata__` skipped)."""
    if not isinstance(header, dict):
        raise KvplanError(f"{where}: safetensors header is not a JSON object")
    return tuple(
        _entry(name, value, where) for name, value in header.items() if name != "__metadata__"
    )


def read_header(path: Path) -> tuple[TensorHeader, ...]:
    """The tensors of the local safetensors file `path`: 8 + header bytes read, no weights.

    Raises:
        KvplanError: a missing, truncated or malformed file, naming it.
    """
    try:
        with open_regular(path) as file:  # a pipe or /dev/zero is refused, never read
            prefix = file.read(8)
            length = int.from_bytes(prefix, "little") if len(prefix) == 8 else -1
            if not 0 < length <= MAX_HEADER_BYTES:
                raise KvplanError(
                    f"{path}: not a safetensors file (header length {length} from its first "
                    f"8 bytes; allowed 1 to {MAX_HEADER_BYTES:,})"
                )
            text = file.read(length)
    except OSError as error:
        raise KvplanError(f"{path}: cannot be read ({error.strerror})") from None
    if len(text) != length:
        raise KvplanError(f"{path}: truncated safetensors header ({len(text)} of {length} bytes)")
    return parse_header(parse_json(text, f"{path}: safetensors header"), str(path))
