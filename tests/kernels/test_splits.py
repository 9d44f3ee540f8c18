"""choose_num_splits: pure-Python split-K choice, checked on the bench's workloads."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvplan.kernels.splits import choose_num_splits

H200_SMS = 132


def test_module_imports_without_torch_or_triton():
    # Planning code may call choose_num_splits; it must not pull in torch or triton.
    code = (
        "import sys, kvplan.kernels.splits\n"
        "assert 'torch' not in sys.modules and 'triton' not in sys.modules, sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    ("batch", "max_seq_len", "expected"),
    [
        # Llama-3.1-8B: 8 KV heads, G = 4 → one program per (sequence, KV head).
        (1, 32 * 1024, 16),  # 8 programs want ⌈264 / 8⌉ = 33 splits; capped at 16
        (8, 8 * 1024, 5),  # 64 programs want ⌈264 / 64⌉ = 5
        (32, 4 * 1024, 2),  # 256 programs want ⌈264 / 256⌉ = 2
        (128, 1024, 1),  # 1024 programs already fill 132 SMs
        (64, 256, 1),  # 256 tokens: one split of the minimum length
    ],
)
def test_bench_workloads(batch, max_seq_len, expected):
    got = choose_num_splits(batch, 8, 4, max_seq_len, H200_SMS, tokens_per_block=16)
    assert got == expected


def test_short_sequences_are_not_split_below_the_minimum_length():
    # 1000 tokens at ≥ 256 per split: at most 3 splits, however idle the GPU.
    assert choose_num_splits(1, 1, 1, 1000, H200_SMS) == 3


def test_window_bounds_splits_not_length():
    # 32k tokens but a 512-token window: only ~512 tokens are read, so 2 splits at most.
    assert choose_num_splits(1, 8, 4, 32 * 1024, H200_SMS, window=512) == 2


def test_no_more_splits_than_pages():
    # 600 tokens in 512-token pages: 2 pages, so 2 splits even with min_tokens_per_split 1.
    got = choose_num_splits(1, 1, 1, 600, H200_SMS, tokens_per_block=512, min_tokens_per_split=1)
    assert got == 2


def test_empty_batch_of_tokens_gives_one_split():
    assert choose_num_splits(4, 8, 4, 0, H200_SMS) == 1


def test_more_heads_per_program_count_as_fewer_programs():
    # B 4, Hkv 8 in programs of 16 heads: G = 16 gives 32 programs, ⌈264 / 32⌉ = 9 splits;
    # G = 32 gives 2 programs per KV head, 64 in all, ⌈264 / 64⌉ = 5 splits.
    assert choose_num_splits(4, 8, 16, 32 * 1024, H200_SMS, heads_per_program=16) == 9
    assert choose_num_splits(4, 8, 32, 32 * 1024, H200_SMS, heads_per_program=16) == 5


@pytest.mark.parametrize(
    "kwargs",
    [{"batch": 0}, {"sm_count": 0}, {"max_seq_len": -1}, {"window": 0}, {"max_splits": 0}],
)
def test_bad_arguments_raise(kwargs):
    args = {"batch": 1, "num_kv_heads": 8, "group_size": 4, "max_seq_len": 100, "sm_count": 132}
    args.update(kwargs)
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        choose_num_splits(**args)


@given(
    batch=st.integers(1, 512),
    num_kv_heads=st.integers(1, 128),
    group_size=st.integers(1, 128),
    max_seq_len=st.integers(0, 1 << 20),
    sm_count=st.integers(1, 256),
    tokens_per_block=st.sampled_from([1, 16, 32, 64, 128]),
)
def test_splits_stay_in_bounds(
    batch, num_kv_heads, group_size, max_seq_len, sm_count, tokens_per_block
):
    splits = choose_num_splits(
        batch, num_kv_heads, group_size, max_seq_len, sm_count, tokens_per_block=tokens_per_block
    )
    assert 1 <= splits <= 16
    # Never more splits than pages, and never below 256 tokens per split (unless S = 1).
    assert splits == 1 or splits <= -(-max_seq_len // tokens_per_block)
    assert splits == 1 or max_seq_len // splits >= 256
