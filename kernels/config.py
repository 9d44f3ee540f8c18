"""Launch configuration of the decode kernels: heads per program, token tiles, splits.

Choices that need a GPU to tune are fixed here from ahead-of-time compiles; the split
count comes from the pure-Python ``kvplan.kernels.splits``.
"""

from __future__ import annotations

import torch
import triton

from kvplan.kernels.decode_kernels import UPCAST
from kvplan.kernels.splits import choose_num_splits, heads_per_program

# H100/H200 SXM: used to choose splits when the tensors are not on a CUDA device.
DEFAULT_SM_COUNT = 132


def default_tokens_per_tile(head_dim_k: int) -> int:
    """BLOCK_N, the tokens per loop iteration, by K width.

    From sm_90 AOT compiles (Triton 3.9, 4 warps; registers / stack bytes): D 128 at 32
    tokens 179 / 0 for bf16 and 186-252 / 0 for fp8 (by S and window), at 64 tokens
    255 / 112 (spills); D 256 at 32 tokens 200 / 0; MLA 512 + 64 at 16 tokens 165 / 0 for
    bf16, 207 / 0 for fp8. Not yet timed on a GPU: sweep with bench/decode_bench.py
    --sweep-config.
    """
    return 32 if head_dim_k <= 256 else 16


def stage1_constexprs(
    *,
    tokens_per_page: int,
    group_size: int,
    head_dim: int,
    rope_dim: int,
    num_splits: int,
    shared_kv: bool,
    has_window: bool,
    tokens_per_tile: int | None = None,
) -> dict[str, int | bool]:
    """Compile-time parameters of the stage-1 kernel for one problem shape."""
    head_dim_k = head_dim + rope_dim
    return {
        "TOKENS_PER_PAGE": tokens_per_page,
        "GROUP_SIZE": group_size,
        "HEAD_DIM": head_dim,
        "ROPE_DIM": rope_dim,
        "BLOCK_H": heads_per_program(group_size, head_dim_k),
        "BLOCK_N": tokens_per_tile or default_tokens_per_tile(head_dim_k),
        "BLOCK_D": triton.next_power_of_2(head_dim),
        "BLOCK_R": triton.next_power_of_2(max(rope_dim, 1)),
        "NUM_SPLITS": num_splits,
        "SHARED_KV": shared_kv,
        "HAS_WINDOW": has_window,
        "UPCAST": UPCAST,
    }


def sm_count(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return DEFAULT_SM_COUNT


def default_num_splits(
    batch: int,
    num_heads: int,
    num_kv_heads: int,
    head_dim_k: int,
    max_seq_len: int,
    tokens_per_page: int,
    device: torch.device | str,
    *,
    window: int | None = None,
) -> int:
    """S that ``paged_decode`` picks when ``num_splits`` is None: ``choose_num_splits`` with
    this kernel's heads per program and the device's SM count (132 off-GPU).

    Args:
        batch: B.
        num_heads: Hq.
        num_kv_heads: Hkv.
        head_dim_k: K width (D, or kv_lora_rank + qk_rope_head_dim for MLA).
        max_seq_len: longest sequence, in tokens.
        tokens_per_page: P.
        device: where the kernel will run.
        window: sliding window in tokens, or None.
    """
    group_size = num_heads // num_kv_heads
    return choose_num_splits(
        batch,
        num_kv_heads,
        group_size,
        max_seq_len,
        sm_count(torch.device(device)),
        heads_per_program=heads_per_program(group_size, head_dim_k),
        tokens_per_block=tokens_per_page,
        window=window,
    )
