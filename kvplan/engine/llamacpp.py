"""The llama.cpp profile (and ollama, which runs it): cells that -c and -np allocate.

llama.cpp's KV cache is not carved from free memory: `llama-server -c N -np S` allocates N
cells (rounded by the build, `llamacpp_cells`) split into S slots, and either it fits beside
the weights and compute buffers or the server fails to start. So:

- with `--ctx-size` (-c) set, the pool is that allocation: S slots of N / S tokens each, if
  weights + KV + compute buffers fit the GPU, else nothing;
- without it, kvplan plans the launch for the question asked: each request of L tokens is one
  slot of the cells `-c L` gives one sequence, and the GPU holds as many slots as fit beside
  the weights and compute buffers (`--batch` B then means `-c B·L -np B`).

K and V are sized separately (`--kv-dtype` is -ctk, `--v-dtype` -ctv, each a ggml type with
its block size), per layer: n_head_kv · row(type, head_dim). Layers not offloaded
(`--gpu-layers`, -ngl) keep their KV in host memory; `--pp` spreads the offloaded layers over
GPUs (llama.cpp's default --split-mode layer). Tensor parallelism is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from kvplan.engine import llamacpp_cells as cells
from kvplan.engine.base import EngineProfile
from kvplan.engine.budget import Budget, device_memory, subtract_terms
from kvplan.engine.choices import SearchChoices
from kvplan.engine.llamacpp_cells import Allocation, CellRules, LayerRow, Plan
from kvplan.engine.llamacpp_swa import ignored_window_note, keeps_window
from kvplan.engine.pages import SlotBytes, Slots
from kvplan.engine.pool import UNLIMITED_REQUESTS, KvLayout, KvPool, StageLayout
from kvplan.engine.release import parse_build
from kvplan.engine.resolved import resolve
from kvplan.errors import SettingError
from kvplan.kvmath import stage_layer_ranges
from kvplan.specs import DtypeInfo, kv_dtype_info

if TYPE_CHECKING:
    from kvplan.engine.batch import Batch
    from kvplan.engine.deployment import Deployment
    from kvplan.specs import ModelSpec, SkuSpec

OLDEST_BUILD, NEWEST_BUILD = 1, 20_000
DEFAULT_BUILD = 7900
# ggml type names for kvplan's KV dtype names (log lines and -ctk/-ctv).
GGML_NAMES = {"fp32": "f32", "fp16": "f16", "bf16": "bf16"}
# -ctk/-ctv types: common/arg.cpp kv_cache_types (ggml-org/llama.cpp): F32, F16, BF16, Q8_0,
# Q4_0, Q4_1, IQ4_NL, Q5_0, Q5_1.
GGML_KV_TYPES = ("fp32", "fp16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl")
# What `recommend` tries: the GGUF file types the most downloaded quantisations ship (Q8_0,
# Q6_K, Q5_K_M, Q4_K_M, IQ4_XS; below 4 bits quality falls off and an importance matrix is
# needed), and the KV types ollama documents (docs/faq.md: f16; q8_0, "a very small loss in
# precision"; q4_0, "a small-medium loss").
SEARCHED_WEIGHT_TYPES = ("q8_0", "q6_k", "q5_k_m", "q4_k_m", "iq4_xs")
SEARCHED_KV_TYPES = ("fp16", "q8_0", "q4_0")


def ggml_name(kv_dtype: str) -> str:
    return GGML_NAMES.get(kv_dtype, kv_dtype)


def _row(dtype: DtypeInfo, elements: int) -> int:
    """ggml_row_size: elements / block · block bytes (blocks never straddle a row here)."""
    return dtype.row_bytes(elements)


def layer_rows(
    model: ModelSpec, k_dtype: DtypeInfo, v_dtype: DtypeInfo, build: int, devices: tuple[str, ...]
) -> tuple[LayerRow, ...]:
    """One row per layer: K and V bytes of one cell, the window, the device it lives on."""
    attention, mla = model.attention, model.mla
    heads, head_dim = attention.num_kv_heads, attention.head_dim
    window = model.layers.sliding_window or model.layers.chunk_size or 0
    rows = []
    for index, kind in enumerate(model.layer_kinds):
        device = devices[index]
        if kind == "mla" and mla is not None:
            if build < cells.MLA_LATENT_BUILD:  # per-head K and V, as transformers stores them
                k = attention.num_heads * _row(k_dtype, mla.qk_nope_head_dim + mla.qk_rope_head_dim)
                v = attention.num_heads * _row(v_dtype, mla.v_head_dim)
            else:
                k = _row(k_dtype, mla.kv_lora_rank + mla.qk_rope_head_dim)
                v = 0 if build >= cells.MLA_NO_V_BUILD else _row(v_dtype, mla.kv_lora_rank)
            rows.append(LayerRow("full", k, v, device=device))
        elif kind in ("full", "sliding", "chunked"):
            k, v = heads * _row(k_dtype, head_dim), heads * _row(v_dtype, head_dim)
            if not keeps_window(model.family, build):  # llamacpp_swa: Phi-3, Mistral v0.1, …
                kind = "full"
            rows.append(LayerRow(kind, k, v, window if kind != "full" else 0, device=device))
        elif kind == "state" and model.state is not None:
            # llama-memory-recurrent keeps conv (r) and ssm (s) states in f32 per sequence.
            rows.append(
                LayerRow(
                    "state", 0, 0, state_bytes=model.state.elements_per_seq() * 4, device=device
                )
            )
        else:
            rows.append(LayerRow("none", 0, 0, device=device))
    return tuple(rows)


def gpu_backend_name(sku: SkuSpec | None) -> str:
    """What llama.cpp's GPU backend calls its devices on `sku` (buffers `<name>0`, `<name>1`…).

    ggml/include/ggml-cuda.h: GGML_CUDA_NAME is "ROCm" in HIP builds (AMD GPUs), "MUSA" in
    Moore Threads builds, else "CUDA".
    """
    return "ROCm" if sku is not None and sku.vendor == "amd" else "CUDA"


def devices_of(num_layers: int, gpu_layers: int, gpus: int) -> tuple[str, ...]:
    """The buffer each layer's cache lives in: the last `gpu_layers` layers on CUDA0..N−1
    (split like --split-mode layer, evenly), the rest on the CPU. The log lines print the
    GPU backend's own name (`gpu_backend_name`: ROCm0 on AMD)."""
    on_gpu = min(gpu_layers, num_layers)
    first = num_layers - on_gpu
    devices = ["CPU"] * first
    if on_gpu:
        for gpu, layers in enumerate(stage_layer_ranges(on_gpu, min(gpus, on_gpu))):
            devices += [f"CUDA{gpu}"] * len(layers)
    return tuple(devices)


