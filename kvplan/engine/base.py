"""The engine model's shared vocabulary: the scheduler limits and the profile.

Every command asks one `EngineProfile` about a deployment, and nothing else holds an engine
rule. A profile implements the two protocols of `profile` — accounting (`layout()`, `budget()`,
`pool()`: pages from `pages`, budgets from `budget`, pools from `pool`) and startup
(`log_lines()`, `launch_command()`) — and the checks and notes around them.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Generic

from kvplan.engine.choices import SearchChoices, default_search_choices
from kvplan.engine.nodes import gpus_per_node
from kvplan.engine.pool import UNLIMITED_REQUESTS, KvPool, Layout
from kvplan.engine.resolved import Scheduler, resolve
from kvplan.engine.settings import BY_NAME
from kvplan.errors import KvplanError, SettingError
from kvplan.specs import KV_DTYPES, kv_dtype_info

if TYPE_CHECKING:
    from kvplan.engine.budget import Budget
    from kvplan.engine.deployment import Deployment
    from kvplan.kvmath import LayerCache
    from kvplan.specs import ModelSpec, SkuSpec


def model_reference(model: ModelSpec) -> str:
    """How a launch command names the model: its Hugging Face repo id (the first alias with a
    slash), a GGUF file's path, else the catalogue name."""
    return next((alias for alias in model.aliases if "/" in alias), model.name)


