"""The simulator's parts, each against hand arithmetic or brute force.

Growth profiles (a request's charge compressed into rates), lockstep sums, the contiguous
allocator, measured step tables, the batched roofline step, workloads, traces, calibration.
"""

from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.engine import ENGINES, engine
from kvplan.engine.batch import Batch
from kvplan.engine.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from kvplan.perf.estimates import batched_step, decode_step, prefill, prefill_chunk_flops
from kvplan.simulate import parse_distribution, parse_seconds, poisson_workload, read_trace
from kvplan.simulate.allocators import ContiguousAllocator, reservation_tokens
from kvplan.simulate.calibration import calibrated_efficiency
from kvplan.simulate.growth import Lockstep, growth_profile
from kvplan.simulate.step_cost import itl_samples, run_s, steps_starting_before
from kvplan.simulate.step_table import TableCost, read_step_table

# --- growth profiles --------------------------------------------------------------


def test_vllm_full_attention_adds_one_block_every_16_tokens(catalog):
    deployment = Deployment(catalog.model("llama-3.1-8b"), engine("vllm"))
    layout = deployment.engine.layout(deployment, catalog.sku("h100-sxm"))
    profile = growth_profile(layout.stages[0].blocks_per_request, 16, 131_072)
    assert profile.starts == (16,) and profile.rates == (1,)
    assert profile.value(16) == 1 and profile.value(17) == 2  # ⌈17 / 16⌉


def test_vllm_sliding_window_stops_growing_past_its_reservation(catalog):
    # Mistral-7B-v0.1, window 4,096, max_num_batched_tokens 8,192 on an H100: vLLM charges
    # ⌈min(L, 4,096 − 1 + 8,192) / 16⌉ + 1 blocks, so growth stops once L passes 12,287: the
    # last boundary that adds a block is 12,272 (767 × 16), and 12,288 starts a zero rate.
    deployment = Deployment(catalog.model("mistral-7b-v0.1"), engine("vllm"))
    layout = deployment.engine.layout(deployment, catalog.sku("h100-sxm"))
    profile = growth_profile(layout.stages[0].blocks_per_request, 16, 32_768)
    assert profile.starts == (16, 12_288) and profile.rates == (1, 0)
    assert profile.value(32_768) == math.ceil(12_287 / 16) + 1


def test_every_catalogue_model_and_engine_compresses(catalog):
    # The event loop relies on this shape for every layout; a new engine joins via ENGINES.
    sku = catalog.sku("h100-sxm")
    for model in catalog.models():
        for name in ENGINES:
            deployment = Deployment(model, engine(name))
            layout = deployment.engine.layout(deployment, sku)
            stages = layout.stages
            profile = growth_profile(
                lambda n, s=stages: max(x.blocks_per_request(n) for x in s),
                layout.tokens_per_block,
                model.max_context,
            )
            # Spot-check the compressed form against the charge itself.
            for tokens in (1, 17, 1000, model.max_context):
                expected = max(x.blocks_per_request(tokens) for x in stages)
                assert _replayed(profile, tokens) == expected, (model.name, name, tokens)


