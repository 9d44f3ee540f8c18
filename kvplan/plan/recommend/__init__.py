"""`recommend`: the cheapest deployment that meets a target, with the settings that get it.

The search walks what a user controls — the SKU, GPUs per instance (tp, pp; dp with expert
parallelism for MoE models), KV and weight dtypes, block size, max_num_seqs and the memory
fraction — and asks the one engine model (`Capacity`) about every point it visits; it has no
formula of its own. What counts as "meets" is an `Objective` (`objective.py`; a throughput
target, `GoodputTarget`, scores points by simulation); what counts as "cheap", a `Cost`.
`space.py` lists the points, `search.py` visits them (and says how it
prunes), `candidates.py` ranks what it found.
"""

from kvplan.plan.recommend.candidates import Candidate, Loss, Ranked, losses
from kvplan.plan.recommend.goodput import GoodputTarget, Simulated, Simulator
from kvplan.plan.recommend.objective import (
    ConcurrencyTarget,
    Cost,
    GpuCount,
    Objective,
    PricePerHour,
    Score,
    held_within_headroom,
)
from kvplan.plan.recommend.search import (
    DEFAULT_HEADROOM,
    DEFAULT_TOP,
    Recommendation,
    SearchStats,
    recommend,
)
from kvplan.plan.recommend.space import DEFAULT_MAX_GPUS, SearchSpace

__all__ = [
    "DEFAULT_HEADROOM",
    "DEFAULT_MAX_GPUS",
    "DEFAULT_TOP",
    "Candidate",
    "ConcurrencyTarget",
    "Cost",
    "GoodputTarget",
    "GpuCount",
    "Loss",
    "Objective",
    "PricePerHour",
    "Ranked",
    "Recommendation",
    "Score",
    "SearchSpace",
    "SearchStats",
    "Simulated",
    "Simulator",
    "held_within_headroom",
    "losses",
    "recommend",
]
