"""The `kvplan check` deployment file: products, each a model on a SKU and what it promises.

A product names its engine settings by their products-file keys (`block_size:`), each declared
once in kvplan.engine.settings with its type, limits and help; the fields below are built from
that declaration, and the values reach the plan through the same check as the CLI's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Annotated, Any, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    create_model,
    field_validator,
    model_validator,
)

import kvplan.limits as limits
from kvplan.catalog.resolve import parse_rope_scaling
from kvplan.engine import ENGINES
from kvplan.engine.settings import BYTES, FRACTION, SETTINGS, SWITCH, Setting
from kvplan.engine.vllm_version import parse_version
from kvplan.errors import KvplanError
from kvplan.specs import kv_dtype_info, weight_dtype_info
from kvplan.specs.common import Name
from kvplan.units import parse_bytes, parse_tokens


def _without_prefix(error: KvplanError) -> str:
    """A parser's message without its leading `what:`; pydantic already names the field."""
    return str(error).split(": ", 1)[-1]


_Parsed = TypeVar("_Parsed")


def _parsed(parse: Callable[[str], _Parsed], value: str) -> _Parsed:
    """parse(value), its KvplanError raised as the ValueError pydantic reports."""
    try:
        return parse(value)
    except KvplanError as error:
        raise ValueError(_without_prefix(error)) from None


def _token_count(value: object) -> object:
    """'128k' → 131,072 before the strict int check; other types pass on and fail there."""
    return _parsed(parse_tokens, value) if isinstance(value, str) else value


def _byte_count(value: object) -> object:
    """'40GiB' → 42,949,672,960 before the strict int check; other types pass on."""
    return _parsed(parse_bytes, value) if isinstance(value, str) else value


# Every number has kvplan's stated maximum (kvplan.limits); floats are finite (no .inf/.nan).
TokenCount = Annotated[int, BeforeValidator(_token_count), Field(gt=0, le=limits.CONTEXT.maximum)]
ByteCount = Annotated[int, BeforeValidator(_byte_count), Field(ge=0, le=limits.MEMORY.maximum)]
GpuCount = Annotated[int, Field(gt=0, le=limits.GPUS.maximum)]
SequenceCount = Annotated[int, Field(gt=0, le=limits.BATCH.maximum)]
BatchedTokens = Annotated[int, Field(gt=0, le=limits.BATCHED_TOKENS.maximum)]
RequestRate = Annotated[
    float,
    Field(ge=float(limits.MIN_REQUEST_RATE), le=limits.REQUEST_RATE.maximum, allow_inf_nan=False),
]
Duration = Annotated[float, Field(gt=0, le=limits.DURATION.maximum, allow_inf_nan=False)]
BlockTokens = Annotated[int, Field(gt=0, le=limits.BLOCK.maximum)]
LayerCount = Annotated[int, Field(ge=0, le=limits.LAYERS.maximum)]


def _engine_field(setting: Setting) -> tuple[Any, Any]:
    """(annotation, Field) of the products-file key of `setting`, from its declaration."""
    bounds: dict[str, Any] = {}
    if setting.unit == FRACTION:
        hint: Any = float
        bounds = {"ge": float(setting.minimum), "le": 1, "allow_inf_nan": False}
    elif setting.unit == BYTES:
        hint = ByteCount
    elif setting.type is int:
        limit = setting.limit.maximum if setting.limit is not None else None
        tokens = setting.unit == "tokens" and setting.limit is limits.CONTEXT  # '128k' too
        hint = Annotated[int, BeforeValidator(_token_count)] if tokens else int
        low = {"gt": 0} if setting.minimum == 1 else {"ge": setting.minimum}  # pydantic's words
        bounds = {**low, "le": limit}
    elif setting.type is float and setting.limit is not None:  # a FACTOR
        hint = float
        bounds = {"ge": float(setting.minimum), "le": setting.limit.maximum, "allow_inf_nan": False}
    elif setting.type is str:
        hint = Name
    else:
        hint = bool
    default = False if setting.unit == SWITCH else setting.default
    if default is None:
        hint = hint | None if not bounds else Annotated[hint, Field(**bounds)] | None
    elif bounds:
        hint = Annotated[hint, Field(**bounds)]
    return hint, Field(default, description=setting.help)


# Every engine setting, by its products-file key (kvplan.engine.settings declares them).
EngineFields = create_model(
    "EngineFields",
    __config__=ConfigDict(strict=True, frozen=True, extra="forbid"),
    **{s.key: _engine_field(s) for s in SETTINGS},  # type: ignore[call-overload]
)