def _replayed(profile, tokens: int) -> int:
    """f(tokens) rebuilt from f(1) and each segment's rate × its boundaries below `tokens`."""
    total, block = profile.value(1), profile.tokens_per_block
    ends = [*profile.starts[1:], math.inf]
    for start, end, rate in zip(profile.starts, ends, profile.rates, strict=True):
        below = min(end, tokens)  # boundaries start, start + B, … under both
        total += rate * max(0, -(-(below - start) // block))
    return total


def test_the_block_is_where_the_charge_first_grows():
    # llama.cpp pads a slot to 256 cells and charges bytes: the period is 256 tokens.
    padded = growth_profile(lambda n: 1000 * -(-n // 256), 1, 4096)
    assert padded.tokens_per_block == 256 and padded.rates == (1000,)
    assert growth_profile(lambda n: 7 * n, 16, 4096).tokens_per_block == 1  # a byte pool


def test_a_charge_that_grows_between_boundaries_is_refused():
    # Blocks of 16, and one more unit once past 40 tokens: between the boundaries 32 and 48.
    with pytest.raises(RuntimeError, match="between boundaries"):
        growth_profile(lambda n: -(-n // 16) + (n > 40), 16, 1000)


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 300), min_size=1, max_size=12),
    start=st.integers(0, 50),
    steps=st.integers(0, 80),
)
def test_lockstep_need_matches_brute_force(lengths, start, steps):
    # A vLLM-like charge with a cap: ⌈min(L, 200) / 16⌉ + 1 blocks.
    profile = growth_profile(lambda n: -(-min(n, 200) // 16) + 1, 16, 400)
    sums = Lockstep(profile)
    members = []
    for tokens in lengths:
        segment = profile.segment(tokens)
        rate = profile.rate(segment)
        # The sums assume a member keeps its rate: stay below the cap's boundary.
        if profile.next_start(segment) is not None and tokens + steps >= profile.next_start(
            segment
        ):
            continue
        sums.add(tokens, start, rate)
        members.append(tokens)
    brute = sum(profile.value(t + steps) - profile.value(t) for t in members)
    assert sums.need(start, steps) == brute
    assert sums.total == sum(profile.value(t) for t in members)
    free = brute + 3
    fits = sums.steps_within(start, free, 500)
    assert sums.need(start, fits) <= free
    if fits < 500:
        assert sums.need(start, fits + 1) > free


# --- allocators -------------------------------------------------------------------


def test_first_fit_reservations_leave_holes_and_merge_them_back():
    alloc = ContiguousAllocator(100)
    a, b, c = (alloc.admit(0, size) for size in (30, 20, 40))
    assert (a, b, c) == (0, 30, 50)
    alloc.release(a, 0, 30)  # holes: [0, 30) and [90, 100)
    assert alloc.free_blocks == 40 and alloc.largest_hole == 30
    assert alloc.fragmentation_blocks == 10  # the 10 free blocks outside the largest hole
    assert alloc.admit(0, 35) is None  # 40 free, but no 35 in one piece
    assert alloc.admit(0, 25) == 0  # first fit: the hole at 0
    alloc.release(b, 0, 20)  # [25, 50) now free: 5 + 20 merge
    assert alloc.holes == [[25, 25], [90, 10]]
    alloc.release(0, 0, 25)
    alloc.release(c, 0, 40)
    assert alloc.holes == [[0, 100]] and alloc.fragmentation_blocks == 0


def test_reservation_policies_follow_the_paper():
    # vLLM paper §6.1: Max reserves the context; Pow2 "if the true output length is 25, it
    # reserves 32 positions for outputs"; Oracle the true output.
    assert reservation_tokens("reserve-max", 2048)(100, 25) == 2048
    assert reservation_tokens("reserve-pow2", 2048)(100, 25) == 132
    assert reservation_tokens("reserve-pow2", 2048)(100, 32) == 132
    assert reservation_tokens("reserve-pow2", 2048)(1500, 600) == 2048  # capped
    assert reservation_tokens("reserve-exact", 2048)(100, 25) == 125


# --- step costs -------------------------------------------------------------------


def test_piecewise_sums_and_the_arrival_cut():
    # s(j) = 1 + j for j < 3, then 10 + 0·j: steps 1, 2, 3, 10, 10, ...
    pieces = [(0, 1.0, 1.0), (3, 10.0, 0.0)]
    assert run_s(pieces, 5) == 1 + 2 + 3 + 10 + 10
    # Steps start at 0, 1, 3, 6, 16: four start before 7 s.
    assert steps_starting_before(pieces, 100, 7.0) == 4
    assert steps_starting_before(pieces, 3, 7.0) == 3
    # Two quartile points per piece, weights adding up to steps × tokens.
    samples = itl_samples(pieces, 5, 4)
    assert sum(weight for _, weight in samples) == 5 * 4


def test_a_step_table_is_interpolated_on_its_grid(tmp_path):
    path = tmp_path / "steps.csv"
    rows = ["batch_size,kv_tokens,prefill_tokens,step_s"]
    for batch in (1, 9):
        for kv in (0, 1000):
            rows.append(f"{batch},{kv},0,{0.010 + 0.001 * (batch - 1) + 0.00001 * kv}")
    path.write_text("\n".join(rows) + "\n")
    table = read_step_table(path)
    # Linear in both: batch 5 and 500 KV tokens sit in the middle of the four corners.
    assert table.time_s(5, 500, 0) == pytest.approx(0.010 + 0.004 + 0.005)
    assert table.time_s(17, 2000, 0) == pytest.approx(0.010 + 0.016 + 0.020)  # extrapolated
    cost = TableCost(table, step_time_factor=2.0)
    assert cost.step_s(5, 0, 500, [], 0) == pytest.approx(2 * 0.019)
    (piece,) = cost.decode_pieces(5, 0, 0, 500, 5)
    assert piece[2] == pytest.approx(2 * 0.00001 * 5)  # 5 tokens more a step


def test_a_step_table_with_holes_is_refused(tmp_path):
    path = tmp_path / "steps.csv"
    path.write_text("batch_size,kv_tokens,prefill_tokens,step_s\n1,0,0,0.01\n2,100,0,0.02\n")
    with pytest.raises(KvplanError, match="not a full grid: 2 of 4"):
        read_step_table(path)


def test_batched_step_agrees_with_decode_step_and_prefill(catalog):
    deployment = Deployment(catalog.model("llama-3.1-8b"), engine("vllm"))
    sku = catalog.sku("h100-sxm")
    batch = Batch.of([300, 1200, 5000])
    alone = batched_step(deployment, sku, batch)
    assert alone.step_s == pytest.approx(decode_step(deployment, batch, sku).step_s, rel=1e-12)
    whole = prefill(deployment, 3000, sku)
    chunks = [(0, 1000), (1000, 1500), (2500, 500)]
    assert sum(prefill_chunk_flops(deployment.model, d, c) for d, c in chunks) == whole.flops
    step = batched_step(deployment, sku, None, [(0, 3000)])
    assert step.step_s == pytest.approx(whole.time_s, rel=1e-12)
    mixed = batched_step(deployment, sku, batch, [(0, 3000)])
    assert mixed.step_s == pytest.approx(sum(mixed.parts_s.values()), rel=1e-12)
    assert mixed.bytes_read == alone.bytes_read  # the weights are read once per step
    # One mixed step pays the weights, the launch gaps and the engine overhead once: cheaper
    # than the decode step and the prefill step run one after the other.
    assert max(alone.step_s, step.step_s) < mixed.step_s < alone.step_s + step.step_s


# --- workloads, traces, calibration ------------------------------------------------


def test_durations_need_a_unit():
    assert parse_seconds("50ms", "--slo-tpot") == pytest.approx(0.05)
    assert parse_seconds("2s", "--slo-ttft") == 2.0
    assert parse_seconds("1.5min", "--duration") == 90.0
    with pytest.raises(KvplanError, match=r"--slo-ttft: '2' needs a time unit"):
        parse_seconds("2", "--slo-ttft")
    with pytest.raises(KvplanError, match="unknown time unit 'sec'"):
        parse_seconds("2sec", "--slo-ttft")
    for text in ("-2s", "0ms", "-0.5 min"):  # a sign or a zero is not a missing unit
        with pytest.raises(KvplanError, match=f"--slo-ttft: '{text}' must be a positive duration"):
            parse_seconds(text, "--slo-ttft")


def test_distributions_are_seeded_and_have_their_mean():
    lognormal = parse_distribution("lognormal:mean=1000,sigma=1", "--prompt-tokens")
    values = [lognormal.sample(random.Random(1)) for _ in range(3)]
    assert values == [lognormal.sample(random.Random(1)) for _ in range(3)]
    rng = random.Random(2)
    samples = [lognormal.sample(rng) for _ in range(40_000)]
    # E[X] = 1000 by construction (mu = ln 1000 − 1/2); the standard error at sigma 1 is
    # 1000 · sqrt(e − 1) / sqrt(40,000) ≈ 6.6 tokens.
    assert sum(samples) / len(samples) == pytest.approx(1000, abs=30)
    uniform = parse_distribution("uniform:10-20", "--output-tokens")
    assert {uniform.sample(rng) for _ in range(500)} == set(range(10, 21))
    assert parse_distribution("8k", "--prompt-tokens").sample(rng) == 8192


def test_poisson_arrivals_have_the_rate():
    fixed = parse_distribution("100", "p")
    workload = poisson_workload(5.0, fixed, fixed, requests=20_000, seed=0)
    # Mean gap 1/5 s; 20,000 gaps: standard error 0.2 / sqrt(20,000) ≈ 0.0014 s.
    assert workload.duration_s / 20_000 == pytest.approx(0.2, abs=0.006)
    assert workload == poisson_workload(5.0, fixed, fixed, requests=20_000, seed=0)
    timed = poisson_workload(5.0, fixed, fixed, duration_s=10.0, seed=0)
    assert all(r.arrival_s < 10.0 for r in timed.requests)


def test_azure_trace_columns_are_read_as_published(tmp_path):
    # The header and time format of AzureLLMInferenceTrace_conv.csv (AzurePublicDataset).
    path = tmp_path / "azure.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,109\n"
    )
    workload = read_trace(path)
    first, second = workload.requests
    assert (first.arrival_s, first.prompt_tokens, first.output_tokens) == (0.0, 374, 44)
    assert second.arrival_s == pytest.approx(50.995169 - 46.68059, abs=1e-6)


def test_jsonl_traces_and_unsorted_rows(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"arrival_s": 2.0, "prompt_tokens": 10, "output_tokens": 5}\n'
        '{"arrival_s": 1.0, "prompt_tokens": 20, "output_tokens": 6}\n'
    )
    workload = read_trace(path)
    assert [r.prompt_tokens for r in workload.requests] == [20, 10]
    assert "sorted by arrival time" in workload.notes[0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file"),
        ("arrival_s,prompt_tokens,output_tokens\n", "no requests in the file"),
        ("arrival_s,prompt_tokens,output_tokens,user\n1,2,3,x\n", "unknown column 'user'"),
        ("arrival_s,prompt_tokens,output_tokens\n0,10,0\n", "t.csv:2: output_tokens is 0"),
        ("arrival_s,prompt_tokens\n0,10\n", "column for output_tokens missing"),
        ("arrival_s,prompt_tokens,output_tokens\nsoon,10,5\n", "arrival 'soon'"),
    ],
)
def test_bad_traces_are_one_clear_error(tmp_path, text, message):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(KvplanError, match=message):
        read_trace(path)


def test_calibration_takes_the_measured_fraction(tmp_path):
    record = tmp_path / "verify.json"
    record.write_text(
        json.dumps(
            {
                "inputs": {"sku": "h100-sxm"},
                "bandwidth": {"achieved_fraction_of_datasheet": 0.78},
            }
        )
    )
    efficiency, notes = calibrated_efficiency(record, DEFAULT_EFFICIENCY, "h100-sxm")
    assert efficiency == Efficiency(0.78, DEFAULT_EFFICIENCY.compute_fraction)
    assert len(notes) == 1
    record.write_text(json.dumps({"bandwidth": {"timings_meaningful": False}}))
    efficiency, notes = calibrated_efficiency(record, DEFAULT_EFFICIENCY, "h100-sxm")
    assert efficiency == DEFAULT_EFFICIENCY
    assert notes == [
        "--calibrate verify.json: no measured bandwidth "
        "(bandwidth.achieved_fraction_of_datasheet); the step model's fitted bandwidth "
        "fractions are used"
    ]
