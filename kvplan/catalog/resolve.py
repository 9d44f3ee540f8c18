"""The one place a MODEL the user typed becomes a spec: a catalogue name or alias, a local
config.json (or a folder holding one), a local GGUF file, or a Hugging Face Hub id
(`org/name[@revision]`).

Order, first match wins:
1. `hf:org/name[@revision]`: the Hub, always (forces a lookup past the catalogue);
2. a path ending in .gguf: the GGUF header (architecture and tensor table; never the data);
3. a path that exists, or one ending in .json: the local config (and, beside it, the
   safetensors headers or the index's total_size);
4. `org/name@revision`: the Hub (a revision names a checkpoint, the catalogue holds
   architectures);
5. a catalogue name or alias (aliases hold Hub ids: `meta-llama/Llama-3.1-8B` is the
   catalogue entry, read without the network);
6. any other `org/name`: the Hub.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import ValidationError

import kvplan.limits as limits
from kvplan.catalog.checkpoint import CheckpointWeights, checkpoint_weights
from kvplan.catalog.store import Catalog
from kvplan.catalog.tensor_headers import TensorHeader, read_header
from kvplan.errors import KvplanError, UnknownNameError
from kvplan.specs import ModelSpec, RopeScalingSpec

if TYPE_CHECKING:  # hub imports huggingface_hub lazily; catalogue lookups never load it
    from kvplan.catalog.hub import HubRef

SINGLE_FILE = "model.safetensors"


@dataclass(frozen=True)
class ResolvedModel:
    """A model spec and what is known of its checkpoint's weights."""

    spec: ModelSpec
    origin: Literal["catalogue", "file", "hub"]
    warnings: tuple[str, ...] = ()  # readings taken, fallbacks; printed as warnings
    # The checkpoint's total: a safetensors index's total_size, or a GGUF tensor table's sum.
    exact_weights_bytes: int | None = None
    checkpoint: CheckpointWeights | None = None  # every tensor's header


def resolve_model(catalog: Catalog, name: str, rope_scaling: str | None = None) -> ResolvedModel:
    """The model `name` means (see the module docstring for the order), with the RoPE scaling
    `rope_scaling` (`TYPE:FACTOR[:ORIGINAL_TOKENS]`) declared on it when given.

    Raises:
        KvplanError: an unknown name (with suggestions), a bad local file, or a Hub failure,
            one line each.
    """
    from kvplan.catalog.hub import HUB_PREFIX, parse_hub_id

    ref = parse_hub_id(name)
    if name.startswith(HUB_PREFIX):
        if ref is None:
            raise KvplanError(f"{name!r}: expected hf:org/name or hf:org/name@revision")
        resolved = _from_hub(ref)
    elif Path(name).suffix.lower() == ".gguf":
        resolved = _from_gguf(Path(name))
    elif _is_local(Path(name)):
        resolved = _from_folder(Path(name))
    elif ref is not None and ref.revision is not None:
        resolved = _from_hub(ref)
    else:
        try:
            resolved = ResolvedModel(catalog.model(name), "catalogue")
        except UnknownNameError as unknown:  # a broken catalogue file is reported as it is
            if ref is None:
                raise KvplanError(
                    f"{unknown}; or give a Hugging Face id (org/name) or a config.json"
                ) from None
            resolved = _from_hub(ref)
    if rope_scaling is not None:
        resolved = replace(resolved, spec=declare_rope_scaling(resolved.spec, rope_scaling))
    return resolved


def _from_gguf(path: Path) -> ResolvedModel:
    """A GGUF file's header; the gguf package (and numpy) load only here."""
    from kvplan.catalog.gguf import read_gguf

    spec, checkpoint = read_gguf(path)
    return ResolvedModel(spec, "file", (), checkpoint.total_bytes, checkpoint)


def _is_local(path: Path) -> bool:
    try:
        return path.suffix == ".json" or path.exists()
    except (OSError, ValueError):  # a name too long to be a path, or with a NUL: not a file
        return False


def _from_folder(path: Path) -> ResolvedModel:
    """A local config; the safetensors headers beside it when every file is there."""
    from kvplan.catalog.hf import import_hf

    imported = import_hf(path)
    folder = path if path.is_dir() else path.parent
    tensors = local_tensors(folder)
    checkpoint = None
    if tensors is not None:
        checkpoint = checkpoint_weights(tensors, imported.spec.num_layers, str(folder))
    return ResolvedModel(
        imported.spec, "file", imported.warnings, imported.weights_bytes, checkpoint
    )


