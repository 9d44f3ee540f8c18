"""Pages own their arithmetic and their unit; pools declare the unit; one search finds the
largest value that fits."""

from __future__ import annotations

import pytest

import kvplan
from kvplan.engine.pages import BytePages, Slots, StatePages, TokenPages
from kvplan.engine.pool import KvLayout, KvPool, StageLayout, largest_fitting
from kvplan.engine.vllm_pages import (
    ChunkedPageSpec,
    CrossPageSpec,
    MlaPageSpec,
    PageSpec,
    SlidingPageSpec,
    StatePageSpec,
    attention_page_spec,
)
from kvplan.kvmath import ChunkedCache, FullCache, MlaCache, SlidingCache

# --- the search ---------------------------------------------------------------------------


def _counted(threshold: int) -> tuple[list[int], object]:
    asked: list[int] = []

    def fits(n: int) -> bool:
        asked.append(n)
        return n <= threshold

    return asked, fits


@pytest.mark.parametrize(
    ("threshold", "lower", "upper", "expected"),
    [
        (-1, 0, 100, 0),  # nothing fits: the floor, which is never asked
        (0, 0, 100, 0),
        (1, 0, 100, 1),  # the first value above the floor
        (99, 0, 100, 99),  # one below the ceiling
        (100, 0, 100, 100),  # everything fits: the ceiling
        (10**9, 0, 100, 100),  # fits beyond the ceiling: still the ceiling
        (5, 5, 5, 5),  # an empty range: the floor, nothing asked
        (0, 1, 100, 1),  # a floor of 1 is returned even where 1 does not fit
        (7, 3, 4, 4),
        (3, 3, 4, 3),
    ],
)
def test_largest_fitting_at_its_boundaries(threshold, lower, upper, expected):
    asked, fits = _counted(threshold)
    assert largest_fitting(fits, upper, lower=lower) == expected
    assert lower not in asked  # the floor is taken to fit
    assert all(lower < n <= upper for n in asked)


def test_largest_fitting_asks_log2_questions():
    # [0, 2**20]: 2**20 + 1 candidates, so at most ⌈log2(2**20 + 1)⌉ = 21 questions.
    asked, fits = _counted(123_456)
    assert largest_fitting(fits, 2**20) == 123_456
    assert len(asked) <= 21
    assert len(set(asked)) == len(asked)  # never the same question twice


def test_largest_fitting_upper_below_lower_returns_lower():
    asked, fits = _counted(10)
    assert largest_fitting(fits, 2, lower=5) == 5
    assert asked == []


# --- pages ----------------------------------------------------------------------------------


def test_token_pages_round_up_to_whole_pages():
    pages = TokenPages(16)
    # ⌈0/16⌉ = 0, ⌈1/16⌉ = 1, ⌈16/16⌉ = 1, ⌈17/16⌉ = 2, ⌈131072/16⌉ = 8192.
    assert [pages.blocks_per_request(n) for n in (0, 1, 16, 17, 131_072)] == [0, 1, 1, 2, 8192]
    assert pages.unit == "page"


def test_state_pages_are_constant_once_a_token_is_held():
    state = StatePages(3)
    assert [state.blocks_per_request(n) for n in (0, 1, 10**6)] == [0, 3, 3]
    assert state.unit == "page"


def test_byte_pages_charge_the_peak_bytes():
    # Llama-3.1-8B's full layer: 2 × 8 heads × 128 × 2 B = 4,096 B per token; 32 layers at
    # 1,000 tokens = 32 × 4,096 × 1,000 = 131,072,000 B.
    full = BytePages(FullCache(4096), 32)
    assert full.blocks_per_request(1000) == 131_072_000
    assert full.unit == "byte"
    # A chunk of 8 tokens: at L = 9 the layer holds 1 token, but the request passed L = 8,
    # where it held 8: 8 × 100 B.
    chunked = BytePages(ChunkedCache(100, chunk_tokens=8), 1)
    assert chunked.blocks_per_request(9) == 800


def test_fixed_slots_charge_one_slot_whatever_the_length():
    assert [Slots().blocks_per_request(n) for n in (0, 1, 10**6)] == [1, 1, 1]
    assert Slots().unit == "slot"


# --- vLLM's page specs: a subclass per kind, each overriding blocks_per_request ----------------


