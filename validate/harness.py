"""`run_verify`: plan, fit check, copy ceiling, allocate, fill, numerics, timing, record.

The steps run in that order so that a plan that cannot fit is refused before anything is
allocated, and the copy ceiling is measured while the device is still empty. Progress goes
through a callback the CLI passes in (``progress(stage, fraction_done)``); nothing here
prints.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import torch

from kvplan.errors import KvplanError
from kvplan.specs import ModelSpec, SkuSpec
from kvplan.validate import memory, record
from kvplan.validate.bandwidth import L2_WORKING_SET_FACTOR, copy_ceiling, l2_bytes, time_steps
from kvplan.validate.environment import collect_environment, gpu_clocks
from kvplan.validate.numerics import (
    check_numerics,
    reference_scratch_bytes_per_token,
    tokens_checked_max,
)
from kvplan.validate.plan import VerifyPlan, build_plan, default_layers

Progress = Callable[[str, float], None]
DEVICES = ("cuda", "cpu")
DEFAULT_REPEATS = {"cuda": 50, "cpu": 2}
# On CPU the numerics run has already compiled and warmed every launch.
DEFAULT_WARMUP = {"cuda": 5, "cpu": 0}
# The interpreter streams ~32-token tiles at ~10 ms each: 2^18 token-head rows per step is
# about a minute. Past it a CPU run would take hours, so it is refused like a pool too large.
CPU_MAX_TOKEN_ROWS_PER_STEP = 2**18


def resolve_device(name: str | None) -> torch.device:
    """--device: cuda, cpu, or None for cuda when available else cpu."""
    if name is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name not in DEVICES:
        raise KvplanError(f"--device: unknown device {name!r} (allowed: {', '.join(DEVICES)})")
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


def _check_cpu_work(plan: VerifyPlan) -> None:
    rows = sum(plan.lengths) * plan.num_kv_heads_per_gpu * plan.layers_verified
    if rows > CPU_MAX_TOKEN_ROWS_PER_STEP:
        raise KvplanError(
            f"the plan is too large for a CPU run: {rows:,} token-head rows per step over "
            f"{plan.layers_verified} layers (cap {CPU_MAX_TOKEN_ROWS_PER_STEP:,}, the Triton "
            "interpreter runs ~10 ms per 32-token tile); use a smaller --context, --batch or "
            "--layers"
        )


def run_verify(
    model: ModelSpec,
    *,
    lengths: list[int],
    kv_dtype: str = "bf16",
    engine: str = "vllm",
    tp: int = 1,
    block_size: int | None = None,
    layers: int | None = None,
    device: str | None = None,
    sku: SkuSpec | None = None,
    skus: Sequence[SkuSpec] = (),
    bandwidth_pass_fraction: float = 0.8,
    repeats: int | None = None,
    seed: int = 0,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Allocate the KV pool kvplan predicts, run the decode kernel over it, measure, compare.

    Args:
        model: the catalogue spec.
        lengths: tokens per sequence of the batch.
        kv_dtype: KV element type (fp32, bf16, fp16, fp8_e4m3, fp8_e5m2).
        engine: KV accounting to check (vllm, sglang, exact).
        tp: tensor-parallel degree; this GPU holds one rank's share.
        block_size: tokens per block, or None for the engine's default.
        layers: layers to verify; None for all on CUDA, 2 on CPU.
        device: cuda, cpu, or None for cuda when available.
        sku: the SKU to compare with; None detects it from the GPU's name among `skus`.
        skus: the catalogue's SKUs, for detection.
        bandwidth_pass_fraction: pass when achieved ≥ this fraction of the measured copy.
        repeats: timed steps; None for 50 on CUDA, 2 on CPU.
        seed: seeds the page shuffle's fill, q, and the pool contents.
        progress: called with (stage, fraction of the run done).

    Returns:
        The record (JSON-ready dict): environment, inputs, memory, numerics, bandwidth,
        tolerances, verdict, notes.

    Raises:
        KvplanError: bad input, or a plan that does not fit (nothing is left allocated).
    """
    report = progress or (lambda stage, fraction: None)
    report("planning", 0.0)
    target = resolve_device(device)
    kind = target.type
    if not 0 < bandwidth_pass_fraction <= 1:
        raise KvplanError(
            f"--bandwidth-pass: {bandwidth_pass_fraction} must be a fraction in (0, 1]"
        )
    if repeats is not None and repeats < 1:
        raise KvplanError(f"--repeats: {repeats} must be at least 1")
    plan = build_plan(
        model,
        lengths=lengths,
        kv_dtype=kv_dtype,
        engine=engine,
        tp=tp,
        tokens_per_block=block_size,
        layers=default_layers(model, kind) if layers is None else layers,
    )
    step_module = _load_step_module(target)
    num_splits = step_module.choose_splits(plan, target)

    sku_match = "given" if sku else ("unknown" if kind == "cuda" else "none: a CPU run")
    if sku is None and kind == "cuda":
        gpu_name = torch.cuda.get_device_name(target)
        sku = detect_sku(skus, gpu_name)
        sku_match = (
            f"detected from {gpu_name!r}"
            if sku
            else f"unknown: {gpu_name!r} matches no catalogue SKU name or alias"
        )
    l2 = l2_bytes(target, sku.l2_bytes if sku else None)
    working_set = plan.kv_bytes_read_per_layer * plan.layers_verified
    l2_flushed = kind == "cuda" and working_set < L2_WORKING_SET_FACTOR * l2
    flush_bytes = L2_WORKING_SET_FACTOR * l2 if l2_flushed else 0
    checked_tokens = min(max(plan.lengths), tokens_checked_max(plan, kind))
    workspace = (
        plan.step_buffer_bytes(num_splits)
        + flush_bytes
        + checked_tokens * reference_scratch_bytes_per_token(plan)
    )

    report("fit check", 0.05)
    fit = memory.check_fit(plan, target, workspace)  # raises before anything is allocated
    if kind == "cpu":
        _check_cpu_work(plan)
    environment = collect_environment(target)

    copy = None
    if kind == "cuda":
        report("copy ceiling", 0.1)
        copy = copy_ceiling(target, fit.device_memory.free_bytes if fit.device_memory else 0)

    report("allocating pools", 0.2)
    pools = memory.allocate_and_measure(plan, target, seed)
    step = None
    try:
        report("filling pools", 0.25)
        memory.fill_pools(pools, plan, seed)
        step = step_module.build_step(plan, pools, seed)

        report("numerics", 0.3)
        numerics = check_numerics(plan, pools, step, kind)

        report("timing", 0.5)
        timing, eager = time_steps(
            step,
            target,
            repeats=DEFAULT_REPEATS[kind] if repeats is None else repeats,
            warmup=DEFAULT_WARMUP[kind],
            flush_l2_bytes=flush_bytes,
            progress=lambda fraction: report("timing", 0.5 + 0.45 * fraction),
        )
        # The timed steps wrote the whole batch: a poisoned (NaN) page read would show here.
        finite = bool(torch.isfinite(step.out.float()).all())
        numerics = dataclasses.replace(numerics, all_outputs_finite=finite)
        memory_facts = record.memory_section(plan, fit, pools, kind)
    finally:
        del step, pools  # the pools go back before anything else runs
        if kind == "cuda":
            torch.cuda.empty_cache()
    if kind == "cuda":
        environment["clocks_after"] = gpu_clocks(target.index or 0)

    report("record", 0.97)
    result: dict[str, Any] = {
        "kvplan_verify_record": record.RECORD_VERSION,
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "environment": environment,
        "inputs": record.inputs_section(
            plan,
            device_type=kind,
            sku=sku,
            sku_match=sku_match,
            bandwidth_pass_fraction=bandwidth_pass_fraction,
            seed=seed,
        ),
        "scaling": record.scaling_section(plan),
        "memory": memory_facts,
        "numerics": record.numerics_section(numerics),
        "bandwidth": record.bandwidth_section(
            plan,
            device_type=kind,
            num_splits=num_splits,
            timing=timing,
            eager=eager,
            copy=copy,
            sku=sku,
            l2_bytes=l2,
            l2_flushed=l2_flushed,
            pass_fraction=bandwidth_pass_fraction,
        ),
    }
    result["tolerances"] = {
        "memory_bytes": memory_facts["tolerance_bytes"],
        "memory_rule": memory_facts["tolerance_rule"],
        "numerics_max_error": result["numerics"]["tolerance"],
        "bandwidth_pass_fraction_of_copy": bandwidth_pass_fraction,
    }
    result["verdict"] = record.verdict(result)
    result["notes"] = _notes(plan, kind, result)
    report("done", 1.0)
    return result


def _notes(plan: VerifyPlan, kind: str, result: dict[str, Any]) -> list[str]:
    notes = [plan.scaling_statement, record.NULL_PAGE_NOTE]
    if kind != "cuda":
        notes.append(record.CPU_TIMING_NOTE)
    numerics = result["numerics"]
    if any(
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
    note = result["bandwidth"].get("note")
    if note and kind == "cuda":
        notes.append(note)
    if result["inputs"]["sku"] is None and kind == "cuda":
        notes.append("datasheet comparison unknown: " + result["inputs"]["sku_match"])
    return notes