@dataclass(frozen=True)
class LlamaCppLayout(KvLayout):
    """Slots of the launch `plan` allocates (planned per request, or fixed by -c / -np)."""

    plan: Plan


@dataclass(frozen=True)
class SlotPool(KvPool[LlamaCppLayout]):
    """A pool whose requests cannot exceed one slot's context (fixed -c / -np)."""

    max_request_tokens: int = UNLIMITED_REQUESTS

    def requests_at(self, tokens: int) -> int:
        return 0 if tokens > self.max_request_tokens else super().requests_at(tokens)

    def holds(self, batch: Batch) -> bool:
        return batch.longest <= self.max_request_tokens and super().holds(batch)

    def concurrency_at(self, tokens: int) -> float:
        return 0.0 if tokens > self.max_request_tokens else super().concurrency_at(tokens)


class LlamaCppProfile(EngineProfile[LlamaCppLayout]):
    name = "llama.cpp"
    summary = "cells that -c / -np allocate (padded by build, one stream per slot, SWA caches)"
    default_utilization_text = "1.0 (no fraction: the cache is what -c allocates)"
    default_kv_dtype = "fp16"
    engine_label = "llama.cpp"
    kv_dtypes = GGML_KV_TYPES
    kv_dtype_setting = "-ctk/-ctv"
    separate_v_dtype = True

    def parsed_release(self, deployment: Deployment) -> Any:
        """The build the version setting names (kvplan.engine.resolved keeps it)."""
        text = deployment.settings.version
        if text is None:
            return DEFAULT_BUILD
        return parse_build(text, "llama.cpp", OLDEST_BUILD, NEWEST_BUILD)

    def build_of(self, deployment: Deployment) -> int:
        """The llama.cpp build whose rules apply, parsed once."""
        return resolve(deployment).release  # type: ignore[no-any-return]

    def search_choices(self, model: ModelSpec, sku: SkuSpec) -> SearchChoices:
        """f16, q8_0 and q4_0 KV; the released weights and the GGUF file types people run
        (a file llama-quantize makes, which the launch line names)."""
        kv_dtypes = tuple(k for k in SEARCHED_KV_TYPES if self.accepts_kv_dtype(k))
        return SearchChoices(kv_dtypes, (None, *SEARCHED_WEIGHT_TYPES))

    def sized_for(self, deployment: Deployment, requests: int, context_tokens: int) -> Deployment:
        """-c requests·L -np requests when --ctx-size is not set: the launch allocates the
        slots asked for, not every slot that would fit."""
        settings = deployment.settings
        if settings.context_size_tokens is not None:
            return deployment
        sized = replace(settings, context_size_tokens=requests * context_tokens, parallel=requests)
        return deployment.replace(settings=sized)

    def tp_refusal(self, model: ModelSpec, tp: int) -> str | None:
        if tp > 1:
            return (
                f"{self.name} does not split attention heads over GPUs; it splits layers "
                "(--split-mode layer): use --pp for several GPUs"
            )
        return None

    def check(self, deployment: Deployment) -> None:
        super().check(deployment)
        self.build_of(deployment)
        settings = deployment.settings
        if deployment.dp > 1 or deployment.ep:
            raise SettingError(
                "dp", f"{self.name} runs one model instance; drop them", also=("ep",)
            )
        v_dtype = deployment.v_dtype
        if kv_dtype_info(v_dtype).is_quantised and not self.flash_attention(deployment):
            # The V type is --v-dtype's when given, else --kv-dtype's (V follows K).
            raise SettingError(
                "v_dtype",
                f"a quantised V cache ({ggml_name(v_dtype)}) needs flash attention "
                f"({self.flash_attention_rule}); add {{flash_attention}}",
                mentions=("flash_attention",),
                lead=None if settings.v_dtype else "--kv-dtype",
            )
        if settings.parallel and settings.context_size_tokens is None:
            raise SettingError(
                "parallel",
                "give {context_size_tokens} with it (the cells the slots share)",
                mentions=("context_size_tokens",),
            )

    # Why a quantised V cache needs flash attention, as the engine says it.
    flash_attention_rule = "llama.cpp: 'V cache quantization requires flash_attn'"

    def flash_attention(self, deployment: Deployment) -> bool:
        """-fa as set; else on from the -fa auto builds (CUDA supports it), off before."""
        given = deployment.settings.flash_attention
        if given is not None:
            return given
        return self.build_of(deployment) >= cells.FLASH_AUTO_BUILD

    def gpu_layers(self, deployment: Deployment) -> int:
        given = deployment.settings.gpu_layers
        return (
            deployment.model.num_layers
            if given is None
            else min(given, deployment.model.num_layers)
        )

    def plan(self, deployment: Deployment) -> Plan:
        return _plan(self, deployment)

    def layout(self, deployment: Deployment, sku: SkuSpec | None) -> LlamaCppLayout:
        return _layout(self, deployment)

    def budget(
        self, deployment: Deployment, sku: SkuSpec, max_model_len: int | None = None
    ) -> Budget:
        """GPU memory − weights of the offloaded layers − compute buffers (utilization 1)."""
        total, basis = device_memory(sku)
        weights = deployment.weights().per_gpu_bytes
        offloaded = self.gpu_layers(deployment)
        weights = weights * offloaded // deployment.model.num_layers
        context = max_model_len or deployment.model.max_context

        def estimate() -> tuple[int, int, int, int]:
            compute = compute_buffer_bytes(
                deployment.model,
                self.flash_attention(deployment),
                self.plan(deployment).rules.ubatch_tokens,
                context,
            )
            return compute, 0, 0, compute // 4

        return subtract_terms(
            total_bytes=total,
            total_basis=basis,
            utilization=1.0,
            weights_bytes=weights if offloaded else 0,
            settings=deployment.settings,
            estimate=estimate,
        )

    def pool(self, layout: LlamaCppLayout, budget: Budget) -> SlotPool:
        """Planned: the bytes left hold slots; fixed: all S slots if they fit, else none."""
        plan = layout.plan
        fixed = plan.fixed
        if fixed is None:
            return SlotPool(layout, max(budget.kv_bytes, 0))
        needed = max(fixed.bytes_on(f"CUDA{g}") for g in range(plan.gpus))
        slots = fixed.n_seq if budget.kv_bytes >= needed or budget.fixed else 0
        return SlotPool(layout, slots, fixed.n_ctx_seq)

    def capacity_tokens(self, pool: KvPool[LlamaCppLayout], max_model_len: int) -> int:
        """Cells of the full-attention layers: n_ctx (fixed), or what the bytes left buy."""
        plan = pool.layout.plan
        if plan.fixed is not None:
            return plan.fixed.n_ctx if pool.num_blocks else 0
        return super().capacity_tokens(pool, max_model_len)

    def log_lines(
        self,
        budget: Budget,
        pool: KvPool[LlamaCppLayout],
        max_model_len: int,
        sku: SkuSpec | None = None,
    ) -> list[str]:
        from kvplan.engine.llamacpp_log import startup_lines

        started = _started(pool, max_model_len)
        if started is None:
            return []
        return startup_lines(*started, gpu_backend_name(sku))

    def startup_figures(
        self,
        budget: Budget,
        pool: KvPool[LlamaCppLayout],
        max_model_len: int,
        sku: SkuSpec | None = None,
    ) -> dict[str, Any]:
        from kvplan.engine.llamacpp_log import startup_record

        started = _started(pool, max_model_len)
        if started is None:
            return {}
        return startup_record(*started, gpu_backend_name(sku))

    def notes(self, deployment: Deployment, sku: SkuSpec | None) -> list[str]:
        notes = super().notes(deployment, sku)
        settings = deployment.settings
        if settings.context_size_tokens is None:
            notes.append(
                f"{self.engine_label}: no `context_size_tokens` given, so each request is one "
                f"slot of the cells {self.slots_text('L', 'B')}; the GPU holds the slots that fit"
            )
        else:
            parallel = settings.parallel or 1
            launch = self.launch_text(settings.context_size_tokens, parallel)
            notes.append(
                f"{self.engine_label} allocates {launch} up front: requests fit only within a slot"
            )
        model = deployment.model
        has_window = any(kind in ("sliding", "chunked") for kind in model.layer_kinds)
        window_note = ignored_window_note(model.family, self.build_of(deployment), has_window)
        if window_note:
            notes.append(window_note)
        if deployment.v_dtype != deployment.kv_dtype:
            notes.append(
                f"K cache {ggml_name(deployment.kv_dtype)} (-ctk), V cache "
                f"{ggml_name(deployment.v_dtype)} (-ctv)"
            )
        offloaded = self.gpu_layers(deployment)
        if offloaded < deployment.model.num_layers:
            notes.append(
                f"{self.gpu_layers_setting} {offloaded}: the KV and weights of "
                f"{deployment.model.num_layers - offloaded} layers stay in host memory "
                "(weights on the GPU scaled by the layers offloaded)"
            )
        if sku is not None and settings.activation_bytes is None:
            # The KQ scores are in the estimate only without flash attention
            # (compute_buffer_bytes): naming them beside --flash-attn read as a contradiction.
            kq = "" if self.flash_attention(deployment) else ", or the KQ matrix when larger"
            notes.append(
                f"compute buffers are an estimate (logits of one ubatch{kq}); the "
                f"{gpu_backend_name(sku)} context is not counted"
            )
        return notes

    # The setting that offloads layers, as this engine's users set it.
    gpu_layers_setting = "-ngl"

    def slots_text(self, context: str, requests: str) -> str:
        """How one request's slot is launched, in this engine's own settings: `context`
        tokens a request, `requests` of them."""
        launch = f"-c {requests}·{context} -np {requests}"
        return f"-c {context} gives it ({requests} requests = {launch})"

    def launch_text(self, cells: int, parallel: int) -> str:
        """The launch that allocates `cells` cells for `parallel` slots, as set."""
        return f"-c {cells} -np {parallel}"

    def launch_command(
        self, deployment: Deployment, sku: SkuSpec | None, context_tokens: int
    ) -> str:
        from kvplan.engine.llamacpp_log import server_command

        settings = deployment.settings
        n_ctx, n_seq = settings.context_size_tokens, settings.parallel or 1
        if n_ctx is None:
            n_seq = 1
            if sku is not None:
                layout = self.layout(deployment, sku)
                pool = self.pool(layout, self.budget(deployment, sku, context_tokens))
                n_seq = max(pool.requests_at(context_tokens), 1)
            n_ctx = n_seq * context_tokens
        return server_command(
            deployment,
            self.plan(deployment),
            n_ctx,
            n_seq,
            ollama=self.name == "ollama",
            flash_attention=self.flash_attention(deployment),
            gpu_layers=self.gpu_layers(deployment),
        )


