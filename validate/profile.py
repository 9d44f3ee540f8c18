"""`verify --profile`: time the speed model's operations on this GPU, write a calibration.

Each point is one kernel on the device, timed with CUDA events around a single call, the
median of `repeats` calls after `warmup`, L2 flushed before each by reading a 4× L2 buffer
outside the events (bandwidth.py says why reading, not writing): torch.matmul at the model's
GEMM shapes (kvplan.validate.profile_shapes), the Triton paged decode kernel over a batch ×
context grid, and an all-reduce over every visible GPU (profile_allreduce). On CPU the same
path runs at tiny shapes in Triton's interpreter and the file says its timings are not
meaningful. The result is the JSON of kvplan.perf.calibration, which report, simulate,
pools and recommend read with --calibration.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import torch

from kvplan.perf.calibration import FORMAT
from kvplan.specs import ModelSpec, SkuSpec
from kvplan.validate.bandwidth import L2_WORKING_SET_FACTOR, l2_bytes
from kvplan.validate.profile_shapes import AttentionShape, attention_shapes, gemm_shapes

GPU_REPEATS, GPU_WARMUP = 20, 3
CPU_REPEATS, CPU_WARMUP = 2, 1
CPU_NOTE = (
    "measured on CPU (Triton interpreter, tiny shapes): timings are not meaningful; "
    "--calibration does not use this file"
)
TOKENS_PER_PAGE = 16


def time_call(
    fn: Callable[[], Any],
    device: torch.device,
    repeats: int,
    warmup: int,
    flush: torch.Tensor | None,
) -> float:
    """Median seconds of one `fn()` call (see the module docstring)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            if flush is not None:
                flush.sum()  # read, not write: no dirty lines to write back inside the events
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) / 1e3)
        else:
            began = time.perf_counter()
            fn()
            times.append(time.perf_counter() - began)
    return statistics.median(times)


def run_profile(
    model: ModelSpec,
    sku: SkuSpec | None,
    device: torch.device,
    environment: dict[str, Any],
    tp: int = 1,
    progress: Callable[[str, float], None] = lambda stage, fraction: None,
) -> dict[str, Any]:
    """The calibration document for `model`'s shapes on `device` (kvplan.perf.calibration)."""
    cpu = device.type != "cuda"
    repeats, warmup = (CPU_REPEATS, CPU_WARMUP) if cpu else (GPU_REPEATS, GPU_WARMUP)
    flush = None
    if not cpu:
        flush = torch.empty(
            L2_WORKING_SET_FACTOR * l2_bytes(device, None) // 4, dtype=torch.int32, device=device
        )
        flush.zero_()
    timer = lambda fn: time_call(fn, device, repeats, warmup, flush)  # noqa: E731
    notes = [CPU_NOTE] if cpu else []
    progress("profile: GEMMs", 0.0)
    gemm = _gemm_points(model, tp, cpu, device, timer)
    progress("profile: attention", 0.4)
    attention, note = _attention_points(model, tp, cpu, device, timer)
    notes += note
    progress("profile: all-reduce", 0.8)
    from kvplan.validate.profile_allreduce import all_reduce_points

    all_reduce, note = all_reduce_points(device)
    notes += note
    progress("profile: done", 1.0)
    return {
        "format": FORMAT,
        "measured_on": _measured_on(sku, environment, cpu),
        "datasheet": _datasheet(sku, cpu),
        "gemm": gemm,
        "decode_attention": attention,
        "all_reduce": all_reduce,
        "notes": notes,
    }


def _gemm_points(model, tp, cpu, device, timer) -> list[dict[str, Any]]:
    dtype = torch.float32 if cpu else torch.bfloat16
    points = []
    for shape in gemm_shapes(model, tp, cpu):
        a = torch.randn(shape.m, shape.k, device=device, dtype=dtype)
        b = torch.randn(shape.k, shape.n, device=device, dtype=dtype)
        out = torch.empty(shape.m, shape.n, device=device, dtype=dtype)
        seconds = timer(lambda a=a, b=b, out=out: torch.matmul(a, b, out=out))
        points.append(
            {
                "op": shape.op,
                "dtype": "fp32" if cpu else "bf16",
                "m": shape.m,
                "n": shape.n,
                "k": shape.k,
                "seconds": seconds,
            }
        )
    return points


