"""What one deployment can serve on one SKU: budget, pool, longest context, concurrency.

Every number comes from the deployment's engine profile (`layout`, `budget`, `pool`); this
module only asks it questions. KV grows monotonically but not linearly with context
(windows, chunks, blocks), so the longest context is found by binary search on the pool's
exact "how many requests fit", never by dividing a budget by bytes per token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import kvplan.limits as limits
from kvplan.engine import Budget, KvLayout, KvPool, Scheduler
from kvplan.engine.batch import Batch
from kvplan.engine.deployment import Deployment
from kvplan.engine.nodes import gpus_per_node
from kvplan.engine.pool import UNLIMITED_REQUESTS, largest_fitting
from kvplan.engine.resolved import resolve
from kvplan.errors import KvplanError
from kvplan.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from kvplan.plan.context_limit import beyond_limit
from kvplan.specs import SkuSpec
from kvplan.units import gib

if TYPE_CHECKING:
    from kvplan.perf.estimates import DecodeEstimate

# Why a plan fails, most fundamental first: the weights leave no KV, the context is past the
# model's limit, not one request fits, not all of them do. Every command's verdict is one.
Failure = Literal["weights", "memory", "native_limit", "one_request", "concurrency"]

T = TypeVar("T")


class once(Generic[T]):  # a decorator, named like `property`
    """A property worked out on first read and kept in the instance's `__dict__`, where later
    reads find it without calling anything: functools.cached_property without the lock it
    takes on every first read under Python 3.11 (a whole-catalogue report makes ~130k)."""

    def __init__(self, compute: Callable[[Any], T]) -> None:
        self.compute, self.name = compute, compute.__name__
        self.__doc__ = compute.__doc__

    def __get__(self, instance: Any, owner: type | None = None) -> T:
        if instance is None:
            return self  # type: ignore[return-value]
        value = instance.__dict__[self.name] = self.compute(instance)
        return value


def _shortest(batch: Batch, count: int) -> Batch:
    """The `count` shortest sequences of `batch` (count ≥ 1)."""
    kept, left = [], count
    for tokens, n in batch:
        if left <= 0:
            break
        kept.append((tokens, min(n, left)))
        left -= n
    return Batch(tuple(kept))


class Capacity:
    """One deployment on one SKU, asked for `batch` requests of `context_tokens` each.

    `sequences` (a ragged batch; its size is `batch`, its longest `context_tokens`) makes the
    verdict about those exact lengths. Counts are for the whole deployment: `dp` replicas
    each hold their own requests.
    """

    def __init__(
        self,
        deployment: Deployment,
        sku: SkuSpec,
        batch: int = 1,
        context_tokens: int | None = None,
        efficiency: Efficiency = DEFAULT_EFFICIENCY,
        sequences: Batch | None = None,
    ) -> None:
        if sequences is not None:
            batch, context_tokens = sequences.size, sequences.longest
        if batch < 1:
            raise KvplanError(f"--batch: {batch} must be at least 1 sequence")
        limits.BATCH.check(batch, "--batch")
        self.deployment, self.sku, self.batch = deployment, sku, batch
        self.sequences = sequences if sequences is not None and not sequences.is_uniform else None
        self.context_tokens = context_tokens or deployment.model.context_limit
        self.efficiency = efficiency
        profile = deployment.engine
        self.budget: Budget = profile.budget(deployment, sku, self.context_tokens)
        self.scheduler: Scheduler = resolve(deployment, sku).scheduler(self.context_tokens)

    # The layout and pool are built when first asked for: a plan whose weights do not fit
    # never needs them, and a search meets thousands of such plans.
    @once
    def layout(self) -> KvLayout:
        return self.deployment.engine.layout(self.deployment, self.sku)

    @once
    def pool(self) -> KvPool:
        return self.deployment.engine.pool(self.layout, self.budget)

    @property
    def weights_bytes_per_gpu(self) -> int:
        return self.budget.weights_bytes

    @once
    def kv_usable(self) -> bool:
        """The weights fit, something is left for KV, and a fixed KV budget fits beside them."""
        budget = self.budget
        return budget.weights_fit and budget.kv_bytes > 0 and self.overcommit_bytes == 0

    @once
    def overcommit_bytes(self) -> int:
        """Bytes a fixed KV pool and the weights need beyond the device (0 when they fit).
        A token cap (--max-kv-tokens) shrinks the pool the engine allocates to what the cap
        holds, so only that much must fit."""
        budget = self.budget
        if not budget.overcommit_bytes:
            return 0
        cap = self.deployment.settings.max_kv_tokens
        pool = (
            budget.kv_bytes if cap is None else min(budget.kv_bytes, self.layout.request_bytes(cap))
        )
        return max(0, budget.weights_bytes + pool - budget.total_bytes)

    def request_bytes_per_gpu(self, tokens: int | None = None) -> int:
        """Bytes the engine charges one request of `tokens` (default: the context), one GPU."""
        return self.layout.request_bytes(tokens or self.context_tokens)

    def max_concurrency(self, tokens: int | None = None) -> int:
        """Whole requests of `tokens` (default: the context) that fit at once, all replicas."""
        if not tokens or tokens == self.context_tokens:
            return self._concurrency_at_context
        return self._concurrency(tokens)

    @once
    def _concurrency_at_context(self) -> int:
        """`max_concurrency()`, which a row asks for several times."""
        return self._concurrency(self.context_tokens)

    def _concurrency(self, tokens: int) -> int:
        if not self.kv_usable:
            return 0
        per_replica = self.pool.requests_at(tokens)
        return min(per_replica * self.deployment.dp, UNLIMITED_REQUESTS)

    def holds(self, batch: Batch) -> bool:
        """Whether the deployment holds every sequence of `batch` at once."""
        return self.kv_usable and self.pool.holds(batch.per_replica(self.deployment.dp))

    @once
    def kv_capacity_tokens(self) -> int:
        """KV tokens one replica's pool holds, as the engine reports it."""
        if not self.kv_usable:
            return 0
        return self.deployment.engine.capacity_tokens(self.pool, self.context_tokens)

    @once
    def max_context_tokens(self) -> int:
        """Longest context every one of `batch` requests can have, capped at the model's
        limit (the extended one when its RoPE scaling is applied)."""
        limit = self.deployment.model.context_limit
        if not self.kv_usable:
            return 0
        if self.max_concurrency(limit) >= self.batch:
            return limit  # the limit binds in most plans of a report: one question, not 17
        return largest_fitting(lambda n: n > 0 and self.max_concurrency(n) >= self.batch, limit)

    @property
    def native_limit_binds(self) -> bool:
        return self.max_context_tokens == self.deployment.model.context_limit

    @once
    def fitting_batch(self) -> int:
        """Requests that fit at once, up to the batch asked for: of the context, or the
        shortest of `sequences`."""
        if self.sequences is None:
            return min(self.batch, self.max_concurrency())
        sequences = self.sequences
        return largest_fitting(
            lambda n: n == 0 or self.holds(_shortest(sequences, n)), sequences.size
        )

    @once
    def failure(self) -> Failure | None:
        """Why the plan fails (see `Failure`), or None when the whole batch fits."""
        if not self.budget.weights_fit or (self.budget.kv_bytes <= 0 and not self.budget.fixed):
            return "weights"
        if self.overcommit_bytes:
            return "memory"
        if beyond_limit(self.deployment.model, self.context_tokens) is not None:
            return "native_limit"
        if self.fitting_batch == 0:
            return "one_request"
        if self.fitting_batch < self.batch:
            return "concurrency"
        return None

    @property
    def fits(self) -> bool:
        """The whole batch at the context fits, within the model's context limit."""
        return self.failure is None

    @property
    def verdict(self) -> str:
        """The one verdict every command prints: 'fits', 'fits N of B', "weights don't fit",
        'no memory left for KV' (the weights fit, the engine's reserve takes the rest),
        'weights + KV exceed the GPU by X GiB' (a fixed KV budget), 'KV too small for one
        request' or 'exceeds the native limit of L tokens'."""
        failure, budget = self.failure, self.budget
        if failure == "weights":
            return "no memory left for KV" if budget.weights_fit else "weights don't fit"
        if failure == "memory":
            return f"weights + KV exceed the GPU by {gib(self.overcommit_bytes)}"
        if failure == "native_limit":
            return str(beyond_limit(self.deployment.model, self.context_tokens))
        if failure == "one_request":
            return "KV too small for one request"
        if failure == "concurrency":
            return f"fits {self.fitting_batch:,} of {self.batch:,}"
        return "fits"

    def decode(self) -> DecodeEstimate | None:
        """Roofline decode step of one replica at the requests that fit (None if none)."""
        from kvplan.perf.estimates import decode_step  # the step model loads when asked for

        if self.fitting_batch == 0:
            return None
        per_replica = Batch.uniform(self.context_tokens, self.fitting_batch)
        per_replica = per_replica.per_replica(self.deployment.dp)
        return decode_step(self.deployment, per_replica, self.sku, self.efficiency)

    def log_lines(self) -> list[str]:
        """The startup lines the engine prints for this plan."""
        engine = self.deployment.engine
        return engine.log_lines(self.budget, self.pool, self.context_tokens, self.sku)

    def startup_figures(self) -> dict[str, Any]:
        """Every number those lines print, exact (JSON's `startup`)."""
        engine = self.deployment.engine
        return engine.startup_figures(self.budget, self.pool, self.context_tokens, self.sku)


