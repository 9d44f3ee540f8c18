"""A checkpoint's exact weight bytes from its safetensors headers, by dtype and by how TP
ranks hold each tensor.

Tensor names follow transformers' module names, and vLLM builds the same modules with
parallel layers (vllm/model_executor/layers/linear.py, vocab_parallel_embedding.py), so the
name tells how a tensor is held on tp GPUs:

- split: column- or row-parallel matrices, the vocabulary (embedding, lm_head), shared
  experts, and their block or group scales and zero points: 1/tp per rank;
- kv: k_proj and v_proj (QKVParallelLinear): 1/tp per rank up to one KV head per rank, then
  replicated (each rank keeps whole heads);
- expert: routed experts: 1/tp per rank, or whole experts per rank under expert parallelism;
- replicated: norms, routers (ReplicatedLinear), MLA's q_a_proj and kv_a_proj_with_mqa,
  biases of row-parallel layers, per-tensor scales (one element), position tables;
- vision: the vision tower and projector (split by default: vLLM --mm-encoder-tp-mode
  weights, vllm/config/multimodal.py);
- unloaded: layers past num_layers (DeepSeek-V3's multi-token-prediction layer 61), which
  vLLM skips unless speculative decoding loads them.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kvplan.catalog.tensor_headers import TensorHeader

ROLES = ("split", "kv", "expert", "replicated", "vision", "unloaded")
FIRST, LAST = -1, -2  # places of tensors outside the layer stack: first and last PP stage

_VISION = re.compile(
    r"(^|\.)(vision_tower|vision_model|visual|vision_encoder|multi_modal_projector|"
    r"mm_projector|image_newline)(\.|$)"
)
_LAYER = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer)\.(\d+)\.")
_EMBEDDINGS = {"embed_tokens", "wte", "word_embeddings", "embed_in", "tok_embeddings"}
_POSITIONS = {"wpe", "embed_positions", "position_embeddings"}
_LM_HEAD = {"lm_head", "embed_out", "output"}
_ROUTERS = {"gate", "router", "shared_expert_gate", "e_score_correction_bias"}
_REPLICATED = {"q_a_proj", "kv_a_proj_with_mqa", "fused_qkv_a_proj"}
_KV = {"k_proj", "v_proj"}
_ROW_PARALLEL = {"o_proj", "down_proj", "out_proj", "dense", "fc2", "c_proj", "w2", "wo"}


@dataclass(frozen=True)
class CheckpointWeights:
    """Exact bytes of a checkpoint, summed by (role, place) and by dtype.

    `place` is a layer index, FIRST (embeddings, vision tower) or LAST (lm_head, final norm).
    """

    source: str  # where the headers were read: a folder, a file, or org/name@commit
    groups: tuple[tuple[str, int, int], ...]  # (role, place, bytes), role in ROLES
    bytes_by_dtype: tuple[tuple[str, int], ...]  # file's dtype name -> bytes, largest first
    num_tensors: int
    basis: str = "safetensors headers"  # what the bytes were read from (or "GGUF tensor table")
    # The weights' dtype in the file's own names where kvplan's weight dtypes do not name them
    # (GGUF: "Q4_K/Q6_K/F32"); None: the model's weight_dtype.
    weight_dtype: str | None = None

    @property
    def total_bytes(self) -> int:
        """Every byte the safetensors files hold (unloaded layers included)."""
        return sum(size for _, _, size in self.groups)

    def role_bytes(self, role: str) -> int:
        """Bytes of the tensors of one role, all places."""
        return sum(size for r, _, size in self.groups if r == role)


def _is_norm(part: str) -> bool:
    return "norm" in part or re.fullmatch(r"ln(_\w+)?", part) is not None


def _layer_role(parts: list[str], numel: int) -> str:
    """How TP ranks hold one tensor of a decoder layer."""
    module = parts[-2] if len(parts) > 1 else parts[-1]
    if numel <= 1 or any(_is_norm(p) for p in parts[:-1]):
        return "replicated"
    if "experts" in parts:
        return "expert"
    if module in _ROUTERS or parts[-1] in _ROUTERS or _REPLICATED & set(parts):
        return "replicated"
    if parts[-1] == "bias" and module in _ROW_PARALLEL:
        return "replicated"  # RowParallelLinear keeps the whole bias on every rank
    return "kv" if _KV & set(parts) else "split"


def tensor_role(name: str, numel: int, num_layers: int) -> tuple[str, int]:
    """(role, place) of the tensor `name` with `numel` elements in a model of `num_layers`."""
    if _VISION.search(name):
        return "vision", FIRST
    parts = name.split(".")
    layer = _LAYER.search(name)
    if layer is not None:
        index = int(layer.group(1))
        if index >= num_layers:
            return "unloaded", index
        return _layer_role(parts, numel), index
    if _EMBEDDINGS & set(parts):
        return "split", FIRST
    if _POSITIONS & set(parts):
        return "replicated", FIRST
    if _LM_HEAD & set(parts):
        return "split", LAST
    if any(_is_norm(p) for p in parts[:-1]):
        return "replicated", LAST
    return "replicated", FIRST  # buffers such as rotary inv_freq


def checkpoint_weights(
    tensors: Iterable[TensorHeader],
    num_layers: int,
    source: str,
    role: Callable[[str, int, int], tuple[str, int]] = tensor_role,
    basis: str = "safetensors headers",
) -> CheckpointWeights:
    """Sum `tensors` by role and place (see the module docstring) and by dtype; `role` reads
    a tensor's name (transformers' names by default; GGUF's in `catalog.gguf_weights`)."""
    groups: Counter[tuple[str, int]] = Counter()
    by_dtype: Counter[str] = Counter()
    count = 0
    for tensor in tensors:
        groups[role(tensor.name, math.prod(tensor.shape), num_layers)] += tensor.nbytes
        by_dtype[tensor.dtype] += tensor.nbytes
        count += 1
    return CheckpointWeights(
        source=source,
        groups=tuple((role, place, size) for (role, place), size in sorted(groups.items())),
        bytes_by_dtype=tuple(sorted(by_dtype.items(), key=lambda item: (-item[1], item[0]))),
        num_tensors=count,
        basis=basis,
    )
