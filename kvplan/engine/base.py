"""The engine model's shared vocabulary: settings, KV layouts and pools, budgets, the profile.

Every command asks one `EngineProfile` about a deployment, and nothing else holds an engine
rule:

- `layout()`: how the engine cuts one GPU's KV cache into blocks, and how many blocks one
  request of L tokens is charged (no memory involved);
- `budget()`: the bytes the engine gives the KV cache on one GPU of a SKU, term by term;
- `pool()`: the blocks that budget buys, hence the requests and tokens that fit.

A block is the engine's unit of allocation: 16 tokens of every layer of a group in vLLM, one
token in a token pool, one *byte* for the analytic profiles (exact, hf, naive), whose pools
are fungible bytes. One request of L tokens is charged `blocks_per_request(L)` blocks, so it
costs `request_bytes(L) = blocks_per_request(L) · bytes_per_block` on one GPU, and a pool of N
blocks holds `N // blocks_per_request(L)` such requests. `size`, `report`, `check`, `claim`,
`recommend` and `verify` all read those three numbers from here.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kvplan.engine.choices import SearchChoices, default_search_choices
from kvplan.errors import KvplanError
from kvplan.specs import KV_DTYPES, kv_dtype_info

if TYPE_CHECKING:
    from kvplan.engine.batch import Batch
    from kvplan.engine.deployment import Deployment
    from kvplan.kvmath import LayerCache
    from kvplan.specs import ModelSpec, SkuSpec

# A request that is charged no block (a model whose every layer reuses another's KV) is
# limited by the scheduler, not by memory; this stands for "no memory limit" in counts.
UNLIMITED_REQUESTS = 2**31 - 1


# Settings counted in whole units, and the option that sets each.
_COUNT_OPTIONS = {
    "tokens_per_block": "block-size",
    "max_num_batched_tokens": "max-num-batched-tokens",
    "max_num_seqs": "max-num-seqs",
    "max_kv_tokens": "max-kv-tokens",
    "context_size_tokens": "ctx-size",
    "parallel": "parallel",
    "ubatch_tokens": "ubatch-size",
}


@dataclass(frozen=True)
class EngineSettings:
    """What a user sets about the engine; None means the engine's (and version's) default.

    Units: tokens for `tokens_per_block` and `max_num_batched_tokens`, bytes for the memory
    overrides, a fraction in (0, 1] for `utilization` (vLLM gpu_memory_utilization, SGLang
    mem_fraction_static).
    """

    version: str | None = None
    tokens_per_block: int | None = None
    hybrid_allocator: bool | None = None  # False: windowed layers reserve full length
    draft_layers: int = 0  # speculative-decoding draft layers sharing the cache (EAGLE: 1)
    utilization: float | None = None
    kv_memory_bytes: int | None = None  # a fixed KV budget per GPU (vLLM --kv-cache-memory)
    activation_bytes: int | None = None
    non_torch_bytes: int | None = None
    cudagraph_bytes: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    max_kv_tokens: int | None = None  # cap on the pool (SGLang --max-total-tokens, TRT max_tokens)
    # llama.cpp / ollama: what llama-server allocates (None: the build's default, or planned
    # from the question asked: one slot per request of --context tokens).
    context_size_tokens: int | None = None  # -c, cells over all slots
    parallel: int | None = None  # -np, slots (sequences)
    v_dtype: str | None = None  # -ctv when it differs from the K type (--kv-dtype)
    flash_attention: bool | None = None  # -fa
    kv_unified: bool | None = None  # --kv-unified: one stream for every slot
    swa_full: bool = False  # --swa-full: sliding layers keep n_ctx cells
    gpu_layers: int | None = None  # -ngl: layers offloaded to the GPU(s); the rest on the CPU
    ubatch_tokens: int | None = None  # -ub, tokens per physical batch

    def __post_init__(self) -> None:
        if self.utilization is not None and not 0 < self.utilization <= 1:
            raise KvplanError(
                f"--utilization: {self.utilization} must be in (0, 1]; a fraction, 0.9 = 90 %"
            )
        for name in ("kv_memory_bytes", "activation_bytes", "non_torch_bytes", "cudagraph_bytes"):
            value = getattr(self, name)
            if value is not None and value < 0:
                option = name.removesuffix("_bytes").replace("_", "-")
                raise KvplanError(f"--{option}: {value} must not be negative")
        for name, option in _COUNT_OPTIONS.items():
            value = getattr(self, name)
            if value is not None and value < 1:
                raise KvplanError(f"--{option}: {value} must be at least 1")
        if self.gpu_layers is not None and self.gpu_layers < 0:
            raise KvplanError(f"--gpu-layers: {self.gpu_layers} must not be negative")
        if self.draft_layers < 0:
            raise KvplanError(f"--draft-layers: {self.draft_layers} must not be negative")


@dataclass(frozen=True)
class Scheduler:
    """The scheduler limits an engine runs with (defaults resolved for one SKU)."""

    max_num_batched_tokens: int  # tokens one step may process (prefill chunks + decodes)
    max_num_seqs: int  # requests running at once


class RequestCharge(Protocol):
    """One KV cache group: the blocks one request of `tokens` tokens is charged."""

    @property
    def kind(self) -> str: ...

    def blocks_per_request(self, tokens: int) -> int: ...


@dataclass(frozen=True)
class StageLayout:
    """One GPU of one pipeline stage: its cache groups and the bytes of one block.

    All groups draw block ids from one pool; a block costs `bytes_per_block` on this GPU
    (vLLM: one page in each layer that shares the block id).
    """

    bytes_per_block: int
    groups: tuple[RequestCharge, ...]

    def blocks_per_request(self, tokens: int) -> int:
        """Blocks one request growing to `tokens` tokens is charged, over every group."""
        blocks = 0
        for group in self.groups:  # a plain loop: searches call this a few million times
            blocks += group.blocks_per_request(tokens)
        return blocks

    def request_bytes(self, tokens: int) -> int:
        """Bytes one request growing to `tokens` tokens is charged on this GPU."""
        return self.blocks_per_request(tokens) * self.bytes_per_block


@dataclass(frozen=True)
class KvLayout:
    """Every pipeline stage's layout (one GPU each); rules every rank applies alike."""

    stages: tuple[StageLayout, ...]
    tokens_per_block: int  # tokens per block shown to users (1: token- or byte-granular)
    kv_bytes_per_token: int  # one token in every layer that keeps tokens, binding GPU

    def request_bytes(self, tokens: int) -> int:
        """Bytes one request of `tokens` tokens is charged on the binding (largest) GPU."""
        return max(stage.request_bytes(tokens) for stage in self.stages)

    def request_bytes_all_stages(self, tokens: int) -> int:
        """Bytes one request of `tokens` tokens is charged, summed over one GPU per stage."""
        return sum(stage.request_bytes(tokens) for stage in self.stages)

    def blocks_for(self, kv_bytes: int) -> int:
        """Blocks every rank gets from `kv_bytes` per GPU: ranks agree on the minimum."""
        if kv_bytes <= 0:
            return 0
        return min(kv_bytes // stage.bytes_per_block for stage in self.stages)


@dataclass(frozen=True)
class KvPool:
    """A layout with the blocks its budget bought (the same count on every rank)."""

    layout: KvLayout
    num_blocks: int

    @property
    def block_capacity_tokens(self) -> int:
        """Tokens the blocks hold: blocks × tokens per block (what paged pools report)."""
        return self.num_blocks * self.layout.tokens_per_block

    def requests_at(self, tokens: int) -> int:
        """Whole requests of `tokens` tokens that fit at once on every rank."""
        fits = UNLIMITED_REQUESTS
        for stage in self.layout.stages:
            blocks = stage.blocks_per_request(tokens)
            if blocks:
                fits = min(fits, self.num_blocks // blocks)
        return fits

    def holds(self, batch: Batch) -> bool:
        """Whether every sequence of `batch` is charged its blocks at once, on every rank."""
        return all(
            sum(count * stage.blocks_per_request(tokens) for tokens, count in batch)
            <= self.num_blocks
            for stage in self.layout.stages
        )

    def concurrency_at(self, tokens: int) -> float:
        """Requests of `tokens` tokens that fit, as a fraction (what engines print)."""
        per_request = max(stage.blocks_per_request(tokens) for stage in self.layout.stages)
        return math.inf if per_request == 0 else self.num_blocks / per_request


@dataclass(frozen=True)
class Budget:
    """One GPU's KV budget and the terms it is made of, in bytes.

    `kv_bytes = requested − weights − activation − non_torch − cudagraph` unless `fixed` (a
    user-given KV budget), where `requested = ⌊total · utilization⌋`. An engine that takes a
    fraction of the memory *free* at some point (SGLang: before weights load; TensorRT-LLM:
    after the engine loads) sets `fraction_of_bytes` to that free memory: then
    `requested = ⌊fraction_of_bytes · utilization⌋ + (total − fraction_of_bytes)`.
    `kv_bytes` may be negative: the plan does not fit. `uncertainty_bytes` is the band the
    estimate terms carry (± that much KV).
    """

    total_bytes: int  # device memory as the engine sees it
    total_basis: str  # where total_bytes comes from (runtime-visible, or the datasheet)
    utilization: float
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    fixed: bool
    kv_bytes: int
    uncertainty_bytes: int = 0
    fraction_of_bytes: int | None = None  # the free memory utilization applies to; None: total

    @property
    def requested_bytes(self) -> int:
        """The engine's share of memory: ⌊total · utilization⌋ (or of the free memory, above)."""
        if self.fraction_of_bytes is None:
            return int(self.total_bytes * self.utilization)
        base = self.fraction_of_bytes
        return int(base * self.utilization) + self.total_bytes - base

    @property
    def weights_fit(self) -> bool:
        """The weights fit the engine's share (with a fixed KV budget: the device)."""
        return self.weights_bytes <= (self.total_bytes if self.fixed else self.requested_bytes)

    @property
    def overcommit_bytes(self) -> int:
        """Bytes a fixed KV budget and the weights need beyond the device (0 when they fit;
        a computed budget never overcommits: it is what is left)."""
        if not self.fixed:
            return 0
        return max(0, self.weights_bytes + self.kv_bytes - self.total_bytes)


def subtract_terms(
    total_bytes: int,
    total_basis: str,
    utilization: float,
    weights_bytes: int,
    settings: EngineSettings,
    estimate: Callable[[], tuple[int, int, int, int]] | None = None,
) -> Budget:
    """A budget as total · utilization minus weights and the engine's reserve terms.

    `estimate()` gives the engine's (activation, non_torch, cudagraph, uncertainty) bytes;
    user overrides in `settings` replace each term, and a fixed KV budget replaces them all.
    """
    activation, non_torch, cudagraph, uncertainty = estimate() if estimate else (0, 0, 0, 0)
    activation = _override(settings.activation_bytes, activation)
    non_torch = _override(settings.non_torch_bytes, non_torch)
    cudagraph = _override(settings.cudagraph_bytes, cudagraph)
    if settings.kv_memory_bytes is not None:
        fixed = settings.kv_memory_bytes
        if fixed > total_bytes:
            # vLLM's --kv-cache-memory cannot allocate more than the device has.
            raise KvplanError(
                f"--kv-memory (kv_memory): {fixed:,} bytes is more than the GPU's "
                f"{total_bytes:,} bytes of device memory"
            )
        return Budget(total_bytes, total_basis, utilization, weights_bytes, 0, 0, 0, True, fixed)
    kv = int(total_bytes * utilization) - weights_bytes - activation - non_torch - cudagraph
    return Budget(
        total_bytes,
        total_basis,
        utilization,
        weights_bytes,
        activation,
        non_torch,
        cudagraph,
        False,
        kv,
        uncertainty,
    )


def fraction_of_free(
    total_bytes: int,
    total_basis: str,
    utilization: float,
    weights_bytes: int,
    terms: tuple[int, int, int],
    free_bytes: int,
    settings: EngineSettings,
    uncertainty_bytes: int = 0,
) -> Budget:
    """A budget where the engine takes `utilization` of `free_bytes`, memory free at one point.

    `terms` are (activation, non_torch, cudagraph) as the engine counts them outside that
    fraction; `kv = ⌊free · utilization⌋ + (total − free) − weights − terms`. A fixed KV
    budget (`settings.kv_memory_bytes`) replaces it all.
    """
    budget = subtract_terms(
        total_bytes,
        total_basis,
        utilization,
        weights_bytes,
        settings,
        lambda: (*terms, uncertainty_bytes),
    )
    if budget.fixed:
        return budget
    budget = dataclasses.replace(budget, fraction_of_bytes=free_bytes)
    reserved = budget.activation_bytes + budget.non_torch_bytes + budget.cudagraph_bytes
    return dataclasses.replace(budget, kv_bytes=budget.requested_bytes - weights_bytes - reserved)


@dataclass(frozen=True)
class BlockCharge:
    """Every layer of a rank in one pool: a request holds ⌈L / tokens_per_block⌉ blocks
    (SGLang pages, TensorRT-LLM blocks)."""

    tokens_per_block: int
    kind: str = "full"

    def blocks_per_request(self, tokens: int) -> int:
        return -(-tokens // self.tokens_per_block)


def _override(given: int | None, default: int) -> int:
    return default if given is None else given


def model_reference(model: ModelSpec) -> str:
    """How a launch command names the model: its Hugging Face repo id (the first alias with a
    slash), a GGUF file's path, else the catalogue name."""
    return next((alias for alias in model.aliases if "/" in alias), model.name)


def device_memory(sku: SkuSpec) -> tuple[int, str]:
    """Memory an engine sees on `sku` in bytes and where the figure comes from.

    Engines size their pools from what the runtime reports (`torch.cuda.mem_get_info()`
    total), a few hundred MiB below the datasheet/nvidia-smi figure; the datasheet figure is
    the fallback for a SKU without a runtime figure, and says so.
    """
    if sku.runtime_memory_bytes is not None:
        return sku.runtime_memory_bytes, "runtime-visible memory (" + (
            sku.runtime_memory_basis or "catalogue"
        ) + ")"
    return sku.memory_bytes, "datasheet memory: no runtime-visible figure in the catalogue"


class EngineProfile(ABC):
    """A serving engine's KV accounting: defaults, layout, budget, pool and log lines."""

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
            raise KvplanError(
                f"--max-kv-tokens: {self.name} has no cap on its KV pool in tokens "
                "(SGLang --max-total-tokens and TensorRT-LLM max_tokens do); drop it"
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
    def layout(self, deployment: Deployment, sku: SkuSpec | None) -> KvLayout:
        """How one GPU's KV is cut into blocks, per pipeline stage."""

    @abstractmethod
    def budget(
        self, deployment: Deployment, sku: SkuSpec, max_model_len: int | None = None
    ) -> Budget:
        """The KV budget on one GPU of `sku` for requests up to `max_model_len` tokens."""

    def pool(self, layout: KvLayout, budget: Budget) -> KvPool:
        """The blocks `budget` buys with `layout`."""
        return KvPool(layout, layout.blocks_for(budget.kv_bytes))

    def capacity_tokens(self, pool: KvPool, max_model_len: int) -> int:
        """Tokens of KV the pool holds, as the engine reports it.

        Default (byte pools): the budget over one token of every layer, no window.
        """
        per_token = pool.layout.kv_bytes_per_token
        bytes_per_block = min(stage.bytes_per_block for stage in pool.layout.stages)
        return pool.num_blocks * bytes_per_block // per_token if per_token else 0

    def log_lines(
        self, budget: Budget, pool: KvPool, max_model_len: int, sku: SkuSpec | None = None
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
        if v_dtype == kv_dtype_info(deployment.kv_dtype).name:
            return
        if not self.separate_v_dtype:
            setting = f" ({self.kv_dtype_setting})" if self.kv_dtype_setting else ""
            raise KvplanError(
                f"--v-dtype: {self.name} stores K and V in one type{setting}, so {v_dtype} "
                f"cannot differ from --kv-dtype {deployment.kv_dtype}"
            )
        self.check_kv_dtype(v_dtype, deployment, "--v-dtype")

    def check_kv_dtype(self, kv_dtype: str, deployment: Deployment, option: str) -> None:
        """Refuse a KV dtype the engine does not store, naming `option` and what it accepts."""
        accepted = self.accepted_kv_dtypes(deployment)
        name = kv_dtype_info(kv_dtype).name
        if name in accepted:
            return
        engine = f"{self.name}{self.version_label(deployment)}"
        setting = f" ({self.kv_dtype_setting})" if self.kv_dtype_setting else ""
        raise KvplanError(
            f"{option}: {engine}{setting} does not store KV as {name}; "
            f"accepted: {', '.join(accepted)}"
        )

    def version_label(self, deployment: Deployment) -> str:
        """' <version>' where the engine's accepted values depend on it, else ''."""
        return ""

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
        if sku is not None and deployment.gpus_per_replica > sku.max_gpus_per_node:
            nodes = deployment.nodes_per_replica(sku.max_gpus_per_node)
            # TP within a node keeps its all-reduces on the node's links; only the pipeline
            # hand-offs between stages cross the network then.
            crossing = "TP" if deployment.tp > sku.max_gpus_per_node else "pipeline"
            notes.append(
                f"tp {deployment.tp} × pp {deployment.pp} spans {nodes} nodes of "
                f"{sku.max_gpus_per_node} {sku.name}: {crossing} traffic crosses the network"
            )
        return notes
