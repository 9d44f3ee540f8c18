"""What a search (`recommend`) may set for a model on a GPU, as each engine accepts it.

An engine profile answers `search_choices(model, sku)`; this module holds the value type and
the reading every engine starts from:

- KV: 16-bit, plus fp8 (E4M3) where the GPU has fp8 tensor cores (Hopper, Ada, Blackwell,
  MI300 and later). Older GPUs can store fp8 KV in some kernels, but not in every backend of
  every engine, so kvplan does not offer it there; `--kv-dtype` still asks for it.
- Weights: the released checkpoint, plus fp8 quantised at load (vLLM and SGLang
  `--quantization fp8` on a 16-bit checkpoint) where the GPU has fp8 tensor cores. Other
  quantised dtypes (int4 AWQ/GPTQ, nvfp4) need a separately published checkpoint, which kvplan
  cannot know exists, so they are not offered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvplan.specs import ModelSpec, SkuSpec

# The 16-bit KV dtype most engines store when not told otherwise (vLLM "auto" on a bf16
# model); a profile passes its own (`EngineProfile.default_kv_dtype`, llama.cpp: fp16).
UNQUANTISED_KV_DTYPE = "bf16"
FP8_KV_DTYPE = "fp8_e4m3"  # vLLM --kv-cache-dtype fp8
LOAD_TIME_WEIGHT_DTYPE = "fp8"  # vLLM/SGLang --quantization fp8 on a 16-bit checkpoint
_SIXTEEN_BIT = ("bf16", "fp16")


@dataclass(frozen=True)
class SearchChoices:
    """Values a search may set for one model on one GPU, the engine's own default first.

    kv_dtypes: canonical KV dtype names (specs.KV_DTYPES).
    weight_dtypes: None for the released checkpoint, else a dtype the engine quantises to.
    tokens_per_block: None for the engine's own block size, else tokens per block.
    """

    kv_dtypes: tuple[str, ...]
    weight_dtypes: tuple[str | None, ...]
    tokens_per_block: tuple[int | None, ...] = (None,)


def has_fp8_tensor_cores(sku: SkuSpec) -> bool:
    """Whether the datasheet lists an fp8 dense peak for `sku`."""
    return "fp8" in sku.peak_flop_per_s


def released_in_16_bit(model: ModelSpec) -> bool:
    """Whether every released weight of `model` is 16-bit (nothing already quantised)."""
    experts = model.moe.expert_weight_dtype if model.moe else None
    return model.weight_dtype in _SIXTEEN_BIT and experts in (None, *_SIXTEEN_BIT)


def default_search_choices(
    model: ModelSpec, sku: SkuSpec, kv_dtype: str = UNQUANTISED_KV_DTYPE
) -> SearchChoices:
    """The engine's 16-bit KV (`kv_dtype`) and the released weights; their fp8 forms where
    the GPU computes in fp8."""
    if not has_fp8_tensor_cores(sku):
        return SearchChoices((kv_dtype,), (None,))
    weights = (None, LOAD_TIME_WEIGHT_DTYPE) if released_in_16_bit(model) else (None,)
    return SearchChoices((kv_dtype, FP8_KV_DTYPE), weights)
