"""The GPUs in one node, read once for every rule that asks whether a deployment spans nodes.

A TP group or pipeline larger than one node sends its traffic over the network: vLLM then
keeps more memory outside torch, reports mark the row (†), notes say which traffic crosses,
and the degrees a report or `recommend` tries stop at the node. All of them read this value:
the `gpus_per_node` setting when given (a cluster of smaller nodes, one GPU per Ray node),
else the SKU's `max_gpus_per_node` (8 on HGX boards).
"""

from __future__ import annotations

from typing import Protocol

from kvplan.specs import SkuSpec


class NodeSetting(Protocol):
    """The setting this module reads (EngineSettings has it)."""

    @property
    def gpus_per_node(self) -> int | None: ...


def gpus_per_node(settings: NodeSetting, sku: SkuSpec) -> int:
    """GPUs in one node of `sku` under `settings` (the setting, else the SKU's board)."""
    return settings.gpus_per_node or sku.max_gpus_per_node


def nodes_spanned(gpus: int, settings: NodeSetting, sku: SkuSpec) -> int:
    """Nodes `gpus` GPUs of `sku` take: ⌈gpus / GPUs per node⌉."""
    return -(-gpus // gpus_per_node(settings, sku))
