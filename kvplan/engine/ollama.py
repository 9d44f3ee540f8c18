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

Models ollama serves with its own Go engine (`ollamarunner`, `model/models/<arch>`) keep their
cache in its `kvcache` package instead, which kvplan does not model: their figures are
llama.cpp's accounting, and `caveat()` says so wherever they are shown. Which architectures
those are is ollama's `fs/ggml/ggml.go` `KV.OllamaEngineRequired()` (`llm/server.go` starts
the Go engine for them; OLLAMA_NEW_ENGINE=1 would add the others it implements), read at each
release tag (`go_engine_architectures`). From 0.30.0 (ollama#16031, "use llama-server
exclusively for GGML models") every GGUF model runs on llama-server, built from the llama.cpp
of `LLAMA_CPP_VERSION` (b9452 at 0.30.0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.engine.llamacpp import LlamaCppProfile
from kvplan.engine.release import parse_release
from kvplan.engine.resolved import resolve
from kvplan.errors import SettingError

if TYPE_CHECKING:
    from kvplan.engine.deployment import Deployment
    from kvplan.specs import SkuSpec

OLDEST, NEWEST = (0, 1, 0), (0, 99, 99)
DEFAULT_RELEASE_TEXT = "0.13.0"
# ollama release (major, minor) from which a vendored llama.cpp build applies; 0.30 builds
# llama-server from LLAMA_CPP_VERSION (b9452 at v0.30.0).
VENDORED_BUILDS = (
    ((0, 30), 9452), ((0, 13), 7000), ((0, 10), 6100), ((0, 7), 5500), ((0, 6), 4400),
    ((0, 0), 4000),
)  # fmt: skip
# fs/ggml/ggml.go OllamaEngineRequired() at each release tag that changed it: (release,
# architectures added, removed). 0.12.5 ran qwen3 on the llama runner ("use llama runner for
# qwen3", ollama#12556, reverted for 0.12.6).
GO_ENGINE_CHANGES: tuple[tuple[tuple[int, int, int], frozenset[str], frozenset[str]], ...] = (
    ((0, 6, 0), frozenset({"gemma3"}), frozenset()),
    ((0, 6, 5), frozenset({"mistral3"}), frozenset()),
    ((0, 6, 7), frozenset({"llama4"}), frozenset()),
    ((0, 7, 0), frozenset({"mllama", "qwen25vl"}), frozenset()),
    ((0, 9, 3), frozenset({"gemma3n"}), frozenset()),
    ((0, 11, 0), frozenset({"gptoss"}), frozenset()),
    ((0, 11, 5), frozenset({"gpt-oss"}), frozenset()),
    ((0, 12, 0), frozenset({"qwen3"}), frozenset()),
    ((0, 12, 2), frozenset({"qwen3moe"}), frozenset()),
    ((0, 12, 5), frozenset(), frozenset({"qwen3"})),
    ((0, 12, 6), frozenset({"qwen3"}), frozenset()),
    ((0, 12, 7), frozenset({"qwen3vl", "qwen3vlmoe"}), frozenset()),
    ((0, 13, 0), frozenset({"deepseek2", "deepseekocr"}), frozenset()),
    ((0, 13, 1), frozenset({"nomic-bert"}), frozenset()),
    ((0, 13, 4), frozenset({"olmo3"}), frozenset()),
    ((0, 13, 5), frozenset({"bert"}), frozenset()),
    ((0, 14, 3), frozenset({"glm4moelite", "lfm2"}), frozenset()),
    ((0, 15, 5), frozenset({"glmocr", "qwen3next"}), frozenset()),
    ((0, 17, 1), frozenset({"lfm2moe", "nemotron_h", "nemotron_h_moe", "qwen35", "qwen35moe"}),
     frozenset()),
    ((0, 20, 0), frozenset({"gemma4"}), frozenset()),
    ((0, 22, 0), frozenset({"laguna", "nemotron_h_omni"}), frozenset()),
)  # fmt: skip
LLAMA_SERVER_ONLY_RELEASE = (0, 30, 0)
# GGUF architecture (ollama's names) for the HF model_type a catalogue family carries;
# DeepSeek-V3 and Kimi K2 convert to deepseek2.
GGUF_ARCH_OF_FAMILY = {
    "gemma3_text": "gemma3", "gemma3n_text": "gemma3n", "llama4_text": "llama4",
    "qwen2_5_vl": "qwen25vl", "gpt_oss": "gptoss", "qwen3_moe": "qwen3moe",
    "qwen3_vl": "qwen3vl", "qwen3_vl_moe": "qwen3vlmoe", "deepseek_v2": "deepseek2",
    "deepseek_v3": "deepseek2", "kimi_k2": "deepseek2", "nomic_bert": "nomic-bert",
    "glm4_moe_lite": "glm4moelite", "lfm2_moe": "lfm2moe", "qwen3_next": "qwen3next",
    "qwen3_5": "qwen35", "qwen3_5_moe": "qwen35moe", "gemma4_text": "gemma4",
}  # fmt: skip


def go_engine_architectures(release: tuple[int, int, int]) -> frozenset[str]:
    """GGUF architectures ollama `release` runs on its Go engine (none from 0.30.0)."""
    if release >= LLAMA_SERVER_ONLY_RELEASE:
        return frozenset()
    archs: frozenset[str] = frozenset()
    for start, added, removed in GO_ENGINE_CHANGES:
        if release >= start:
            archs = (archs | added) - removed
    return archs


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

    def parsed_release(self, deployment: Deployment) -> tuple[int, int, int]:
        text = deployment.settings.version or DEFAULT_RELEASE_TEXT
        return parse_release(text, "ollama", OLDEST, NEWEST)

    def release(self, deployment: Deployment) -> tuple[int, int, int]:
        """The ollama release whose rules apply, parsed once (kvplan.engine.resolved)."""
        return resolve(deployment).release  # type: ignore[no-any-return]

    def build_of(self, deployment: Deployment) -> int:
        release = self.release(deployment)[:2]
        return next(build for start, build in VENDORED_BUILDS if release >= start)

    def flash_attention(self, deployment: Deployment) -> bool:
        """OLLAMA_FLASH_ATTENTION as set; off by default."""
        return bool(deployment.settings.flash_attention)

    def caveat(self, deployment: Deployment) -> str | None:
        family = deployment.model.family
        release = self.release(deployment)
        if GGUF_ARCH_OF_FAMILY.get(family, family) not in go_engine_architectures(release):
            return None
        return (
            f"ollama serves {family} models with its own Go engine (ollamarunner) at "
            f"{'.'.join(map(str, release))} (fs/ggml/ggml.go OllamaEngineRequired), whose "
            "kvcache kvplan does not model: these figures are llama.cpp's accounting, not "
            "that engine's"
        )

    def notes(self, deployment: Deployment, sku: SkuSpec | None) -> list[str]:
        caveat = self.caveat(deployment)
        return [*([caveat] if caveat else []), *super().notes(deployment, sku)]

    def check(self, deployment: Deployment) -> None:
        super().check(deployment)
        if deployment.kv_dtype != "fp16" and not self.flash_attention(deployment):
            raise SettingError(
                "flash_attention",
                f"ollama falls back to f16 for {deployment.kv_dtype} unless "
                "OLLAMA_FLASH_ATTENTION=1; add {flash_attention} or use --kv-dtype f16",
                mentions=("flash_attention",),
                lead="--kv-dtype",
            )


OLLAMA = OllamaProfile()
