"""Timing decode steps and the device-to-device copy ceiling.

On CUDA: CUDA events on the current stream, warm-up excluded, the median of many repeats,
each step rotating over every verified layer's pool (each layer reads its own KV, as in a
real model). When those pools read less than 4× the L2 cache per step, L2 is flushed
before each timed step by *reading* a 4× L2 buffer outside the events, and the record says
so. Reading, not writing: zeroing a buffer (the usual flush) leaves up to a whole L2 of
dirty lines, and their write-back to DRAM then happens while the timed kernel's loads evict
them, inside the timed region. A read leaves only clean lines, which are dropped for free.
A step is also captured in a CUDA graph and replayed, which removes the Python and launch
gaps between the 1–2 launches per layer; the graph figure is the one reported when the
capture works. On CPU the Triton interpreter runs and the wall clock is recorded, flagged
as not meaningful.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from kvplan.units import GIB

FLUSH_METHOD = "read of a 4× L2 buffer before each timed step, outside the events"

if TYPE_CHECKING:  # imported for real only once TRITON_INTERPRET is settled (harness)
    from kvplan.validate.decode_step import DecodeStep

L2_WORKING_SET_FACTOR = 4  # the KV read per step must be ≥ 4× L2, or L2 is flushed
COPY_TARGET_BYTES = 2 * 10**9  # per buffer: far past L2 and launch overhead
COPY_MIN_BYTES = 256 * 2**20
COPY_REPEATS = 20
COPY_WARMUP = 3
# Off-GPU fallback for L2 when neither torch nor the SKU says (an H200 reports 60 MiB).
FALLBACK_L2_BYTES = 60 * 2**20


@dataclass(frozen=True)
class Timing:
    """Step times in seconds over `repeats` timed steps (warm-up excluded)."""

    median_s: float
    p10_s: float
    p90_s: float
    repeats: int
    warmup_steps: int
    method: str
    """cuda_graph, cuda_events or cpu_wall_clock."""


@dataclass(frozen=True)
class CopyCeiling:
    """A device-to-device copy: bytes read + written per second."""

    buffer_bytes: int
    bytes_per_s: float
    median_s: float


def l2_bytes(device: torch.device, sku_l2_bytes: int | None) -> int:
    """The device's L2 size: torch's device properties, else the SKU's datasheet figure."""
    if device.type == "cuda":
        reported = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
        if reported:
            return int(reported)
    return sku_l2_bytes or FALLBACK_L2_BYTES


def _summary(times_s: list[float], warmup: int, method: str) -> Timing:
    ordered = sorted(times_s)
    if len(ordered) > 1:
        deciles = statistics.quantiles(ordered, n=10)
        p10, p90 = deciles[0], deciles[-1]
    else:
        p10 = p90 = ordered[0]
    return Timing(statistics.median(ordered), p10, p90, len(ordered), warmup, method)


def _cuda_event_times(
    launch: Callable[[], object], repeats: int, flush: torch.Tensor | None
) -> list[float]:
    pairs = []
    for _ in range(repeats):
        if flush is not None:
            flush.sum()  # reads 4× L2: evicts the last step's KV, leaves clean lines only
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        launch()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return [start.elapsed_time(end) / 1e3 for start, end in pairs]


def _capture_graph(step: DecodeStep) -> torch.cuda.CUDAGraph | None:
    """One step captured as a CUDA graph, or None when capture fails (then eager is used)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step.run_all_layers()  # warm-up on a side stream, as torch.cuda.graphs advises
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            step.run_all_layers()
    except RuntimeError:
        return None
    return graph


def time_steps(
    step: DecodeStep,
    device: torch.device,
    *,
    repeats: int,
    warmup: int,
    flush_l2_bytes: int = 0,
    progress: Callable[[float], None] | None = None,
) -> tuple[Timing, Timing | None]:
    """Time decode steps over every verified layer.

    Args:
        step: the prepared step (buffers allocated, kernels compiled by a first run).
        device: where it runs.
        repeats: timed steps.
        warmup: untimed steps first (compile, caches, clocks).
        flush_l2_bytes: if > 0, read a buffer of this size before each timed step.
        progress: called with the fraction of timing done.

    Returns:
        (the reported timing, the eager CUDA-events timing when a graph was reported).
    """
    report = progress or (lambda _: None)
    if device.type != "cuda":
        for _ in range(warmup):
            step.run_all_layers()
        times = []
        for i in range(repeats):
            start_s = time.perf_counter()
            step.run_all_layers()
            times.append(time.perf_counter() - start_s)
            report((i + 1) / repeats)
        return _summary(times, warmup, "cpu_wall_clock"), None

    flush = None
    if flush_l2_bytes:
        # Written once here, outside any timing: its dirty lines leave L2 during the first
        # flush read, before the first start event.
        flush = torch.zeros(flush_l2_bytes // 4, dtype=torch.int32, device=device)
    for _ in range(warmup):
        step.run_all_layers()
    torch.cuda.synchronize()
    eager = _summary(_cuda_event_times(step.run_all_layers, repeats, flush), warmup, "cuda_events")
    report(0.5)
    graph = _capture_graph(step)
    if graph is None:
        report(1.0)
        return eager, None
    for _ in range(warmup):
        graph.replay()
    torch.cuda.synchronize()
    replayed = _summary(_cuda_event_times(graph.replay, repeats, flush), warmup, "cuda_graph")
    del graph
    report(1.0)
    return replayed, eager


def _time_copy(device: torch.device, buffer_bytes: int) -> Timing:
    src = torch.empty(buffer_bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    for _ in range(COPY_WARMUP):
        dst.copy_(src)
    torch.cuda.synchronize()
    times = _cuda_event_times(lambda: dst.copy_(src), COPY_REPEATS, None)
    return _summary(times, COPY_WARMUP, "cuda_events")


def copy_ceiling(device: torch.device, free_bytes: int) -> CopyCeiling:
    """Time ``dst.copy_(src)``: 2 GB buffers, or what free memory allows (less 1 GiB)."""
    buffer_bytes = min(COPY_TARGET_BYTES, max(COPY_MIN_BYTES, (free_bytes - GIB) // 2))
    timing = _time_copy(device, buffer_bytes)  # the buffers are freed on return
    torch.cuda.empty_cache()  # give their segments back before the pools are allocated
    return CopyCeiling(buffer_bytes, 2 * buffer_bytes / timing.median_s, timing.median_s)