def test_vllm_sliding_page_keeps_one_extra_block():
    # kv_cache_interface.py's example: a 6-token window over 4-token blocks can straddle
    # 3 blocks. With one new token per step: min(6 − 1 + 1, 100) = 6 kept, ⌈6/4⌉ + 1 = 3.
    spec = SlidingPageSpec(page_bytes=4 * 10, block_tokens=4, window_tokens=6)
    assert spec.blocks_per_request(100, 1) == 3
    assert spec.max_memory_usage_bytes(100, 1) == 3 * 40
    # Shorter than the window: min(5 + 1, 3) = 3 tokens, ⌈3/4⌉ + 1 = 2 blocks.
    assert spec.blocks_per_request(3, 1) == 2


def test_vllm_page_kinds():
    # Full: ⌈100/16⌉ = 7. Chunked C = 32 with 8 batched: min(40, 100) = 40 → ⌈40/16⌉ = 3.
    # Cross with 50 encoder tokens: ⌈50/16⌉ = 4 at any text length. State: one block.
    assert PageSpec(160, 16).blocks_per_request(100, 8) == 7
    assert ChunkedPageSpec(160, 16, chunk_tokens=32).blocks_per_request(100, 8) == 3
    assert CrossPageSpec(160, 16, encoder_tokens=50).blocks_per_request(1, 8) == 4
    assert StatePageSpec(160, 16).blocks_per_request(10**6, 8) == 1
    assert [c.kind for c in (PageSpec, MlaPageSpec, SlidingPageSpec, StatePageSpec)] == [
        "full",
        "mla",
        "sliding",
        "state",
    ]


def test_attention_page_spec_follows_the_cache_class():
    # One block of 16 tokens at 4,096 B per token: 65,536 B.
    sliding = attention_page_spec(SlidingCache(4096, window_tokens=4096), 16)
    assert sliding == SlidingPageSpec(65_536, 16, 4096)
    assert type(attention_page_spec(MlaCache(1152), 64)) is MlaPageSpec
    assert type(attention_page_spec(FullCache(4096), 16)) is PageSpec
    # Same bytes, another kind: not the same spec (vLLM groups them apart).
    assert PageSpec(65_536, 16) != MlaPageSpec(65_536, 16)


# --- pools declare their unit ----------------------------------------------------------------


def test_a_layout_refuses_a_charge_of_another_unit():
    with pytest.raises(ValueError, match="a byte charge"):
        KvLayout(
            (StageLayout(1, (BytePages(FullCache(4), 1),)),),
            tokens_per_block=16,
            kv_bytes_per_token=4,
        )
    with pytest.raises(ValueError, match="page unit 'tokens'"):
        KvLayout((), tokens_per_block=1, kv_bytes_per_token=0, unit="tokens")  # type: ignore[arg-type]


def test_a_pool_says_what_it_counts():
    layout = KvLayout((StageLayout(64, (TokenPages(16),)),), 16, 4)
    pool = KvPool(layout, layout.blocks_for(6400))  # 6,400 B // 64 B = 100 pages
    assert (pool.num_blocks, pool.unit, pool.block_capacity_tokens) == (100, "page", 1600)
    # 17 tokens take ⌈17/16⌉ = 2 pages: 100 // 2 = 50 requests.
    assert pool.requests_at(17) == 50


@pytest.mark.parametrize(
    ("engine", "unit"),
    [
        ("exact", "byte"),
        ("hf", "byte"),
        ("vllm", "page"),
        ("sglang", "page"),
        ("llama.cpp", "byte"),
    ],
)
def test_capacity_names_the_unit_of_its_blocks(engine, unit):
    row = kvplan.capacity("llama-3.1-8b", "h100-sxm", engine=engine, context=8192)
    assert row.kv_block_unit == unit
    if unit == "byte":
        # A byte pool's blocks are its budget in bytes, one byte each.
        assert row.kv_bytes_per_block_per_gpu == 1
        assert row.kv_blocks == row.kv_budget_bytes_per_gpu
    else:
        # Llama-3.1-8B: 32 layers × 2 × 8 heads × 128 × 2 B = 131,072 B per token; a page
        # holds tokens_per_block of them on the one GPU.
        assert row.kv_bytes_per_block_per_gpu == row.tokens_per_block * 131_072
        assert row.kv_blocks == row.kv_budget_bytes_per_gpu // row.kv_bytes_per_block_per_gpu


