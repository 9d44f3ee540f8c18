"""Entry points: a parsed config, or a config.json on disk, to a validated ModelSpec."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kvplan.catalog.hf.families import (
    _FAMILIES,
    _NESTED_TEXT,
    _TOP_OR_NESTED_TEXT,
    ENCODER_FAMILIES,
    ENCODER_REFUSAL,
    SUPPORTED_MODEL_TYPES,
)
from kvplan.catalog.hf.fields import _Config, _weight_dtype
from kvplan.catalog.hf.files import (
    INDEX_FILE,
    _config_path,
    _json_object,
    _read_json,
    _repo_id,
    _slug,
    _weights_bytes,
)
from kvplan.catalog.hf.quantization import _quantization
from kvplan.catalog.hf.rope import _rope_scaling
from kvplan.catalog.hf.towers import _vision_tower
from kvplan.errors import KvplanError
from kvplan.specs import ModelSpec


@dataclass(frozen=True)
class HfImport:
    """A ModelSpec read from a Hugging Face config, the readings taken, and exact weight bytes."""

    spec: ModelSpec
    warnings: tuple[str, ...]
    weights_bytes: int | None  # model.safetensors.index.json metadata.total_size, when present


def spec_from_hf_config(
    config: dict, *, name: str, source: str
) -> tuple[ModelSpec, tuple[str, ...]]:
    """The ModelSpec for a parsed config.json, and the readings taken (one line each).

    Args:
        config: the parsed config.json object.
        name: catalogue name for the spec.
        source: where the config came from (URL or path); also names it in errors.

    Returns:
        The spec (its notes hold the same readings) and the warnings.

    Raises:
        KvplanError: unknown model_type, a missing or malformed field, or a spec that fails
            validation; one line naming the source, field and value.
    """
    return _spec(config, name=name, source=source, where=source, aliases=())


def _spec(
    config: dict, *, name: str, source: str, where: str, aliases: tuple[str, ...]
) -> tuple[ModelSpec, tuple[str, ...]]:
    config = _json_object(config, where)
    model_type = config.get("model_type")
    family = _FAMILIES.get(model_type) if isinstance(model_type, str) else None
    if family is None:
        raise KvplanError(_unknown_type(where, model_type))
    c = _Config(config, where, model_type)
    top = None
    text = config.get("text_config")
    if model_type in _NESTED_TEXT or (model_type in _TOP_OR_NESTED_TEXT and text is not None):
        if not isinstance(text, dict):
            raise KvplanError(f"{where}: model_type {model_type!r} needs a text_config object")
        top, c = c, _Config(text, f"{where} text_config", model_type)
        c.outer = top
    elif model_type in _TOP_OR_NESTED_TEXT:
        top = _Config(config, where, model_type)  # the same object read twice: text, tower
    fields = family(c)
    _context_and_vision(c, top, fields)
    if top is not None:
        # Wrappers state torch_dtype at the top level; text_config may repeat it, or not, or
        # differ: transformers 4.53 saves Qwen2.5-VL's text_config with float32 beside the
        # checkpoint's bfloat16 at the top. The top level names the checkpoint.
        stated = {k: top.data[k] for k in ("torch_dtype", "dtype") if k in top.data}
        fields["weight_dtype"] = _weight_dtype(_Config({**c.data, **stated}, where, model_type))
        c.warnings = [w for w in c.warnings if not w.startswith("no torch_dtype")]
        _quantization(top, fields)
        c.warnings += top.warnings
    else:
        _quantization(c, fields)
    warnings = tuple(c.warnings)
    fields |= {"name": name, "source": source, "aliases": aliases, "notes": warnings}
    try:
        spec = ModelSpec.model_validate(fields)
    except ValidationError as error:
        raise KvplanError(_validation_line(where, error)) from None
    return spec, warnings


def _context_and_vision(c: _Config, top: _Config | None, fields: dict[str, Any]) -> None:
    """The RoPE extension the text config states and a wrapper's vision tower, when present."""
    rope = _rope_scaling(c)
    if rope is not None:
        fields["rope_scaling"] = rope
    # A cross-attended encoder (mllama) is its family's `vision` section; other wrappers feed
    # the tower's tokens in as embeddings: weights only (`vision_tower`).
    if top is not None and "vision" not in fields:
        tower = _vision_tower(top, fields["hidden_size"])
        if tower is not None:
            fields["vision_tower"] = tower


def _unknown_type(where: str, model_type: Any) -> str:
    supported = ", ".join(SUPPORTED_MODEL_TYPES)
    if model_type in ENCODER_FAMILIES:
        return f"{where}: model_type {model_type!r} {ENCODER_REFUSAL}"
    if model_type is None:
        return f"{where}: no 'model_type' field; supported: {supported}"
    close = difflib.get_close_matches(str(model_type), SUPPORTED_MODEL_TYPES, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{where}: model_type {model_type!r} is not supported{hint}; supported: {supported}"


def _validation_line(where: str, error: ValidationError) -> str:
    """Every pydantic error as `field.path value: message`, without the docs URL."""
    parts = []
    for item in error.errors(include_url=False):
        path = ".".join(str(p) for p in item["loc"]) or "spec"
        value = item.get("input")
        shown = "" if isinstance(value, dict) else f" {value!r:.60}"
        parts.append(f"{path}{shown}: {item['msg']}")
    return f"{where}: the config does not give a valid spec: {'; '.join(parts)}"


def import_hf(path: str | Path, name: str | None = None) -> HfImport:
    """Read a Hugging Face config.json (a file, or a folder holding one) into a ModelSpec.

    A `model.safetensors.index.json` beside the config gives the exact weight bytes
    (`metadata.total_size`).

    Args:
        path: config.json, or a folder holding config.json.
        name: catalogue name; defaults to a slug of `_name_or_path` or of the folder.

    Returns:
        The spec, the readings taken of ambiguous fields, and weights_bytes (None without an
        index file).

    Raises:
        KvplanError: a missing or non-JSON file, or a config that gives no valid spec.
    """
    config_path = _config_path(Path(path))
    config = _json_object(_read_json(config_path), config_path)
    repo_id = _repo_id(config)
    if repo_id:
        source = f"https://huggingface.co/{repo_id}/blob/main/config.json"
    else:
        source = str(config_path.resolve())
    default_name = repo_id.split("/")[-1] if repo_id else config_path.resolve().parent.name
    spec, warnings = _spec(
        config,
        name=name or _slug(default_name),
        source=source,
        where=str(config_path),
        aliases=(repo_id,) if repo_id else (),
    )
    weights_bytes, index_warnings = _weights_bytes(config_path.parent / INDEX_FILE)
    if index_warnings:
        warnings += index_warnings
        spec = spec.model_copy(update={"notes": spec.notes + index_warnings})
    return HfImport(spec=spec, warnings=warnings, weights_bytes=weights_bytes)
