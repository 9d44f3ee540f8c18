"""PagedKVCache: byte counts against the formula, and allocator invariants (hypothesis)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.kernels import (
    CacheStats,
    KernelError,
    OutOfBlocksError,
    PagedKVCache,
    UnknownSequenceError,
    pool_bytes,
)


def make_cache(**overrides) -> PagedKVCache:
    """A small cache on the meta device (no memory), with overridable defaults."""
    args = {
        "num_layers": 2,
        "num_blocks": 10,
        "tokens_per_block": 16,
        "num_kv_heads": 2,
        "head_dim": 64,
        "dtype": torch.float16,
        "device": "meta",
    }
    args.update(overrides)
    return PagedKVCache(**args)


def test_llama_3_1_8b_pool_bytes_match_the_formula():
    # Llama-3.1-8B: 32 layers, 8 KV heads, head_dim 128; bf16 is 2 bytes; 1000 blocks of 16.
    # 32 x 1000 x 16 x 8 x 128 x 2 bytes x 2 (K and V) = 2_097_152_000 bytes.
    cache = make_cache(
        num_layers=32, num_blocks=1000, num_kv_heads=8, head_dim=128, dtype=torch.bfloat16
    )
    assert cache.tensor_bytes() == 2_097_152_000
    assert cache.formula_bytes() == 2_097_152_000
    assert pool_bytes(32, 1000, 16, 8, 128, 2) == 2_097_152_000


def test_deepseek_v3_mla_latent_is_counted_once():
    # DeepSeek-V3: 61 layers, latent 512 + 64 = 576 columns, no separate V; fp8 is 1 byte.
    # 61 x 100 blocks x 64 tokens x 576 x 1 byte = 224_870_400 bytes.
    cache = make_cache(
        num_layers=61,
        num_blocks=100,
        tokens_per_block=64,
        num_kv_heads=1,
        head_dim=576,
        dtype=torch.float8_e4m3fn,
        is_mla=True,
    )
    assert cache.v_pools == []
    assert cache.k_pools[0].shape == (100, 64, 1, 576)
    assert cache.tensor_bytes() == cache.formula_bytes() == 224_870_400


@pytest.mark.parametrize(
    ("dtype", "element_bytes"),
    [
        (torch.float32, 4),
        (torch.float16, 2),
        (torch.bfloat16, 2),
        (torch.float8_e4m3fn, 1),
        (torch.float8_e5m2, 1),
    ],
)
def test_element_bytes_per_dtype(dtype, element_bytes):
    cache = make_cache(dtype=dtype)
    assert cache.element_bytes == element_bytes
    assert cache.tensor_bytes() == cache.formula_bytes() == 2 * 10 * 16 * 2 * 64 * element_bytes * 2


def test_real_allocation_on_cpu_matches_meta():
    cpu = make_cache(device="cpu")
    assert cpu.tensor_bytes() == make_cache().tensor_bytes()
    assert cpu.k_pools[1].shape == (10, 16, 2, 64)


def test_allocate_append_free_and_fragmentation():
    cache = make_cache(num_blocks=4)
    assert cache.allocate(seq_id=1, tokens=20) == [3, 2]  # 2 blocks of 16
    assert cache.append(1, 12) == []  # 32 tokens still fit in 2 blocks
    assert cache.append(1, 1) == [1]  # the 33rd token needs a third block
    assert cache.stats() == CacheStats(
        num_blocks=4,
        blocks_used=3,
        blocks_free=1,
        tokens_stored=33,
        slots_allocated=48,
        fragmentation_slots=15,
        pool_bytes=cache.tensor_bytes(),
    )
    assert cache.block_table().tolist() == [[3, 2, 1]]
    assert cache.seq_lens().tolist() == [33]
    assert cache.free(1) == 3
    assert cache.stats().blocks_free == 4


def test_out_of_blocks_names_needed_and_free_and_changes_nothing():
    cache = make_cache(num_blocks=3)
    cache.allocate(0, 40)  # 3 blocks
    cache.free(0)
    cache.allocate(1, 17)  # 2 blocks
    before = (cache.stats(), cache.blocks(1), cache.block_table().tolist())
    with pytest.raises(OutOfBlocksError, match="needs 2 more blocks of 16 tokens, 1 free of 3"):
        cache.allocate(2, 32)
    with pytest.raises(OutOfBlocksError, match="needs 2 more blocks"):
        cache.append(1, 32)  # 49 tokens would need 4 blocks
    assert (cache.stats(), cache.blocks(1), cache.block_table().tolist()) == before
    assert 2 not in cache.seq_ids
    assert issubclass(OutOfBlocksError, KernelError)


def test_one_allocation_per_layer_holds_k_and_v():
    # vLLM's FlashAttention layout [2, N, P, Hkv, D]: K and V are the two halves of one
    # allocation. 10 blocks x 16 tokens x 2 heads x 64 x 2 B (fp16) = 40_960 B per half.
    cache = make_cache(device="cpu")
    assert len(cache.buffers) == 2  # one per layer
    assert cache.buffer_bytes() == [2 * 40_960, 2 * 40_960]
    buffer = cache.buffers[1]
    assert cache.k_pools[1].data_ptr() == buffer.data_ptr()
    assert cache.v_pools[1].data_ptr() == buffer.data_ptr() + 40_960
    assert cache.k_pools[1].is_contiguous() and cache.v_pools[1].is_contiguous()
    assert sum(cache.buffer_bytes()) == cache.tensor_bytes() == cache.formula_bytes()


def test_mla_allocation_is_the_latent_alone():
    cache = make_cache(device="cpu", num_kv_heads=1, head_dim=576, is_mla=True, num_layers=3)
    # 10 blocks x 16 tokens x 1 x 576 x 2 B = 184_320 B per layer, no V.
    assert cache.buffer_bytes() == [184_320] * 3
    assert cache.k_pools[0] is cache.buffers[0]


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.free(9),
        lambda c: c.append(9, 1),
        lambda c: c.blocks(9),
        lambda c: c.seq_len(9),
        lambda c: c.block_table([9]),
        lambda c: c.seq_lens([9]),
    ],
    ids=["free", "append", "blocks", "seq_len", "block_table", "seq_lens"],
)
def test_unknown_sequence_is_a_kernel_error_naming_the_id(call):
    cache = make_cache()
    cache.allocate(1, 20)
    with pytest.raises(UnknownSequenceError, match="sequence 9 was never allocated"):
        call(cache)
    assert issubclass(UnknownSequenceError, KernelError)
    assert not issubclass(UnknownSequenceError, KeyError)  # no bare KeyError leaks out


def test_double_free_is_a_kernel_error_and_changes_nothing():
    cache = make_cache()
    cache.allocate(4, 40)
    assert cache.free(4) == 3
    before = cache.stats()
    with pytest.raises(UnknownSequenceError, match="sequence 4 was already freed"):
        cache.free(4)
    assert cache.stats() == before
    cache.allocate(4, 1)  # the id can be used again
    assert cache.free(4) == 1


def test_write_to_unknown_sequence_names_it():
    cache = make_cache(device="cpu", num_layers=1, dtype=torch.float32)
    k = torch.zeros(1, 2, 64)
    with pytest.raises(UnknownSequenceError, match="sequence 3 was never allocated"):
        cache.write(0, 3, 0, k, k)


def test_allocating_a_live_sequence_again_is_a_kernel_error():
    cache = make_cache()
    cache.allocate(2, 17)
    with pytest.raises(KernelError, match="sequence 2 is already allocated"):
        cache.allocate(2, 5)
    assert cache.seq_len(2) == 17


def test_block_table_is_padded_int32():
    cache = make_cache(shuffle_seed=0)
    cache.allocate(5, 40)
    cache.allocate(6, 1)
    table = cache.block_table(pad_value=-1, max_blocks=4)
    assert table.dtype == torch.int32 and table.shape == (2, 4)
    assert table[0, :3].tolist() == cache.blocks(5)
    assert table[1].tolist() == [*cache.blocks(6), -1, -1, -1]


def test_write_places_tokens_in_their_pages():
    cache = make_cache(device="cpu", num_layers=1, dtype=torch.float32)
    cache.allocate(0, 20)
    k = torch.arange(20 * 2 * 64, dtype=torch.float32).reshape(20, 2, 64)
    cache.write(0, 0, 0, k, -k)
    first, second = cache.blocks(0)
    assert torch.equal(cache.k_pools[0][first], k[:16])
    assert torch.equal(cache.v_pools[0][second, :4], -k[16:])
    with pytest.raises(ValueError, match="outside sequence 0 of 20 tokens"):
        cache.write(0, 0, 10, k, k)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_blocks": 0}, "num_blocks must be >= 1"),
        ({"dtype": torch.int8}, "dtype must be one of"),
        ({"is_mla": True}, "MLA latent has num_kv_heads = 1"),
    ],
)
def test_bad_construction_raises(overrides, message):
    with pytest.raises(ValueError, match=message):
        make_cache(**overrides)


# One operation: (kind, sequence id, token count).
operations = st.lists(
    st.tuples(
        st.sampled_from(["allocate", "append", "free"]),
        st.integers(0, 5),
        st.integers(0, 70),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(ops=operations, num_blocks=st.integers(1, 12), tokens_per_block=st.sampled_from([1, 16]))
def test_allocator_invariants(ops, num_blocks, tokens_per_block):
    cache = make_cache(num_blocks=num_blocks, tokens_per_block=tokens_per_block)
    lens: dict[int, int] = {}  # the model: tokens per live sequence
    for kind, seq_id, tokens in ops:
        before = (cache.stats(), {s: cache.blocks(s) for s in cache.seq_ids})
        try:
            if kind == "allocate" and seq_id not in lens:
                cache.allocate(seq_id, tokens)
                lens[seq_id] = tokens
            elif kind == "append" and seq_id in lens:
                cache.append(seq_id, tokens)
                lens[seq_id] += tokens
            elif kind == "free" and seq_id in lens:
                cache.free(seq_id)
                del lens[seq_id]
        except OutOfBlocksError:
            # Checked before taking: nothing half-allocated.
            assert (cache.stats(), {s: cache.blocks(s) for s in cache.seq_ids}) == before

        owned = [block for s in cache.seq_ids for block in cache.blocks(s)]
        assert len(owned) == len(set(owned)), "a block is owned twice"
        assert all(0 <= block < num_blocks for block in owned)
        stats = cache.stats()
        assert stats.blocks_used == len(owned)
        assert stats.blocks_used + stats.blocks_free == num_blocks
        assert stats.tokens_stored == sum(lens.values())
        assert stats.slots_allocated == stats.blocks_used * tokens_per_block
        assert 0 <= stats.fragmentation_slots < max(len(lens), 1) * tokens_per_block
        for s, length in lens.items():
            assert cache.seq_len(s) == length
            assert len(cache.blocks(s)) == -(-length // tokens_per_block)

    for seq_id in list(lens):
        cache.free(seq_id)
    assert cache.stats().blocks_free == num_blocks, "free did not return every block"
    assert sorted(cache._free_blocks) == list(range(num_blocks))
