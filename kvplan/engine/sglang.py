"""The SGLang profile: a token pool in pages, sized the way model_runner profiles it.

Read from sgl-project/sglang `python/sglang/srt/model_executor/model_runner.py`
(`profile_max_num_token`, `init_memory_pool`; ≥ 0.5.3 `model_runner_kv_cache_mixin.py`) and
`mem_cache/memory_pool.py` (`MHATokenToKVPool`, `MLATokenToKVPool`):

- cell = bytes of one token in every attention layer of this rank: kv_heads_per_gpu ·
  (head_dim + v_head_dim) · e per layer, or the MLA latent (kv_lora_rank + qk_rope) · e;
- rest = free after weights − free before weights · (1 − mem_fraction_static)
       = ⌊pre · f⌋ − weights, with pre = runtime-visible memory − CUDA context − NCCL;
- max_total_num_tokens = rest // cell, capped by --max-total-tokens, floored to the page;
- each layer's K and V buffer holds tokens + page_size rows (row 0 absorbs padded tokens).

Windowed layers keep full length: SGLang 0.5.x turns its hybrid SWA pool off for Gemma 2/3,
GPT-OSS and OLMo 3 (`server_args.py` `_handle_model_specific_adjustments`), and Gemma 2 had
no SWA pool before. Mamba-style state is charged as token slots of equal bytes.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from kvplan.engine import sglang_memory, sparse_mla
from kvplan.engine.base import EngineProfile, model_reference
from kvplan.engine.budget import Budget, device_memory, fraction_of_free
from kvplan.engine.pages import StatePages, TokenPages
from kvplan.engine.pool import KvLayout, KvPool, StageLayout
from kvplan.engine.release import Release, parse_release
from kvplan.engine.resolved import resolve
from kvplan.kvmath import LayerCache, StateCache, ceil_div
from kvplan.units import GIB

if TYPE_CHECKING:
    from kvplan.engine.deployment import Deployment
    from kvplan.specs import SkuSpec

OLDEST, NEWEST = (0, 1, 0), (0, 5, 99)
DEFAULT_RELEASE_TEXT = "0.5.3"
# KV dtypes SGLang's pools store as kvplan sizes them: --kv-cache-dtype auto (the model's
# dtype), fp8_e4m3 and fp8_e5m2 with per-tensor scales (server_args.py; docs/advanced_features/
# quantized_kv_cache.md, sgl-project/sglang 03cd2ec). Not offered: the experimental fp4_e2m1
# (E2M1 with one 8-bit scale per 16 values) and the --int8-kv-cache phase-1 feature (Triton,
# page 1 only), which kvplan does not model.
KV_DTYPES = ("fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2")
# Backends that force a page size for MLA (server_args.py): trtllm_mla, the default for
# DeepSeek on Blackwell (SM100), pages of 64; FlashAttention-3 on Hopper keeps page 1.
MLA_PAGE_BY_CAPABILITY = {"10.0": 64, "10.3": 64}


def release_of(deployment: Deployment) -> Release:
    """The SGLang release whose rules apply, parsed once (kvplan.engine.resolved)."""
    return resolve(deployment).release  # type: ignore[no-any-return]


def parse_sglang_release(deployment: Deployment) -> Release:
    """The version setting parsed, else the default release, as (major, minor, patch, post):
    SGLang changed its log wording within 0.4.3's post releases."""
    text = deployment.settings.version or DEFAULT_RELEASE_TEXT
    release = parse_release(text, "SGLang", OLDEST, NEWEST)
    post = re.search(r"post([0-9]{1,10})", text)
    return (*release, int(post.group(1)) if post else 0)  # type: ignore[return-value]


def is_multimodal(deployment: Deployment) -> bool:
    """Whether the checkpoint has a vision encoder (an hf vision_config)."""
    return deployment.model.vision is not None or deployment.model.vision_tower is not None


def vit_geometry(deployment: Deployment) -> tuple[int, int] | None:
    """(layers, hidden size) of the vision encoder (vision_config num_hidden_layers and
    hidden_size; mllama's count is its local layers); None when the catalogue does not give it."""
    model = deployment.model
    if model.vision is not None:
        return model.vision.num_layers, model.vision.hidden_size
    tower = model.vision_tower
    if tower is None or tower.num_layers is None or tower.hidden_size is None:
        return None
    return tower.num_layers, tower.hidden_size


