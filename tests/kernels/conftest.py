"""Kernel tests: run Triton in its CPU interpreter unless a CUDA GPU is present.

TRITON_INTERPRET is read when ``@triton.jit`` decorates a kernel, i.e. when
``kvplan.kernels.decode`` is imported, so it is set here before any test module imports it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@dataclass
class PagedCase:
    """One decode problem: inputs for the kernel and the reference."""

    q: torch.Tensor  # [B, Hq, Dk]
    k_pool: torch.Tensor  # [N, P, Hkv, Dk]
    v_pool: torch.Tensor | None  # [N, P, Hkv, D]; None for MLA
    block_table: torch.Tensor  # [B, max_blocks] int32
    seq_lens: torch.Tensor  # [B] int32
    k_dense: list[torch.Tensor]  # per sequence [L, Hkv, Dk] fp32, before fp8 quantisation
    v_dense: list[torch.Tensor] | None


def _poisoned_pool(
    dense: list[torch.Tensor],
    tables: list[list[int]],
    num_pages: int,
    tokens_per_page: int,
    dtype: torch.dtype,
    scale: float,
) -> torch.Tensor:
    """Scatter each sequence's tokens into its pages; everything else (free pages, the tail
    of each last page) is NaN, so a read the kernel should not make shows in the output."""
    _, num_kv_heads, head_dim = dense[0].shape
    pool = torch.full((num_pages, tokens_per_page, num_kv_heads, head_dim), float("nan"))
    for tokens, pages in zip(dense, tables, strict=True):
        for i in range(tokens.shape[0]):
            pool[pages[i // tokens_per_page], i % tokens_per_page] = tokens[i] / scale
    return pool.to(dtype)


@pytest.fixture
def make_case() -> Callable[..., PagedCase]:
    """Factory: a NaN-poisoned pool with scattered pages and ragged sequence lengths."""

    def make(
        seq_lens: tuple[int, ...] = (1, 37, 80),
        *,
        num_heads: int = 8,
        num_kv_heads: int = 2,
        head_dim: int = 64,
        rope_dim: int = 0,
        tokens_per_page: int = 16,
        dtype: torch.dtype = torch.float16,
        kv_dtype: torch.dtype | None = None,
        k_scale: float = 1.0,
        v_scale: float = 1.0,
        spare_pages: int = 3,
        seed: int = 0,
    ) -> PagedCase:
        generator = torch.Generator().manual_seed(seed)
        kv_dtype = dtype if kv_dtype is None else kv_dtype
        is_mla = rope_dim > 0
        head_dim_k = head_dim + rope_dim
        pages_per_seq = [math.ceil(n / tokens_per_page) for n in seq_lens]
        num_pages = sum(pages_per_seq) + max(spare_pages, 1)
        # Scattered pages, and page 0 always spare (NaN): masked block-table loads fall back
        # to page 0, so a data load left unmasked there shows up as NaN.
        order = (torch.randperm(num_pages - 1, generator=generator) + 1).tolist()
        tables = []
        for count in pages_per_seq:
            tables.append(order[:count])
            order = order[count:]
        k_dense = [torch.randn(n, num_kv_heads, head_dim_k, generator=generator) for n in seq_lens]
        v_dense = (
            None
            if is_mla
            else [torch.randn(n, num_kv_heads, head_dim, generator=generator) for n in seq_lens]
        )
        # Padding points at the NaN page 0 too: a read past ⌈L / P⌉ entries would show.
        width = max(max(pages_per_seq), 1) + 1
        block_table = torch.zeros((len(seq_lens), width), dtype=torch.int32)
        for row, pages in enumerate(tables):
            block_table[row, : len(pages)] = torch.tensor(pages, dtype=torch.int32)
        q = torch.randn(len(seq_lens), num_heads, head_dim_k, generator=generator)
        return PagedCase(
            q=q.to(dtype).to(DEVICE),
            k_pool=_poisoned_pool(
                k_dense, tables, num_pages, tokens_per_page, kv_dtype, k_scale
            ).to(DEVICE),
            v_pool=None
            if v_dense is None
            else _poisoned_pool(v_dense, tables, num_pages, tokens_per_page, kv_dtype, v_scale).to(
                DEVICE
            ),
            block_table=block_table.to(DEVICE),
            seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=DEVICE),
            k_dense=k_dense,
            v_dense=v_dense,
        )

    return make
