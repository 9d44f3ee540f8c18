"""Product guardrails: promised context × concurrency against what a SKU holds, and claim sheets.

Two questions, one answer each, as frozen results (rendering is `report`'s job):

- `kvplan check FILE.yaml`: each product in a deployment file promises a context and a
  concurrency (or a request rate × duration, Little's law). `check_products` states what the
  SKU supports under the product's engine and whether the promise holds.
- `kvplan claim`: the bytes behind a "long context" claim, from `size()` and `Capacity`
  (weights + KV + the engine's reserve, per GPU, against the GPU's memory).

No arithmetic of its own beyond adding terms up: every byte comes from `sizing` or `capacity`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

import kvplan.limits as limits
from kvplan.catalog.deployments import LoadedDeployments
from kvplan.catalog.resolve import declare_rope_scaling, parse_rope_scaling
from kvplan.errors import KvplanError
from kvplan.plan.batch import Batch
from kvplan.plan.capacity import Capacity, Failure
from kvplan.plan.deployment import Deployment
from kvplan.plan.engines import DEFAULT_ENGINE, ENGINES, EngineSettings
from kvplan.plan.engines import engine as engine_profile
from kvplan.plan.engines.vllm_version import parse_version
from kvplan.plan.sizing import SizeResult, size
from kvplan.specs import ModelSpec, SkuSpec, kv_dtype_info, weight_dtype_info
from kvplan.specs.common import Name
from kvplan.units import parse_bytes, parse_tokens

# --- the deployment file -------------------------------------------------------------


def _without_prefix(error: KvplanError) -> str:
    """A parser's message without its leading `what:`; pydantic already names the field."""
    return str(error).split(": ", 1)[-1]


def _token_count(value: object) -> object:
    """'128k' → 131,072 before the strict int check; other types pass on and fail there."""
    if isinstance(value, str):
        try:
            return parse_tokens(value)
        except KvplanError as error:
            raise ValueError(_without_prefix(error)) from None
    return value


def _byte_count(value: object) -> object:
    """'40GiB' → 42,949,672,960 before the strict int check; other types pass on."""
    if isinstance(value, str):
        try:
            return parse_bytes(value)
        except KvplanError as error:
            raise ValueError(_without_prefix(error)) from None
    return value


# Every number has kvplan's stated maximum (kvplan.limits); floats are finite (no .inf/.nan).
TokenCount = Annotated[int, BeforeValidator(_token_count), Field(gt=0, le=limits.CONTEXT.maximum)]
ByteCount = Annotated[int, BeforeValidator(_byte_count), Field(ge=0, le=limits.MEMORY.maximum)]
GpuCount = Annotated[int, Field(gt=0, le=limits.GPUS.maximum)]
SequenceCount = Annotated[int, Field(gt=0, le=limits.BATCH.maximum)]
BatchedTokens = Annotated[int, Field(gt=0, le=limits.BATCHED_TOKENS.maximum)]
RequestRate = Annotated[float, Field(gt=0, le=limits.REQUEST_RATE.maximum, allow_inf_nan=False)]
Duration = Annotated[float, Field(gt=0, le=limits.DURATION.maximum, allow_inf_nan=False)]


