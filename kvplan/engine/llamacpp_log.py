"""llama.cpp's KV cache log lines and launch commands, in each build's wording.

Formats (`src/llama-kv-cache.cpp` and its predecessors; MiB = 2^20, the 2023 "MB" too):

- 2023 (`llama_init_from_file`): `kv self size  = %7.2f MB`, the total only;
- 2024 – b5400: `llama_kv_cache_init: %10s KV buffer size = %8.2f MiB` per buffer, then
  `<ctx>: KV self size  = %7.2f MiB, K (%s): %7.2f MiB, V (%s): %7.2f MiB` (ctx is
  `llama_new_context_with_model` until b4500, `llama_init_from_model` after);
- from b5940: `llama_kv_cache: %10s KV buffer size = …` per buffer and
  `llama_kv_cache: size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs), K (%s): …, V (%s): …`
  (cells per stream; seqs = n_seq_max / streams), one per sub-cache of an iSWA cache after
  `llama_kv_cache_iswa: creating non-SWA KV cache, size = %u cells` (and `    SWA`).
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from kvplan.engine.base import model_reference
from kvplan.engine.llamacpp_cells import FLASH_AUTO_BUILD, Allocation, allocate
from kvplan.units import MIB

if TYPE_CHECKING:
    from kvplan.engine.deployment import Deployment
    from kvplan.engine.llamacpp import LlamaCppProfile, Plan

PAD_ERA_BUILD = 1601
INIT_FROM_MODEL_BUILD = 4500
NEW_FORMAT_BUILD = 5940


def startup_lines(plan: Plan, allocation: Allocation, gpu_backend: str = "CUDA") -> list[str]:
    """The lines llama.cpp prints for `allocation` under `plan`'s build; GPU buffers are named
    `gpu_backend` and the device index (CUDA0, ROCm0)."""
    build = plan.rules.build
    total = allocation.k_bytes + allocation.v_bytes
    if build < PAD_ERA_BUILD:
        return [f"llama_init_from_file: kv self size  = {total / MIB:7.2f} MB"]
    if build < NEW_FORMAT_BUILD:
        context = (
            "llama_init_from_model"
            if build >= INIT_FROM_MODEL_BUILD
            else ("llama_new_context_with_model")
        )
        lines = [
            f"llama_kv_cache_init: {_device(b.device, gpu_backend):>10} KV buffer size = "
            f"{b.kv_bytes / MIB:8.2f} MiB"
            for b in allocation.buffers
            if b.kv_bytes
        ]
        lines.append(
            f"{context}: KV self size  = {total / MIB:7.2f} MiB, K ({plan.type_k}): "
            f"{allocation.k_bytes / MIB:7.2f} MiB, V ({plan.type_v}): "
            f"{allocation.v_bytes / MIB:7.2f} MiB"
        )
        return lines
    return _new_format(plan, allocation, gpu_backend)


def startup_record(plan: Plan, allocation: Allocation, gpu_backend: str = "CUDA") -> dict[str, Any]:
    """The numbers of the lines above, exact: n_ctx, sequences and streams, K and V bytes,
    each buffer's bytes by its printed name, and per sub-cache (full, sliding) its cells per
    stream, layers and bytes (the lines print MiB with two decimals)."""
    caches = []
    for kind, cells, layers in (
        ("full", allocation.cells, allocation.full_layers),
        ("sliding", allocation.swa_cells, allocation.swa_layers),
    ):
        if not layers:
            continue
        part = allocate(_rows_of(plan, kind), plan.rules, allocation.n_ctx, allocation.n_seq)
        caches.append(
            {
                "kind": kind,
                "cells": cells,
                "layers": layers,
                "k_bytes": part.k_bytes,
                "v_bytes": part.v_bytes,
                "buffer_bytes": _buffer_bytes(part, gpu_backend),
            }
        )
    return {
        "n_ctx": allocation.n_ctx,
        "n_seq": allocation.n_seq,
        "streams": allocation.streams,
        "type_k": plan.type_k,
        "type_v": plan.type_v,
        "kv_bytes": allocation.k_bytes + allocation.v_bytes,
        "k_bytes": allocation.k_bytes,
        "v_bytes": allocation.v_bytes,
        "buffer_bytes": _buffer_bytes(allocation, gpu_backend),
        "caches": caches,
    }


def _buffer_bytes(allocation: Allocation, gpu_backend: str) -> dict[str, int]:
    return {_device(b.device, gpu_backend): b.kv_bytes for b in allocation.buffers if b.kv_bytes}


def _rows_of(plan: Plan, kind: str) -> tuple:
    """The plan's layer rows of one sub-cache: windowed layers are the SWA cache's."""
    return tuple(r for r in plan.rows if r.is_windowed == (kind == "sliding"))


def _device(device: str, gpu_backend: str) -> str:
    """A buffer's name as the build prints it: kvplan's CUDA<i> under the GPU backend's name."""
    return gpu_backend + device.removeprefix("CUDA") if device.startswith("CUDA") else device


