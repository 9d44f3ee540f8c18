"""The question a log raises: what serves N requests of L tokens (`--target 32k×16`).

The answer is kvplan's recommend search (kvplan.api.recommend) started from the logged
deployment: first on the logged GPU (the smallest change is a setting, a KV dtype or more
of the same GPUs), then on any GPU of the catalogue. Its launch line is the engine's own
rendering (the engine model's `launch_command`).
"""

from __future__ import annotations

import re
from dataclasses import replace

from kvplan.api import capacity, recommend
from kvplan.api.results_recommend import RecommendCandidate
from kvplan.catalog import Catalog
from kvplan.engine.base import model_reference
from kvplan.engine.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.explain.rebuild import Rebuilt
from kvplan.explain.result import TargetAnswer
from kvplan.limits import BATCH
from kvplan.units import parse_tokens

_TARGET = re.compile(r"\s*([0-9][0-9.,]*[kKmM]?)\s*[×xX*]\s*([0-9]{1,7})\s*", re.ASCII)


def parse_target(text: str) -> tuple[int, int]:
    """(tokens per request, requests) of '32k×16' or '32kx16'.

    Raises:
        KvplanError: not LENGTH×COUNT.
    """
    match = _TARGET.fullmatch(text) if len(text) <= 40 else None
    if match is None:
        raise KvplanError(
            f"--target: {text[:40]!r} is not LENGTH×REQUESTS; write e.g. 32k×16 or 32kx16"
        )
    requests = int(match.group(2))
    BATCH.check(requests, "--target")
    if requests < 1:
        raise KvplanError("--target: at least 1 request")
    return parse_tokens(match.group(1), "--target"), requests


def _change(built: Rebuilt, chosen: RecommendCandidate, holds: int | None, wanted: int) -> str:
    """What differs from the logged deployment, in words."""
    planned = built.deployment
    changes = []
    if chosen.sku != built.sku.name:
        changes.append(f"GPU {built.sku.name} → {chosen.sku}")
    for label, old, new in (
        ("GPUs", planned.gpus, chosen.gpus),
        ("tp", planned.tp, chosen.tp),
        ("pp", planned.pp, chosen.pp),
        ("KV", planned.kv_dtype, chosen.kv_dtype),
    ):
        if old != new:
            changes.append(f"{label} {old} → {new}")
    if planned.weight_dtype not in (None, chosen.weight_dtype):
        changes.append(f"weights {planned.weight_dtype} → {chosen.weight_dtype}")
    if changes:
        return ", ".join(changes)
    if holds is not None and holds >= wanted:
        return "the logged settings already serve it"
    return "the same GPUs and split, with the settings of the launch line"


def _as_logged(command: str | None, built: Rebuilt, logged_model: str | None) -> str | None:
    """The launch line naming the model as the log did (the engine renders the catalogue's
    reference for the architecture, which may stand in for the logged checkpoint)."""
    if command is None or not logged_model:
        return command
    return command.replace(model_reference(built.deployment.model), logged_model, 1)


# Settings that fix the request length or count the log was launched for: the answer sizes
# them afresh (llama.cpp's -c and -np, a fixed KV budget or token cap, the running limit).
SIZED_BY_TARGET = (
    "context_size_tokens", "parallel", "kv_memory_bytes", "max_kv_tokens", "max_num_seqs",
)  # fmt: skip


def _free_of_launch_sizes(planned: Deployment) -> Deployment:
    settings = replace(planned.settings, **dict.fromkeys(SIZED_BY_TARGET))
    return replace(planned, settings=settings)


def answer(
    built: Rebuilt, wanted: tuple[int, int], catalog: Catalog, logged_model: str | None = None
) -> TargetAnswer:
    """The smallest change of the logged deployment that serves `wanted` (tokens, requests)."""
    tokens, requests = wanted
    planned = _free_of_launch_sizes(built.deployment)
    try:
        holds = capacity(built.deployment, built.sku, context=tokens).max_concurrency
    except KvplanError:
        holds = None
    found = None
    for skus in ([built.sku], None):
        found = recommend(planned, context=tokens, concurrency=requests, skus=skus, catalog=catalog)
        if found.meets:
            break
    chosen = found.ranked[0] if found and found.ranked else found.closest_miss if found else None
    if chosen is None:
        return TargetAnswer(
            context_tokens=tokens, concurrency=requests, holds_now=holds, meets=False,
            change="no deployment kvplan searched holds one request of this length",
            sku=None, gpus=None, tp=None, pp=None, kv_dtype=None, weight_dtype=None,
            max_concurrency=None, launch_command=None,
        )  # fmt: skip
    return TargetAnswer(
        context_tokens=tokens,
        concurrency=requests,
        holds_now=holds,
        meets=found.meets,
        change=("" if found.meets else "closest miss: ") + _change(built, chosen, holds, requests),
        sku=chosen.sku,
        gpus=chosen.gpus,
        tp=chosen.tp,
        pp=chosen.pp,
        kv_dtype=chosen.kv_dtype,
        weight_dtype=chosen.weight_dtype,
        max_concurrency=chosen.max_concurrency,
        launch_command=_as_logged(chosen.launch_command, built, logged_model),
    )