class ProductSpec(BaseModel):
    """One product: a model served on a SKU, and what it promises its users."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    name: Name = Field(description="product name, unique in the file")
    model: Name = Field(description="catalogue model name or alias")
    sku: Name = Field(description="catalogue GPU SKU name or alias")
    tp: GpuCount = Field(1, description="tensor-parallel degree (GPUs per stage)")
    pp: GpuCount = Field(1, description="pipeline-parallel degree (stages)")
    engine: Name = Field(
        DEFAULT_ENGINE,
        description="KV accounting: vllm, sglang, trtllm, llama.cpp, ollama, exact, hf or naive",
    )
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
    utilization: float | None = Field(
        None,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="fraction of GPU memory the engine may use (vLLM gpu_memory_utilization, "
        "SGLang mem_fraction_static); null: the engine's default",
    )
    kv_memory: ByteCount | None = Field(
        None,
        description="fixed KV budget per GPU in bytes or with a unit (40GiB), like vLLM "
        "--kv-cache-memory",
    )
    vllm_version: str | None = Field(
        None, description="vLLM version whose accounting to follow, e.g. 0.11; null: 0.11"
    )
    max_num_batched_tokens: BatchedTokens | None = Field(
        None, description="vLLM max_num_batched_tokens in tokens; null: vLLM's default"
    )
    max_num_seqs: SequenceCount | None = Field(
        None, description="vLLM max_num_seqs in requests; null: vLLM's default"
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
        if value is None:
            return None
        try:
            return kv_dtype_info(value).name
        except KvplanError as error:
            raise ValueError(_without_prefix(error)) from None

    @field_validator("weight_dtype")
    @classmethod
    def _known_weight_dtype(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return weight_dtype_info(value).name
        except KvplanError as error:
            raise ValueError(_without_prefix(error)) from None

    @field_validator("vllm_version")
    @classmethod
    def _version(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_version(value)
            except KvplanError as error:
                raise ValueError(_without_prefix(error)) from None
        return value

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


# --- evaluation ---------------------------------------------------------------------


@dataclass(frozen=True)
class ProductCheck:
    """One product's promise against its SKU; bytes exact, per GPU of the binding rank."""

    product: ProductSpec
    capacity: Capacity  # the deployment on its SKU, batch = the promised concurrency
    promised_context_tokens: int
    promised_concurrency: int
    supported_concurrency: int  # whole requests of the promised context that fit at once
    supported_context_tokens: int  # longest context at the promised concurrency (native cap)
    kv_bytes_per_request_per_gpu: int
    kv_bytes_needed_per_gpu: int  # the promised concurrency × one request's bytes
    failure: Failure | None
    notes: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def kv_budget_bytes_per_gpu(self) -> int:
        return self.capacity.budget.kv_bytes