def local_tensors(folder: Path) -> tuple[TensorHeader, ...] | None:
    """Headers of the safetensors files in `folder` (the index's shards, or
    model.safetensors); None unless every file is present."""
    from kvplan.catalog.hf.files import INDEX_FILE, _read_json

    index_path = folder / INDEX_FILE
    if index_path.is_file():
        index = _read_json(index_path)
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            return None
        shards = sorted({str(shard) for shard in weight_map.values()})
    elif (folder / SINGLE_FILE).is_file():
        shards = [SINGLE_FILE]
    else:
        return None
    paths = [folder / shard for shard in shards]
    if not all(p.is_file() and p.parent == folder for p in paths):
        return None
    return tuple(tensor for p in paths for tensor in read_header(p))


def import_model(text: str, name: str | None = None) -> tuple[ModelSpec, tuple[str, ...]]:
    """The spec (and readings) of a config.json, a folder holding one, or a Hub id
    (`org/name[@revision]`, `hf:` allowed), named `name` when given: what `import-hf` writes.

    Raises:
        KvplanError: a missing file that is no Hub id either, a bad config, a Hub failure.
    """
    from kvplan.catalog.hf import import_hf
    from kvplan.catalog.hub import parse_hub_id

    ref = parse_hub_id(text)
    if _is_local(Path(text)) or ref is None:
        imported = import_hf(text, name=name)
        return imported.spec, imported.warnings
    resolved = _from_hub(ref)
    spec = resolved.spec if name is None else resolved.spec.model_copy(update={"name": name})
    return spec, resolved.warnings


def _from_hub(ref: HubRef) -> ResolvedModel:
    """A Hub model: its config (HF cache) and safetensors headers (Range requests)."""
    from kvplan.catalog.hf import spec_from_hf_config
    from kvplan.catalog.hf.files import _slug
    from kvplan.catalog.hub import fetch_hub_model

    hub = fetch_hub_model(ref)
    spec, readings = spec_from_hf_config(
        hub.config, name=_slug(ref.repo_id.split("/")[-1]), source=hub.source
    )
    spec = spec.model_copy(update={"aliases": (ref.repo_id,)})
    checkpoint = None
    if hub.tensors is not None:
        checkpoint = checkpoint_weights(hub.tensors, spec.num_layers, f"{ref.repo_id}@{hub.commit}")
    return ResolvedModel(spec, "hub", readings + hub.warnings, None, checkpoint)


def parse_rope_scaling(text: str, where: str = "--rope-scaling") -> tuple[str, float, int | None]:
    """(type, factor, original tokens or None) of `TYPE:FACTOR[:ORIGINAL_TOKENS]`."""
    from kvplan.units import parse_decimal, parse_tokens

    parts = text.strip().split(":")
    if len(parts) not in (2, 3):
        raise KvplanError(f"{where}: {text!r}: expected TYPE:FACTOR[:ORIGINAL_TOKENS], e.g. yarn:4")
    factor = float(
        parse_decimal(
            parts[1],
            f"{where} factor",
            limits.ROPE_FACTOR,
            Fraction(1),
            "write a decimal of at least 1, e.g. yarn:4",
        )
    )
    original = parse_tokens(parts[2], where) if len(parts) == 3 else None
    return parts[0].lower(), factor, original


def declare_rope_scaling(spec: ModelSpec, text: str, where: str = "--rope-scaling") -> ModelSpec:
    """`spec` served with the RoPE scaling `TYPE:FACTOR[:ORIGINAL_TOKENS]` (e.g. yarn:4,
    yarn:4:32k): the deployment declares it, as vLLM's --hf-overrides does. Without
    ORIGINAL, a recommendation of the same type on the spec gives it, else max_context."""
    rope_type, factor, original = parse_rope_scaling(text, where)
    known = spec.rope_scaling
    same = known is not None and known.rope_type == rope_type
    if original is None and same:
        original = known.original_max_context  # type: ignore[union-attr]
    try:
        declared = RopeScalingSpec(
            rope_type=rope_type,  # type: ignore[arg-type]
            factor=factor,
            original_max_context=original,
            applied=True,
            source=known.source if same else None,  # type: ignore[union-attr]
        )
    except ValidationError as error:
        problem = error.errors(include_url=False)[0]
        field = ".".join(str(p) for p in problem["loc"])
        raise KvplanError(
            f"{where}: {text!r}: {field}: {problem['msg']} (types: yarn, dynamic, linear, "
            "llama3, longrope; factor >= 1)"
        ) from None
    return spec.model_copy(update={"rope_scaling": declared})