def test_fixed_llama_cpp_slots_are_counted_as_slots():
    # -c 16384 -np 4: four slots of 4,096 cells, counted one per slot.
    row = kvplan.capacity(
        "llama-3.1-8b",
        "h100-sxm",
        engine="llama.cpp",
        context=4096,
        context_size_tokens=16384,
        parallel=4,
    )
    assert (row.kv_block_unit, row.kv_blocks) == ("slot", 4)


@pytest.mark.parametrize(
    ("engine", "charged"),
    [
        ("vllm", "charges each request its blocks (16 tokens each)"),
        ("hf", "charges each request its bytes (a pool of bytes, no pages)"),
    ],
)
def test_size_explain_names_what_a_request_is_charged(engine, charged):
    from typer.testing import CliRunner

    from kvplan.cli import app

    result = CliRunner().invoke(
        app, ["size", "llama-3.1-8b", "-c", "8k", "--engine", engine, "--explain"]
    )
    assert result.exit_code == 0
    assert charged in result.output
    # A byte pool never claims its one-byte blocks hold a token each.
    assert "(1 tokens each)" not in result.output


def test_cache_classes_answer_what_engines_used_to_ask_of_kind_strings():
    from kvplan.kvmath import MlaIndexerCache, ParallelCache, SharedCache, StateCache

    # The latent is one buffer; every other attention cache has a K and a V row.
    assert [c.is_latent for c in (MlaCache(576), MlaIndexerCache(708), FullCache(4096))] == [
        True,
        True,
        False,
    ]
    assert StateCache(1000).is_latent is False
    # Recurrent state per sequence: Mamba's, and Falcon-H1's beside its attention; none for
    # attention-only and shared layers.
    assert StateCache(1000).state_bytes_per_seq == 1000
    assert ParallelCache(4096, state_bytes=777).state_bytes_per_seq == 777
    assert FullCache(4096).state_bytes_per_seq == 0
    assert SharedCache().state_bytes_per_seq == 0


def test_only_full_length_vllm_specs_take_a_draft_layer():
    assert PageSpec(1, 16).keeps_every_token and MlaPageSpec(1, 64).keeps_every_token
    assert not SlidingPageSpec(1, 16, 4096).keeps_every_token
    assert not StatePageSpec(1, 16).keeps_every_token


def test_windowed_models(catalog):
    # Mistral-7B-v0.1: every layer slides over 4,096 tokens; Llama-3.1-8B: all full.
    assert catalog.model("mistral-7b-v0.1").has_windowed_layers
    assert not catalog.model("llama-3.1-8b").has_windowed_layers


def test_models_with_per_head_kv(catalog):
    # Llama-3.1-8B caches K/V per KV head; DeepSeek-V3's MLA latent has no heads to split.
    assert catalog.model("llama-3.1-8b").has_kv_head_layers
    assert not catalog.model("deepseek-v3").has_kv_head_layers


def test_simulate_tells_a_slot_pool_in_slots():
    from typer.testing import CliRunner

    from kvplan.cli import app

    # -c 16384 -np 4 with f16 K and V: 16,384 cells × 32 layers × 2 × 8 heads × 128 × 2 B
    # = 2 GiB, four slots of 512 MiB.
    args = ["simulate", "llama-3.1-8b", "-s", "h100-sxm", "--engine", "llama.cpp"]
    args += ["--ctx-size", "16384", "--parallel", "4", "--rate", "1", "--requests", "5"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "4 slots × 512.00 MiB = 2.00 GiB (16,384 tokens)" in result.output


@pytest.mark.parametrize("name", ["vllm", "sglang", "trtllm", "llama.cpp", "ollama", "exact"])
def test_every_engine_implements_both_protocols(name):
    from kvplan.engine import engine
    from kvplan.engine.profile import Accounting, Startup

    profile = engine(name)
    assert isinstance(profile, Accounting) and isinstance(profile, Startup)


def test_results_spell_the_page_units_of_the_engine():
    from typing import get_args

    from kvplan.api.results import BlockUnit
    from kvplan.engine.pages import PAGE_UNITS

    assert get_args(BlockUnit) == PAGE_UNITS
