"""A bounded reader of a GGUF file's header: its metadata and its tensor-info table.

The layout is GGUF v2/v3 as llama.cpp's `ggml/src/gguf.cpp` and the `gguf` package's
`GGUFReader` read it (all little-endian): magic "GGUF", version u32, tensor count u64, key/value
count u64; then each key (u64 length + UTF-8 bytes), a value type u32 and the value (scalars,
a string as u64 length + bytes, an array as item type u32 + count u64 + items); then each
tensor's name, dimension count u32, dimensions u64 each, ggml type u32 and data offset u64.

Every length and count is checked against the bytes the file still holds before anything is
read or allocated, so a hostile header (an array claiming 2^60 items, a string longer than the
file) is refused at once with the byte offset where it breaks. Long arrays are only walked
over: kvplan needs the length of a tokenizer's token list, not its millions of strings. A file
cut inside its tensor data (an interrupted download) is refused too: the table says where the
data end, and the file must reach that byte.
"""

from __future__ import annotations

import math
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.catalog.tensor_headers import TensorHeader
from kvplan.errors import KvplanError

MAGIC = b"GGUF"
VERSIONS = (2, 3)
# Arrays longer than this keep only their length (per-layer arrays are at most block_count long).
KEPT_ARRAY_ITEMS = 65_536
# GGUF's default general.alignment: the tensor data start on a multiple of it.
DEFAULT_ALIGNMENT = 32
# llama.cpp's GGML_MAX_DIMS.
MAX_DIMS = 4
# GGUFValueType: (struct format, bytes) of the scalar types; 8 is string, 9 is array.
_SCALARS = {
    0: ("<B", 1), 1: ("<b", 1), 2: ("<H", 2), 3: ("<h", 2), 4: ("<I", 4), 5: ("<i", 4),
    6: ("<f", 4), 7: ("<?", 1), 10: ("<Q", 8), 11: ("<q", 8), 12: ("<d", 8),
}  # fmt: skip
_STRING, _ARRAY = 8, 9


class ArrayLength(int):
    """A long array's item count, kept in place of its items (len() gives it back)."""

    def __len__(self) -> int:
        return int(self)


@dataclass(frozen=True)
class GgufHeader:
    """What kvplan reads from a GGUF file: metadata by key, and each tensor's name, ggml
    type, dimensions (as stored, innermost first) and bytes."""

    fields: dict[str, Any]
    tensors: list[TensorHeader]


def read_header(path: Path) -> GgufHeader:
    """The metadata and tensor table of the GGUF file at `path`, without its tensor data.

    Raises:
        KvplanError: one line naming the file and what is wrong: not a GGUF file, an
            unsupported version, truncated (with the byte offset), or a value out of range.
    """
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, 2)
            if size == 0:
                raise KvplanError(f"{path}: not a GGUF file (it is empty)")
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _Cursor(path, data, size).header()
    except OSError as error:
        raise KvplanError(f"{path}: cannot read: {error.strerror or error}") from None


