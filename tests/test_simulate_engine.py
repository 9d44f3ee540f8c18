"""`kvplan simulate`'s event loop, checked against independent arithmetic.

Step times come from the roofline in `kvplan.perf.estimates` (tested by hand in test_perf.py);
these tests check that the simulator strings those steps together as a serving engine does:
one request alone, identical requests under both schedulers, padding, Little's law, token and
block conservation, and the PagedAttention paper's reserve-max capacity on OPT-13B.
"""

from __future__ import annotations

import math

import pytest

from kvplan.engine import EngineSettings, engine
from kvplan.engine.batch import Batch
from kvplan.engine.deployment import Deployment
from kvplan.perf.estimates import batched_step, decode_step, prefill
from kvplan.simulate import (
    RequestSpec,
    SimConfig,
    Slo,
    Workload,
    goodput,
    parse_distribution,
    poisson_workload,
    simulate,
)
from kvplan.simulate.engine_view import instance_model
from kvplan.simulate.instance import Instance
from kvplan.simulate.metrics import Metrics
from kvplan.units import GIB

VLLM = engine("vllm")


@pytest.fixture(scope="module")
def llama(catalog):
    return Deployment(catalog.model("llama-3.1-8b"), VLLM)


@pytest.fixture(scope="module")
def h100(catalog):
    return catalog.sku("h100-sxm")


@pytest.fixture(scope="module")
def opt(catalog):
    """OPT-13B with a 12 GiB KV budget, as in the PagedAttention paper's capacity example."""
    return Deployment(
        catalog.model("opt-13b"), VLLM, settings=EngineSettings(kv_memory_bytes=12 * GIB)
    )


def poisson(rate: float, prompt: str, output: str, requests: int, seed: int) -> Workload:
    """Poisson arrivals at `rate` req/s with the written length distributions."""
    return poisson_workload(
        rate,
        parse_distribution(prompt, "--prompt-tokens"),
        parse_distribution(output, "--output-tokens"),
        requests=requests,
        seed=seed,
    )


def at_once(*lengths: tuple[int, int]) -> Workload:
    """Requests of (prompt, output) tokens all arriving at t = 0."""
    return Workload(tuple(RequestSpec(0.0, p, o) for p, o in lengths), "at once")


def test_one_request_alone_is_a_prefill_then_one_step_per_token(llama, h100):
    # 2,000 prompt tokens fit one step (max_num_batched_tokens 8,192 on an H100) and are
    # compute-bound (32 TFLOP vs 16 GB of weights), so TTFT is perf.prefill's time; then
    # each of the 63 remaining tokens is one memory-bound decode step at batch 1, the
    # context one token longer each time.
    result = simulate(llama, h100, at_once((2000, 64)), SimConfig(max_model_len=8192))
    (request,) = result.requests
    assert request.ttft_s == pytest.approx(prefill(llama, 2000, h100).time_s, rel=1e-12)
    steps = [decode_step(llama, Batch.uniform(2000 + j, 1), h100).step_s for j in range(63)]
    assert request.e2e_s - request.ttft_s == pytest.approx(math.fsum(steps), rel=1e-12)
    assert request.tpot_s == pytest.approx(math.fsum(steps) / 63, rel=1e-12)
    assert result.steps == 1 + 63
    assert result.itl.p50_s == pytest.approx(sorted(steps)[31], rel=1e-3)


def test_one_request_through_a_sliding_window(catalog, h100):
    # Mistral-7B-v0.1 keeps a 4,096-token window: the decode steps cross it, and each step
    # reads min(L, 4096) tokens, as perf.decode_step does for the same lengths.
    mistral = Deployment(catalog.model("mistral-7b-v0.1"), VLLM)
    result = simulate(mistral, h100, at_once((4080, 40)), SimConfig(max_model_len=8192))
    (request,) = result.requests
    steps = [decode_step(mistral, Batch.uniform(4080 + j, 1), h100).step_s for j in range(39)]
    assert request.e2e_s - request.ttft_s == pytest.approx(math.fsum(steps), rel=1e-12)


def test_a_long_prompt_is_prefilled_in_chunks_of_the_step_budget(llama, h100):
    # 20,000 tokens with max_num_batched_tokens 8,192: chunks of 8,192, 8,192 and 3,616, each
    # attending to the chunks before it; without chunking, one step of 20,000.
    chunks = [(0, 8192), (8192, 8192), (16384, 3616)]
    chunked = sum(batched_step(llama, h100, None, [c]).step_s for c in chunks)
    config = SimConfig(max_model_len=32768)
    (request,) = simulate(llama, h100, at_once((20000, 1)), config).requests
    assert request.ttft_s == pytest.approx(chunked, rel=1e-12)
    whole = batched_step(llama, h100, None, [(0, 20000)]).step_s
    unchunked = SimConfig(max_model_len=32768, chunked_prefill=False)
    (request,) = simulate(llama, h100, at_once((20000, 1)), unchunked).requests
    assert request.ttft_s == pytest.approx(whole, rel=1e-12)


