"""Collectives a step pays under tensor, pipeline and expert parallelism: bytes and seconds.

Each is latency + bytes on the busiest link / achieved link bandwidth, the alpha-beta model
NCCL's own tuner uses (src/graph/tuning.cc: a base latency per algorithm plus size / bus
bandwidth). Every function is zero at degree 1: the structure says which terms exist.
"""

from __future__ import annotations


def all_reduce_bytes(size_bytes: float, ranks: int) -> float:
    """Bytes each rank sends in a ring all-reduce of `size_bytes`: 2 (n − 1) / n · size.

    A reduce-scatter and an all-gather, each moving (n − 1) / n of the buffer per rank.
    """
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) / ranks * size_bytes


def all_reduce_s(size_bytes: float, ranks: int, link_bytes_per_s: float, latency_s: float) -> float:
    """Seconds of one all-reduce of `size_bytes` over `ranks` GPUs (0 for one rank)."""
    if ranks <= 1:
        return 0.0
    return latency_s + all_reduce_bytes(size_bytes, ranks) / link_bytes_per_s


def all_to_all_bytes(size_bytes: float, ranks: int) -> float:
    """Bytes each rank sends in an all-to-all of its `size_bytes`: (n − 1) / n · size.

    Expert dispatch: every token's hidden state goes to the ranks holding its experts; with
    uniform routing (n − 1) / n of them live elsewhere. Combine sends the results back.
    """
    if ranks <= 1:
        return 0.0
    return (ranks - 1) / ranks * size_bytes


def all_to_all_s(size_bytes: float, ranks: int, link_bytes_per_s: float, latency_s: float) -> float:
    """Seconds of one all-to-all (dispatch or combine) of `size_bytes` per rank."""
    if ranks <= 1:
        return 0.0
    return latency_s + all_to_all_bytes(size_bytes, ranks) / link_bytes_per_s


def pipeline_sends_s(
    size_bytes: float, stages: int, link_bytes_per_s: float, latency_s: float
) -> float:
    """Seconds of the stage-to-stage sends of one step: (pp − 1) point-to-point copies."""
    if stages <= 1:
        return 0.0
    return (stages - 1) * (latency_s + size_bytes / link_bytes_per_s)
