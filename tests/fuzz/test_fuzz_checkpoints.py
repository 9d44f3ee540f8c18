"""Checkpoint headers: GGUF files and safetensors headers beside a config.json.

Both are binary formats read from files kvplan did not write: a corrupted byte, a truncated
file, a header nested a hundred thousand deep or a pipe where a file should be must end as
one line (or, for a safetensors file kvplan only reads for exact weight bytes, be ignored).
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
from fuzz_corpus import ROOT
from fuzz_harness import assert_accepted, assert_clean, assert_refused, cli, fuzz
from gguf_files import gemma3_270m, write_gguf
from hypothesis import given
from hypothesis import strategies as st

CONFIG = (ROOT / "tests" / "fixtures" / "hf" / "llama-3.1-8b" / "config.json").read_text()
LLAMA = {
    "{arch}.block_count": 4, "{arch}.context_length": 8192, "{arch}.embedding_length": 256,
    "{arch}.feed_forward_length": 512, "{arch}.attention.head_count": 8,
    "{arch}.attention.head_count_kv": 2, "{arch}.vocab_size": 1000,
}  # fmt: skip


@pytest.fixture(scope="module")
def gemma3_bytes(tmp_path_factory) -> bytes:
    return gemma3_270m(tmp_path_factory.mktemp("gguf") / "g.gguf").read_bytes()


@fuzz(12)
@given(data=st.data())
def test_corrupted_gguf_files(tmp_path_factory, gemma3_bytes, data):
    blob = bytearray(gemma3_bytes)
    for _ in range(data.draw(st.integers(1, 8))):
        blob[data.draw(st.integers(0, len(blob) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(blob)))
    path = tmp_path_factory.mktemp("gguf") / "m.gguf"
    path.write_bytes(bytes(blob[:cut]))
    assert_clean(cli("size", str(path)))


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("{arch}.block_count", 4_000_000_000, "num_layers: Input should be less than or equal"),
        ("{arch}.context_length", 4_000_000_000, "max_context: Input should be less than or"),
        ("{arch}.attention.head_count", 0, "head_count is 0, not a positive integer"),
    ],
)
def test_gguf_metadata_beyond_the_limits(tmp_path, key, value, fragment):
    path = write_gguf(tmp_path / "m.gguf", "llama", {**LLAMA, key: value})
    assert_refused(cli("size", str(path)), str(path), fragment)


def test_gguf_paths_that_are_not_files(tmp_path):
    os.mkfifo(tmp_path / "pipe.gguf")
    (tmp_path / "zero.gguf").symlink_to("/dev/zero")
    for path, fragment in (
        (tmp_path / "pipe.gguf", "not a regular file"),
        (tmp_path / "zero.gguf", "not a regular file"),
        (tmp_path / ("g" * 300 + ".gguf"), "File name too long"),
        (tmp_path / "missing.gguf", "no such file"),
    ):
        assert_refused(cli("size", str(path)), fragment)


def _checkpoint(folder: Path, header: bytes, length: int | None = None) -> Path:
    """A folder with the Llama 3.1 8B config and a model.safetensors of `header` only."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(CONFIG)
    size = len(header) if length is None else length
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", size) + header)
    return folder


@pytest.mark.parametrize(
    ("header", "length", "fragment"),
    [
        (b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", None, "nested deeper than 64"),
        (
            b'{"a": {"dtype": "BF16", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 2]}}',
            None,
            "tensor 'a' needs dtype, shape and data_offsets",
        ),
        (b"not json at all", None, "not valid JSON"),
        (b"{}", 10**9, "allowed 1 to 100,000,000"),
        (b'{"a": {"dtype": "BF16"', 1000, "truncated safetensors header"),
        (b'{"a": "\xff\xfe"}', None, "not UTF-8"),
    ],
)
def test_hostile_safetensors_headers(tmp_path, header, length, fragment):
    folder = _checkpoint(tmp_path / "ckpt", header, length)
    assert_refused(cli("size", str(folder)), "model.safetensors", fragment)


@pytest.mark.parametrize("make", [os.mkfifo, lambda p: os.symlink("/dev/zero", p)])
def test_a_safetensors_file_that_is_not_a_file_is_not_read(tmp_path, make):
    # The weights' header is optional (exact bytes when present): a pipe or a device there is
    # skipped, never opened, and the size comes from the config.
    (tmp_path / "config.json").write_text(CONFIG)
    make(tmp_path / "model.safetensors")
    outcome = cli("size", str(tmp_path), "-f", "json")
    assert_accepted(outcome)
    assert json.loads(outcome.stdout)["kv_bytes_per_token"] == 131_072  # 2 × 32 × 8 × 128 × 2
