"""One operation's time: max(bytes ÷ achieved bandwidth, FLOPs ÷ achieved FLOP/s).

"Achieved" depends on the shape: a GEMM with few rows (M = the step's tokens) cannot fill
the tensor cores, so its compute fraction rises with M and saturates,
    fraction(M) = peak_fraction · M / (M + M_half),
half the large-M fraction at M = M_half. The same curve serves grouped (MoE) GEMMs with M the
tokens per expert, and prefill attention with M the chunk's tokens.
"""

from __future__ import annotations


def saturating_fraction(peak_fraction: float, size: float, half_size: float) -> float:
    """peak_fraction · size / (size + half_size): 0 at size 0, peak_fraction as size grows."""
    if size <= 0:
        return 0.0
    return peak_fraction * size / (size + half_size)


def op_s(bytes_moved: float, flops: float, bytes_per_s: float, flop_per_s: float) -> float:
    """Seconds of one kernel: the slower of its memory traffic and its arithmetic."""
    memory_s = bytes_moved / bytes_per_s
    if flops <= 0 or flop_per_s <= 0:
        return memory_s
    return max(memory_s, flops / flop_per_s)


def gemm_s(
    weight_bytes: float,
    flops: float,
    rows: float,
    bytes_per_s: float,
    peak_flop_per_s: float,
    peak_fraction: float,
    half_rows: float,
) -> float:
    """Seconds of a GEMM of `rows` tokens through `weight_bytes` of weights.

    Memory: the weights once (activations are small beside them at decode, and the compute
    line binds long before they matter at prefill). Compute at the shape's fraction.
    """
    if rows <= 0:
        return 0.0
    achieved = peak_flop_per_s * saturating_fraction(peak_fraction, rows, half_rows)
    return op_s(weight_bytes, flops, bytes_per_s, achieved)
