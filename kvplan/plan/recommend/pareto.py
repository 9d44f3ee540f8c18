"""`recommend --pareto`: output tokens/s per GPU against tokens/s per user, and the frontier.

The space is recommend's (`space.points_of`: every tp the engine accepts, KV and weight
dtypes), at one instance (pp fixed, no dp), swept over the batch: 1, 2, 4, … and the largest
batch whose requests of prompt + output tokens all fit in the engine's KV pool (max_num_seqs
set to the batch, as the launch line would). Each (point, batch) is timed by the speed model
(`step_times`) in a closed-loop steady state, the way `vllm bench serve --max-concurrency B`
runs: B requests always in flight, each of P prompt and O output tokens. Over one request's
life every slot turns over once, so the instance runs O − 1 decode steps of B sequences
(staggered evenly over their outputs) and B prefills of P tokens (each in chunks of
max_num_batched_tokens, not overlapped with decode: an upper bound on time):

    T = (O − 1) · t_decode(B) + B · t_prefill(P)
    tokens/s per user = O / T;  output tokens/s per GPU = B · O / T / (tp · pp)

A point is on the frontier when no other point is at least as fast for the fleet and for the
user and faster for one of them (`frontier_flags`). KV bytes per token travel with every point,
with the most requests of P + O tokens the pool holds: a faster setup that doubles KV bytes per
token holds half as many.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import kvplan.limits as limits
from kvplan.engine.batch import Batch
from kvplan.engine.deployment import Deployment
from kvplan.engine.pool import largest_fitting
from kvplan.errors import KvplanError
from kvplan.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from kvplan.perf.estimates import batched_step, decode_step
from kvplan.plan.capacity import Capacity
from kvplan.plan.recommend.objective import ConcurrencyTarget, GpuCount
from kvplan.plan.recommend.search import point_deployment
from kvplan.plan.recommend.space import SearchSpace, points_of
from kvplan.specs import SkuSpec


@dataclass(frozen=True)
class ParetoWorkload:
    """Every request: `prompt_tokens` in, `output_tokens` out; `context_tokens` the
    max_model_len the instance is launched with (at least prompt + output)."""

    prompt_tokens: int
    output_tokens: int
    context_tokens: int

    def __post_init__(self) -> None:
        for name, value in (
            ("prompt_tokens", self.prompt_tokens),
            ("output_tokens", self.output_tokens),
        ):
            if value < 1:
                raise KvplanError(f"{name}: {value} must be at least 1 token")
        if self.context_tokens < self.request_tokens:
            raise KvplanError(
                f"context: {self.context_tokens:,} tokens is shorter than prompt + output "
                f"({self.request_tokens:,})"
            )

    @property
    def request_tokens(self) -> int:
        """Tokens one request holds at its end: prompt + output."""
        return self.prompt_tokens + self.output_tokens


@dataclass(frozen=True)
class StepTimes:
    """One instance's step times, seconds, from the speed model."""

    decode_s: float  # one decode step of the batch, contexts staggered over the outputs
    prefill_s: float  # one prompt's prefill, all its chunks


def step_times(
    deployment: Deployment,
    sku: SkuSpec,
    workload: ParetoWorkload,
    batch: int,
    efficiency: Efficiency,
) -> StepTimes:
    """The speed model's decode step at `batch` and one prompt's prefill (see the module).

    The B sequences decoding at once are spread evenly over their outputs: sequence j has
    P + ⌊j · (O − 1) / B⌋ tokens in KV, the steady state of a closed loop.
    """
    p, o = workload.prompt_tokens, workload.output_tokens
    decode_s = decode_step(deployment, staggered(p, o, batch), sku, efficiency).step_s
    chunk = deployment.settings.max_num_batched_tokens or p
    prefill_s = sum(
        batched_step(
            deployment, sku, None, [(done, min(chunk, p - done))], efficiency=efficiency
        ).step_s
        for done in range(0, p, chunk)
    )
    return StepTimes(decode_s, prefill_s)