def _started(pool: KvPool[LlamaCppLayout], max_model_len: int) -> tuple[Plan, Allocation] | None:
    """The launch plan and what it allocates (None when no launch fits)."""
    plan = pool.layout.plan
    allocation = plan.fixed or launch_allocation(plan, pool, max_model_len)
    return None if allocation is None else (plan, allocation)


def launch_allocation(plan: Plan, pool: KvPool, context_tokens: int) -> Allocation | None:
    """The allocation of `-c S·L -np S` for the slots S of length L the pool holds."""
    slots = pool.requests_at(context_tokens)
    if slots < 1:
        return None
    return plan.allocation(slots * context_tokens, slots)


def compute_buffer_bytes(model: ModelSpec, flash_attention: bool, ubatch: int, context: int) -> int:
    """An estimate of llama.cpp's compute buffer on the GPU, in bytes.

    The graph's largest live tensors for one ubatch: the f32 logits (n_vocab · ubatch · 4 B),
    and without flash attention the KQ scores and their softmax (2 · ubatch · cells · heads ·
    4 B). A Llama-3 8B with flash attention logs 258.50 MiB (logits 250.5 MiB).
    """
    logits = model.vocab_size * ubatch * 4
    scores = 0 if flash_attention else 2 * ubatch * context * model.attention.num_heads * 4
    return max(logits, scores) + 8 * 2**20