def _attention_points(model, tp, cpu, device, timer) -> tuple[list[dict[str, Any]], list[str]]:
    if model.mla is not None:
        return [], ["MLA model: the paged GQA decode kernel is not its kernel; attention not timed"]
    from kvplan.kernels import paged_decode

    dtype = torch.float32 if cpu else torch.bfloat16
    element = torch.tensor([], dtype=dtype).element_size()
    points = []
    for shape in attention_shapes(model, tp, cpu, element):
        seconds, kv_bytes = _time_attention(shape, dtype, device, timer, paged_decode)
        points.append(
            {
                "batch": shape.batch,
                "context_tokens": shape.context_tokens,
                "kv_bytes": kv_bytes,
                "seconds": seconds,
            }
        )
    return points, []


def _time_attention(shape: AttentionShape, dtype, device, timer, paged_decode) -> tuple[float, int]:
    """Seconds of one paged decode call over `shape`, and the KV bytes it reads."""
    pages_per_seq = -(-shape.context_tokens // TOKENS_PER_PAGE)
    pages = shape.batch * pages_per_seq
    pool_shape = (pages, TOKENS_PER_PAGE, shape.num_kv_heads, shape.head_dim)
    k_pool = torch.randn(pool_shape, device=device, dtype=dtype)
    v_pool = torch.randn(pool_shape, device=device, dtype=dtype)
    # Pages in a shuffled order, as a long-running engine's free list leaves them.
    order = torch.randperm(pages, device="cpu").to(device=device, dtype=torch.int32)
    table = order.view(shape.batch, pages_per_seq)
    lens = torch.full((shape.batch,), shape.context_tokens, dtype=torch.int32, device=device)
    q = torch.randn(shape.batch, shape.num_heads, shape.head_dim, device=device, dtype=dtype)
    out = torch.empty_like(q)

    def call() -> None:
        paged_decode(q, k_pool, v_pool, table, lens, max_seq_len=shape.context_tokens, out=out)

    kv_bytes = 2 * shape.batch * shape.context_tokens * shape.num_kv_heads * shape.head_dim
    return timer(call), kv_bytes * k_pool.element_size()


def _measured_on(sku: SkuSpec | None, environment: dict[str, Any], cpu: bool) -> dict[str, Any]:
    versions = {
        key: str(environment[key])
        for key in ("torch", "triton", "cuda_runtime", "kvplan", "python")
        if environment.get(key)
    }
    return {
        "gpu": environment.get("gpu_name") or f"CPU ({environment.get('cpu') or 'unknown'})",
        "sku": sku.name if sku is not None else None,
        "driver": environment.get("driver"),
        "versions": versions,
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "meaningful": not cpu,
    }


def _datasheet(sku: SkuSpec | None, cpu: bool) -> dict[str, Any]:
    """The SKU figures the fractions are of; a CPU run gives fp32 a nominal peak of 1 TFLOP/s
    so the file stays well-formed (it is never used: `meaningful` is false)."""
    if sku is None:
        return {"bandwidth_bytes_per_s": 1e11, "peak_flop_per_s": {"fp32": 1e12, "bf16": 1e12}}
    peaks = dict(sku.peak_flop_per_s)
    if cpu:
        peaks.setdefault("fp32", peaks.get("bf16", 1e12))
    sheet: dict[str, Any] = {
        "bandwidth_bytes_per_s": sku.bandwidth_bytes_per_s,
        "peak_flop_per_s": peaks,
    }
    if sku.interconnect_bytes_per_s:
        sheet["interconnect_bytes_per_s"] = sku.interconnect_bytes_per_s
    return sheet
