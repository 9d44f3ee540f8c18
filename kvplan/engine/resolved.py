"""One deployment × SKU × engine, resolved once: what the engine rules read on every call.

An engine rule used to re-derive its inputs from strings on each call: the release from the
version text, the K and V dtypes from their names, the scheduler defaults from the SKU.
`resolve(deployment, sku)` does that once and keeps the frozen record with the deployment,
so the tenth question about the same plan reads fields instead of parsing again.

The record is kept in the (frozen) deployment's own `__dict__`, one per SKU object: a
changed deployment (`Deployment.replace`) is a new object and resolves afresh, and a record
never outlives its deployment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from kvplan.specs import DtypeInfo

if TYPE_CHECKING:
    from kvplan.engine.deployment import Deployment
    from kvplan.specs import SkuSpec

_MEMO = "_resolved"  # the key of the records in a deployment's __dict__


@dataclass(frozen=True)
class Scheduler:
    """The scheduler limits an engine runs with (defaults resolved for one SKU)."""

    max_num_batched_tokens: int  # tokens one step may process (prefill chunks + decodes)
    max_num_seqs: int  # requests running at once


@dataclass(frozen=True)
class Resolved:
    """A deployment on one SKU (None: no SKU known) under its engine, parsed once."""

    deployment: Deployment
    sku: SkuSpec | None
    # The engine's release as its rules read it (VllmVersion, (major, minor, patch), a
    # llama.cpp build number), from the version setting or the engine's default; None for
    # the analytic profiles, which have no releases.
    release: Any
    k_dtype: DtypeInfo  # the K cache's element type (Deployment.kv_dtype)
    v_dtype: DtypeInfo  # the V cache's: the v_dtype setting, else the K type
    tokens_per_block: int | None  # as set; None: the engine's page for the layer kind and GPU
    utilization: float | None  # fraction of device memory as set; None: the engine's default
    _schedulers: dict[int | None, Scheduler] = field(default_factory=dict, compare=False)

    def scheduler(self, max_model_len: int | None = None) -> Scheduler:
        """The engine's scheduler limits on this SKU (defaults for the release and GPU, the
        settings applied), resolved once per model length (vLLM V0 batches whole prompts)."""
        key = max_model_len if self._reads_length else None
        found = self._schedulers.get(key)
        if found is None:
            found = self.deployment.engine.scheduler(self.deployment, self.sku, max_model_len)
            self._schedulers[key] = found
        return found

    @cached_property
    def _reads_length(self) -> bool:
        """Whether the scheduler limits depend on the model length (asked once a record)."""
        reads_length = getattr(self.deployment.engine, "scheduler_reads_length", None)
        return reads_length is None or bool(reads_length(self.deployment))


def resolve(deployment: Deployment, sku: SkuSpec | None = None) -> Resolved:
    """The record of `deployment` on `sku`, built on first use and kept with the deployment.

    Raises:
        KvplanError: a version setting the engine does not follow (its release parse).
    """
    memo: dict[int | None, Resolved] | None = deployment.__dict__.get(_MEMO)
    if memo is None:  # (asked ~10 times a report row: no empty dict made for each ask)
        memo = deployment.__dict__.setdefault(_MEMO, {})
    key = None if sku is None else id(sku)  # the record holds `sku`, so its id stays its own
    found = memo.get(key)
    if found is not None and found.sku is sku:  # (a copied deployment carries foreign ids)
        return found
    if sku is not None:  # what does not depend on the SKU is read once per deployment
        base = resolve(deployment)
        found = Resolved(
            deployment,
            sku,
            base.release,
            base.k_dtype,
            base.v_dtype,
            base.tokens_per_block,
            base.utilization,
        )
    else:
        settings = deployment.settings
        parse = getattr(deployment.engine, "parsed_release", None)
        found = Resolved(
            deployment,
            None,
            parse(deployment) if parse is not None else None,
            deployment.k_dtype_info,
            deployment.v_dtype_info,
            settings.tokens_per_block,
            settings.utilization,
        )
    memo[key] = found
    return found