class ProductSpec(EngineFields):  # type: ignore[misc, valid-type]
    """One product: a model served on a SKU, and what it promises its users; its engine
    settings are the fields of EngineFields."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    name: Name = Field(description="product name, unique in the file")
    model: Name = Field(description="catalogue model name or alias")
    sku: Name = Field(description="catalogue GPU SKU name or alias")
    tp: GpuCount = Field(1, description="tensor-parallel degree (GPUs per stage)")
    pp: GpuCount = Field(1, description="pipeline-parallel degree (stages)")
    kv_dtype: Name | None = Field(
        None, description="KV element type: bf16, fp8, int8, q8_0, ...; null: the engine's default"
    )
    weight_dtype: Name | None = Field(
        None, description="weight type (bf16, fp8, int4, ...); null: the model's released dtype"
    )
    context: TokenCount = Field(
        description="promised context per request in tokens; accepts 8k, 128k, 1M (k = 1024)"
    )
    concurrency: SequenceCount | None = Field(
        None, description="promised concurrent requests at that context"
    )
    requests_per_s: RequestRate | None = Field(
        None, description="promised arrival rate in requests per second (with duration_s)"
    )
    duration_s: Duration | None = Field(
        None, description="time one request stays in the engine in seconds (with requests_per_s)"
    )
    vllm_version: Name | None = Field(
        None,
        description="vLLM version whose accounting to follow, e.g. 0.11 (engine_version "
        "under its older name); null: 0.11",
    )
    rope_scaling: str | None = Field(
        None,
        description="RoPE scaling the deployment serves with, TYPE:FACTOR[:ORIGINAL_TOKENS] "
        "(e.g. yarn:4; vLLM --hf-overrides): a context past the model's native limit counts "
        "as served only when declared here (or stated in the model's config)",
    )

    @field_validator("rope_scaling")
    @classmethod
    def _rope_syntax(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_rope_scaling(value, "rope_scaling")
            except KvplanError as error:
                raise ValueError(str(error).removeprefix("rope_scaling: ")) from None
        return value

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        if value.lower() not in ENGINES:
            raise ValueError(f"unknown engine (allowed: {', '.join(ENGINES)})")
        return value.lower()

    @field_validator("kv_dtype")
    @classmethod
    def _known_kv_dtype(cls, value: str | None) -> str | None:
        return None if value is None else _parsed(kv_dtype_info, value).name

    @field_validator("weight_dtype")
    @classmethod
    def _known_weight_dtype(cls, value: str | None) -> str | None:
        return None if value is None else _parsed(weight_dtype_info, value).name

    @field_validator("vllm_version")
    @classmethod
    def _version(cls, value: str | None) -> str | None:
        if value is not None:
            _parsed(parse_version, value)
        return value

    @model_validator(mode="after")
    def _one_version(self) -> ProductSpec:
        if self.vllm_version is not None and self.engine_version is not None:
            raise ValueError("give engine_version or vllm_version (its older name), not both")
        return self

    @model_validator(mode="after")
    def _one_promise(self) -> ProductSpec:
        rate = (self.requests_per_s, self.duration_s)
        if self.concurrency is not None and any(v is not None for v in rate):
            raise ValueError("give either concurrency or requests_per_s with duration_s, not both")
        if self.concurrency is None and None in rate:
            raise ValueError(
                "give concurrency, or both requests_per_s and duration_s (Little's law)"
            )
        if self.promised_concurrency > limits.BATCH.maximum:
            raise ValueError(
                f"requests_per_s × duration_s = {self.promised_concurrency:,} requests at once: "
                + limits.BATCH.describe(self.promised_concurrency)
            )
        return self

    @property
    def promised_concurrency(self) -> int:
        """Requests in flight at once: `concurrency`, or ceil(requests_per_s × duration_s).

        The rate and duration are read as the decimals the user wrote (Fraction of their
        repr), so 0.1 req/s × 30 s is 3 requests, not the 4 that binary floats would give.
        """
        if self.concurrency is not None:
            return self.concurrency
        assert self.requests_per_s is not None and self.duration_s is not None  # _one_promise
        return math.ceil(Fraction(repr(self.requests_per_s)) * Fraction(repr(self.duration_s)))


class DeploymentFile(BaseModel):
    """A deployment file: the products a team promises, checked by `kvplan check`."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    # Unique names are checked by the loader (kvplan.catalog.deployments), which can point at
    # the repeated entry's line; a validator here could only show the whole list.
    products: list[ProductSpec] = Field(min_length=1, description="the products to check")
