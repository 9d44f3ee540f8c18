"""`kvplan check`: each product's promise against what its SKU holds under its engine.

A promise is a context and a concurrency (or a request rate × duration, Little's law); the
verdict is the one `Capacity` gives every command.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from kvplan.catalog.deployments import LoadedDeployments
from kvplan.catalog.resolve import ResolvedModel, declare_rope_scaling
from kvplan.engine import engine as engine_profile
from kvplan.engine.deployment import Deployment
from kvplan.engine.nodes import gpus_per_node
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
    # Requests of the promised context held with the KV budget at the low end of its
    # estimate band (budget − uncertainty); None when the budget has no band.
    low_end_concurrency: int | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def within_band(self) -> bool:
        """The promise holds with the estimated budget but not at the low end of its band:
        the engine's real activation and non-torch memory decide it."""
        low = self.low_end_concurrency
        return self.ok and low is not None and low < self.promised_concurrency

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
    low_end = _low_end_concurrency(capacity, context)
    notes = _notes(product, capacity, low_end)
    if capacity.failure not in (None, "native_limit"):
        notes.append(_passing_tp(product, model, sku))
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
        low_end_concurrency=low_end,
    )


def _notes(product: ProductSpec, capacity: Capacity, low_end: int | None) -> list[str]:
    """Assumptions and warnings beside the verdict: Little's law, the scheduler's limit, a
    promise inside the budget's estimate band."""
    promised, notes = product.promised_concurrency, []
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
    if capacity.failure is None and low_end is not None and low_end < promised:
        band = capacity.budget.uncertainty_bytes / 2**30
        notes.append(
            f"within the KV budget's ± {band:.2f} GiB estimate band: at its low end the "
            f"budget holds {_requests(low_end)} of the {promised:,} promised; measure or set "
            "activation_memory and non_torch_memory to settle it"
        )
    return notes


def _low_end_concurrency(capacity: Capacity, context: int) -> int | None:
    """Requests of `context` tokens held when the KV budget is its estimate less the band
    (the engine terms kvplan estimates, at their worst); None without a band."""
    budget = capacity.budget
    if not budget.uncertainty_bytes or capacity.failure is not None:
        return None
    low_bytes = budget.kv_bytes - budget.uncertainty_bytes
    if low_bytes <= 0:
        return 0
    d = capacity.deployment
    fixed = d.replace(settings=replace(d.settings, kv_memory_bytes=low_bytes))
    return Capacity(fixed, capacity.sku, capacity.batch, context).max_concurrency(context)


def _passing_tp(product: ProductSpec, model: ResolvedModel, sku: SkuSpec) -> str:
    """The smallest larger tp on one node of `sku` that holds the promise, as a hint."""
    settings = product_deployment(product, model).settings
    node = gpus_per_node(settings, sku) // (product.pp * product.dp)
    promised, context = product.promised_concurrency, product.context
    for tp in (t for t in (2, 4, 8, 16) if product.tp < t <= node):
        try:
            wider = product_deployment(product.model_copy(update={"tp": tp}), model)
            capacity = Capacity(wider, sku, promised, context)
        except KvplanError:
            continue  # the engine refuses the degree (heads it does not divide)
        if capacity.failure is None:
            held = _requests(capacity.max_concurrency(context))
            return f"tp {tp} would hold it: {sku.name} tp {tp} holds {held} of {context:,} tokens"
    return f"no tp up to {node} on one {sku.name} node holds it"


def check_products(loaded: LoadedDeployments[DeploymentFile]) -> GuardrailResult:
    """Every product of a loaded deployment file, checked; errors name the product's line."""
    checks, problems = [], []
    for index, product in enumerate(loaded.file.products):
        try:
            checks.append(check_product(product, loaded.models[index], loaded.skus[index]))
        except KvplanError as error:  # every product's, at once; a setting by its file key
            shown = error.render(key_of) if isinstance(error, SettingError) else str(error)
            problems.append(f"{loaded.where(index)}: {shown}")
    if problems:
        raise KvplanError("\n".join(problems))
    return GuardrailResult(loaded.path, tuple(checks))


def _requests(count: int) -> str:
    return f"{count:,} request" + ("" if count == 1 else "s")
