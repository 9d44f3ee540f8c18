"""What is being planned: a model on tp × pp × dp GPUs under one engine, with its dtypes."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Protocol

import kvplan.limits as limits
from kvplan.catalog.checkpoint import CheckpointWeights
from kvplan.engine.settings import BY_NAME, EngineSettings
from kvplan.engine.weights import (
    WeightBytes,
    check_checkpoint_total,
    checkpoint_weight_bytes,
    weight_bytes,
)
from kvplan.errors import KvplanError, SettingError
from kvplan.kvmath import LayerCache, layer_caches, stage_layer_ranges
from kvplan.specs import DtypeInfo, ModelSpec, kv_dtype_info


class ServingEngine(Protocol):
    """What a deployment asks of the engine serving it while it is built.

    Every engine profile (`engine.base.EngineProfile`) is one. The profiles take a Deployment
    in every method, so this module names only the part it calls, not the profiles.
    """

    name: str
    default_kv_dtype: str

    def check_kv_dtypes(self, deployment: Deployment) -> None:
        """Raise KvplanError for a K or V dtype the engine does not serve."""

    def check(self, deployment: Deployment) -> None:
        """Raise KvplanError for a deployment the engine refuses (TP degree, settings)."""


@dataclass(frozen=True)
class Deployment:
    """A model served by `engine` on tp × pp GPUs per replica, `dp` replicas.

    `tp` splits attention heads and matrices inside a replica, `pp` splits layers, `dp`
    runs independent replicas (each with its own KV cache, holding its own requests).
    `ep` shards the routed experts of an MoE model over all tp · dp GPUs instead of
    splitting every expert by tp (vLLM --enable-expert-parallel, SGLang --ep).
    """

    model: ModelSpec
    engine: ServingEngine  # an EngineProfile: layout, budget and pool come from it
    kv_dtype: str = ""  # "": the engine's default (bf16; f16 for llama.cpp and ollama)
    weight_dtype: str | None = None  # None: the model's released dtype
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: bool = False
    settings: EngineSettings = field(default_factory=EngineSettings)
    exact_weights_bytes: int | None = None  # safetensors total_size, when imported from HF
    checkpoint: CheckpointWeights | None = None  # safetensors headers: exact bytes per tensor

    def __post_init__(self) -> None:
        for name, value in (("--tp", self.tp), ("--pp", self.pp)):
            if value < 1:
                raise KvplanError(f"{name}: {value} must be at least 1")
            limits.GPUS.check(value, name)
        BY_NAME["dp"].check(self.dp)
        if self.ep and self.model.moe is None:
            raise SettingError(
                "ep", f"{self.model.name} has no routed experts; expert parallelism needs an MoE"
            )
        if not self.kv_dtype:
            object.__setattr__(self, "kv_dtype", self.engine.default_kv_dtype)
        kv_dtype_info(self.kv_dtype)  # fail early on a typo
        self.engine.check_kv_dtypes(self)
        stage_layer_ranges(self.model.num_layers, self.pp)
        if self.exact_weights_bytes is not None and self.checkpoint is None:
            check_checkpoint_total(self.model, self.exact_weights_bytes)
        self.engine.check(self)

    @property
    def gpus(self) -> int:
        """GPUs of the whole deployment: tp · pp · dp."""
        return self.tp * self.pp * self.dp

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp

    def nodes_per_replica(self, gpus_per_node: int) -> int:
        """Nodes of `gpus_per_node` GPUs one replica (tp · pp GPUs) spans."""
        return -(-self.gpus_per_replica // gpus_per_node)

    @property
    def expert_shards(self) -> int:
        """GPUs one MoE layer's routed experts are spread over."""
        return self.tp * self.dp if self.ep else self.tp

    @property
    def k_dtype_info(self) -> DtypeInfo:
        """The K cache's element type (`kv_dtype`), looked up once."""
        return self._memo("_k_dtype", lambda: kv_dtype_info(self.kv_dtype))

    @property
    def v_dtype_info(self) -> DtypeInfo:
        """The V cache's element type: the v_dtype setting (llama.cpp -ctv) when set, else
        the K type; looked up once."""
        return self._memo("_v_dtype", lambda: kv_dtype_info(self.settings.v_dtype or self.kv_dtype))

    @property
    def v_dtype(self) -> str:
        """The V cache's dtype name: the v_dtype setting when set, else the K type."""
        return self.v_dtype_info.name

    def exact_caches(self, full_reservation: bool = False) -> tuple[LayerCache, ...]:
        """The physics: one cache per layer on one TP rank (kvmath), no engine rounding; K in
        `kv_dtype`, V in `v_dtype`."""
        return layer_caches(
            self.model, self.k_dtype_info, self.tp, full_reservation, self.v_dtype_info
        )

    @property
    def kv_bytes_per_token_per_gpu(self) -> int:
        """The physics of one token in every layer that keeps tokens, on the binding GPU (the
        largest pipeline stage), in bytes; worked out once per deployment."""
        return self._memo("_kv_bytes_per_token", self._kv_bytes_per_token_per_gpu)

    def _kv_bytes_per_token_per_gpu(self) -> int:
        caches = self.exact_caches()
        return max(sum(caches[i].context_token_bytes for i in r) for r in self.stage_ranges())

    def stage_ranges(self) -> tuple[range, ...]:
        """The layers of each pipeline stage."""
        return stage_layer_ranges(self.model.num_layers, self.pp)

    def weights(self) -> WeightBytes:
        """Weight bytes, whole and on the binding GPU: the checkpoint's tensors when its
        headers were read and no other weight dtype was asked for, else computed. Computed
        once per deployment: a report asks for them once per SKU and engine term."""
        return self._memo("_weights", self._weight_bytes)

    def _weight_bytes(self) -> WeightBytes:
        if self.checkpoint is not None and self.weight_dtype is None:
            return checkpoint_weight_bytes(
                self.model, self.checkpoint, self.tp, self.pp, self.expert_shards
            )
        return weight_bytes(
            self.model,
            self.weight_dtype,
            self.tp,
            self.pp,
            self.exact_weights_bytes,
            self.expert_shards,
        )

    # A deployment is a key of the engine's caches (layouts, stage caches), looked up many
    # times a row: its hash, like its weights, is worked out once. The remembered values live
    # beside the fields, never in comparisons, copies or pickles (a hash differs between
    # processes).
    _MEMOS = ("_hash", "_weights", "_k_dtype", "_v_dtype", "_kv_bytes_per_token")

    def __hash__(self) -> int:
        found = self.__dict__.get("_hash")  # read inline: a lookup key, hashed on every ask
        if found is None:
            found = self._memo(
                "_hash", lambda: hash(tuple(getattr(self, f.name) for f in fields(self)))
            )
        return found

    def _memo(self, name: str, compute: Any) -> Any:
        value = self.__dict__.get(name)
        if value is None:
            value = compute()
            object.__setattr__(self, name, value)  # frozen: set once, beside the fields
        return value

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in self._MEMOS}

    def replace(self, **changes: object) -> Deployment:
        """This deployment with some fields changed (validated again)."""
        fields = {name: getattr(self, name) for name in self.__dataclass_fields__}
        return Deployment(**(fields | changes))  # type: ignore[arg-type]
