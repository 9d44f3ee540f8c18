"""Shared pieces of the spec models: strict frozen base, constrained ints, the layer kinds."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

# --- layer kinds ------------------------------------------------------------

LayerKind = Literal[
    "full", "sliding", "chunked", "mla", "state", "shared", "parallel", "cross", "mlp"
]
LAYER_KINDS: tuple[str, ...] = (
    "full",
    "sliding",
    "chunked",
    "mla",
    "state",
    "shared",
    "parallel",
    "cross",
    "mlp",
)
# Kinds whose layer has an attention mixer caching K and V per token (or per encoder token).
ATTENTION_KINDS: tuple[str, ...] = ("full", "sliding", "chunked", "parallel", "cross")

_STRICT = ConfigDict(strict=True, frozen=True, extra="forbid")

PositiveInt = Annotated[int, Field(gt=0)]
# YAML gives lists; tuples keep the specs hashable and frozen. Lax only on the container.
Names = Annotated[tuple[str, ...], Field(strict=False)]
Kinds = Annotated[tuple[LayerKind, ...], Field(strict=False)]
NonNegativeInt = Annotated[int, Field(ge=0)]


class _Spec(BaseModel):
    model_config = _STRICT
