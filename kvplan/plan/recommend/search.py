"""The search: visit points cheapest first, evaluate each through `Capacity`, rank.

Exhaustive over the stated space, yet fast, by two kinds of pruning that never drop a winner:

- Cost bound. Candidates rank by cost, then fewer quantised parts, nodes and stages, all
  known before a point is evaluated; points are visited in that order, a whole group of
  equal keys at a time, and once `top` distinct shapes meet the target every later point
  ranks below them and is not evaluated.
- Dominance, only for objectives that say more KV never hurts (`kv_monotone`): the KV
  budget grows with the memory fraction, so each point is tried at its highest fraction
  first (a miss there is a miss everywhere) and then from the lowest up, keeping the lowest
  that meets; max_num_seqs values come from the objective (a KV target needs only the
  smallest that admits it: vLLM's sampler peak grows with it); a block size that is a multiple
  of another one tried never holds more (charges and pools both round to whole blocks); and
  for MoE models, dp replicas without expert parallelism hold the same KV as with it on
  more weight bytes per GPU.
- Objectives that are not `kv_monotone` (throughput: a larger pool admits larger, slower
  batches) get no dominance pruning: each point tries every fraction from the lowest up
  until one meets, for each max_num_seqs the objective offers. `GoodputTarget`'s score
  settles a point by arithmetic where it can (no KV for one request, a step slower than the
  TPOT target) and simulates the rest; with the cost bound, only points cheap enough to rank
  are ever simulated.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction

import kvplan.limits as limits
from kvplan.engine.deployment import Deployment
from kvplan.engine.nodes import nodes_spanned
from kvplan.errors import KvplanError, SettingError
from kvplan.plan.capacity import Capacity
from kvplan.plan.context_limit import beyond_limit_sentence
from kvplan.plan.recommend.candidates import Candidate, Ranked, closer, rank_candidates
from kvplan.plan.recommend.objective import Cost, GpuCount, Objective
from kvplan.plan.recommend.space import Point, SearchSpace, points_of
from kvplan.specs import ModelSpec, SkuSpec, kv_dtype_info

DEFAULT_TOP = 5
# Share of the KV budget kept unused for bursts, fragmentation and estimate error.
DEFAULT_HEADROOM = Fraction(1, 10)


@dataclass(frozen=True)
class SearchStats:
    """What the search covered: points of the space, capacities computed, points pruned."""

    skus: int
    points: int  # (SKU, GPUs layout, dtypes, block) points, before memory fraction and seqs
    evaluated: int  # capacities computed
    refused: int  # points the engine refuses to start
    beyond_bound: int  # points costlier than the top candidates, not evaluated
    simulated: int  # candidates scored by simulation (throughput targets)
    unpriced: tuple[str, ...]  # SKUs left out: no price
    searched: dict[str, tuple[object, ...]] = field(default_factory=dict)  # values per knob


@dataclass(frozen=True)
class Recommendation:
    """The ranked candidates that meet the objective (best first), or the closest miss."""

    base: Deployment
    objective: Objective
    cost: Cost
    headroom: Fraction
    ranked: tuple[Ranked, ...]
    closest_miss: Candidate | None  # when nothing meets the objective
    # When the first quantises: the closest miss without quantisation, as cheap or cheaper.
    unquantised_miss: Candidate | None
    stats: SearchStats

    @property
    def chosen(self) -> Candidate | None:
        return self.ranked[0].candidate if self.ranked else None


def recommend(
    base: Deployment,
    objective: Objective,
    space: SearchSpace,
    cost: Cost | None = None,
    headroom: Fraction = DEFAULT_HEADROOM,
    top: int = DEFAULT_TOP,
) -> Recommendation:
    """The `top` best distinct deployments of `base.model` that meet `objective`, cheapest first.

    `base` carries the engine and every fixed setting; `headroom` is the share (0 ≤ h < 1) of
    each KV budget kept unused when checking the objective.
    """
    if not 0 <= headroom < 1:
        raise KvplanError(f"--headroom: {float(headroom):g} must be at least 0 and below 1")
    model = base.model
    beyond = beyond_limit_sentence(model, objective.context_tokens)
    if beyond is not None:
        hint, scaling, extended = "", model.rope_scaling, model.extended_context
        if scaling is not None and extended and objective.context_tokens <= extended:
            declared = f"{scaling.rope_type}:{scaling.factor:g}"
            hint = f"; declare the RoPE scaling: --rope-scaling {declared}"
        raise KvplanError(f"--context: {beyond} (engines refuse a longer max_model_len){hint}")
    cost = cost or GpuCount()
    points, unpriced, searched = points_of(base, objective, space, cost)
    groups = sorted(((_group(p, model, base), i) for i, p in enumerate(points)))
    points = [points[i] for _, i in groups]
    meeting: list[Candidate] = []
    miss: Candidate | None = None
    plain_miss: Candidate | None = None  # the closest miss without quantisation
    evaluated = refused = visited = simulated = 0
    refusal: KvplanError | None = None  # the engine's reason for the first point it refused
    while visited < len(points):
        level = groups[visited][0]
        while visited < len(points) and groups[visited][0] == level:
            found, count, runs, reason = _evaluate(points[visited], base, objective, headroom)
            refusal = refusal or reason
            visited += 1
            evaluated += count
            refused += count == 0
            simulated += runs
            for candidate in found:
                if candidate.score.meets:
                    meeting.append(candidate)
                else:
                    miss = closer(candidate, miss)
                    # Levels come cheapest first: meeting[0] costs what the first will.
                    if not candidate.quantised and (
                        not meeting or candidate.cost <= meeting[0].cost
                    ):
                        plain_miss = closer(candidate, plain_miss)
        if len({c.shape for c in meeting}) >= top:
            break
    if not meeting and miss is None:
        # Not even a miss to show: the engine refused every point, so its reason is the answer.
        context = f"{base.engine.name} refuses every point searched ({len(points):,}); the first: "
        if isinstance(refusal, SettingError):
            raise refusal.within(context)  # each reader still names the settings its way
        raise KvplanError(f"{context}{refusal or 'no point to search'}")
    ranked = rank_candidates(meeting, top, cost.name)
    stats = SearchStats(
        len(space.skus),
        len(points),
        evaluated,
        refused,
        len(points) - visited,
        simulated,
        unpriced,
        searched,
    )
    chosen = ranked[0].candidate if ranked else None
    if chosen is None or not chosen.quantised or plain_miss is None:
        plain_miss = None
    return Recommendation(
        base, objective, cost, headroom, ranked, None if ranked else miss, plain_miss, stats
    )


def _group(point: Point, model: ModelSpec, base: Deployment) -> tuple[float, int, int, int]:
    """The first keys candidates rank by, known before evaluating: cost, quantised parts,
    nodes, pipeline stages (`candidates._rank_key`)."""
    quantised = point.weight_dtype not in (None, model.weight_dtype)
    quantised += kv_dtype_info(point.kv_dtype).is_quantised
    nodes = nodes_spanned(point.tp * point.pp * point.dp, base.settings, point.sku)
    return (point.cost, quantised, nodes, point.pp)


def point_deployment(point: Point, base: Deployment, context_tokens: int) -> Deployment:
    """`base` at `point`: its layout, dtypes and block size, the scheduler's step pinned.

    Raises:
        KvplanError: the engine refuses the point (a layout or dtype it cannot run).
    """
    settings = replace(base.settings, tokens_per_block=point.tokens_per_block)
    deployment = base.replace(
        kv_dtype=point.kv_dtype,
        weight_dtype=point.weight_dtype,
        tp=point.tp,
        pp=point.pp,
        dp=point.dp,
        ep=point.ep,
        settings=settings,
        # Another weight dtype than the release's: the checkpoint's bytes no longer apply.
        exact_weights_bytes=base.exact_weights_bytes if point.weight_dtype is None else None,
        checkpoint=base.checkpoint if point.weight_dtype is None else None,
    )
    if settings.max_num_batched_tokens is None:
        # Pin the scheduler's step to the default this plan was sized with: the default
        # differs by GPU and version, and the launch command should not depend on either.
        step = deployment.engine.scheduler(deployment, point.sku, context_tokens)
        settings = replace(settings, max_num_batched_tokens=step.max_num_batched_tokens)
        deployment = deployment.replace(settings=settings)
    return deployment


def _evaluate(
    point: Point, base: Deployment, objective: Objective, headroom: Fraction
) -> tuple[list[Candidate], int, int, KvplanError | None]:
    """The candidates one point yields, the capacities computed (0: the engine refuses), the
    simulations run and the engine's reason when it refuses the point."""
    try:
        deployment = point_deployment(point, base, objective.context_tokens)
    except KvplanError as error:
        return [], 0, 0, error
    sku, profile, settings = point.sku, deployment.engine, deployment.settings
    # A fixed fraction is kept; a fixed KV budget makes the fraction irrelevant.
    fractions: tuple[float | None, ...] = (settings.utilization,)
    if settings.utilization is None and settings.kv_memory_bytes is None:
        fractions = profile.utilizations(deployment, sku)
    seqs = _max_num_seqs(deployment, sku, objective)
    computed = runs = 0

    def at(fraction: float | None, max_num_seqs: int | None) -> Candidate:
        nonlocal computed, runs
        computed += 1
        changed = replace(deployment.settings, utilization=fraction, max_num_seqs=max_num_seqs)
        # Engines that allocate a fixed pool (llama.cpp -c/-np) launch for the target only.
        launched = profile.sized_for(
            deployment.replace(settings=changed),
            max_num_seqs or objective.running_requests,
            objective.context_tokens,
        )
        capacity = Capacity(
            launched,
            sku,
            min(objective.running_requests, limits.BATCH.maximum),
            objective.context_tokens,
        )
        score = objective.score(capacity, headroom)
        runs += score.simulated
        return Candidate(capacity, point.cost, score, headroom)

    if not objective.kv_monotone:
        # No dominance: every fraction from the lowest up until one meets (the lowest that
        # meets is the one a ranking keeps), for every max_num_seqs.
        found = []
        for max_num_seqs in seqs:
            for fraction in fractions:
                found.append(at(fraction, max_num_seqs))
                if found[-1].score.meets:
                    break
        return found, computed, runs, None
    misses = []
    for max_num_seqs in seqs:
        highest = at(fractions[-1], max_num_seqs)
        if not highest.score.meets:
            misses.append(highest)
            if not highest.score.simulated:
                break  # arithmetic ruled the point out: no max_num_seqs changes that
            continue
        for fraction in fractions[:-1]:
            lower = at(fraction, max_num_seqs)
            if lower.score.meets:
                return [lower], computed, runs, None
        return [highest], computed, runs, None
    return misses, computed, runs, None


def _max_num_seqs(
    deployment: Deployment, sku: SkuSpec, objective: Objective
) -> tuple[int | None, ...]:
    """max_num_seqs values to try: the fixed one, else the objective's choices for the
    requests each replica must admit and the engine's default."""
    if deployment.settings.max_num_seqs is not None:
        return (deployment.settings.max_num_seqs,)
    need = -(-objective.running_requests // deployment.dp)
    default = deployment.engine.scheduler(deployment, sku).max_num_seqs
    return objective.max_num_seqs_choices(need, default)