# Tensor-parallel degrees a report tries when none is given: powers of two up to one node.
REPORT_TP_DEGREES = (1, 2, 4, 8)


def tp_degrees(deployment: Deployment, sku: SkuSpec) -> list[int]:
    """TP degrees to report by default: 1, 2, 4, 8 that fit the node and the engine accepts."""
    node = gpus_per_node(deployment.settings, sku)
    return [t for t in _accepted_degrees(deployment) if t <= node]


# What a report asks per model and again per SKU, answered once per deployment: the SKU only
# sets the node size that bounds the degrees.
@lru_cache(maxsize=4096)
def _accepted_degrees(deployment: Deployment) -> tuple[int, ...]:
    """The report's degrees the engine accepts for the deployment's model."""
    profile, model = deployment.engine, deployment.model
    return tuple(t for t in REPORT_TP_DEGREES if profile.tp_refusal(model, t) is None)


def data_parallel_attention(deployment: Deployment, sku: SkuSpec) -> list[Deployment]:
    """For an MoE model given neither dp nor ep: data-parallel attention with expert
    parallelism over 2, 4 and 8 GPUs of a node (tp 1 × dp N + ep), the layouts the engine
    accepts.

    This is the usual way to serve a large MoE (DeepSeek-V3 on 8 GPUs: SGLang's
    --enable-dp-attention, vLLM's --data-parallel-size with --enable-expert-parallel), and a
    report of TP degrees alone hides it: an MLA latent is whole on every TP rank, so TP 8
    keeps each request's KV eight times, where each DP rank keeps only its own requests'.
    """
    node = gpus_per_node(deployment.settings, sku)
    return [d for d in _data_parallel_layouts(deployment) if d.dp * d.pp <= node]


