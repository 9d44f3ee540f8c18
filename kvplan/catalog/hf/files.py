"""The only file I/O of the importer: `config.json` and `model.safetensors.index.json`.

Every failure here is a one-line KvplanError naming the path: a missing file or folder, a file
that cannot be read (not a regular file, over kvplan.limits.JSON_FILE_BYTES), JSON that does
not parse or nests deeper than kvplan.limits.NESTING_DEPTH, or a top level that is not a JSON
object. Integers longer than kvplan.limits.NUMBER_CHARS digits are kept as text
(kvplan.files.parse_json): harmless in a key the importer never reads, refused as "not a
positive integer" in one it does.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kvplan.limits as limits
from kvplan.errors import KvplanError
from kvplan.files import parse_json, read_text

INDEX_FILE = "model.safetensors.index.json"
CONFIG_FILE = "config.json"


def _config_path(path: Path) -> Path:
    try:
        if path.is_dir():
            if not (path / CONFIG_FILE).exists():
                raise KvplanError(f"{path}: no {CONFIG_FILE} in this folder")
            return path / CONFIG_FILE
        if not path.exists():
            raise KvplanError(f"{path}: no such file (give a config.json or a folder holding one)")
    except (OSError, ValueError) as error:  # a name too long, a NUL byte
        reason = error.strerror if isinstance(error, OSError) else str(error)
        raise KvplanError(f"{path}: cannot read: {reason}") from None
    return path  # read_text refuses what is not a regular file


def _read_json(path: Path) -> Any:
    return parse_json(read_text(path, limits.JSON_FILE_BYTES), str(path))


def _json_object(value: Any, where: object) -> dict:
    """`value` if it is a JSON object (dict); the top level of a config must be one."""
    if not isinstance(value, dict):
        raise KvplanError(f"{where}: top level is {type(value).__name__}, expected a JSON object")
    return value


def _repo_id(config: dict) -> str | None:
    """`_name_or_path` when it is a Hub repo id (org/name), not a local path."""
    value = config.get("_name_or_path")
    if isinstance(value, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", value):
        return value
    return None


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-")
    return slug or "hf-model"


def _weights_bytes(index_path: Path) -> tuple[int | None, tuple[str, ...]]:
    """metadata.total_size of the safetensors index: the exact bytes of the released weights."""
    if not index_path.is_file():
        return None, ()
    index = _read_json(index_path)
    metadata = index.get("metadata") if isinstance(index, dict) else None
    total = metadata.get("total_size") if isinstance(metadata, dict) else None
    if isinstance(total, bool) or not isinstance(total, int) or total <= 0:
        return None, (f"{index_path.name} has no metadata.total_size: weight bytes computed",)
    return total, ()
