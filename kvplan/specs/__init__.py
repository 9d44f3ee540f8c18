"""Frozen, strict pydantic models for the catalogue: models, GPU SKUs, layer plans, dtypes.

Every field carries a description with its unit; the JSON Schema that
`kvplan schema models|skus` prints is built from these classes.

One file per job:
    dtypes    number formats (DtypeInfo) for KV caches and weights, and their spellings
    gguf_types  ggml block sizes and llama-quantize's file types (Q4_K_M, …)
    common    the strict frozen base and the layer kinds
    sections  attention, MLA + indexer, MoE, recurrent state, vision, layer plan
    extensions  RoPE context extension; a vision tower that adds weights only
    model     ModelSpec and its checks across sections
    sku       SkuSpec
"""

from kvplan.specs.common import ATTENTION_KINDS, LAYER_KINDS, WINDOWED_KINDS, LayerKind
from kvplan.specs.dtypes import (
    KV_DTYPE_ALIASES,
    KV_DTYPES,
    WEIGHT_DTYPE_ALIASES,
    WEIGHT_DTYPES,
    DtypeInfo,
    KvDtypeName,
    WeightDtypeName,
    is_gguf_weight_dtype,
    kv_dtype_info,
    weight_dtype_info,
)
from kvplan.specs.extensions import RopeScalingSpec, VisionTowerSpec
from kvplan.specs.model import ModelSpec
from kvplan.specs.sections import (
    AttentionSpec,
    IndexerSpec,
    LayerPlan,
    MlaSpec,
    MoeSpec,
    StateSpec,
    VisionSpec,
)
from kvplan.specs.sku import SkuSpec

__all__ = [
    "ATTENTION_KINDS",
    "KV_DTYPES",
    "KV_DTYPE_ALIASES",
    "LAYER_KINDS",
    "WEIGHT_DTYPES",
    "WEIGHT_DTYPE_ALIASES",
    "WINDOWED_KINDS",
    "AttentionSpec",
    "DtypeInfo",
    "IndexerSpec",
    "KvDtypeName",
    "LayerKind",
    "LayerPlan",
    "MlaSpec",
    "ModelSpec",
    "MoeSpec",
    "RopeScalingSpec",
    "SkuSpec",
    "StateSpec",
    "VisionSpec",
    "VisionTowerSpec",
    "WeightDtypeName",
    "is_gguf_weight_dtype",
    "kv_dtype_info",
    "weight_dtype_info",
]
