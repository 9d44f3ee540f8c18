"""Paged KV cache: per-layer block pools, a free list and per-sequence block tables.

Block ids are shared by all layers (as in vLLM): allocating one block for a sequence
reserves page ``i`` in every layer's pool. Each layer's K and V live in one device
allocation ``[2, N, P, Hkv, D]``, the layout of vLLM's FlashAttention backend
(vllm/v1/attention/backends/flash_attn.py ``get_kv_cache_shape``: ``(2, num_blocks,
block_size, num_kv_heads, head_size)``), so the device allocator sees one request per
layer, as it does under vLLM. Dimension names are defined in ``kvplan.kernels``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from kvplan.kernels.errors import KernelError, OutOfBlocksError, UnknownSequenceError

KV_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def pool_bytes(
    num_layers: int,
    num_blocks: int,
    tokens_per_block: int,
    num_kv_heads: int,
    head_dim: int,
    element_bytes: int,
    *,
    is_mla: bool = False,
) -> int:
    """Bytes of all KV pools: the formula the allocated tensors must match exactly.

    num_layers · num_blocks · tokens_per_block · num_kv_heads · head_dim · element_bytes
    · 2 (K and V), or · 1 for MLA, whose one latent (kv_lora_rank + qk_rope_head_dim
    columns, num_kv_heads = 1) serves as both K and V.
    Example: Llama-3.1-8B (32 layers, 8 KV heads, head_dim 128), bf16, 1000 blocks of 16:
    32 · 1000 · 16 · 8 · 128 · 2 · 2 = 2_097_152_000 bytes.
    """
    kv_tensors = 1 if is_mla else 2
    return (
        num_layers
        * num_blocks
        * tokens_per_block
        * num_kv_heads
        * head_dim
        * element_bytes
        * kv_tensors
    )


@dataclass(frozen=True)
class CacheStats:
    """Occupancy of a PagedKVCache at one moment."""

    num_blocks: int
    """pages in each layer's pool."""
    blocks_used: int
    """pages owned by some sequence."""
    blocks_free: int
    """pages on the free list; blocks_used + blocks_free == num_blocks."""
    tokens_stored: int
    """tokens over all sequences."""
    slots_allocated: int
    """token slots in used pages: blocks_used · tokens_per_block."""
    fragmentation_slots: int
    """internal fragmentation: slots_allocated − tokens_stored (empty tails of last pages)."""
    pool_bytes: int
    """bytes of every pool tensor together (all layers, K and V), allocated or not."""


