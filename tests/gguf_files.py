"""Small real GGUF files written with the gguf package's writer (tiny tensors), for tests."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np


def write_gguf(
    path: Path,
    arch: str,
    metadata: dict,
    tensors: dict[str, tuple[np.ndarray, gguf.GGMLQuantizationType | None]] | None = None,
) -> Path:
    """A GGUF file at `path`: `arch`, `metadata` as {key: value} ({arch} in keys expanded)."""
    writer = gguf.GGUFWriter(str(path), arch)
    for key, value in metadata.items():
        key = key.format(arch=arch)
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        else:
            writer.add_array(key, value)
    for name, (array, raw_dtype) in (
        tensors or {"token_embd.weight": (np.zeros((4, 8), np.float16), None)}
    ).items():
        writer.add_tensor(name, array, raw_dtype=raw_dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def gemma3_270m(path: Path) -> Path:
    """google/gemma-3-270m's attention geometry (HF config.json): 18 layers, 1 KV head of
    256, window 512, one full layer in 6; tiny tensors."""
    return write_gguf(
        path,
        "gemma3",
        {
            "{arch}.block_count": 18,
            "{arch}.context_length": 32768,
            "{arch}.embedding_length": 640,
            "{arch}.feed_forward_length": 2048,
            "{arch}.attention.head_count": 4,
            "{arch}.attention.head_count_kv": 1,
            "{arch}.attention.key_length": 256,
            "{arch}.attention.value_length": 256,
            "{arch}.attention.sliding_window": 512,
            "{arch}.vocab_size": 262144,
        },
    )
