"""Where a GGUF file's parts end, walked byte by byte: what to tell the user when the `gguf`
package's reader fails on a cut or damaged file.

The reader fails on a truncated file with numpy's words ("index 0 is out of bounds for axis
0", "When changing to a larger dtype…"); this walk names the part that runs past the end
instead. Layout (ggml docs/gguf.md, GGUF v2/v3): magic "GGUF", uint32 version, uint64 tensor
count, uint64 key count; each key a string (uint64 length + bytes), a uint32 value type and
the value (an array: uint32 item type, uint64 count, the items); each tensor a name string,
uint32 dimension count, uint64 per dimension, uint32 ggml type, uint64 offset; then padding to
`general.alignment` (32 by default) and the tensor data. Little-endian unless the version
reads byte-swapped.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

from kvplan.errors import KvplanError

MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
# GGUF value types (gguf.md `gguf_metadata_value_type`) of fixed size, in bytes.
_FIXED_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY, _UINT32 = 8, 9, 4


class _Cut(Exception):
    """The part named ran past the end of the file."""


class _Walk:
    """A cursor over the file's bytes that raises _Cut(what) past the end."""

    def __init__(self, data: bytes | mmap.mmap, order: str) -> None:
        self.data, self.order, self.at = data, order, 0

    def take(self, size: int, what: str) -> bytes:
        if size < 0 or self.at + size > len(self.data):
            raise _Cut(what)
        chunk = self.data[self.at : self.at + size]
        self.at += size
        return chunk

    def number(self, fmt: str, what: str) -> int:
        return struct.unpack(self.order + fmt, self.take(struct.calcsize(fmt), what))[0]

    def string(self, what: str) -> bytes:
        return self.take(self.number("Q", what), what)

    def value(self, kind: int, what: str) -> int | None:
        """Skip one value of GGUF type `kind`; a uint32's value is returned."""
        if kind == _UINT32:
            return self.number("I", what)
        if kind in _FIXED_BYTES:
            self.take(_FIXED_BYTES[kind], what)
        elif kind == _STRING:
            self.string(what)
        elif kind == _ARRAY:
            item, count = self.number("I", what), self.number("Q", what)
            if item in _FIXED_BYTES or item == _UINT32:
                self.take(count * (_FIXED_BYTES.get(item) or 4), what)
            else:
                for _ in range(count):
                    self.value(item, what)
        else:
            raise KvplanError(f"{what} has unknown GGUF value type {kind}")
        return None


def explain_unreadable(path: Path) -> str:
    """What is wrong with the GGUF file at `path` that the reader refused, in a few words
    ("truncated GGUF: the file ends at byte 200, inside key 3 of 14 …"); a generic
    reason when the walk finds the layout whole."""
    with path.open("rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size == 0:
            return "empty file (0 bytes), not a GGUF file"
        # Mapped, not read: a cut multi-GB file is walked without loading its tensors.
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
            head = data[:4]
            if head != MAGIC:
                if MAGIC.startswith(head):
                    return f"truncated GGUF: the file ends at byte {size}, inside the magic"
                return "not a GGUF file (wrong magic)"
            try:
                return _walk(data)
            except _Cut as cut:
                return f"truncated GGUF: the file ends at byte {size:,}, inside {cut}"
            except KvplanError as error:
                return f"damaged GGUF: {error}"


def _walk(data: bytes | mmap.mmap) -> str:
    version_bytes = data[4:8]
    order = "<"
    if len(version_bytes) == 4 and struct.unpack("<I", version_bytes)[0] & 0xFFFF == 0:
        order = ">"  # a big-endian file: the version reads byte-swapped
    walk = _Walk(data, order)
    walk.take(4, "the magic")
    walk.number("I", "the version")
    tensors = walk.number("Q", "the tensor count")
    keys = walk.number("Q", "the key count")
    alignment = DEFAULT_ALIGNMENT
    for index in range(keys):
        where = f"key {index + 1} of {keys:,} of the metadata"
        name = walk.string(where)
        where = f"metadata key {name.decode('utf-8', 'replace')!r} ({index + 1} of {keys:,})"
        value = walk.value(walk.number("I", where), where)
        if name == b"general.alignment" and value:
            alignment = value
    ends: list[tuple[int, int]] = []
    for index in range(tensors):
        where = f"tensor {index + 1} of {tensors:,} of the tensor table"
        walk.string(where)
        dims = [walk.number("Q", where) for _ in range(walk.number("I", where))]
        kind, offset = walk.number("I", where), walk.number("Q", where)
        ends.append((offset, _tensor_bytes(kind, dims)))
    start = -(-walk.at // alignment) * alignment
    end = start + max((offset + nbytes for offset, nbytes in ends), default=0)
    if end > len(data):
        return (
            f"truncated GGUF: the file ends at byte {len(data):,}, inside the tensor data "
            f"(which runs to byte {end:,})"
        )
    return "damaged GGUF: the header is complete but does not parse"


def _tensor_bytes(kind: int, dims: list[int]) -> int:
    """Bytes of a tensor of ggml type `kind` and shape `dims` (0 when the type is unknown)."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        block, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
    except (ValueError, KeyError):
        return 0
    elements = 1
    for dim in dims:
        elements *= dim
    return elements // block * block_bytes
