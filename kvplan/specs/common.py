"""Shared pieces of the spec models: strict frozen base, constrained ints, the layer kinds."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

import kvplan.limits as limits

# --- layer kinds ------------------------------------------------------------

LayerKind = Literal[
    "full", "sliding", "chunked", "mla", "state", "shared", "parallel", "cross", "mlp"
]
LAYER_KINDS: tuple[str, ...] = get_args(LayerKind)  # the Literal's values, in its order
# Kinds whose layer has an attention mixer caching K and V per token (or per encoder token).
ATTENTION_KINDS: tuple[str, ...] = ("full", "sliding", "chunked", "parallel", "cross")
# Kinds whose layer keeps only some of a sequence's tokens (a window or the current chunk).
WINDOWED_KINDS = frozenset({"sliding", "chunked"})
# Kinds whose cache has K and V rows per KV head, the ones tensor parallelism splits.
KV_HEAD_KINDS = frozenset({"full", "sliding", "chunked"})

_STRICT = ConfigDict(strict=True, frozen=True, extra="forbid")

PositiveInt = Annotated[int, Field(gt=0)]
# YAML gives lists; tuples keep the specs hashable and frozen. Lax only on the container.
Names = Annotated[tuple[str, ...], Field(strict=False)]
Kinds = Annotated[tuple[LayerKind, ...], Field(strict=False, max_length=limits.LAYERS.maximum)]
NonNegativeInt = Annotated[int, Field(ge=0)]


def _valid_name(value: str) -> str:
    problem = limits.name_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


# Names are looked up and printed: no empty, padded, multi-line or over-long ones
# (kvplan.limits.name_problem). A spec has a handful of aliases; 64 is far above any.
Name = Annotated[
    str, Field(min_length=1, max_length=limits.NAME_CHARS), AfterValidator(_valid_name)
]
Aliases = Annotated[tuple[Name, ...], Field(strict=False, max_length=64)]


def _bounded(limit: limits.Limit, minimum: int = 1) -> Any:
    """An int type from `minimum` (0 or 1) to the stated maximum of `limit` (kvplan.limits):
    no per-layer or per-head list is ever built from an unbounded number."""
    low = {"gt": 0} if minimum == 1 else {"ge": 0}
    return Annotated[int, Field(**low, le=limit.maximum)]


Heads = _bounded(limits.HEADS)
Width = _bounded(limits.WIDTH)
WidthOrZero = _bounded(limits.WIDTH, 0)
Experts = _bounded(limits.EXPERTS)
ExpertsOrZero = _bounded(limits.EXPERTS, 0)
LayerCount = _bounded(limits.LAYERS)
LayerCountOrZero = _bounded(limits.LAYERS, 0)
Tokens = _bounded(limits.CONTEXT)
TokensOrZero = _bounded(limits.CONTEXT, 0)
Tiles = _bounded(limits.TILES)
Bytes = _bounded(limits.MEMORY)
VocabSize = _bounded(limits.VOCAB)
ParamCount = _bounded(limits.PARAMS)
BytesPerS = _bounded(limits.BANDWIDTH)
FlopPerS = _bounded(limits.FLOP_RATE)
GpuCount = _bounded(limits.GPUS)
UnitCount = _bounded(limits.HEADS)


class _Spec(BaseModel):
    model_config = _STRICT
