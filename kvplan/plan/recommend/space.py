"""The space a recommendation searches: SKUs, GPU layouts, dtypes and block sizes.

Memory fraction and max_num_seqs are chosen per point when it is evaluated (they depend on the
deployment), so a point here is (SKU, tp, pp, dp, ep, weight dtype, KV dtype, block size).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import product
from typing import Any

from kvplan.engine.deployment import Deployment
from kvplan.engine.nodes import gpus_per_node
from kvplan.errors import KvplanError
from kvplan.plan.recommend.objective import Cost, Objective
from kvplan.specs import ModelSpec, SkuSpec, kv_dtype_info, weight_dtype_info

# Largest deployment searched unless --max-gpus says otherwise: eight 8-GPU nodes, enough for
# the largest catalogue models (Llama-3.1-405B, Kimi-K2) on 80 GB GPUs at long contexts.
DEFAULT_MAX_GPUS = 64


@dataclass(frozen=True)
class SearchSpace:
    """Where to search. None searches a dimension; a value fixes it. The memory fraction,
    block size and max_num_seqs are fixed by setting them in the base deployment."""

    skus: tuple[SkuSpec, ...]
    max_gpus: int = DEFAULT_MAX_GPUS
    kv_dtypes: tuple[str, ...] | None = None  # allowed KV dtypes; None: what the engine offers
    quantization: bool = True  # offer weights the engine quantises at load
    weight_dtypes: tuple[str, ...] | None = None  # allowed weight dtypes; None: the engine's
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    ep: bool | None = None

    def __post_init__(self) -> None:
        if self.max_gpus < 1:
            raise KvplanError(f"--max-gpus: {self.max_gpus} must be at least 1")
        if not self.skus:
            raise KvplanError("--sku: no SKU to search")
        if self.weight_dtypes and not self.quantization:
            raise KvplanError(
                "--weight-dtype: --no-quantization searches only the released weights; give one"
            )


def named_space(
    skus: tuple[SkuSpec, ...],
    kv_dtypes: Iterable[str] | None,
    weight_dtypes: Iterable[str] | None,
    **fixed: Any,
) -> SearchSpace:
    """A space from dtype names as people type them (fp8 → fp8_e4m3), each once, in order;
    `fixed` are SearchSpace's other fields."""
    return SearchSpace(
        skus=skus,
        kv_dtypes=tuple(dict.fromkeys(kv_dtype_info(k).name for k in kv_dtypes))
        if kv_dtypes
        else None,
        weight_dtypes=tuple(dict.fromkeys(weight_dtype_info(w).name for w in weight_dtypes))
        if weight_dtypes
        else None,
        **fixed,
    )


@dataclass(frozen=True)
class Point:
    """One point of the space and its cost; None dtype/block: the release / engine default."""

    sku: SkuSpec
    cost: float
    tp: int
    pp: int
    dp: int
    ep: bool
    weight_dtype: str | None
    kv_dtype: str
    tokens_per_block: int | None


def points_of(
    base: Deployment, objective: Objective, space: SearchSpace, cost: Cost
) -> tuple[list[Point], tuple[str, ...], dict[str, tuple[object, ...]]]:
    """Every point of the space (memory fraction and max_num_seqs are chosen per point)."""
    model, profile, settings = base.model, base.engine, base.settings
    for kv_dtype in space.kv_dtypes or ():
        # A dtype the engine does not store is bad input, not a point the engine refuses.
        profile.check_kv_dtype(kv_dtype, base, "--kv-dtype")
    points, unpriced = [], []
    seen: dict[str, set[object]] = {k: set() for k in ("tp", "pp", "dp", "kv", "weights", "block")}
    for sku in space.skus:
        choices = profile.search_choices(model, sku)
        kv_dtypes = space.kv_dtypes or choices.kv_dtypes
        weights = space.weight_dtypes or (choices.weight_dtypes if space.quantization else (None,))
        blocks: tuple[int | None, ...] = (settings.tokens_per_block,)
        if settings.tokens_per_block is None:
            blocks = choices.tokens_per_block
            if objective.prunes_larger_blocks:
                blocks = _undominated_blocks(blocks)
        layouts = _layouts(model, sku, space, objective, base)
        priced = False
        for tp, pp, dp, ep in layouts:
            price = cost.of(sku, tp * pp * dp)
            if price is None:
                continue
            priced = True
            for weight, kv, block in product(weights, kv_dtypes, blocks):
                points.append(Point(sku, price, tp, pp, dp, ep, weight, kv, block))
                for key, value in zip(seen, (tp, pp, dp, kv, weight, block), strict=True):
                    seen[key].add(value)
        if layouts and not priced:
            unpriced.append(sku.name)
    searched = {k: tuple(sorted(v, key=_order)) for k, v in seen.items()}
    return points, tuple(unpriced), searched


def _order(value: object) -> tuple[int, float, str]:
    """None first, then numbers by value, then text."""
    if value is None:
        return (0, 0.0, "")
    if isinstance(value, (int, float)):
        return (1, float(value), "")
    return (2, 0.0, str(value))


def _undominated_blocks(blocks: tuple[int | None, ...]) -> tuple[int | None, ...]:
    """Drop a block size that is a multiple of another one offered (it never holds more)."""
    sizes = [b for b in blocks if b is not None]
    return tuple(b for b in blocks if b is None or not any(b != s and b % s == 0 for s in sizes))


def _layouts(
    model: ModelSpec, sku: SkuSpec, space: SearchSpace, objective: Objective, base: Deployment
) -> list[tuple[int, int, int, bool]]:
    """(tp, pp, dp, ep) to try on `sku`: tp the engine accepts within a node, GPU counts of
    `_instance_size` up to `space.max_gpus`, pp or dp (MoE models: with expert parallelism;
    dense models: for objectives that count `replicas`)."""
    node = gpus_per_node(base.settings, sku)
    tps = (
        [space.tp]
        if space.tp
        else [t for t in range(1, node + 1) if base.engine.tp_refusal(model, t) is None]
    )
    fixed = space.tp is not None or space.pp is not None or space.dp is not None
    layouts = []
    for tp in tps:
        for rest in range(1, space.max_gpus // tp + 1):
            if not fixed and not _instance_size(tp * rest, node):
                continue
            layouts += [(tp, pp, dp, ep) for pp, dp, ep in _splits(rest, model, space, objective)]
    return layouts


def _instance_size(gpus: int, node: int) -> bool:
    """GPU counts an instance may have: 1, 2, 4, … within a node (the shapes clouds rent and
    tensor parallelism splits evenly), then whole nodes."""
    if gpus > node:
        return gpus % node == 0
    return gpus & (gpus - 1) == 0 or gpus == node


def _splits(
    rest: int, model: ModelSpec, space: SearchSpace, objective: Objective
) -> list[tuple[int, int, bool]]:
    """Ways to spread `rest` GPUs per tp rank over pipeline stages and replicas."""
    if space.dp is not None:
        if rest % space.dp or (space.pp is not None and rest // space.dp != space.pp):
            return []
        return [(rest // space.dp, space.dp, bool(space.ep))]
    splits = []
    if space.pp in (None, rest) and rest <= model.num_layers:
        splits.append((rest, 1, bool(space.ep)))
    if rest > 1 and space.pp in (None, 1):
        if model.moe is not None:
            splits.append((1, rest, True))
            if not objective.kv_monotone and not space.ep:
                splits.append((1, rest, False))
        elif objective.replicas:
            splits.append((1, rest, False))  # replicas of a dense model behind a router
    return splits