def _new_format(plan: Plan, allocation: Allocation, gpu_backend: str) -> list[str]:
    """b5940+: one summary per sub-cache (non-SWA, SWA) with its cells, layers and seqs."""
    sub_caches = [("full", allocation.cells, allocation.full_layers)]
    lines = []
    if allocation.swa_layers:
        sub_caches.append(("sliding", allocation.swa_cells, allocation.swa_layers))
        lines += [
            f"llama_kv_cache_iswa: creating non-SWA KV cache, size = {allocation.cells} cells",
            f"llama_kv_cache_iswa: creating     SWA KV cache, size = {allocation.swa_cells} cells",
        ]
    for kind, cells, layers in sub_caches:
        if not layers:
            continue
        part = allocate(_rows_of(plan, kind), plan.rules, allocation.n_ctx, allocation.n_seq)
        lines += [
            f"llama_kv_cache: {_device(b.device, gpu_backend):>10} KV buffer size = "
            f"{b.kv_bytes / MIB:8.2f} MiB"
            for b in part.buffers
            if b.kv_bytes
        ]
        lines.append(
            f"llama_kv_cache: size = {(part.k_bytes + part.v_bytes) / MIB:7.2f} MiB "
            f"({cells:6d} cells, {layers:3d} layers, {allocation.n_seq:2d}/{allocation.streams} "
            f"seqs), K ({plan.type_k}): {part.k_bytes / MIB:7.2f} MiB, V ({plan.type_v}): "
            f"{part.v_bytes / MIB:7.2f} MiB"
        )
    return lines


def gguf_reference(deployment: Deployment) -> str:
    """The GGUF file a launch loads: the one given as the model, else a placeholder named the
    way GGUF conversions are (<Llama-3.1-8B-BF16.gguf>): llama.cpp's -m takes a file path,
    not a Hugging Face repo id."""
    model = deployment.model
    given = next((a for a in model.aliases if a.lower().endswith(".gguf")), None)
    if given is not None:
        return shlex.quote(given)
    stem = model_reference(model).rsplit("/", 1)[-1]
    weights = (deployment.weight_dtype or model.weight_dtype).upper().replace("FP", "F")
    return f"<{stem}-{weights}.gguf>"


def server_command(profile: LlamaCppProfile, deployment: Deployment, n_ctx: int, n_seq: int) -> str:
    """`llama-server` (or ollama's environment) for -c n_ctx -np n_seq with this plan's types."""
    plan = profile.plan(deployment)
    settings = deployment.settings
    model = deployment.model
    fa = profile.flash_attention(deployment)
    gguf = gguf_reference(deployment)
    if profile.name == "ollama":
        env = [f"OLLAMA_CONTEXT_LENGTH={n_ctx // n_seq}", f"OLLAMA_NUM_PARALLEL={n_seq}"]
        if plan.type_k != "f16":
            env.append(f"OLLAMA_KV_CACHE_TYPE={plan.type_k}")
        if fa:
            env.append("OLLAMA_FLASH_ATTENTION=1")
        name = model.name
        then = f"# then: ollama create {name} -f Modelfile (FROM {gguf}); ollama run {name}"
        return " ".join([*env, "ollama serve", then])
    parts = ["llama-server", f"-m {gguf}", f"-c {n_ctx}", f"-np {n_seq}"]
    if plan.type_k != "f16":
        parts.append(f"-ctk {plan.type_k}")
    if plan.type_v != "f16":
        parts.append(f"-ctv {plan.type_v}")
    if plan.rules.build >= FLASH_AUTO_BUILD:
        parts.append(f"-fa {'on' if fa else 'off'}")
    elif fa:
        parts.append("-fa")
    parts.append(
        f"-ngl {profile.gpu_layers(deployment) if settings.gpu_layers is not None else 999}"
    )
    if deployment.pp > 1:
        parts.append("--split-mode layer")
    if settings.kv_unified:
        parts.append("--kv-unified")
    if settings.swa_full:
        parts.append("--swa-full")
    if settings.batch_tokens:
        parts.append(f"-b {settings.batch_tokens}")
    if settings.ubatch_tokens:
        parts.append(f"-ub {settings.ubatch_tokens}")
    return " ".join(parts)
