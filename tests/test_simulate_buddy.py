"""The buddy placement for reservations, and the PagedAttention paper's split of the pool.

Properties of a buddy allocator (Knuth, TAOCP vol. 1 §2.5) checked over random admit and
release sequences against a brute-force picture of the address space: every run is a power
of two aligned to its size, live runs never overlap and lie inside the pool, free and
reserved blocks add up to the pool, and once everything is released the free runs have
merged back into the pool's binary digits.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.engine import engine
from kvplan.engine.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.simulate import SimConfig, parse_distribution, poisson_workload, simulate
from kvplan.simulate.allocators import BuddyAllocator


def _digits(num_blocks: int) -> dict[int, set[int]]:
    """The pool cut into its binary digits, largest first, by hand."""
    runs, start = {}, 0
    for order in sorted((k for k in range(32) if num_blocks >> k & 1), reverse=True):
        runs[order] = {start}
        start += 1 << order
    return runs


def test_a_pool_of_26_290_blocks_starts_as_its_binary_digits():
    # 26,290 = 16,384 + 8,192 + 1,024 + 512 + 128 + 32 + 16 + 2
    alloc = BuddyAllocator(26_290)
    assert {k: v for k, v in alloc.free_runs.items() if v} == {
        14: {0}, 13: {16_384}, 10: {24_576}, 9: {25_600}, 7: {26_112}, 5: {26_240},
        4: {26_272}, 1: {26_288},
    }  # fmt: skip
    assert alloc.largest_run == 16_384 and alloc.fragmentation_blocks == 26_290 - 16_384


def test_a_reservation_is_rounded_up_and_split_from_the_smallest_run_that_holds_it():
    alloc = BuddyAllocator(64)
    first = alloc.admit(1, 5, final_blocks=4)  # 5 blocks -> a run of 8: 64 -> 32+16+8+8
    assert first == 0 and alloc.allocated_blocks == 8 and alloc.final_blocks == 4
    assert {k: v for k, v in alloc.free_runs.items() if v} == {5: {32}, 4: {16}, 3: {8}}
    second = alloc.admit(1, 8)  # takes the free run of 8 beside it
    assert second == 8
    alloc.release(first, 1, 5)
    alloc.release(second, 1, 8)  # 0 and 8 merge, then with 16, then with 32: one run of 64
    assert {k: v for k, v in alloc.free_runs.items() if v} == {6: {0}}


@settings(max_examples=60, deadline=None)
@given(
    num_blocks=st.integers(1, 300),
    actions=st.lists(st.tuples(st.booleans(), st.integers(1, 80)), max_size=60),
)
def test_buddy_runs_are_aligned_powers_of_two_that_never_overlap(num_blocks, actions):
    alloc = BuddyAllocator(num_blocks)
    live: dict[int, tuple[int, int]] = {}  # start -> (size, reservation)
    for is_admit, value in actions:
        if is_admit:
            start = alloc.admit(1, value)
            size = 1 << (value - 1).bit_length()
            if start is None:
                assert not alloc.can_place(value)
                continue
            assert start % size == 0 and start + size <= num_blocks  # aligned, inside
            for other, (other_size, _) in live.items():  # no overlap
                assert start + size <= other or other + other_size <= start
            live[start] = (size, value)
        elif live:
            start = sorted(live)[value % len(live)]
            alloc.release(start, 1, live.pop(start)[1])
        taken = sum(size for size, _ in live.values())
        assert alloc.allocated_blocks == taken
        free = sum(len(starts) << k for k, starts in alloc.free_runs.items())
        assert free + taken == num_blocks == alloc.free_blocks + alloc.allocated_blocks
    for start, (_, value) in list(live.items()):
        alloc.release(start, 1, value)
    # Coalescing: nothing live, so the free runs are the pool's binary digits again.
    assert {k: v for k, v in alloc.free_runs.items() if v} == _digits(num_blocks)


def test_buddy_reservations_split_the_pool_as_the_paper_does(catalog):
    # reserve-pow2 reserves prompt + 2^⌈log2 output⌉ tokens; buddy rounds the run up again,
    # so it holds at least as much never-used memory as first-fit on the same requests.
    deployment = Deployment(catalog.model("opt-13b"), engine("vllm"))
    workload = poisson_workload(
        2.0,
        parse_distribution("lognormal:mean=161,sigma=1", "--prompt-tokens"),
        parse_distribution("lognormal:mean=338,sigma=1", "--output-tokens"),
        requests=150,
    )
    splits = {}
    for placement in ("first-fit", "buddy"):
        config = SimConfig(allocator="reserve-pow2", placement=placement, max_model_len=2048)
        result = simulate(deployment, catalog.sku("a100-40gb"), workload, config)
        split = result.memory_mean
        parts = split.reserved_later_used_bytes + split.reserved_never_used_bytes
        assert parts == pytest.approx(split.reserved_unused_bytes)
        assert split.reserved_later_used_bytes >= 0 and split.reserved_never_used_bytes > 0
        splits[placement] = split
    assert (
        splits["buddy"].internal_fragmentation_bytes
        > splits["first-fit"].internal_fragmentation_bytes
    )


def test_paged_has_no_never_used_reservation(catalog):
    deployment = Deployment(catalog.model("llama-3.1-8b"), engine("vllm"))
    workload = poisson_workload(
        5.0, parse_distribution("500", "p"), parse_distribution("100", "o"), requests=50
    )
    result = simulate(deployment, catalog.sku("h100-sxm"), workload, SimConfig(max_model_len=4096))
    assert result.memory_mean.reserved_never_used_bytes == 0
    assert result.memory_mean.reserved_later_used_bytes == 0


def test_buddy_placement_needs_a_reservation():
    with pytest.raises(KvplanError, match="--placement buddy: places contiguous reservations"):
        SimConfig(placement="buddy")
