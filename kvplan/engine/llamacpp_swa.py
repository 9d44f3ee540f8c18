"""Which architectures llama.cpp gives a sliding-window (or chunked) cache, by build.

A config's `sliding_window` is not what llama.cpp reads: `llama_model::load_hparams`
(`src/llama-model.cpp`) sets `hparams.swa_type` / `n_swa` / `set_swa_pattern` per
architecture, and only a model whose swa_type is not LLAMA_SWA_TYPE_NONE gets the iSWA cache
(`llama_kv_cache_iswa`, from b5440, PR #13194); every other layer keeps all n_ctx cells. Read
in the llama.cpp sources ollama vendored on 2025-08-14, 2025-10-02 (b6646), 2025-11-06
(b6840), 2025-12-03 (b7108) and 2026-02-02 (a5bb8ba4):

- STANDARD or CHUNKED windows: gemma2 (pattern 2), gemma3 (6), gemma3n (5), cohere2 (4),
  llama4 (chunked 8192, 4), exaone4 (4, the 64-layer model), gpt-oss (LLM_ARCH_OPENAI_MOE, 2),
  smallthinker, afmoe, plamo3, exaone-moe, mimo2, and olmo2 when the file states a window
  (OLMo 3, pattern 4; PR #16015, September 2025, about b6500).
- Never a window, whatever the config says: Mistral-7B-v0.1 (converted as `llama`, whose
  hparams read no sliding_window key), StarCoder2 (`starcoder2` reads none), Qwen2.
- Phi-3 (`phi3`): the window is read and then disabled, "Phi SWA is currently disabled"
  (PR #13676, 2025-05-21): swa_type NONE, n_swa 0. Between PR #13194 and it, Phi-3's default
  n_swa_pattern 1 marked no layer as sliding (il % 1 < 0 is never true), so no llama.cpp
  build kept a window for it: phi-3-mini-4k at -c 4096 allocates 4096 cells on all 32 layers.

Families are matched by the model's family: an HF model_type (catalogue, config.json) or a
GGUF general.architecture (a .gguf file), so both spellings are listed.
"""

from __future__ import annotations

from kvplan.engine.llamacpp_cells import SWA_CACHE_BUILD

OLMO3_SWA_BUILD = 6500  # PR #16015 (2025-09), OLMo 3's window in the olmo2 architecture
# family (HF model_type or GGUF architecture) -> first build with a sliding-window cache.
SWA_FAMILIES: dict[str, int] = {
    **dict.fromkeys(
        (
            "gemma2", "gemma3", "gemma3_text", "gemma3n", "gemma3n_text", "cohere2",
            "llama4", "llama4_text", "exaone4", "gpt_oss", "gpt-oss", "smallthinker",
            "afmoe", "plamo3", "exaone_moe", "mimo2",
        ),
        SWA_CACHE_BUILD,
    ),
    "olmo3": OLMO3_SWA_BUILD,
    "olmo2": OLMO3_SWA_BUILD,
}  # fmt: skip


def keeps_window(family: str, build: int) -> bool:
    """Whether llama.cpp `build` keeps a sliding-window or chunked cache for `family`."""
    first = SWA_FAMILIES.get(family)
    return first is not None and build >= first


def ignored_window_note(family: str, build: int, has_window: bool) -> str | None:
    """The note for a model whose window llama.cpp does not keep at `build` (from b5440, when
    it keeps windows at all), else None."""
    if not has_window or build < SWA_CACHE_BUILD or keeps_window(family, build):
        return None
    why = (
        "disables Phi's window (llama-model.cpp: 'Phi SWA is currently disabled')"
        if family == "phi3"
        else f"reads no sliding window for {family} models (llama-model.cpp load_hparams)"
    )
    return f"llama.cpp {why}: every layer keeps all -c cells, as full attention"