def test_identical_requests_give_the_same_answer_static_and_continuous(llama, h100):
    # Eight requests of 500 + 100 tokens arriving together: both schedulers prefill them in
    # one step (8 × 500 ≤ 8,192) and decode them together to the end.
    workload = at_once(*[(500, 100)] * 8)
    results = [
        simulate(llama, h100, workload, SimConfig(scheduler=s, max_model_len=4096))
        for s in ("continuous", "static")
    ]
    continuous, static = results
    assert static.throughput_requests_per_s == pytest.approx(
        continuous.throughput_requests_per_s, rel=1e-12
    )
    for a, b in zip(continuous.requests, static.requests, strict=True):
        assert (a.ttft_s, a.e2e_s) == pytest.approx((b.ttft_s, b.e2e_s), rel=1e-12)
    assert static.padded_decode_tokens == static.padded_prompt_tokens == 0


def test_static_padding_is_the_sum_of_longest_minus_own(llama, h100):
    # One static batch of four: prompts padded to the longest (400), outputs decoded until
    # the longest (50) ends. By hand: prompt padding (400-100)+(400-200)+(400-300)+0 = 600,
    # decode padding (50-10)+(50-20)+(50-35)+(50-50) = 85 slots.
    workload = at_once((100, 10), (200, 20), (300, 35), (400, 50))
    result = simulate(llama, h100, workload, SimConfig(scheduler="static", max_model_len=4096))
    assert result.padded_prompt_tokens == 600
    assert result.padded_decode_tokens == 85
    # Every request returns with its batch, when the longest output ends.
    assert len({r.finish_s for r in result.requests}) == 1
    assert result.batch_peak == 4 and result.steps == 1 + 49


def test_littles_law_holds_within_two_percent(llama, h100):
    # L = λ · W: requests in the system averaged over time (the instance's own count, step by
    # step) against throughput × mean end-to-end latency (from the requests' timestamps).
    workload = poisson(
        12.0, "lognormal:mean=800,sigma=1", "lognormal:mean=200,sigma=1", 1500, seed=3
    )
    result = simulate(llama, h100, workload, SimConfig(max_model_len=16384))
    mean_e2e = sum(r.e2e_s for r in result.requests) / result.completed
    assert result.queue_mean > 0  # a loaded instance, not an empty one
    little = result.throughput_requests_per_s * mean_e2e
    assert result.requests_in_system_mean == pytest.approx(little, rel=0.02)


def busy(deployment, sku, config: SimConfig, requests: int = 400):
    """A loaded instance run to the end: (view, workload, the instance)."""
    workload = poisson(
        40.0, "lognormal:mean=1500,sigma=1", "lognormal:mean=400,sigma=1.2", requests, 7
    )
    view = instance_model(deployment, sku, config)
    instance = Instance(view, Metrics(1.0))
    for order, spec in enumerate(workload.requests):
        instance.run_until(spec.arrival_s)
        instance.submit(spec, order)
    instance.run_until(math.inf)
    return view, workload, instance


@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_tokens_and_blocks_are_conserved_under_preemption(llama, h100, preemption):
    # A pool of 4 GiB forces preemptions. Every output token is sampled once: by a decode
    # step, by a prompt's prefill, or by the prefill that follows a recompute; and every
    # block goes back to the pool.
    settings = EngineSettings(kv_memory_bytes=4 * GIB)
    deployment = llama.replace(settings=settings)
    config = SimConfig(max_model_len=16384, preemption=preemption)
    view, workload, instance = busy(deployment, h100, config)
    metrics = instance.metrics
    served = [r for r in workload.requests if r.prompt_tokens + r.output_tokens <= 16384]
    assert len(metrics.arrival_s) == len(served)
    assert sum(metrics.preemptions.values()) > 0
    if preemption == "swap":
        assert metrics.preemptions["swap"] > 0 and metrics.swapped_bytes > 0
    sampled = metrics.decode_tokens + len(served) + metrics.recompute_tokens_sampled
    assert sampled == sum(r.output_tokens for r in served)
    assert instance.alloc.used_blocks == 0 and instance.swap_used_bytes == 0
    assert [sums.total for sums in instance.sums] == [0, 0, 0]
    # Each timeline point splits the whole pool.
    for _, _, _, split in metrics.timeline:
        assert sum(split) == pytest.approx(view.pool_bytes, rel=1e-9)