def staggered(prompt_tokens: int, output_tokens: int, batch: int) -> Batch:
    """`batch` sequences j = 0 … B − 1 of P + ⌊j · (O − 1) / B⌋ tokens, counted per length.

    Length P + v is held by the j with v · B ≤ j · (O − 1) < (v + 1) · B: ⌈(v + 1) · B / m⌉ −
    ⌈v · B / m⌉ of them (m = O − 1), so a batch of a million costs O steps, not a million.
    """
    m = output_tokens - 1
    if m <= 0:
        return Batch.uniform(prompt_tokens, batch)
    ceil = [-(-v * batch // m) for v in range(m + 1)]  # ⌈v · B / m⌉
    counts = ((prompt_tokens + v, ceil[v + 1] - ceil[v]) for v in range(m))
    return Batch(tuple((tokens, n) for tokens, n in counts if n > 0))


@dataclass(frozen=True)
class ParetoPoint:
    """One (deployment, batch) of the sweep, timed; `on_frontier` set by `frontier_flags`."""

    sku: SkuSpec
    deployment: Deployment
    batch: int  # requests in flight (max_num_seqs)
    max_batch: int  # the most requests of prompt + output tokens the pool holds
    times: StepTimes
    request_s: float  # T: one request's life, prefill to last token
    output_tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    kv_bytes_per_token: int  # whole model, every GPU of the instance
    kv_bytes_per_token_per_gpu: int
    on_frontier: bool = False


def frontier_flags(values: Sequence[tuple[float, float]]) -> list[bool]:
    """For each (x, y), whether no other pair dominates it (≥ in both, > in one); larger is
    better in both. Equal pairs do not dominate each other: both stay.

    Sorted by x then y, largest first, a pair is undominated exactly when its y beats every
    y before it, or it equals the pair that set that best.
    """
    order = sorted(range(len(values)), key=lambda i: (-values[i][0], -values[i][1]))
    flags = [False] * len(values)
    best: tuple[float, float] | None = None
    for i in order:
        if best is None or values[i][1] > best[1] or values[i] == best:
            flags[i] = True
            if best is None or values[i][1] > best[1]:
                best = values[i]
    return flags


@dataclass(frozen=True)
class ParetoSearch:
    """Every point swept, the frontier flagged; what the sweep covered."""

    workload: ParetoWorkload
    points: tuple[ParetoPoint, ...]
    configurations: int  # (SKU, tp, dtypes) points of the space
    refused: int  # configurations the engine refuses, or whose KV holds no request
    searched: dict[str, tuple[object, ...]]

    @property
    def frontier(self) -> tuple[ParetoPoint, ...]:
        """The frontier, fastest per user first."""
        on = [p for p in self.points if p.on_frontier]
        return tuple(
            sorted(on, key=lambda p: (-p.tokens_per_s_per_user, -p.output_tokens_per_s_per_gpu))
        )


def pareto(
    base: Deployment,
    workload: ParetoWorkload,
    space: SearchSpace,
    efficiency: Efficiency | Callable[[SkuSpec], Efficiency] = DEFAULT_EFFICIENCY,
) -> ParetoSearch:
    """The sweep of the module docstring over `space` (its pp and dp are fixed at base's);
    `efficiency` may be one per SKU (a calibration applies to the SKU it was measured on)."""
    efficiency_of = efficiency if callable(efficiency) else lambda _: efficiency
    space = replace(
        space, pp=space.pp or base.pp, dp=1, ep=False if base.model.moe is None else space.ep
    )
    objective = ConcurrencyTarget(workload.context_tokens, 1)
    found, _, searched = points_of(base, objective, space, GpuCount())
    seen: set[tuple] = set()
    points: list[ParetoPoint] = []
    configurations = refused = 0
    for point in found:
        # Block sizes change neither speed nor (beyond rounding) KV: the engine default only.
        key = (point.sku.name, point.tp, point.pp, point.weight_dtype, point.kv_dtype)
        if key in seen:
            continue
        seen.add(key)
        configurations += 1
        try:
            deployment = point_deployment(point, base, workload.context_tokens)
            swept = _sweep(deployment, point.sku, workload, efficiency_of(point.sku))
        except KvplanError:
            swept = []
        refused += not swept
        points += swept
    flags = frontier_flags(
        [(p.output_tokens_per_s_per_gpu, p.tokens_per_s_per_user) for p in points]
    )
    marked = tuple(replace(p, on_frontier=f) for p, f in zip(points, flags, strict=True))
    searched = {k: v for k, v in searched.items() if k in ("tp", "kv", "weights")}
    return ParetoSearch(workload, marked, configurations, refused, searched)


def _launched(
    deployment: Deployment, sku: SkuSpec, batch: int, workload: ParetoWorkload
) -> Capacity:
    """The instance launched for `batch` requests (max_num_seqs = batch unless fixed)."""
    settings = deployment.settings
    if settings.max_num_seqs is None:
        deployment = deployment.replace(settings=replace(settings, max_num_seqs=batch))
    launched = deployment.engine.sized_for(deployment, batch, workload.context_tokens)
    return Capacity(launched, sku, batch, workload.context_tokens)


def _sweep(
    deployment: Deployment, sku: SkuSpec, workload: ParetoWorkload, efficiency: Efficiency
) -> list[ParetoPoint]:
    """Batches 1, 2, 4, … and the largest that fits, each timed (empty: none fits)."""

    def fits(batch: int) -> bool:
        capacity = _launched(deployment, sku, batch, workload)
        return capacity.kv_usable and capacity.max_concurrency(workload.request_tokens) >= batch

    upper = limits.BATCH.maximum
    if deployment.settings.max_num_seqs is not None:
        upper = min(upper, deployment.settings.max_num_seqs)
    first = _launched(deployment, sku, 1, workload)
    if not first.kv_usable:
        return []
    # max_num_seqs = 1 leaves the largest budget (the sampler's peak grows with it): a bound.
    upper = min(upper, first.max_concurrency(workload.request_tokens))
    largest = largest_fitting(fits, upper)
    if largest == 0:
        return []
    batches = sorted({*(2**i for i in range(largest.bit_length())), largest})
    return [_timed(deployment, sku, workload, b, largest, efficiency) for b in batches]


def _timed(
    deployment: Deployment,
    sku: SkuSpec,
    workload: ParetoWorkload,
    batch: int,
    largest: int,
    efficiency: Efficiency,
) -> ParetoPoint:
    launched = _launched(deployment, sku, batch, workload).deployment
    times = step_times(launched, sku, workload, batch, efficiency)
    o = workload.output_tokens
    request_s = (o - 1) * times.decode_s + batch * times.prefill_s
    per_user = o / request_s
    estimate = decode_step(launched, Batch.uniform(workload.request_tokens, 1), sku, efficiency)
    return ParetoPoint(
        sku=sku,
        deployment=launched,
        batch=batch,
        max_batch=largest,
        times=times,
        request_s=request_s,
        output_tokens_per_s_per_gpu=batch * per_user / launched.gpus,
        tokens_per_s_per_user=per_user,
        kv_bytes_per_token=estimate.kv_bytes_per_token,
        kv_bytes_per_token_per_gpu=estimate.kv_bytes_per_token_per_gpu,
    )
