"""`run_verify`: plan, fit check, copy ceiling, allocate, fill, numerics, timing, record.

The steps run in that order so that a plan that cannot fit is refused before anything is
allocated, and the copy ceiling is measured while the device is still empty. With
``capacity``, the planner's non-KV terms are held as placeholders first, the pool is the
planner's predicted block count covered by sequences of the asked context, and the largest
block count that really allocates is searched afterwards (``kvplan.validate.capacity``).
Progress goes through a callback the CLI passes in (``progress(stage, fraction_done)``);
nothing here prints.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import torch

from kvplan.errors import KvplanError
from kvplan.specs import ModelSpec, SkuSpec
from kvplan.validate import memory, record
from kvplan.validate.bandwidth import L2_WORKING_SET_FACTOR, copy_ceiling, l2_bytes, time_steps
from kvplan.validate.capacity_run import CapacityRun, finish_capacity, start_capacity
from kvplan.validate.environment import collect_environment, gpu_clocks
from kvplan.validate.fill import fill_pools
from kvplan.validate.numerics import (
    check_numerics,
    reference_scratch_bytes_per_token,
    tokens_checked_max,
)
from kvplan.validate.plan import build_plan, check_device, default_layers
from kvplan.validate.record_bandwidth import CPU_TIMING_NOTE, TimedRun, bandwidth_section
from kvplan.validate.record_memory import memory_section
from kvplan.validate.traffic import step_traffic
from kvplan.validate.verify_plan import VerifyPlan

Progress = Callable[[str, float], None]
DEFAULT_REPEATS = {"cuda": 50, "cpu": 2}
# On CPU the numerics run has already compiled and warmed every launch.
DEFAULT_WARMUP = {"cuda": 5, "cpu": 0}
# The interpreter runs one kernel program at a time (one per sequence, KV head and layer),
# each streaming its sequence in 32-token tiles; a 1-token sequence still costs one tile. A
# tile takes ~10-13 ms (gpt2, --lengths 1k,1k, 2 layers: 3 steps × 1,536 tiles in 58 s on a
# busy 2-core machine). A run executes the step once for numerics and once per repeat; past
# CPU_MAX_TILES tiles in all (about half a minute) it is refused like a pool too large.
CPU_TILE_TOKENS = 32
CPU_MAX_TILES = 2048


@dataclass(frozen=True)
class VerifyRequest:
    """What `kvplan verify` was asked, after parsing; see ``run_verify`` for each field."""

    lengths: tuple[int, ...]
    kv_dtype: str = "bf16"
    engine: str = "vllm"
    tp: int = 1
    block_size: int | None = None
    layers: int | None = None
    device: str | None = None
    sku: SkuSpec | None = None
    skus: tuple[SkuSpec, ...] = ()
    bandwidth_pass_fraction: float = 0.8
    repeats: int | None = None
    seed: int = 0
    capacity: bool = False
    utilization: float | None = None


def resolve_device(name: str | None) -> torch.device:
    """--device: cuda, cpu, or None for cuda when available else cpu."""
    if name is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    check_device(name)
    if name == "cuda" and not torch.cuda.is_available():
        raise KvplanError(
            f"--device cuda: no CUDA device is visible to torch {torch.__version__}; "
            "use --device cpu for the small interpreter run"
        )
    return torch.device(name)


def detect_sku(skus: Sequence[SkuSpec], device_name: str) -> SkuSpec | None:
    """The catalogue SKU whose name or alias equals the GPU's reported name, if any."""
    wanted = device_name.strip().lower()
    for sku in skus:
        if wanted in (label.strip().lower() for label in (sku.name, *sku.aliases)):
            return sku
    return None


def _sku_match(
    sku: SkuSpec | None, skus: Sequence[SkuSpec], device: torch.device
) -> tuple[SkuSpec | None, str, SkuSpec | None]:
    """(the SKU to compare with, how it was chosen, the SKU the device itself matches)."""
    if device.type != "cuda":
        return sku, "given" if sku else "none: a CPU run", None
    gpu_name = torch.cuda.get_device_name(device)
    detected = detect_sku(skus, gpu_name)
    if sku is not None:
        return sku, "given", detected
    if detected is not None:
        return detected, f"detected from {gpu_name!r}", detected
    return None, f"unknown: {gpu_name!r} matches no catalogue SKU name or alias", None