def test_reserve_max_holds_seven_opt_13b_requests_in_12_gib(opt, h100):
    # OPT-13B: 40 layers × 5,120 hidden × 2 (K, V) × 2 bytes = 819,200 B (800 KiB) per token,
    # 2,048-token context. Reserving the whole context takes 2,048 × 819,200 = 1.5625 GiB per
    # request; 12 GiB / 1.5625 GiB = 7.68, so 7 requests at once (the PagedAttention paper's
    # Orca (Max) baseline), while paging holds all 20 short requests.
    workload = at_once(*[(100, 100)] * 20)
    assert (12 * GIB) // (2048 * 819_200) == 7
    reserved = simulate(opt, h100, workload, SimConfig(allocator="reserve-max"))
    assert reserved.batch_peak == 7
    paged = simulate(opt, h100, workload, SimConfig(allocator="paged"))
    assert paged.batch_peak == 20


def test_paged_utilisation_is_above_90_percent_on_a_long_tailed_workload(opt, h100):
    # Lengths with a long tail (lognormal, sigma 1.5): paging wastes at most part of one
    # 16-token block per request; reserving the context wastes most of the pool.
    workload = poisson(
        4.0, "lognormal:mean=160,sigma=1.5", "lognormal:mean=340,sigma=1.5", 400, seed=11
    )
    paged = simulate(opt, h100, workload, SimConfig(allocator="paged"))
    assert paged.kv_utilization_fraction > 0.9
    reserved = simulate(opt, h100, workload, SimConfig(allocator="reserve-max"))
    assert reserved.kv_utilization_fraction < 0.4
    exact = simulate(opt, h100, workload, SimConfig(allocator="reserve-exact"))
    assert reserved.kv_utilization_fraction < exact.kv_utilization_fraction < 1


def test_reservations_fragment_the_pool(opt, h100):
    # reserve-exact places spans of different sizes first-fit: freed spans leave holes that
    # a larger request cannot use, which paging never has.
    workload = poisson(6.0, "uniform:16-1024", "uniform:16-1024", 300, seed=5)
    exact = simulate(opt, h100, workload, SimConfig(allocator="reserve-exact"))
    assert exact.memory_mean.fragmentation_bytes > 0
    assert exact.memory_mean.reserved_unused_bytes > 0
    paged = simulate(opt, h100, workload, SimConfig(allocator="paged"))
    assert paged.memory_mean.fragmentation_bytes == paged.memory_mean.reserved_unused_bytes == 0


def test_a_kv_window_caps_what_each_request_holds(llama, h100):
    # Keeping 4 sinks + 252 recent tokens: a request never holds more than 256 tokens' blocks
    # (16 vLLM blocks of 16 tokens), so the pool's token bytes stay under 256 × 128 KiB each.
    config = SimConfig(max_model_len=8192, kv_window_tokens=252, kv_sink_tokens=4)
    view = instance_model(llama, h100, config)
    assert view.charge.value(8000) == view.charge.value(256) == 16
    result = simulate(llama, h100, at_once((2000, 50), (3000, 50)), config)
    assert result.memory_mean.token_bytes <= 2 * 256 * 131_072
    assert any("quality is not modelled" in note for note in result.notes)


def test_rows_that_cannot_be_served_are_counted(catalog, h100):
    opt = Deployment(catalog.model("opt-13b"), VLLM)
    workload = at_once((2000, 100), (100, 100))  # 2,100 > OPT's 2,048-token context
    result = simulate(opt, h100, workload)
    assert result.completed == 1
    assert result.rejected == {"prompt + output longer than max_model_len": 1}


def test_instances_share_the_load(llama, h100):
    workload = at_once(*[(500, 20)] * 8)
    for router in ("round-robin", "least-loaded"):
        result = simulate(
            llama, h100, workload, SimConfig(instances=2, router=router, max_model_len=4096)
        )
        assert result.completed == 8 and result.batch_peak == 4


def test_goodput_counts_requests_meeting_both_targets(llama, h100):
    workload = at_once((500, 50), (500, 50))
    loose = goodput(
        llama, h100, workload, Slo(ttft_s=10.0, tpot_s=1.0), SimConfig(max_model_len=4096)
    )
    result = simulate(llama, h100, workload, SimConfig(max_model_len=4096))
    assert loose == pytest.approx(2 / result.makespan_s)
    assert goodput(llama, h100, workload, Slo(ttft_s=1e-6, tpot_s=1.0)) == 0.0