class EngineProfile(ABC, Generic[Layout]):
    """A serving engine: `profile.Accounting` and `profile.Startup` over its own `Layout`,
    with the checks, defaults and notes every command shows beside the numbers."""

    name: str
    summary: str
    default_utilization_text: str = "1.0"  # for --help and docs
    default_kv_dtype: str = "bf16"  # --kv-dtype when not given (the model's 16-bit type)
    # KV dtypes (canonical names) the engine stores, each module citing where its list comes
    # from; the analytic profiles (exact, hf, naive) take every dtype kvplan knows.
    kv_dtypes: tuple[str, ...] = tuple(KV_DTYPES)
    kv_dtype_setting: str = ""  # how the engine is told (vLLM --kv-cache-dtype), for messages
    separate_v_dtype: bool = False  # V may be stored in another type than K (llama.cpp -ctv)
    token_cap_setting: str = ""  # the engine's cap on the pool in tokens; "": it has none

    def check(self, deployment: Deployment) -> None:
        """Refuse a deployment the engine refuses to start (raise KvplanError)."""
        reason = self.tp_refusal(deployment.model, deployment.tp)
        if reason:
            raise KvplanError(f"--tp: {reason}")
        if deployment.settings.max_kv_tokens is not None and not self.token_cap_setting:
            raise SettingError(
                "max_kv_tokens",
                f"{self.name} has no cap on its KV pool in tokens "
                "(SGLang --max-total-tokens and TensorRT-LLM max_tokens do); drop it",
            )

    def tp_refusal(self, model: ModelSpec, tp: int) -> str | None:
        """Why the engine refuses tensor-parallel degree `tp` for `model`, or None.

        Splitting attention over tp needs the query heads to divide by it (every engine that
        shards heads refuses otherwise).
        """
        heads = model.attention.num_heads
        if heads % tp:
            return f"{self.name} cannot split {model.name}'s {heads} attention heads over tp {tp}"
        return None

    def scheduler(
        self, deployment: Deployment, sku: SkuSpec | None, max_model_len: int | None = None
    ) -> Scheduler:
        """The scheduler limits on `sku` (None: no SKU known), user settings applied."""
        settings = deployment.settings
        return Scheduler(
            settings.max_num_batched_tokens or 8192, settings.max_num_seqs or UNLIMITED_REQUESTS
        )

    def stored_caches(
        self, deployment: Deployment, full_reservation: bool = False
    ) -> tuple[LayerCache, ...]:
        """One cache per layer on one TP rank as this engine stores tokens (no paging)."""
        return deployment.exact_caches(full_reservation)

    @abstractmethod
    def layout(self, deployment: Deployment, sku: SkuSpec | None) -> Layout:
        """How one GPU's KV is cut into blocks, per pipeline stage."""

    @abstractmethod
    def budget(
        self, deployment: Deployment, sku: SkuSpec, max_model_len: int | None = None
    ) -> Budget:
        """The KV budget on one GPU of `sku` for requests up to `max_model_len` tokens."""

    def pool(self, layout: Layout, budget: Budget) -> KvPool[Layout]:
        """The blocks `budget` buys with `layout`."""
        return KvPool(layout, layout.blocks_for(budget.kv_bytes))

    def capacity_tokens(self, pool: KvPool[Layout], max_model_len: int) -> int:
        """Tokens of KV the pool holds, as the engine reports it.

        Default (byte pools): the budget over one token of every layer, no window.
        """
        per_token = pool.layout.kv_bytes_per_token
        bytes_per_block = min(stage.bytes_per_block for stage in pool.layout.stages)
        return pool.num_blocks * bytes_per_block // per_token if per_token else 0

    def log_lines(
        self, budget: Budget, pool: KvPool[Layout], max_model_len: int, sku: SkuSpec | None = None
    ) -> list[str]:
        """The startup lines the engine prints for this budget and pool on `sku` (none by
        default)."""
        return []

    def startup_figures(
        self, budget: Budget, pool: KvPool, max_model_len: int, sku: SkuSpec | None = None
    ) -> dict[str, Any]:
        """Every number `log_lines` prints, exact and keyed by its meaning (the JSON's
        `startup` object): blocks, tokens, bytes, the float concurrency (none by default)."""
        return {}

    def search_choices(self, model: ModelSpec, sku: SkuSpec) -> SearchChoices:
        """KV dtypes, weight dtypes and block sizes a search may set for `model` on `sku`."""
        choices = default_search_choices(model, sku, self.default_kv_dtype)
        kv_dtypes = tuple(k for k in choices.kv_dtypes if self.accepts_kv_dtype(k))
        return dataclasses.replace(choices, kv_dtypes=kv_dtypes)

    def utilizations(self, deployment: Deployment, sku: SkuSpec) -> tuple[float | None, ...]:
        """Memory fractions a search may try, ascending (None: the engine's default only)."""
        return (None,)

    def accepted_kv_dtypes(self, deployment: Deployment | None = None) -> tuple[str, ...]:
        """KV dtypes the engine stores, for the deployment's version (None: in any version
        kvplan follows)."""
        return self.kv_dtypes

    def accepts_kv_dtype(self, kv_dtype: str, deployment: Deployment | None = None) -> bool:
        """Whether the engine stores KV in `kv_dtype` (a canonical name)."""
        return kv_dtype in self.accepted_kv_dtypes(deployment)

    def check_kv_dtypes(self, deployment: Deployment) -> None:
        """Refuse a K or V dtype the engine does not store (raise KvplanError)."""
        self.check_kv_dtype(deployment.kv_dtype, deployment, "--kv-dtype")
        v_dtype = deployment.v_dtype
        if v_dtype == resolve(deployment).k_dtype.name:
            return
        if not self.separate_v_dtype:
            setting = f" ({self.kv_dtype_setting})" if self.kv_dtype_setting else ""
            raise SettingError(
                "v_dtype",
                f"{self.name} stores K and V in one type{setting}, so {v_dtype} "
                f"cannot differ from --kv-dtype {deployment.kv_dtype}",
            )
        self.check_kv_dtype(v_dtype, deployment, "v_dtype")

    def check_kv_dtype(self, kv_dtype: str, deployment: Deployment, option: str) -> None:
        """Refuse a KV dtype the engine does not store, naming `option` (a flag, or a declared
        setting) and what it accepts."""
        accepted = self.accepted_kv_dtypes(deployment)
        name = kv_dtype_info(kv_dtype).name
        if name in accepted:
            return
        engine = f"{self.name}{self.version_label(deployment)}"
        setting = f" ({self.kv_dtype_setting})" if self.kv_dtype_setting else ""
        problem = f"{engine}{setting} does not store KV as {name}; accepted: {', '.join(accepted)}"
        if option in BY_NAME:
            raise SettingError(option, problem)
        raise KvplanError(f"{option}: {problem}")

    def version_label(self, deployment: Deployment) -> str:
        """' <version>' where the engine's accepted values depend on it, else ''."""
        return ""

    def decode_kv_reads(self, deployment: Deployment) -> int:
        """How many times a decode step's attention reads each cached KV byte: once (the query
        heads of a GQA group share one read of their KV head)."""
        return 1

    def sized_for(self, deployment: Deployment, requests: int, context_tokens: int) -> Deployment:
        """The deployment a launch for `requests` requests of `context_tokens` starts: as
        planned, for engines that carve their pool from free memory."""
        return deployment

    def launch_command(
        self, deployment: Deployment, sku: SkuSpec | None, context_tokens: int
    ) -> str | None:
        """The command that starts this engine as planned (flags that differ from defaults or
        matter for KV), or None when the profile is not a real engine."""
        return None

    def page_note(self, deployment: Deployment, sku: SkuSpec | None) -> str | None:
        """Which page size the engine was given on `sku` and why, where it depends on the GPU
        (and no --block-size set it), or None."""
        return None

    def caveat(self, deployment: Deployment) -> str | None:
        """Why the figures may not be this engine's own for `deployment` (the engine runs it
        with a part kvplan does not model), or None; also one of `notes()`."""
        return None

    def notes(self, deployment: Deployment, sku: SkuSpec | None) -> list[str]:
        """Assumptions this profile made for the plan, said where the numbers are shown."""
        notes = []
        node = gpus_per_node(deployment.settings, sku) if sku is not None else 0
        if sku is not None and deployment.gpus_per_replica > node:
            nodes = deployment.nodes_per_replica(node)
            # TP within a node keeps its all-reduces on the node's links; only the pipeline
            # hand-offs between stages cross the network then.
            crossing = "TP" if deployment.tp > node else "pipeline"
            notes.append(
                f"tp {deployment.tp} × pp {deployment.pp} spans {nodes} nodes of "
                f"{node} {sku.name}: {crossing} traffic crosses the network"
            )
        return notes
