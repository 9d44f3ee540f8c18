"""The memory check against PyTorch's caching allocator, without a GPU.

The "device" here is ``caching_allocator_model``: equal-size requests from an empty cache,
derived in this file from the rules of c10/cuda/CUDACachingAllocator.cpp (pytorch/pytorch):
sizes round up to 512 B; ≤ 1 MiB goes to the small pool, packed into 2 MiB segments and cut
when ≥ 512 B remain; 1–10 MiB requests share 20 MiB segments; ≥ 10 MiB requests get their own
segment rounded up to 2 MiB; a large-pool block is cut only when more than 1 MiB remains,
else the whole block is allocated. kvplan's replay (kvplan.validate.allocator_rules) is a
general implementation of the same rules; the check must pass for a sound pool and fail for
a pool one block short or over, at every size.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.validate.allocator_rules import FreeBlock, replay
from kvplan.validate.device_memory import DeviceMeasurement
from kvplan.validate.memory_check import check_device_memory

MIB = 2**20


def caching_allocator_model(sizes: list[int]) -> DeviceMeasurement:
    """What the allocator and driver report for equal-size requests from an empty cache."""
    size, count = sizes[0], len(sizes)
    assert all(s == size for s in sizes)
    rounded = -(-size // 512) * 512
    blocks, segments = [], []
    if rounded <= MIB:
        # Small pool: every cut leaves 0 or ≥ 512 B (both multiples of 512), so it always
        # cuts; ⌊2 MiB / rounded⌋ requests share one segment.
        per_segment = (2 * MIB) // rounded
        blocks = [rounded] * count
        segments = [2 * MIB] * -(-count // per_segment)
    elif rounded < 10 * MIB:
        left = 0  # free tail of the newest 20 MiB segment; older tails are too small to reuse
        for _ in range(count):
            if left < rounded:
                segments.append(20 * MIB)
                left = 20 * MIB
            taken = rounded if left - rounded > MIB else left
            blocks.append(taken)
            left -= taken
    else:
        segment = -(-rounded // (2 * MIB)) * 2 * MIB
        segments = [segment] * count
        blocks = [rounded if segment - rounded > MIB else segment] * count
    return DeviceMeasurement(
        requested_bytes=sum(sizes),
        allocated_bytes=sum(blocks),
        reserved_bytes=sum(segments),
        driver_bytes=sum(segments),
        new_segments=tuple(segments),
        block_bytes=tuple(blocks),
        free_blocks_before={"small": [], "large": []},
        alloc_retries=0,
        free_after_bytes=0,
        total_bytes=0,
    )


# Llama-3.1-8B: 8 KV heads x head_dim 128 x 2 B (bf16) x 16 tokens = 32_768 B per block of K
# (or of V) in one layer; vLLM's layout keeps K and V of a layer in one allocation: 65_536 B.
LLAMA_HALF_PAGE_BYTES = 16 * 8 * 128 * 2


@pytest.mark.parametrize(
    ("context", "batch", "kv_separate_extra_mib", "per_layer_extra_mib", "reserved_extra_mib"),
    [
        # 3000 x 8: ⌈3000/16⌉ = 188 blocks x 8 + 1 null = 1505 blocks. K alone: 1505 x 32_768
        # = 49_315_840 B, segment 48 MiB = 50_331_648 B, remainder 1_015_808 B ≤ 1 MiB: not
        # cut, 64 tensors x 1_015_808 = 62 MiB more allocated. K and V together: 98_631_680 B,
        # segment 96 MiB, remainder 2_031_616 B > 1 MiB: cut, nothing extra allocated; the
        # 32 remainders stay reserved: 62 MiB.
        (3000, 8, 62, 0, 62),
        # 10000 x 1: 625 + 1 = 626 blocks. K alone 20_512_768 B in 20 MiB, remainder 458_752:
        # 64 x = 28 MiB. K and V 41_025_536 B in 40 MiB, remainder 917_504 ≤ 1 MiB: 32 x =
        # 28 MiB allocated and reserved.
        (10000, 1, 28, 28, 28),
        # 6000 x 16: 375 x 16 + 1 = 6001 blocks. K alone 196_640_768 B in 188 MiB, remainder
        # 491_520: 64 x = 30 MiB. K and V 393_281_536 B in 376 MiB, remainder 983_040: 30 MiB.
        (6000, 16, 30, 30, 30),
    ],
)
def test_llama_pools_at_non_power_of_two_contexts(
    context, batch, kv_separate_extra_mib, per_layer_extra_mib, reserved_extra_mib
):
    blocks = batch * -(-context // 16) + 1
    separate = [blocks * LLAMA_HALF_PAGE_BYTES] * 64  # K and V as 64 tensors (32 layers)
    per_layer = [2 * blocks * LLAMA_HALF_PAGE_BYTES] * 32  # vLLM's [2, N, P, Hkv, D]
    old = replay(separate)
    assert (old.allocated_bytes - old.requested_bytes) // MIB == kv_separate_extra_mib
    # The old rule (measured − predicted ≤ 511 B per tensor) failed every one of these.
    assert old.allocated_bytes - old.requested_bytes > 511 * 64
    new = replay(per_layer)
    assert new.allocated_bytes - new.requested_bytes == per_layer_extra_mib * MIB
    assert new.reserved_bytes - new.requested_bytes == reserved_extra_mib * MIB
    # The device reports exactly that, and the check explains it byte for byte.
    for sizes in (separate, per_layer):
        check = check_device_memory(sizes, caching_allocator_model(sizes))
        assert check.passed, check.failed_terms


page_sizes = st.sampled_from(
    [
        2_048,  # tiny GQA page
        32_768,  # Llama-3.1-8B K (or V) block, bf16
        65_536,  # Llama-3.1-8B K+V block
        73_728,  # DeepSeek-V2-Lite latent block: 64 tokens x 576 x 2 B
        36_864,  # the same in fp8
        4_608,  # odd: a 3 x 1536 B page
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    page_bytes=page_sizes,
    blocks=st.integers(2, 20_000),
    layers=st.sampled_from([1, 2, 3, 27, 32, 61]),
)
def test_sound_pools_pass_and_one_block_off_fails(page_bytes, blocks, layers):
    planned = [blocks * page_bytes] * layers
    sound = check_device_memory(planned, caching_allocator_model(planned))
    assert sound.passed, (sound.failed_terms, sound.replay.explanation())
    for actual_blocks in (blocks - 1, blocks + 1):
        actual = [actual_blocks * page_bytes] * layers
        off = check_device_memory(planned, caching_allocator_model(actual))
        assert not off.passed
        # The requested bytes always show it, even where a whole segment absorbs the block.
        assert "requested" in off.failed_terms


def test_whole_block_absorbs_one_block_but_requested_bytes_do_not():
    # 626 and 627 blocks of 32_768 B both land in one 20 MiB segment, unsplit (remainders
    # 458_752 and 425_984 B ≤ 1 MiB): allocated and reserved are equal for both pools.
    planned, over = [626 * 32_768], [627 * 32_768]
    measured = caching_allocator_model(over)
    assert measured.allocated_bytes == caching_allocator_model(planned).allocated_bytes
    check = check_device_memory(planned, measured)
    assert check.failed_terms == ["requested"]
    term = check.terms[0].as_record(sum(planned))
    assert term["measured_minus_planned_bytes"] == 32_768


def test_an_unexplained_byte_fails():
    planned = [1505 * 65_536] * 4
    measured = caching_allocator_model(planned)
    extra = DeviceMeasurement(**{**measured.__dict__, "driver_bytes": measured.driver_bytes + 1})
    assert check_device_memory(planned, extra).failed_terms == ["driver"]
    retried = DeviceMeasurement(**{**measured.__dict__, "alloc_retries": 1})
    assert "alloc_retries" in check_device_memory(planned, retried).failed_terms


def test_cached_free_blocks_are_reused_best_fit():
    # A 50 MiB and a 45 MiB free large block: a 40 MiB request takes the 45 MiB one (smallest
    # that fits) and cuts it (5 MiB > 1 MiB remain); no new segment.
    free = {"large": [FreeBlock(50 * MIB, 0), FreeBlock(45 * MIB, 1 << 30)], "small": []}
    result = replay([40 * MIB], free)
    assert result.reserved_bytes == 0 and result.allocated_bytes == 40 * MIB
    # 44.5 MiB from the 45 MiB block leaves 0.5 MiB: not cut, the whole 45 MiB is allocated.
    result = replay([44 * MIB + MIB // 2], free)
    assert result.allocated_bytes == 45 * MIB
    # A large request never takes small-pool blocks: a new 2 MiB-rounded segment.
    result = replay([3 * MIB], {"small": [FreeBlock(2 * MIB, 0)], "large": []})
    assert result.new_segments == (20 * MIB,)


def test_small_requests_round_to_512_and_pack_into_2_mib():
    # 1000 B rounds to 1024 B; 2048 of them fill exactly one 2 MiB segment, the next opens one.
    result = replay([1000] * 2049)
    assert result.allocated_bytes == 2049 * 1024
    assert result.new_segments == (2 * MIB, 2 * MIB)
    assert replay([1]).allocated_bytes == 512