class _Cursor:
    """Reads forward through the header, refusing any read past the end of the file."""

    def __init__(self, path: Path, data: mmap.mmap, size: int) -> None:
        self.path, self.data, self.size, self.offset = path, data, size, 0
        self.offsets: list[int] = []  # each tensor's data offset, from the data section start

    def fail(self, what: str) -> KvplanError:
        return KvplanError(f"{self.path}: cannot read GGUF header: {what}")

    def take(self, count: int, what: str) -> int:
        """Advance over `count` bytes; the offset where they start."""
        start = self.offset
        if count > self.size - start:
            raise self.fail(
                f"truncated: {what} needs {count:,} bytes at byte {start:,}, "
                f"but the file ends at byte {self.size:,}"
            )
        self.offset = start + count
        return start

    def scalar(self, kind: int, what: str) -> Any:
        fmt, width = _SCALARS[kind]
        return struct.unpack_from(fmt, self.data, self.take(width, what))[0]

    def u32(self, what: str) -> int:
        return self.scalar(4, what)

    def u64(self, what: str) -> int:
        return self.scalar(10, what)

    def string(self, what: str) -> str:
        length = self.u64(f"the length of {what}")
        start = self.take(length, what)
        try:
            return self.data[start : start + length].decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} at byte {start:,} is not UTF-8") from None

    def header(self) -> GgufHeader:
        magic = self.data[:4]
        if magic != MAGIC and self.size < len(MAGIC) and MAGIC.startswith(magic):
            raise self.fail(f"truncated: the file ends at byte {self.size} inside the magic")
        if magic != MAGIC:
            raise self.fail("not a GGUF file (wrong magic)")
        self.take(4, "the magic")
        version = self.u32("the version")
        if version not in VERSIONS:
            raise self.fail(f"version {version} (kvplan reads GGUF versions 2 and 3)")
        tensor_count = self.u64("the tensor count")
        field_count = self.u64("the metadata count")
        # Each entry takes at least 12 bytes: a bound that refuses absurd counts up front.
        if (tensor_count + field_count) * 12 > self.size:
            raise self.fail(
                f"truncated or corrupt: {field_count:,} metadata entries and "
                f"{tensor_count:,} tensors cannot fit in {self.size:,} bytes"
            )
        fields: dict[str, Any] = {}
        for index in range(field_count):
            key = self.string(f"metadata key {index}")
            kind = self.u32(f"the type of {key}")
            fields[key] = self.value(kind, key)
        tensors = [self.tensor(index) for index in range(tensor_count)]
        self.check_data(fields, tensors)
        return GgufHeader(fields, tensors)

    def check_data(self, fields: dict[str, Any], tensors: list[TensorHeader]) -> None:
        """Refuse a file cut inside its tensor data (an interrupted download): the data start
        at the header's end rounded up to general.alignment (32 by default), each tensor at
        its stated offset."""
        alignment = fields.get("general.alignment", DEFAULT_ALIGNMENT)
        if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment <= 0:
            raise self.fail(f"general.alignment is {alignment!r}, not a positive integer")
        start = -(-self.offset // alignment) * alignment
        ends = [offset + t.nbytes for offset, t in zip(self.offsets, tensors, strict=True)]
        end = start + max(ends, default=0)
        if end > self.size:
            raise self.fail(
                f"truncated: the tensor data runs to byte {end:,}, but the file ends at byte "
                f"{self.size:,}"
            )

    def value(self, kind: int, key: str) -> Any:
        if kind in _SCALARS:
            return self.scalar(kind, key)
        if kind == _STRING:
            return self.string(key)
        if kind != _ARRAY:
            raise self.fail(f"{key} has value type {kind}, which GGUF does not define")
        item_kind = self.u32(f"the item type of {key}")
        count = self.u64(f"the length of {key}")
        if item_kind in _SCALARS:
            width = _SCALARS[item_kind][1]
            start = self.take(count * width, f"{key} ({count:,} items)")
            if count > KEPT_ARRAY_ITEMS:
                return ArrayLength(count)
            fmt = "<" + _SCALARS[item_kind][0][1] * count
            return list(struct.unpack_from(fmt, self.data, start))
        if item_kind == _STRING:
            if count * 8 > self.size - self.offset:  # every string has its 8-byte length
                raise self.fail(f"truncated: {key} claims {count:,} strings")
            if count > KEPT_ARRAY_ITEMS:
                self.skip_strings(count, key)
                return ArrayLength(count)
            return [self.string(f"{key}[{index}]") for index in range(count)]
        raise self.fail(f"{key} is an array of type {item_kind} (kvplan reads flat arrays)")

    def skip_strings(self, count: int, key: str) -> None:
        """Walk over `count` strings without decoding them (a tokenizer's vocabulary)."""
        unpack = struct.Struct("<Q").unpack_from
        data, size, offset = self.data, self.size, self.offset
        for index in range(count):
            # A length cut off by the end leaves `end` past it too.
            end = offset + 8 + (unpack(data, offset)[0] if offset + 8 <= size else 0)
            if end > size:
                raise self.fail(f"truncated: {key}[{index}] runs past the end at byte {offset:,}")
            offset = end
        self.offset = offset

    def tensor(self, index: int) -> TensorHeader:
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

        name = self.string(f"the name of tensor {index}")
        dims = self.u32(f"the dimension count of {name}")
        if not 1 <= dims <= MAX_DIMS:
            raise self.fail(f"tensor {name} has {dims} dimensions (GGML allows 1 to {MAX_DIMS})")
        shape = [self.u64(f"a dimension of {name}") for _ in range(dims)]
        kind = self.u32(f"the type of {name}")
        self.offsets.append(self.u64(f"the data offset of {name}"))
        try:
            ggml_type = GGMLQuantizationType(kind)
            block, block_bytes = GGML_QUANT_SIZES[ggml_type]
        except (ValueError, KeyError):
            raise self.fail(f"tensor {name} has ggml type {kind}, unknown to kvplan") from None
        if shape[0] % block:
            raise self.fail(
                f"tensor {name}: its first dimension {shape[0]:,} is not a whole number of "
                f"{ggml_type.name} blocks of {block}"
            )
        nbytes = math.prod(shape) // block * block_bytes
        return TensorHeader(name, ggml_type.name, tuple(shape), nbytes)
