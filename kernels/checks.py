"""Checks of the decode wrappers' inputs, before any launch, and their output buffers.

Every check raises ``ValueError`` naming the offending shape, dtype, stride or value.
Dimension names are defined in ``kvplan.kernels``.
"""

from __future__ import annotations

import torch

Q_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)


def check_inputs(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor | None,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    rope_dim: int,
) -> None:
    if q.dim() != 3:
        raise ValueError(f"q must be [B, Hq, Dk], got shape {tuple(q.shape)}")
    if k_pool.dim() != 4:
        raise ValueError(f"k_pool must be [N, P, Hkv, Dk], got shape {tuple(k_pool.shape)}")
    batch, num_heads, head_dim_k = q.shape
    _, _, num_kv_heads, pool_dim = k_pool.shape
    if pool_dim != head_dim_k:
        raise ValueError(
            f"q head dim {head_dim_k} != k_pool head dim {pool_dim} "
            f"(q {tuple(q.shape)}, k_pool {tuple(k_pool.shape)})"
        )
    if num_heads % num_kv_heads:
        raise ValueError(
            f"query heads {num_heads} are not a multiple of KV heads {num_kv_heads} "
            f"(q {tuple(q.shape)}, k_pool {tuple(k_pool.shape)})"
        )
    if v_pool is not None and v_pool.shape != k_pool.shape:
        raise ValueError(
            f"v_pool shape {tuple(v_pool.shape)} != k_pool shape {tuple(k_pool.shape)}"
        )
    if not 0 <= rope_dim < head_dim_k:
        raise ValueError(f"rope_dim must be in [0, {head_dim_k}), got {rope_dim}")
    if q.dtype not in Q_DTYPES:
        raise ValueError(f"q dtype must be one of {Q_DTYPES}, got {q.dtype}")
    for name, pool in (("k_pool", k_pool), ("v_pool", v_pool)):
        if pool is not None and pool.dtype != q.dtype and pool.dtype not in FP8_DTYPES:
            raise ValueError(f"{name} dtype must be {q.dtype} (as q) or fp8, got {pool.dtype}")
    if block_table.dim() != 2 or block_table.shape[0] != batch:
        raise ValueError(
            f"block_table must be [B={batch}, max_blocks], got shape {tuple(block_table.shape)}"
        )
    if seq_lens.shape != (batch,):
        raise ValueError(f"seq_lens must be [B={batch}], got shape {tuple(seq_lens.shape)}")
    for name, tensor in (("block_table", block_table), ("seq_lens", seq_lens)):
        if tensor.dtype != torch.int32:
            raise ValueError(f"{name} must be int32, got {tensor.dtype}")
    if not seq_lens.is_contiguous():
        raise ValueError("seq_lens must be contiguous")
    # The kernel steps through a row by +1 element: a strided last dimension (a transposed
    # or sliced table) would read other rows' page ids as this row's.
    if block_table.shape[1] > 1 and block_table.stride(1) != 1:
        raise ValueError(
            f"block_table's last dimension must be contiguous (stride 1), got strides "
            f"{tuple(block_table.stride())} for shape {tuple(block_table.shape)}; "
            "pass block_table.contiguous()"
        )
    for name, tensor in (
        ("q", q),
        ("k_pool", k_pool),
        ("v_pool", v_pool),
        ("block_table", block_table),
        ("seq_lens", seq_lens),
    ):
        if tensor is not None and tensor.device != q.device:
            raise ValueError(f"{name} is on {tensor.device}, q on {q.device}")


def check_table_width(
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    tokens_per_page: int,
    max_seq_len: int | None,
) -> int:
    """The longest L_b, checked against the block table's width; returns it.

    Reads seq_lens (a host sync on a GPU) unless ``max_seq_len`` is given, which is then
    trusted as an upper bound: a row narrower than ⌈L_b / P⌉ entries would make the kernel
    read the next row's page ids as its own.
    """
    if max_seq_len is None or seq_lens.device.type == "cpu":
        longest = int(seq_lens.max())
        if int(seq_lens.min()) < 0:
            raise ValueError(f"seq_lens must be >= 0, got {seq_lens.tolist()}")
        if max_seq_len is not None and max_seq_len < longest:
            raise ValueError(f"max_seq_len {max_seq_len} < the longest seq_lens entry {longest}")
    else:
        longest = max_seq_len
    needed = -(-longest // tokens_per_page)
    if block_table.shape[1] < needed:
        raise ValueError(
            f"block_table has {block_table.shape[1]} entries per row, but a sequence of "
            f"{longest} tokens needs ⌈{longest} / {tokens_per_page}⌉ = {needed} pages"
        )
    return longest


def output_buffer(q: torch.Tensor, out: torch.Tensor | None, shape: tuple[int, ...]):
    """``out`` checked against ``[B, Hq, Dv]`` in q's dtype, or a new one."""
    if out is None:
        return torch.empty(shape, dtype=q.dtype, device=q.device)
    if out.shape != shape or out.dtype != q.dtype:
        raise ValueError(f"out must be {list(shape)} {q.dtype}, got {tuple(out.shape)} {out.dtype}")
    return out


def split_buffers(
    q: torch.Tensor,
    mid_o: torch.Tensor | None,
    mid_lse: torch.Tensor | None,
    out_shape: tuple[int, int, int],
    num_splits: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """mid_o ``[B, Hq, S, Dv]`` and mid_lse ``[B, Hq, S]`` float32, checked or new."""
    batch, num_heads, head_dim = out_shape
    mid_o_shape = (batch, num_heads, num_splits, head_dim)
    if mid_o is None:
        mid_o = torch.empty(mid_o_shape, dtype=torch.float32, device=q.device)
    if mid_lse is None:
        mid_lse = torch.empty(mid_o_shape[:3], dtype=torch.float32, device=q.device)
    if mid_o.shape != mid_o_shape or mid_o.dtype != torch.float32:
        raise ValueError(
            f"mid_o must be {list(mid_o_shape)} float32, got {tuple(mid_o.shape)} {mid_o.dtype}"
        )
    if mid_lse.shape != mid_o_shape[:3] or mid_lse.dtype != torch.float32:
        raise ValueError(
            f"mid_lse must be {list(mid_o_shape[:3])} float32, "
            f"got {tuple(mid_lse.shape)} {mid_lse.dtype}"
        )
    return mid_o, mid_lse