@lru_cache(maxsize=4096)
def _data_parallel_layouts(deployment: Deployment) -> tuple[Deployment, ...]:
    """`data_parallel_attention`'s layouts on any node, built once per deployment: every SKU
    of a report gets the same objects, and with them the caches keyed by them (weights,
    layouts, step shapes)."""
    if deployment.model.moe is None or deployment.dp > 1 or deployment.ep:
        return ()
    layouts = []
    for gpus in REPORT_TP_DEGREES:
        if gpus == 1:
            continue
        try:
            layouts.append(deployment.replace(tp=1, dp=gpus, ep=True))
        except KvplanError:
            continue  # the engine runs one instance (llama.cpp) or refuses the split
    return tuple(layouts)


@dataclass(frozen=True)
class Refusal:
    """A model × SKU × TP degree of a grid that the engine refuses to start, and why."""

    deployment: Deployment  # the model's deployment; `tp` is the degree refused
    sku: SkuSpec
    tp: int
    reason: str
    batch: int
    context_tokens: int


def capacity_grid(
    deployments: list[Deployment],
    skus: list[SkuSpec],
    batch: int = 1,
    context_tokens: int | None = None,
    tps: tuple[int, ...] | None = None,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
    keep_refusals: bool = False,
) -> list[Capacity | Refusal]:
    """Capacity of every deployment (one per model) × SKU × TP degree.

    Degrees the user asks for are validated: the engine's refusal is an error, or with
    `keep_refusals` a Refusal in the combination's place (one refused model does not sink
    a whole report). The default degrees skip those the engine refuses, and for an MoE model
    given neither dp nor ep are followed by the data-parallel attention rows
    (`data_parallel_attention`).
    """
    rows: list[Capacity | Refusal] = []
    for base in deployments:
        # One deployment per degree serves every SKU: the engine's caches of layouts, stage
        # caches and weights are keyed by it, and built once per degree instead of per SKU.
        at_tp = {base.tp: base}
        for sku in skus:
            for tp in tps or tp_degrees(base, sku):
                reason = base.engine.tp_refusal(base.model, tp) if keep_refusals else None
                if reason:
                    context = context_tokens or base.model.context_limit
                    rows.append(Refusal(base, sku, tp, reason, batch, context))
                    continue
                deployment = at_tp.get(tp) or at_tp.setdefault(tp, base.replace(tp=tp))
                rows.append(Capacity(deployment, sku, batch, context_tokens, efficiency))
            for deployment in data_parallel_attention(base, sku) if tps is None else ():
                rows.append(Capacity(deployment, sku, batch, context_tokens, efficiency))
    return rows


def contexts_up_to(limit_tokens: int, asked_tokens: int, lowest_tokens: int = 1024) -> list[int]:
    """Powers of two from `lowest_tokens` to the limit, plus the limit and the asked context:
    where a capacity curve is sampled (sorted, each once)."""
    points = {asked_tokens, limit_tokens}
    tokens = min(lowest_tokens, asked_tokens, limit_tokens)
    while tokens < limit_tokens:
        points.add(tokens)
        tokens *= 2
    return sorted(p for p in points if 0 < p <= max(limit_tokens, asked_tokens))


def concurrency_curve(capacity: Capacity) -> list[tuple[int, int]]:
    """(L, requests of L tokens that fit at once) from 1k tokens to the model's limit, with
    the capacity's own context among the points."""
    limit = capacity.deployment.model.context_limit
    return concurrency_by_context(capacity, contexts_up_to(limit, capacity.context_tokens))


def concurrency_by_context(capacity: Capacity, contexts: list[int]) -> list[tuple[int, int]]:
    """(L, requests of L tokens that fit at once) for each context L in tokens.

    Each point plans the deployment afresh for max_model_len = L (the engine's budget and
    scheduler depend on it), so the point at the capacity's own context is its
    `max_concurrency()` and every point is what `kvplan report --context L` would say.
    """
    points = []
    for tokens in contexts:
        at = Capacity(
            capacity.deployment, capacity.sku, capacity.batch, tokens, capacity.efficiency
        )
        points.append((tokens, at.max_concurrency()))
    return points