@dataclass(frozen=True)
class GuardrailResult:
    """Every product of one deployment file, checked."""

    path: Path
    checks: tuple[ProductCheck, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


def product_deployment(product: ProductSpec, model: ModelSpec) -> Deployment:
    """The deployment a product describes, its engine settings included."""
    if product.rope_scaling is not None:
        model = declare_rope_scaling(model, product.rope_scaling, "rope_scaling")
    return Deployment(
        model=model,
        engine=engine_profile(product.engine),
        kv_dtype=product.kv_dtype or "",
        weight_dtype=product.weight_dtype,
        tp=product.tp,
        pp=product.pp,
        settings=EngineSettings(
            version=product.vllm_version,
            utilization=product.utilization,
            kv_memory_bytes=product.kv_memory,
            max_num_batched_tokens=product.max_num_batched_tokens,
            max_num_seqs=product.max_num_seqs,
        ),
    )


def check_product(product: ProductSpec, model: ModelSpec, sku: SkuSpec) -> ProductCheck:
    """The product's promise against what `sku` holds under the product's engine."""
    promised = product.promised_concurrency
    context = product.context
    capacity = Capacity(product_deployment(product, model), sku, promised, context)
    per_request = capacity.request_bytes_per_gpu(context)
    supported = capacity.max_concurrency(context)
    notes: list[str] = []
    if product.concurrency is None:
        notes.append(
            f"concurrency {promised} = ceil({product.requests_per_s} requests/s × "
            f"{product.duration_s} s) (Little's law)"
        )
    if promised > capacity.scheduler.max_num_seqs:
        notes.append(
            f"the engine schedules at most max_num_seqs = {capacity.scheduler.max_num_seqs} "
            f"requests at once; set max_num_seqs ≥ {promised} to serve the promise"
        )
    return ProductCheck(
        product=product,
        capacity=capacity,
        promised_context_tokens=context,
        promised_concurrency=promised,
        supported_concurrency=supported,
        supported_context_tokens=capacity.max_context_tokens,
        kv_bytes_per_request_per_gpu=per_request,
        # Identical requests: the batch's bytes are one request's, added up `promised` times.
        kv_bytes_needed_per_gpu=promised * per_request,
        failure=capacity.failure,
        notes=tuple(notes),
    )


def check_products(loaded: LoadedDeployments[DeploymentFile]) -> GuardrailResult:
    """Every product of a loaded deployment file, checked; errors name the product's line."""
    checks = []
    for index, product in enumerate(loaded.file.products):
        try:
            checks.append(check_product(product, loaded.models[index], loaded.skus[index]))
        except KvplanError as error:
            raise KvplanError(f"{loaded.where(index)}: {error}") from None
    return GuardrailResult(loaded.path, tuple(checks))


# --- the vendor-claim sheet -----------------------------------------------------------


@dataclass(frozen=True)
class ClaimSheet:
    """The bytes behind "serves context L at batch B": per request, per batch, per GPU.

    `size` holds the KV and weights (engine rounding included) and, on the SKU, the engine's
    capacity (budget, pool, verdict); the totals below only add their terms up.
    """

    size: SizeResult
    capacity: Capacity

    @property
    def kv_bytes_per_request_per_gpu(self) -> int:
        return self.size.kv_bytes_per_request_per_gpu

    @property
    def memory_bytes(self) -> int:
        """Device memory the engine sees on one GPU (runtime-visible where known)."""
        return self.capacity.budget.total_bytes

    @property
    def headroom_bytes_per_gpu(self) -> int:
        """The (1 − utilization) share of memory the engine leaves untouched (exact: 0)."""
        return self.memory_bytes - self.capacity.budget.requested_bytes

    @property
    def weights_bytes_per_gpu(self) -> int:
        """Weights on the binding GPU as the engine loads them (the figure `report` shows)."""
        return self.size.weights_bytes_per_gpu

    @property
    def reserve_bytes_per_gpu(self) -> int:
        """Everything the engine keeps out of the KV pool besides weights: memory − weights −
        KV budget, which is the unused share + activation + non-torch + CUDA graphs (with a
        fixed KV budget, whatever the engine leaves)."""
        return self.memory_bytes - self.weights_bytes_per_gpu - self.capacity.budget.kv_bytes

    @property
    def total_bytes_per_gpu(self) -> int:
        """Weights + the batch's KV + the engine's reserve, on the binding GPU."""
        kv = self.size.kv_bytes_per_gpu
        return self.weights_bytes_per_gpu + kv + self.reserve_bytes_per_gpu

    @property
    def free_bytes_per_gpu(self) -> int:
        """Memory left after the total: the KV budget left after the batch, as `size` says it;
        negative: short by that much."""
        free = self.size.free_bytes_per_gpu
        assert free is not None  # a SKU was given
        return free

    @property
    def fits(self) -> bool:
        """The engine's verdict for the whole batch (the one every command gives)."""
        return self.capacity.fits

    @property
    def verdict(self) -> str:
        """The verdict in words, as `size` and `report` print it."""
        return self.capacity.verdict

    @property
    def within_native_limit(self) -> bool:
        """The claimed context is within the model's limit, extended when its RoPE scaling
        is applied (memory aside)."""
        return self.size.context <= self.size.deployment.model.context_limit


def claim_sheet(
    deployment: Deployment, sku: SkuSpec, context_tokens: int, batch: int
) -> ClaimSheet:
    """The claim sheet of `batch` requests of `context_tokens` each on `sku`."""
    result = size(deployment, Batch.uniform(context_tokens, batch), sku)
    assert result.capacity is not None  # a SKU was given
    return ClaimSheet(result, result.capacity)
