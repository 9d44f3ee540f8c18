"""The ollama profile: llama.cpp's cells, reached through ollama's environment settings.

ollama (`envconfig/config.go`, `llm/server.go`, `server/sched.go`) starts its llama.cpp runner
with `--ctx-size num_ctx × OLLAMA_NUM_PARALLEL --parallel OLLAMA_NUM_PARALLEL` and one
`--kv-cache-type` (OLLAMA_KV_CACHE_TYPE: f16, q8_0 or q4_0) for both K and V, quantised only
with OLLAMA_FLASH_ATTENTION=1 (otherwise it falls back to f16). So kvplan's options map as:
`--context` = OLLAMA_CONTEXT_LENGTH / num_ctx (tokens per request), `--ctx-size` = num_ctx ×
OLLAMA_NUM_PARALLEL, `--parallel` = OLLAMA_NUM_PARALLEL, `--kv-dtype` = OLLAMA_KV_CACHE_TYPE,
`--flash-attn` = OLLAMA_FLASH_ATTENTION, `--gpu-layers` = num_gpu.

`--engine-version` is ollama's release; the llama.cpp build it vendored decides the rules
(kvplan's reading of ollama's release dates; approximate): ≤ 0.5 → b4000 era (padded cells,
per-head DeepSeek cache), 0.6 → b4400 (ollama#8308 vendored llama.cpp 46e3556 in January 2025,
the b44xx builds; the next update, ollama#10655 to de4c07f9 on 2025-05-11, shipped in 0.7),
0.7 – 0.9 → b5500 (MLA latent, SWA caches), 0.10 – 0.12 → b6100 (streams), ≥ 0.13 → b7000.

Models ollama serves with its own Go engine (`ollamarunner`, `model/models/<arch>` in
ollama/ollama: gemma3, gemma3n, llama4, gpt-oss, mistral3, mllama, qwen2.5-vl) keep their cache
in its `kvcache` package instead, which kvplan does not model: their figures are llama.cpp's
accounting, and `caveat()` says so wherever they are shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.engine.llamacpp import LlamaCppProfile
from kvplan.engine.release import parse_release
from kvplan.errors import KvplanError

if TYPE_CHECKING:
    from kvplan.engine.deployment import Deployment
    from kvplan.specs import SkuSpec

OLDEST, NEWEST = (0, 1, 0), (0, 99, 99)
DEFAULT_RELEASE_TEXT = "0.13.0"
# ollama release (major, minor) from which a vendored llama.cpp build applies.
VENDORED_BUILDS = (((0, 13), 7000), ((0, 10), 6100), ((0, 7), 5500), ((0, 6), 4400), ((0, 0), 4000))
# Architectures only ollama's Go engine runs (ollama/ollama model/models/: gemma3, gemma3n,
# llama4, gptoss, mistral3, mllama, qwen25vl), as HF model_type and as GGUF architecture.
GO_ENGINE_FAMILIES = frozenset(
    {
        "gemma3", "gemma3_text", "gemma3n", "gemma3n_text", "llama4", "llama4_text",
        "gpt_oss", "gpt-oss", "mistral3", "mllama", "qwen2_5_vl", "qwen25vl",
    }
)  # fmt: skip
# OLLAMA_KV_CACHE_TYPE: f16, q8_0, q4_0 (docs/faq.md "How can I set the quantization type for
# the K/V cache?", ollama/ollama).
OLLAMA_KV_TYPES = ("fp16", "q8_0", "q4_0")


class OllamaProfile(LlamaCppProfile):
    name = "ollama"
    summary = "llama.cpp's cells via ollama's settings (num_ctx × OLLAMA_NUM_PARALLEL cells)"
    engine_label = "ollama"
    kv_dtypes = OLLAMA_KV_TYPES
    kv_dtype_setting = "OLLAMA_KV_CACHE_TYPE"
    separate_v_dtype = False  # one OLLAMA_KV_CACHE_TYPE for K and V
    flash_attention_rule = (
        "ollama quantises the cache only with OLLAMA_FLASH_ATTENTION=1, else it keeps f16"
    )

    gpu_layers_setting = "num_gpu"

    def slots_text(self, context: str, requests: str) -> str:
        """ollama's settings for the same cells: num_ctx a request, OLLAMA_NUM_PARALLEL of
        them (the runner gets num_ctx × OLLAMA_NUM_PARALLEL cells)."""
        return (
            f"num_ctx {context} gives it ({requests} requests = OLLAMA_NUM_PARALLEL {requests}, "
            f"num_ctx × {requests} cells)"
        )

    def launch_text(self, cells: int, parallel: int) -> str:
        return f"num_ctx {cells // parallel:,} × OLLAMA_NUM_PARALLEL {parallel}"

    def release(self, deployment: Deployment) -> tuple[int, int, int]:
        text = deployment.settings.version or DEFAULT_RELEASE_TEXT
        return parse_release(text, "ollama", OLDEST, NEWEST)

    def build_of(self, deployment: Deployment) -> int:
        release = self.release(deployment)[:2]
        return next(build for start, build in VENDORED_BUILDS if release >= start)

    def flash_attention(self, deployment: Deployment) -> bool:
        """OLLAMA_FLASH_ATTENTION as set; off by default."""
        return bool(deployment.settings.flash_attention)

    def caveat(self, deployment: Deployment) -> str | None:
        family = deployment.model.family
        if family not in GO_ENGINE_FAMILIES:
            return None
        return (
            f"ollama serves {family} models with its own Go engine (ollamarunner), whose "
            "kvcache kvplan does not model: these figures are llama.cpp's accounting, not "
            "that engine's"
        )

    def notes(self, deployment: Deployment, sku: SkuSpec | None) -> list[str]:
        caveat = self.caveat(deployment)
        return [*([caveat] if caveat else []), *super().notes(deployment, sku)]

    def check(self, deployment: Deployment) -> None:
        super().check(deployment)
        if deployment.kv_dtype != "fp16" and not self.flash_attention(deployment):
            raise KvplanError(
                f"--kv-dtype: ollama falls back to f16 for {deployment.kv_dtype} unless "
                "OLLAMA_FLASH_ATTENTION=1; add --flash-attn or use --kv-dtype f16"
            )


OLLAMA = OllamaProfile()