@lru_cache(maxsize=1024)
def _plan(profile: LlamaCppProfile, deployment: Deployment) -> Plan:
    settings = deployment.settings
    build = profile.build_of(deployment)
    rules = CellRules(
        build,
        profile.flash_attention(deployment),
        bool(settings.kv_unified),
        settings.swa_full,
        cells.physical_batch_tokens(
            settings.context_size_tokens, settings.batch_tokens, settings.ubatch_tokens
        ),
    )
    devices = devices_of(deployment.model.num_layers, profile.gpu_layers(deployment), deployment.pp)
    k_dtype, v_dtype = (
        kv_dtype_info(deployment.kv_dtype),
        kv_dtype_info(deployment.v_dtype),
    )
    rows = layer_rows(deployment.model, k_dtype, v_dtype, build, devices)
    return Plan(
        rows,
        rules,
        ggml_name(k_dtype.name),
        ggml_name(v_dtype.name),
        settings.context_size_tokens,
        settings.parallel or 1,
        deployment.pp,
    )


@lru_cache(maxsize=1024)
def _layout(profile: LlamaCppProfile, deployment: Deployment) -> LlamaCppLayout:
    plan = profile.plan(deployment)
    fixed = plan.fixed
    stages = []
    for gpu in range(deployment.pp):
        device = f"CUDA{gpu}"
        # Planned: a page is a byte of the slot sized for the request. Fixed: one of the -np
        # slots, priced at its share of the allocation.
        if fixed is None:
            stages.append(StageLayout(1, (SlotBytes(plan, device),)))
        else:
            per_slot = max(-(-fixed.bytes_on(device) // fixed.n_seq), 1)
            stages.append(StageLayout(per_slot, (Slots(),)))
    per_token = max(
        sum(r.k_bytes + r.v_bytes for r in plan.rows if r.device == f"CUDA{g}")
        for g in range(deployment.pp)
    )
    unit = "byte" if fixed is None else "slot"
    return LlamaCppLayout(tuple(stages), 1, per_token, plan=plan, unit=unit)


LLAMA_CPP = LlamaCppProfile()