def page_tokens(deployment: Deployment, sku: SkuSpec | None) -> int:
    """--page-size (kvplan --block-size), else 1, or the MLA backend's forced page."""
    if deployment.settings.tokens_per_block:
        return deployment.settings.tokens_per_block
    if deployment.model.mla is not None and sku is not None and sku.compute_capability:
        return MLA_PAGE_BY_CAPABILITY.get(sku.compute_capability, 1)
    return 1


def dp_attention_ranks(deployment: Deployment) -> int:
    """SGLang --dp with --enable-dp-attention: kvplan's --dp N --ep at --tp 1 per replica."""
    return deployment.dp if deployment.dp > 1 and deployment.ep else 0


@dataclass(frozen=True)
class SglangLayout(KvLayout):
    """Pages of cells, plus what the log line needs: K and V bytes of one row, all layers."""

    k_row_bytes: int  # one token of K (or of the MLA latent) over this rank's layers
    v_row_bytes: int  # 0 for MLA: one latent buffer
    release: Release
    kv_dtype: str
    max_pages: int | None  # --max-total-tokens // page; None: no cap
    max_running_requests: int | None  # as set; None: SGLang's default from the pool


@lru_cache(maxsize=4096)
def _layout(deployment: Deployment, page: int) -> SglangLayout:
    caches = SGLANG.stored_caches(deployment, full_reservation=True)
    stages = []
    for layers in deployment.stage_ranges():
        stage = [caches[i] for i in layers]
        cell = sum(c.token_bytes for c in stage)
        state = sum(c.state_bytes for c in stage if isinstance(c, StateCache))
        page_bytes = max(cell * page, 1)
        groups: tuple = (TokenPages(page),) if cell else ()
        if state:
            groups += (StatePages(ceil_div(state, page_bytes)),)
        stages.append(StageLayout(page_bytes, groups))
    binding = max(deployment.stage_ranges(), key=len)
    cells = [caches[i] for i in binding]
    mla = deployment.model.mla is not None
    # MLA keeps one latent buffer (K only); other layers a K and a V row of equal bytes.
    k_row = sum(c.token_bytes if c.is_latent else c.token_bytes // 2 for c in cells)
    v_row = 0 if mla else sum(c.token_bytes // 2 for c in cells if not c.is_latent)
    cap = deployment.settings.max_kv_tokens
    return SglangLayout(
        tuple(stages),
        tokens_per_block=page,
        kv_bytes_per_token=max(s.bytes_per_block for s in stages) // page,
        k_row_bytes=k_row,
        v_row_bytes=v_row,
        release=release_of(deployment),
        kv_dtype=deployment.kv_dtype,
        max_pages=None if cap is None else cap // page,
        max_running_requests=deployment.settings.max_num_seqs,
    )


class SglangProfile(EngineProfile[SglangLayout]):
    name = "sglang"
    summary = (
        "token pool in pages (1; MLA 64 on Blackwell): pre-load free × mem_fraction_static − "
        "weights, over one token's cells"
    )
    default_utilization_text = "by GPU memory and TP (0.835 on an H100 at TP 1, SGLang ≥ 0.5.3)"
    kv_dtypes = KV_DTYPES
    kv_dtype_setting = "--kv-cache-dtype"
    token_cap_setting = "--max-total-tokens"

    def parsed_release(self, deployment: Deployment) -> Release:
        return parse_sglang_release(deployment)

    def stored_caches(
        self, deployment: Deployment, full_reservation: bool = False
    ) -> tuple[LayerCache, ...]:
        """The physics caches, with sparse MLA's fp8 latent in the 656-byte layout."""
        caches = deployment.exact_caches(full_reservation)
        return sparse_mla.stored_caches(caches, resolve(deployment).k_dtype)

    def check(self, deployment: Deployment) -> None:
        release_of(deployment)  # a bad version fails before anything is sized
        super().check(deployment)

    def layout(self, deployment: Deployment, sku: SkuSpec | None) -> SglangLayout:
        return _layout(deployment, page_tokens(deployment, sku))

    def utilization(self, deployment: Deployment, sku: SkuSpec | None) -> float:
        """--mem-fraction-static as set, else SGLang's default for this release and GPU;
        lowered for a multimodal model as that release does (`vlm_fraction_factor`)."""
        release, given = release_of(deployment), deployment.settings.utilization
        if given:
            fraction = given
        else:
            ranks = dp_attention_ranks(deployment)
            tp = deployment.tp * (ranks or 1)
            fraction = sglang_memory.mem_fraction_static(release, sku, tp, deployment.pp, ranks)
        if not is_multimodal(deployment):
            return fraction
        if given and not sglang_memory.scales_given_fraction(release):
            return fraction
        return fraction * sglang_memory.vlm_fraction_factor(release, vit_geometry(deployment))

    def budget(
        self, deployment: Deployment, sku: SkuSpec, max_model_len: int | None = None
    ) -> Budget:
        """rest = post-load free − pre-load free · (1 − f), SGLang's `profile_max_num_token`.

        pre = "Load weight begin. avail mem" (given, else total − CUDA context − NCCL);
        post = "Load weight end. … avail mem" (given, else pre − weights − the loader's
        overhead). The non-torch term is what is gone before loading plus that overhead.
        """
        total, basis = device_memory(sku)
        settings = deployment.settings
        ranks = dp_attention_ranks(deployment)
        readings = sglang_memory.readings(
            settings,
            total,
            deployment.weights().per_gpu_bytes,
            deployment.tp * (ranks or 1),
            deployment.pp,
            sku,
        )
        utilization = self.utilization(deployment, sku)
        return fraction_of_free(
            total_bytes=total,
            total_basis=basis,
            utilization=utilization,
            weights_bytes=readings.weights_bytes,
            free_bytes=readings.before_load_bytes,
            settings=dataclasses.replace(settings, non_torch_bytes=None),
            non_torch_bytes=readings.non_torch_bytes,
            uncertainty_bytes=int(readings.band_bytes * utilization),
        )

    def pool(self, layout: SglangLayout, budget: Budget) -> KvPool[SglangLayout]:
        """Pages the budget buys, capped by --max-total-tokens (floored to the page)."""
        pool = super().pool(layout, budget)
        if layout.max_pages is None:
            return pool
        return dataclasses.replace(pool, num_blocks=min(pool.num_blocks, layout.max_pages))

    def capacity_tokens(self, pool: KvPool[SglangLayout], max_model_len: int) -> int:
        """max_total_num_tokens: pages × page size."""
        return pool.block_capacity_tokens

    def log_lines(
        self,
        budget: Budget,
        pool: KvPool[SglangLayout],
        max_model_len: int,
        sku: SkuSpec | None = None,
    ) -> list[str]:
        return startup_lines(budget, pool, max_model_len)

    def startup_figures(
        self, budget: Budget, pool: KvPool, max_model_len: int, sku: SkuSpec | None = None
    ) -> dict[str, Any]:
        return startup_record(budget, pool, max_model_len)

    def page_note(self, deployment: Deployment, sku: SkuSpec | None) -> str | None:
        """MLA pages depend on the GPU's attention backend (`page_tokens`): say which."""
        if deployment.model.mla is None or deployment.settings.tokens_per_block:
            return None
        page = page_tokens(deployment, sku)
        if sku is None:
            where = "no GPU given: page 1 assumed, as off Blackwell"
        elif page > 1:
            where = f"{sku.name}: the trtllm_mla backend's page"
        else:
            where = f"{sku.name}: token pages"
        return f"MLA pages of {page} tokens ({where})"

    def notes(self, deployment: Deployment, sku: SkuSpec | None) -> list[str]:
        notes = super().notes(deployment, sku)
        page = self.page_note(deployment, sku)
        if page:
            notes.append(page)
        if deployment.model.has_windowed_layers:
            notes.append(
                "SGLang keeps every attention layer at full length (its hybrid SWA pool is off "
                "for Gemma 2/3, GPT-OSS and OLMo 3 in 0.5.x; other models: an upper bound)"
            )
        if "state" in deployment.model.layer_kinds:
            notes.append("recurrent state is counted as token slots of the same bytes")
        settings = deployment.settings
        if sku is not None and settings.kv_memory_bytes is None:
            notes.append(self.readings_note(deployment, sku))
        fraction = self.utilization(deployment, sku)
        lowered = is_multimodal(deployment)
        if not deployment.settings.utilization:
            notes.append(
                f"mem_fraction_static {fraction:.4g}: SGLang's default for this GPU and TP"
                + (", lowered for the vision encoder" if lowered else "")
            )
        elif lowered and sglang_memory.scales_given_fraction(release_of(deployment)):
            notes.append(
                f"mem_fraction_static {fraction:.4g}: the given fraction × 0.95, as this release "
                "lowers it for a multimodal model"
            )
        return notes

    def readings_note(self, deployment: Deployment, sku: SkuSpec) -> str:
        """Where the two free-memory readings the pool is sized from come from."""
        settings = deployment.settings
        if settings.avail_mem_before_load_bytes is not None:
            before = "the logged free memory before weights load (`avail_mem_before_load_bytes`)"
        elif settings.non_torch_bytes is not None:
            before = "the runtime total less `non_torch_bytes` before weights load"
        else:
            gpus = deployment.tp * (dp_attention_ranks(deployment) or 1) * deployment.pp
            link = "NVLink" if sglang_memory.fully_linked(sku) else "PCIe"
            nccl = sglang_memory.init_bytes(gpus, 1, sku) - sglang_memory.CUDA_CONTEXT_BYTES
            before = (
                "free memory before weights load as the runtime total less the CUDA context "
                f"(0.32 GiB) and the communicators ({nccl / GIB:.2f} GiB over {link}, from "
                "public logs; `avail_mem_before_load_bytes` or `non_torch_bytes` sets it)"
            )
        after = (
            "the logged free memory after (`avail_mem_after_load_bytes`)"
            if settings.avail_mem_after_load_bytes is not None
            else "that less the weights after"
        )
        return f"SGLang sizes its pool from {before} and {after}"

    def launch_command(
        self, deployment: Deployment, sku: SkuSpec | None, context_tokens: int
    ) -> str:
        """`python -m sglang.launch_server` with the flags this plan depends on."""
        model, settings = deployment.model, deployment.settings
        parts = ["python -m sglang.launch_server", f"--model-path {model_reference(model)}"]
        ranks = dp_attention_ranks(deployment)
        parts.append(f"--tp {deployment.tp * (ranks or 1)}")
        if ranks:
            parts += [f"--dp {ranks}", "--enable-dp-attention"]
        elif deployment.dp > 1:
            parts.append(f"--dp {deployment.dp}")
        if deployment.ep:
            parts.append(f"--ep-size {deployment.tp * max(deployment.dp, 1)}")
        if deployment.pp > 1:
            parts.append(f"--pp-size {deployment.pp}")
        parts.append(f"--mem-fraction-static {self.utilization(deployment, sku):g}")
        parts.append(f"--context-length {context_tokens}")
        if deployment.kv_dtype.startswith("fp8"):
            parts.append(f"--kv-cache-dtype {deployment.kv_dtype}")
        if settings.tokens_per_block:
            parts.append(f"--page-size {settings.tokens_per_block}")
        if settings.max_kv_tokens:
            parts.append(f"--max-total-tokens {settings.max_kv_tokens}")
        if settings.max_num_seqs:
            parts.append(f"--max-running-requests {settings.max_num_seqs}")
        if settings.max_num_batched_tokens:
            parts.append(f"--chunked-prefill-size {settings.max_num_batched_tokens}")
        if settings.cuda_graphs is False:
            parts.append("--disable-cuda-graph")
        if settings.schedule_conservativeness != 1.0:
            parts.append(f"--schedule-conservativeness {settings.schedule_conservativeness:g}")
        return " ".join(parts)


# --- startup log -------------------------------------------------------------------------

# The releases whose KV line first has "#tokens: N" and "dtype: torch.…" (startup_lines).
TOKENS_FIELD_RELEASE = (0, 4, 3, 3)
DTYPE_FIELD_RELEASE = (0, 5, 13)
_TORCH_DTYPES = {
    "bf16": "torch.bfloat16",
    "fp16": "torch.float16",
    "fp32": "torch.float32",
    "fp8_e4m3": "torch.float8_e4m3fn",
    "fp8_e5m2": "torch.float8_e5m2",
}


def buffer_bytes(layout: SglangLayout, tokens: int) -> tuple[int, int]:
    """(K, V) bytes of the pool's buffers: tokens + page_size rows per layer (≤ 0.4.3: + 1)."""
    extra = layout.tokens_per_block if layout.release >= (0, 4, 4) else 1
    rows = tokens + extra
    return rows * layout.k_row_bytes, rows * layout.v_row_bytes


def startup_record(
    budget: Budget, pool: KvPool[SglangLayout], max_model_len: int
) -> dict[str, Any]:
    """The numbers of SGLang's startup lines, exact: max_total_num_tokens, the K and V
    buffers' bytes (MLA: one latent buffer, `v_size_bytes` 0) and, when the pool is sized from
    free memory, the free bytes before and after the weights load ("Load weight begin/end.
    avail mem") and after the pool is carved ("Memory pool end. avail mem")."""
    layout = pool.layout
    if budget.kv_bytes <= 0 or pool.num_blocks == 0:
        return {}
    tokens = pool.block_capacity_tokens  # max_total_num_tokens
    k_bytes, v_bytes = buffer_bytes(layout, tokens)
    record: dict[str, Any] = {
        "max_total_num_tokens": tokens,
        "k_size_bytes": k_bytes,
        "v_size_bytes": v_bytes,
    }
    if not budget.fixed and budget.fraction_of_bytes is not None:
        pre_load = budget.fraction_of_bytes
        requests = layout.max_running_requests or sglang_memory.max_running_requests(
            tokens, max_model_len
        )
        after_load = budget.total_bytes - budget.weights_bytes - budget.non_torch_bytes
        left = after_load - k_bytes - v_bytes
        left -= sglang_memory.req_to_token_bytes(requests, max_model_len)
        record |= {
            "avail_bytes_before_weights": pre_load,
            "avail_bytes_after_weights": after_load,
            "avail_bytes_after_pool": left,
        }
    return record


def startup_lines(budget: Budget, pool: KvPool[SglangLayout], max_model_len: int) -> list[str]:
    """ "KV Cache is allocated. …" and the lines around it, in that release's wording.

    SGLang's "GB" is GiB (memory_pool.py: GB = 1024 ** 3). Read from the PyPI wheels'
    `sglang/srt/mem_cache/memory_pool.py`: 0.4.3.post2 prints "KV Cache is allocated. K size:
    … GB, V size: … GB." (a closing period); 0.4.3.post3 adds "#tokens: N, " and drops the
    period; 0.5.12.post1 still has no dtype, 0.5.13 prints "dtype: torch.bfloat16, " first.
    """
    layout = pool.layout
    record = startup_record(budget, pool, max_model_len)
    if not record:
        return ["RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."]
    k_bytes, v_bytes = record["k_size_bytes"], record["v_size_bytes"]
    release = layout.release
    fields = []
    if release >= DTYPE_FIELD_RELEASE:
        fields.append(f"dtype: {_TORCH_DTYPES.get(layout.kv_dtype, layout.kv_dtype)}")
    if release >= TOKENS_FIELD_RELEASE:
        fields.append(f"#tokens: {record['max_total_num_tokens']}")
    if layout.v_row_bytes:
        fields += [f"K size: {k_bytes / GIB:.2f} GB", f"V size: {v_bytes / GIB:.2f} GB"]
    else:
        fields.append(f"KV size: {k_bytes / GIB:.2f} GB")
    closing = "" if release >= TOKENS_FIELD_RELEASE else "."
    lines = [f"KV Cache is allocated. {', '.join(fields)}{closing}"]
    if "avail_bytes_before_weights" in record:
        lines.insert(
            0, f"Load weight begin. avail mem={record['avail_bytes_before_weights'] / GIB:.2f} GB"
        )
        lines.append(f"Memory pool end. avail mem={record['avail_bytes_after_pool'] / GIB:.2f} GB")
    return lines


SGLANG = SglangProfile()
