"""Grid choices for paged decode (heads per program, split-K): pure Python, no torch or triton.

Importable before TRITON_INTERPRET is settled (``kvplan.validate`` counts the kernel's
traffic from these), and unit-tested alone.
"""

from __future__ import annotations

# Cap on splits: past ~16 the reduce stage and the fp32 partials (B·Hq·S·(D+1)·4 bytes,
# written then read back) cost more than the extra parallelism gives.
DEFAULT_MAX_SPLITS = 16
# A split shorter than this spends its time on the prologue/epilogue, not on streaming KV.
DEFAULT_MIN_TOKENS_PER_SPLIT = 256
# Programs to aim for per SM: two resident programs per SM hide the reduce tail of a wave.
DEFAULT_PROGRAMS_PER_SM = 2


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def heads_per_program(group_size: int, head_dim_k: int) -> int:
    """BLOCK_H: all G query heads of a KV head in one program, 16 rows at least (tl.dot).

    The next power of two ≥ G, at least 16, at most 64 (16 for K wider than 256). Example:
    Falcon-7B's 71 heads on one KV head take ⌈71 / 64⌉ = 2 programs per KV head.
    """
    # The fp32 accumulator is BLOCK_H × BLOCK_D: cap it near 16K elements (64 KB) so wide
    # MLA heads (512 + 64) take 16 heads per program, as SGLang's Triton MLA does.
    cap = 64 if head_dim_k <= 256 else 16
    return min(max(16, 1 << (group_size - 1).bit_length()), cap)


def choose_num_splits(
    batch: int,
    num_kv_heads: int,
    group_size: int,
    max_seq_len: int,
    sm_count: int,
    *,
    heads_per_program: int = 16,
    tokens_per_block: int = 1,
    window: int | None = None,
    max_splits: int = DEFAULT_MAX_SPLITS,
    min_tokens_per_split: int = DEFAULT_MIN_TOKENS_PER_SPLIT,
    programs_per_sm: int = DEFAULT_PROGRAMS_PER_SM,
) -> int:
    """Number of KV splits S for one decode step (1 means no split and no reduce stage).

    Without splits the grid has B · Hkv · ⌈G / heads_per_program⌉ programs; S multiplies
    that until it reaches ``programs_per_sm · sm_count``, but never past ``max_splits``,
    never below ``min_tokens_per_split`` tokens per split and never past one page per split.
    With a sliding window only the last ``window`` tokens are read, so the window, not the
    sequence length, bounds S (as TensorRT-LLM's Triton kernel does).

    Example: B 1, Hkv 8, G 4, L 32k on 132 SMs gives 8 programs, wants ⌈264 / 8⌉ = 33
    splits, and is capped at 16. B 32, L 4k gives 256 programs already: S = 1.

    Args:
        batch: sequences B.
        num_kv_heads: KV heads Hkv.
        group_size: query heads per KV head, G.
        max_seq_len: longest sequence in the batch, in tokens.
        sm_count: streaming multiprocessors on the device.
        heads_per_program: query heads one program handles (the kernel's BLOCK_H).
        tokens_per_block: tokens per page P; splits are page-aligned.
        window: sliding-window size in tokens, or None for full attention.
        max_splits: upper bound on S.
        min_tokens_per_split: smallest useful split, in tokens.
        programs_per_sm: target resident programs per SM.

    Returns:
        S, an integer in [1, max_splits].
    """
    for name, value in (
        ("batch", batch),
        ("num_kv_heads", num_kv_heads),
        ("group_size", group_size),
        ("sm_count", sm_count),
        ("heads_per_program", heads_per_program),
        ("tokens_per_block", tokens_per_block),
        ("max_splits", max_splits),
        ("min_tokens_per_split", min_tokens_per_split),
        ("programs_per_sm", programs_per_sm),
    ):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if max_seq_len < 0:
        raise ValueError(f"max_seq_len must be >= 0, got {max_seq_len}")
    if window is not None and window < 1:
        raise ValueError(f"window must be >= 1 or None, got {window}")

    tokens_read = max_seq_len if window is None else min(max_seq_len, window)
    if tokens_read == 0:
        return 1
    programs = batch * num_kv_heads * _ceil_div(group_size, heads_per_program)
    to_fill_device = _ceil_div(programs_per_sm * sm_count, programs)
    by_length = max(1, tokens_read // min_tokens_per_split)
    # A window may straddle one more page than it has tokens' worth of pages.
    by_pages = _ceil_div(tokens_read, tokens_per_block) + (window is not None)
    return max(1, min(to_fill_device, by_length, by_pages, max_splits))