def _load_step_module(device: torch.device):
    """kvplan.validate.decode_step, with the kernels in the interpreter for CPU tensors."""
    if device.type == "cpu":
        # Read when @triton.jit decorates the kernels: must precede their first import.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from kvplan.validate import decode_step

    if device.type == "cpu" and not decode_step.kernels_interpreted():
        raise KvplanError(
            "--device cpu: the Triton kernels were already loaded for the GPU in this process; "
            "set TRITON_INTERPRET=1 before starting it"
        )
    if device.type == "cuda" and decode_step.kernels_interpreted():
        raise KvplanError(
            "--device cuda: TRITON_INTERPRET=1 is set, so the kernels would run in the CPU "
            "interpreter; unset it to measure the GPU"
        )
    return decode_step


def cpu_tiles(plan: VerifyPlan, repeats: int) -> int:
    """Kernel tiles the Triton interpreter runs for `plan`: the numerics step and `repeats`."""
    per_layer_head = sum(max(1, -(-n // CPU_TILE_TOKENS)) for n in plan.lengths)
    return per_layer_head * plan.num_kv_heads_per_gpu * plan.layers_verified * (1 + repeats)


def _check_cpu_work(plan: VerifyPlan, repeats: int) -> None:
    tiles = cpu_tiles(plan, repeats)
    if tiles > CPU_MAX_TILES:
        raise KvplanError(
            f"the plan is too large for a CPU run: {tiles:,} kernel tiles of "
            f"{CPU_TILE_TOKENS} tokens over {plan.batch:,} sequences, "
            f"{plan.num_kv_heads_per_gpu} KV heads, {plan.layers_verified} layers and "
            f"{1 + repeats} steps (cap {CPU_MAX_TILES:,}; the Triton interpreter takes ~10 ms a "
            "tile); use a smaller --context, --batch, --lengths, --layers or --repeats"
        )


def _repeats(request: VerifyRequest, kind: str) -> int:
    return DEFAULT_REPEATS[kind] if request.repeats is None else request.repeats


def _check_request(request: VerifyRequest) -> None:
    if not 0 < request.bandwidth_pass_fraction <= 1:
        raise KvplanError(
            f"--bandwidth-pass: {request.bandwidth_pass_fraction} must be a fraction in (0, 1]"
        )
    if request.repeats is not None and request.repeats < 1:
        raise KvplanError(f"--repeats: {request.repeats} must be at least 1")
    if request.capacity and request.layers is not None:
        raise KvplanError("--layers: --capacity proves the whole model, so it takes no --layers")
    if not request.capacity and request.utilization is not None:
        raise KvplanError("--utilization: only --capacity uses the engine's memory budget")


@dataclass
class Setup:
    """Everything decided before the first allocation."""

    plan: VerifyPlan
    device: torch.device
    step_module: Any
    num_splits: int
    sku: SkuSpec | None
    sku_match: str
    l2_bytes: int
    flush_bytes: int
    workspace_bytes: int
    capacity: CapacityRun | None


def _setup(model: ModelSpec, request: VerifyRequest) -> Setup:
    target = resolve_device(request.device)
    _check_request(request)
    if target.type == "cuda":
        memory.check_allocator_settings()
    sku, sku_match, detected = _sku_match(request.sku, request.skus, target)
    capacity = None
    lengths, layers = list(request.lengths), request.layers
    if request.capacity:
        capacity = start_capacity(model, request, sku, detected, target)
        lengths, layers = capacity.lengths, model.num_layers
    plan = build_plan(
        model,
        lengths=lengths,
        kv_dtype=request.kv_dtype,
        engine=request.engine,
        tp=request.tp,
        tokens_per_block=request.block_size,
        layers=default_layers(model, target.type) if layers is None else layers,
        sku=sku,
    )
    if capacity is not None:
        capacity.check_plan(plan)
    step_module = _load_step_module(target)
    num_splits = step_module.choose_splits(plan, target)
    l2 = l2_bytes(target, sku.l2_bytes if sku else None)
    working_set = plan.kv_bytes_read_per_layer * plan.layers_verified
    flushed = target.type == "cuda" and working_set < L2_WORKING_SET_FACTOR * l2
    flush_bytes = L2_WORKING_SET_FACTOR * l2 if flushed else 0
    checked_tokens = min(max(plan.lengths), tokens_checked_max(plan, target.type))
    workspace = (
        plan.step_buffer_bytes(num_splits)
        + flush_bytes
        + checked_tokens * reference_scratch_bytes_per_token(plan)
    )
    return Setup(
        plan, target, step_module, num_splits, sku, sku_match, l2, flush_bytes, workspace, capacity
    )


def run_verify(
    model: ModelSpec, request: VerifyRequest, progress: Progress | None = None
) -> dict[str, Any]:
    """Allocate the KV pool kvplan predicts, run the decode kernel over it, measure, compare.

    Args:
        model: the catalogue spec.
        request: lengths (tokens per sequence), kv_dtype (fp32, bf16, fp16, fp8_e4m3,
            fp8_e5m2), engine (vllm, sglang, exact), tp, block_size (tokens per block or
            None for the engine's), layers (None: all on CUDA, 2 on CPU), device (cuda, cpu
            or None for cuda when available), sku (None: detected from the GPU's name among
            skus), bandwidth_pass_fraction (pass when achieved ≥ this fraction of the copy),
            repeats (timed steps; None: 50 on CUDA, 2 on CPU), seed, capacity (prove the
            planner's vLLM block count for sku at the context lengths[0]) and utilization
            (gpu_memory_utilization for capacity; None: vLLM's default).
        progress: called with (stage, fraction of the run done).

    Returns:
        The record (JSON-ready dict): environment, inputs, memory, numerics, bandwidth,
        capacity (when asked), tolerances, verdict, notes.

    Raises:
        KvplanError: bad input, or a plan that does not fit (nothing is left allocated).
    """
    report = progress or (lambda stage, fraction: None)
    report("planning", 0.0)
    setup = _setup(model, request)
    plan, target, kind = setup.plan, setup.device, setup.device.type

    report("fit check", 0.05)
    fit = None  # with --capacity, fitting is the claim under test, not a precondition
    if setup.capacity is None:
        fit = memory.check_fit(plan, target, setup.workspace_bytes)  # raises before allocating
    if kind == "cpu":
        _check_cpu_work(plan, _repeats(request, kind))
    environment = collect_environment(target)

    copy = None
    if kind == "cuda":
        report("copy ceiling", 0.1)
        copy = copy_ceiling(target, memory.device_memory_now(target).free_bytes)
    if setup.capacity is not None:
        report("placeholders", 0.15)
        setup.capacity.hold(target)

    report("allocating pools", 0.2)
    measured = _allocate_and_run(setup, request, report)
    if setup.capacity is not None:
        report("largest block count", 0.9)
        capacity_section = finish_capacity(setup.capacity, plan, measured.get("pool_fits"))
    if kind == "cuda":
        environment["clocks_after"] = gpu_clocks(target.index or 0)

    report("record", 0.97)
    result = _record(model, request, setup, fit, environment, copy, measured)
    if setup.capacity is not None:
        result["capacity"] = capacity_section
    result["verdict"] = record.verdict(result)
    result["notes"] = _notes(setup, result)
    report("done", 1.0)
    return result


def _allocate_and_run(setup: Setup, request: VerifyRequest, report: Progress) -> dict[str, Any]:
    """Allocate, fill, check numerics and time the step; the pools are freed on return."""
    plan, target, kind = setup.plan, setup.device, setup.device.type
    capacity = setup.capacity
    try:
        pools = memory.allocate_and_measure(plan, target, request.seed)
    except KvplanError:
        if capacity is None:
            raise
        return {"pool_fits": False}  # the claim failed: the predicted pool did not allocate
    step = None
    try:
        pool_fits = capacity.adopt_pool(pools) if capacity is not None else None
        report("filling pools", 0.25)
        fill_pools(pools, plan, request.seed)
        step = setup.step_module.build_step(plan, pools, request.seed)
        report("numerics", 0.3)
        scratch = capacity.scratch_bytes() if capacity is not None else None
        numerics = check_numerics(plan, pools, step, kind, scratch)
        report("timing", 0.5)
        timing, eager = time_steps(
            step,
            target,
            repeats=_repeats(request, kind),
            warmup=DEFAULT_WARMUP[kind],
            flush_l2_bytes=setup.flush_bytes,
            progress=lambda fraction: report("timing", 0.5 + 0.35 * fraction),
        )
        # The timed steps wrote the whole batch: a poisoned (NaN) page read would show here.
        finite = bool(torch.isfinite(step.out.float()).all())
        numerics = dataclasses.replace(numerics, all_outputs_finite=finite)
        return {
            "pools": pools,
            "pool_fits": pool_fits,
            "numerics": numerics,
            "timing": timing,
            "eager": eager,
        }
    finally:
        del step, pools  # the pools go back before anything else runs
        if kind == "cuda":
            torch.cuda.empty_cache()


def _record(
    model: ModelSpec,
    request: VerifyRequest,
    setup: Setup,
    fit: memory.FitCheck | None,
    environment: dict[str, Any],
    copy: Any,
    measured: dict[str, Any],
) -> dict[str, Any]:
    plan, kind = setup.plan, setup.device.type
    result: dict[str, Any] = {
        "kvplan_verify_record": record.RECORD_VERSION,
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "environment": environment,
        "inputs": record.inputs_section(
            plan,
            device_type=kind,
            sku=setup.sku,
            sku_match=setup.sku_match,
            bandwidth_pass_fraction=request.bandwidth_pass_fraction,
            seed=request.seed,
        ),
        "scaling": record.scaling_section(plan),
    }
    result["inputs"]["capacity"] = request.capacity
    if "pools" not in measured:  # --capacity: the predicted pool did not allocate
        result["memory"] = {"passed": False, "fit": None, "not_allocated": True}
        result["numerics"] = result["bandwidth"] = None
        result["tolerances"] = {"bandwidth_pass_fraction_of_copy": request.bandwidth_pass_fraction}
        return result
    result["memory"] = memory_section(plan, fit, measured["pools"], kind)
    result["numerics"] = record.numerics_section(measured["numerics"])
    run = TimedRun(
        device_type=kind,
        traffic=step_traffic(plan, setup.num_splits),
        timing=measured["timing"],
        eager=measured["eager"],
        copy=copy,
        sku=setup.sku,
        l2_bytes=setup.l2_bytes,
        l2_flushed=setup.flush_bytes > 0,
        sm_count=environment.get("sm_count"),
    )
    result["bandwidth"] = bandwidth_section(plan, run, request.bandwidth_pass_fraction)
    result["tolerances"] = {
        "memory_rule": result["memory"]["rule"],
        "numerics_max_error": result["numerics"]["tolerance"],
        "bandwidth_pass_fraction_of_copy": request.bandwidth_pass_fraction,
    }
    return result


def _notes(setup: Setup, result: dict[str, Any]) -> list[str]:
    plan, kind = setup.plan, setup.device.type
    notes = [plan.scaling_statement, record.NULL_PAGE_NOTE]
    if plan.page_note:
        notes.append(plan.page_note)
    if kind != "cuda":
        notes.append(CPU_TIMING_NOTE)
    if setup.capacity is not None:
        notes += setup.capacity.notes
    numerics = result["numerics"]
    if numerics and any(
        checked < plan.lengths[i]
        for i, checked in zip(
            numerics["sequences_checked"], numerics["tokens_checked"], strict=True
        )
    ):
        notes.append(
            "numerics compared the first "
            f"{min(numerics['tokens_checked']):,} tokens of the longest sampled sequences "
            "(the float64 reference's memory budget); the timed steps ran the full lengths"
        )
    bandwidth = result["bandwidth"]
    if bandwidth and bandwidth.get("note") and kind == "cuda":
        notes.append(bandwidth["note"])
    if bandwidth and bandwidth.get("shortfall"):
        notes.append("bandwidth shortfall: " + bandwidth["shortfall"]["statement"])
    if result["inputs"]["sku"] is None and kind == "cuda":
        notes.append("datasheet comparison unknown: " + result["inputs"]["sku_match"])
    return notes