class PagedKVCache:
    """Block pools for K and V (or one MLA latent) per layer, with a block allocator.

    Each layer holds ``k_pools[layer]: [N, P, Hkv, D]`` and ``v_pools[layer]`` of the same
    shape, the two halves of one allocation ``buffers[layer]: [2, N, P, Hkv, D]``; for MLA
    ``k_pools[layer] = buffers[layer]: [N, P, 1, kv_lora_rank + qk_rope_head_dim]`` and
    ``v_pools`` is empty (V is the first kv_lora_rank columns of the latent).

    Use ``device="meta"`` to build the pools without allocating memory: shapes and
    ``nbytes`` are exact, so the byte count can be checked for any size.

    Example:
        >>> cache = PagedKVCache(num_layers=2, num_blocks=8, tokens_per_block=16,
        ...                      num_kv_heads=2, head_dim=64, dtype=torch.float16)
        >>> cache.allocate(seq_id=0, tokens=20)
        [7, 6]
        >>> cache.stats().fragmentation_slots
        12
    """

    def __init__(
        self,
        num_layers: int,
        num_blocks: int,
        tokens_per_block: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype = torch.bfloat16,
        device: torch.device | str = "cpu",
        *,
        is_mla: bool = False,
        shuffle_seed: int | None = None,
    ) -> None:
        """Build the pools and a free list holding every block.

        Args:
            num_layers: layers, each with its own pools.
            num_blocks: pages N per pool.
            tokens_per_block: tokens P per page.
            num_kv_heads: KV heads Hkv (must be 1 for MLA).
            head_dim: D; for MLA kv_lora_rank + qk_rope_head_dim (e.g. 512 + 64).
            dtype: element type, one of fp32, fp16, bf16, float8_e4m3fn, float8_e5m2.
            device: where the pools live; "meta" allocates nothing.
            is_mla: one latent pool per layer instead of K and V.
            shuffle_seed: if given, the free list is a random permutation, so sequences
                get scattered pages as in a long-running server.
        """
        for name, value in (
            ("num_layers", num_layers),
            ("num_blocks", num_blocks),
            ("tokens_per_block", tokens_per_block),
            ("num_kv_heads", num_kv_heads),
            ("head_dim", head_dim),
        ):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if dtype not in KV_DTYPES:
            raise ValueError(f"dtype must be one of {KV_DTYPES}, got {dtype}")
        if is_mla and num_kv_heads != 1:
            raise ValueError(f"an MLA latent has num_kv_heads = 1, got {num_kv_heads}")
        self.num_layers = num_layers
        self.num_blocks = num_blocks
        self.tokens_per_block = tokens_per_block
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.dtype = dtype
        self.is_mla = is_mla

        shape = (num_blocks, tokens_per_block, num_kv_heads, head_dim)  # [N, P, Hkv, D]
        buffer_shape = shape if is_mla else (2, *shape)  # MLA: one latent; else [2, N, P, Hkv, D]
        self.buffers = [
            torch.empty(buffer_shape, dtype=dtype, device=device) for _ in range(num_layers)
        ]
        self.k_pools = [buffer if is_mla else buffer[0] for buffer in self.buffers]
        self.v_pools = [] if is_mla else [buffer[1] for buffer in self.buffers]

        # Popped from the end: without shuffling, block 0 is handed out last.
        self._free_blocks = list(range(num_blocks))
        if shuffle_seed is not None:
            random.Random(shuffle_seed).shuffle(self._free_blocks)
        self._blocks: dict[int, list[int]] = {}  # seq_id -> its pages, in token order
        self._seq_lens: dict[int, int] = {}  # seq_id -> tokens stored
        self._freed: set[int] = set()  # ids freed and not allocated again: "already freed"

    # -- allocation -------------------------------------------------------------------

    def _held(self, seq_id: int) -> list[int]:
        """The blocks of a live sequence; UnknownSequenceError naming the id otherwise."""
        blocks = self._blocks.get(seq_id)
        if blocks is None:
            state = "was already freed" if seq_id in self._freed else "was never allocated"
            raise UnknownSequenceError(f"sequence {seq_id!r} {state}")
        return blocks

    def _blocks_for(self, tokens: int) -> int:
        return _ceil_div(tokens, self.tokens_per_block)

    def _take(self, seq_id: int, count: int) -> list[int]:
        free = len(self._free_blocks)
        if count > free:
            raise OutOfBlocksError(
                f"sequence {seq_id}: needs {count} more blocks of {self.tokens_per_block} "
                f"tokens, {free} free of {self.num_blocks}"
            )
        taken = self._free_blocks[len(self._free_blocks) - count :]
        del self._free_blocks[len(self._free_blocks) - count :]
        return taken[::-1]

    def allocate(self, seq_id: int, tokens: int) -> list[int]:
        """Register a new sequence of ``tokens`` tokens and give it ⌈tokens / P⌉ blocks.

        Returns:
            The block ids given to the sequence, in token order.

        Raises:
            KernelError: seq_id is already live (its blocks would be lost).
            ValueError: tokens < 0.
            OutOfBlocksError: not enough free blocks; nothing is allocated.
        """
        if seq_id in self._blocks:
            raise KernelError(
                f"sequence {seq_id!r} is already allocated ({len(self._blocks[seq_id])} blocks); "
                "free it first or use append"
            )
        if tokens < 0:
            raise ValueError(f"tokens must be >= 0, got {tokens}")
        blocks = self._take(seq_id, self._blocks_for(tokens))
        self._blocks[seq_id] = blocks
        self._seq_lens[seq_id] = tokens
        self._freed.discard(seq_id)
        return list(blocks)

    def append(self, seq_id: int, tokens: int = 1) -> list[int]:
        """Grow a sequence by ``tokens`` tokens, taking new blocks only when the last fills.

        Returns:
            The block ids newly given to the sequence (often none).

        Raises:
            UnknownSequenceError: seq_id was never allocated or was freed.
            ValueError: tokens < 0.
            OutOfBlocksError: not enough free blocks; the sequence is unchanged.
        """
        blocks = self._held(seq_id)
        if tokens < 0:
            raise ValueError(f"tokens must be >= 0, got {tokens}")
        old_len = self._seq_lens[seq_id]
        new_len = old_len + tokens
        new_blocks = self._take(seq_id, self._blocks_for(new_len) - self._blocks_for(old_len))
        blocks.extend(new_blocks)
        self._seq_lens[seq_id] = new_len
        return list(new_blocks)

    def free(self, seq_id: int) -> int:
        """Forget a sequence and return its blocks to the free list.

        Returns:
            Blocks returned.

        Raises:
            UnknownSequenceError: seq_id was never allocated, or was freed already (a double
                free); nothing changes.
        """
        blocks = self._held(seq_id)
        del self._blocks[seq_id], self._seq_lens[seq_id]
        self._freed.add(seq_id)
        self._free_blocks.extend(reversed(blocks))
        return len(blocks)

    # -- views for the kernels ------------------------------------------------------------

    @property
    def seq_ids(self) -> list[int]:
        """Live sequences, in allocation order."""
        return list(self._blocks)

    def blocks(self, seq_id: int) -> list[int]:
        """Block ids of one sequence, in token order (UnknownSequenceError if not live)."""
        return list(self._held(seq_id))

    def seq_len(self, seq_id: int) -> int:
        """Tokens stored for one sequence (UnknownSequenceError if not live)."""
        self._held(seq_id)
        return self._seq_lens[seq_id]

    def block_table(
        self,
        seq_ids: list[int] | None = None,
        *,
        max_blocks: int | None = None,
        pad_value: int = 0,
        device: torch.device | str | None = None,
    ) -> torch.Tensor:
        """Block table of the given sequences (default: all), padded with ``pad_value``.

        Padding is never read by the kernels (they read ⌈L / P⌉ entries per row); it is a
        valid page id by default so that an accidental read stays inside the pool.

        Returns:
            ``[B, max_blocks]`` int32, on ``device`` (default: the pools' device, or the
            CPU for pools on the meta device).
        """
        seq_ids = self.seq_ids if seq_ids is None else seq_ids
        longest = max((len(self._held(s)) for s in seq_ids), default=0)
        width = max(longest, 1) if max_blocks is None else max_blocks
        if width < longest:
            raise ValueError(f"max_blocks={max_blocks} is less than the longest table {longest}")
        table = torch.full((len(seq_ids), width), pad_value, dtype=torch.int32)
        for row, seq_id in enumerate(seq_ids):
            blocks = self._blocks[seq_id]
            table[row, : len(blocks)] = torch.tensor(blocks, dtype=torch.int32)
        return table.to(self._table_device if device is None else device)

    def seq_lens(
        self, seq_ids: list[int] | None = None, *, device: torch.device | str | None = None
    ) -> torch.Tensor:
        """Tokens per sequence: ``[B]`` int32, in the order of ``seq_ids`` (default: all)."""
        seq_ids = self.seq_ids if seq_ids is None else seq_ids
        lens = torch.tensor([self.seq_len(s) for s in seq_ids], dtype=torch.int32)
        return lens.to(self._table_device if device is None else device)

    def write(
        self,
        layer: int,
        seq_id: int,
        start: int,
        k: torch.Tensor,
        v: torch.Tensor | None = None,
    ) -> None:
        """Copy tokens ``start .. start + T`` of a sequence into one layer's pages.

        Args:
            layer: layer index.
            seq_id: an allocated sequence holding at least start + T tokens.
            start: position of the first token written.
            k: ``[T, Hkv, D]`` (MLA: the latent ``[T, 1, Dk]``), cast to the pool dtype.
            v: ``[T, Hkv, D]``; must be None for MLA.
        """
        if (v is None) != self.is_mla:
            raise ValueError("pass v for K/V pools and only k for an MLA latent")
        blocks = self._held(seq_id)
        count = k.shape[0]
        if start < 0 or start + count > self._seq_lens[seq_id]:
            raise ValueError(
                f"tokens {start}..{start + count} outside sequence {seq_id} of "
                f"{self._seq_lens[seq_id]} tokens"
            )
        positions = torch.arange(start, start + count)
        pages = torch.tensor(blocks, dtype=torch.long)[positions // self.tokens_per_block]
        pages = pages.to(self._device)
        offsets = (positions % self.tokens_per_block).to(self._device)
        self.k_pools[layer][pages, offsets] = k.to(self.dtype)
        if v is not None:
            self.v_pools[layer][pages, offsets] = v.to(self.dtype)

    # -- sizes --------------------------------------------------------------------------

    @property
    def _device(self) -> torch.device:
        return self.k_pools[0].device

    @property
    def _table_device(self) -> torch.device:
        # Meta pools hold no data; their block tables are still wanted, on the CPU.
        return torch.device("cpu") if self._device.type == "meta" else self._device

    @property
    def element_bytes(self) -> int:
        """Bytes per stored element (1 for fp8)."""
        return self.k_pools[0].element_size()

    def tensor_bytes(self) -> int:
        """Sum of ``nbytes`` over every pool tensor (shape × element size, not the device's
        view of memory: ``kvplan.validate`` asks the device for that)."""
        return sum(pool.nbytes for pool in (*self.k_pools, *self.v_pools))

    def buffer_bytes(self) -> list[int]:
        """Bytes of each device allocation, one per layer, in allocation order."""
        return [buffer.nbytes for buffer in self.buffers]

    def formula_bytes(self) -> int:
        """The same quantity from ``pool_bytes``: must equal ``tensor_bytes()``."""
        return pool_bytes(
            self.num_layers,
            self.num_blocks,
            self.tokens_per_block,
            self.num_kv_heads,
            self.head_dim,
            self.element_bytes,
            is_mla=self.is_mla,
        )

    def stats(self) -> CacheStats:
        """Occupancy now: blocks used and free, tokens, internal fragmentation, bytes."""
        blocks_used = sum(len(blocks) for blocks in self._blocks.values())
        tokens_stored = sum(self._seq_lens.values())
        slots_allocated = blocks_used * self.tokens_per_block
        return CacheStats(
            num_blocks=self.num_blocks,
            blocks_used=blocks_used,
            blocks_free=len(self._free_blocks),
            tokens_stored=tokens_stored,
            slots_allocated=slots_allocated,
            fragmentation_slots=slots_allocated - tokens_stored,
            pool_bytes=self.tensor_bytes(),
        )
