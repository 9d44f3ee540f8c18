"""`kvplan check`: each product's promise against what its SKU holds under its engine.

A promise is a context and a concurrency (or a request rate × duration, Little's law); the
verdict is the one `Capacity` gives every command.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvplan.catalog.deployments import LoadedDeployments
from kvplan.catalog.resolve import ResolvedModel, declare_rope_scaling
from kvplan.engine import engine as engine_profile
from kvplan.engine.deployment import Deployment
from kvplan.engine.settings import BY_KEY, key_of, settings_from
from kvplan.errors import KvplanError, SettingError
from kvplan.plan.capacity import Capacity, Failure
from kvplan.plan.guardrail.products import DeploymentFile, ProductSpec
from kvplan.specs import SkuSpec


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


def product_deployment(product: ProductSpec, resolved: ResolvedModel) -> Deployment:
    """The deployment a product describes, its engine options included; a checkpoint's exact
    weights count as in `size` unless the product names another weight dtype."""
    model = resolved.spec
    if product.rope_scaling is not None:
        model = declare_rope_scaling(model, product.rope_scaling, "rope_scaling")
    exact = product.weight_dtype is None
    options = product.model_dump(include=set(BY_KEY))
    options["engine_version"] = product.engine_version or product.vllm_version
    engine_name, settings, dp, ep = settings_from(options)
    return Deployment(
        model=model,
        engine=engine_profile(engine_name),
        kv_dtype=product.kv_dtype or "",
        weight_dtype=product.weight_dtype,
        tp=product.tp,
        pp=product.pp,
        dp=dp,
        ep=ep,
        settings=settings,
        exact_weights_bytes=resolved.exact_weights_bytes if exact else None,
        checkpoint=resolved.checkpoint if exact else None,
    )


def check_product(product: ProductSpec, model: ResolvedModel, sku: SkuSpec) -> ProductCheck:
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
        # Identical requests: one replica's share of the promise, each charged one request's
        # bytes (the dp replicas split the requests between them).
        kv_bytes_needed_per_gpu=-(-promised // capacity.deployment.dp) * per_request,
        failure=capacity.failure,
        notes=tuple(notes),
    )


def check_products(loaded: LoadedDeployments[DeploymentFile]) -> GuardrailResult:
    """Every product of a loaded deployment file, checked; errors name the product's line."""
    checks = []
    for index, product in enumerate(loaded.file.products):
        try:
            checks.append(check_product(product, loaded.models[index], loaded.skus[index]))
        except SettingError as error:  # the setting as the file names it
            raise KvplanError(f"{loaded.where(index)}: {error.render(key_of)}") from None
        except KvplanError as error:
            raise KvplanError(f"{loaded.where(index)}: {error}") from None
    return GuardrailResult(loaded.path, tuple(checks))
