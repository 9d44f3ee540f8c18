"""`recommend`'s search: hand-derived budgets, the engine's search choices, the vLLM command,
the headroom, and the pruned search against brute force over every point of a small space."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.engine import ENGINES, EngineSettings, engine
from kvplan.engine.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.plan.capacity import Capacity
from kvplan.plan.recommend import (
    ConcurrencyTarget,
    GpuCount,
    PricePerHour,
    SearchSpace,
    recommend,
)

GIB = 2**30
# vLLM 0.11 defaults (config/cache.py, engine/arg_utils.py): gpu_memory_utilization 0.9,
# block_size 16; `vllm serve` on a >= 70 GiB GPU that is not an A100 schedules 8192 tokens
# per step and 1024 sequences, otherwise 2048 and 256.
VLLM_UTILIZATION = 0.9
VLLM_BLOCK = 16


def vllm(catalog, model: str, **settings) -> Deployment:
    return Deployment(catalog.model(model), engine("vllm"), settings=EngineSettings(**settings))


def search(catalog, model, context, concurrency, skus, **space):
    base = space.pop("base", None) or vllm(catalog, model)
    options = {k: space.pop(k) for k in ("cost", "headroom", "top") if k in space}
    return recommend(
        base,
        ConcurrencyTarget(context, concurrency),
        SearchSpace(tuple(catalog.sku(s) for s in skus), **space),
        **options,
    )


# --- the 8x H100 question, worked by hand ---------------------------------------------------
#
# Llama-3.1-70B (config.json): 80 layers, hidden 8192, 64 heads / 8 KV heads of 128, MLP 28672,
# vocab 128256, untied. Per layer 8192 x (8192 + 1024 + 1024 + 8192) + 3 x 8192 x 28672
# = 855,638,016 parameters; x 80 = 68,451,041,280; embedding and lm_head 2 x 128256 x 8192
# = 2,101,346,304; norms 80 x 2 x 8192 + 8192 = 1,318,912: 70,553,706,496 in all (the bf16
# safetensors total 141,107,412,992 bytes = 2 x that).
# On one of 8 GPUs (tp 8): matrices and vocabulary split, norms whole, plus vLLM's rotary
# cos/sin table (131,072 positions x 128 x 2 B = 33,554,432, whole on every GPU):
#   bf16: 2 x (68,451,041,280 + 2,101,346,304) / 8 + 2 x 1,318,912 + 33,554,432
#   = 17,674,289,152 bytes
# H100 SXM as the CUDA runtime reports it: 85,013,508,916 bytes; vLLM 0.11 requests
# floor(0.9 x that) = 76,512,158,024. Its profile run (max_num_seqs 64, 8192 batched tokens):
#   sampler 39 B x 64 x 128256 = 320,126,976 < forward 8192 x 2 x (2 x 8192 + 80 x 128 / 8
#   + 3 x 28672 / 8) = 465,567,744; non-torch at tp > 1: round(0.56 GiB) = 601,295,421.
# KV budget = 76,512,158,024 - 17,674,289,152 - 465,567,744 - 601,295,421 = 57,771,005,707.
# fp8 KV, one KV head per GPU: 80 x 2 x 128 x 1 = 20,480 B per token, 327,680 B per block;
# 176,303 blocks; a 32k request takes 2048 blocks: 86 requests. Keeping 10 % unused:
# 57,771,005,707 - ceil(5,777,100,570.7) = 51,993,905,136 -> 158,672 blocks -> 77 requests.
# In bf16 the same budget holds 88,151 blocks of 655,360 B: 43 requests (38 within 10 %), so
# 64 users need fp8 KV (fp8 weights with bf16 KV hold 44 within 10 %; 4 GPUs at most 41).
LLAMA_70B_TP8_KV_BUDGET = 57_771_005_707


@pytest.fixture(scope="module")
def h100_70b(catalog):
    return search(catalog, "llama-3.1-70b", 32_768, 64, ["h100-sxm"], max_gpus=8)


def test_8x_h100_llama_70b_at_32k_for_64_users_needs_fp8_kv(h100_70b):
    first = h100_70b.chosen
    d = first.deployment
    assert (first.sku.name, d.tp, d.pp, d.dp) == ("h100-sxm", 8, 1, 1)
    assert (d.weight_dtype, d.kv_dtype) == (None, "fp8_e4m3")
    assert first.capacity.budget.utilization == VLLM_UTILIZATION  # the default is enough
    assert first.capacity.scheduler.max_num_seqs == 64
    assert first.capacity.budget.kv_bytes == LLAMA_70B_TP8_KV_BUDGET
    assert first.capacity.pool.num_blocks == 176_303
    assert first.capacity.max_concurrency() == 86
    assert first.score.achieved == 77


def test_alternatives_say_why_they_lose(h100_70b):
    second = h100_70b.ranked[1]
    assert second.candidate.deployment.weight_dtype == "fp8"
    assert [(loss.kind, loss.value) for loss in second.losses] == [("weights", "fp8")]
    # The closest plain (bf16 weights and KV) deployment on 8 GPUs, at 0.95:
    # 80,762,833,470 - 17,674,289,152 - 465,567,744 - 601,295,421 = 62,021,681,153 B,
    # 94,637 blocks of 655,360 B: 46 requests; within 10 %: 85,173 blocks, 41 requests.
    plain = h100_70b.unquantised_miss
    assert plain is not None and plain.capacity.budget.utilization == 0.95
    assert (plain.capacity.max_concurrency(), plain.score.achieved) == (46, 41)


def test_launch_command_sets_what_the_deployment_sets(h100_70b):
    first = h100_70b.chosen
    command = first.deployment.engine.launch_command(first.deployment, first.sku, 32_768)
    assert command == (
        "vllm serve meta-llama/Llama-3.1-70B --tensor-parallel-size 8 --max-model-len 32768 "
        "--gpu-memory-utilization 0.9 --kv-cache-dtype fp8 --max-num-seqs 64 --block-size 16 "
        "--max-num-batched-tokens 8192"
    )


def test_launch_command_flags_for_quantised_weights_pp_dp_and_a100(catalog):
    a100 = catalog.sku("a100-80gb")
    dense = vllm(catalog, "llama-3.1-70b").replace(tp=4, pp=2, weight_dtype="fp8")
    command = dense.engine.launch_command(dense, a100, 8192)
    assert "--pipeline-parallel-size 2" in command and "--quantization fp8" in command
    # Nothing set: vLLM's own defaults apply and are not written out.
    assert "--max-num-seqs" not in command and "--block-size" not in command
    assert "--kv-cache-dtype" not in command  # 16-bit KV: vLLM's "auto"
    moe = vllm(catalog, "qwen3-30b-a3b").replace(dp=4, ep=True)
    command = moe.engine.launch_command(moe, a100, 8192)
    assert "--data-parallel-size 4 --enable-expert-parallel" in command
    fixed = vllm(catalog, "llama-3.1-8b", kv_memory_bytes=10 * GIB)
    command = fixed.engine.launch_command(fixed, a100, 8192)
    assert "--kv-cache-memory-bytes 10737418240" in command and "utilization" not in command
    # vLLM 0.11 has no int4 KV cache (refused before any command), and int4 weights need
    # another checkpoint.
    with pytest.raises(KvplanError, match="does not store KV as int4"):
        fixed.replace(kv_dtype="int4")
    assert fixed.engine.launch_command(fixed.replace(weight_dtype="int4"), a100, 8192) is None
    # DeepSeek-V3.2's sparse MLA defaults to fp8 in vLLM: 16 bits are asked for by name.
    sparse = vllm(catalog, "deepseek-v3.2")
    assert "--kv-cache-dtype bfloat16" in sparse.engine.launch_command(sparse, a100, 8192)
    sparse_fp8 = sparse.replace(kv_dtype="fp8_e4m3")
    assert "--kv-cache-dtype" not in sparse.engine.launch_command(sparse_fp8, a100, 8192)


def test_the_search_pins_the_scheduler_step(catalog):
    # vllm serve's default on an A100 is 2048 tokens per step (8192 on an H100): the plan was
    # sized with it, so the command says it.
    result = search(catalog, "llama-3.1-8b", 8192, 8, ["a100-80gb"], max_gpus=1)
    first = result.chosen
    command = first.deployment.engine.launch_command(first.deployment, first.sku, 8192)
    assert "--max-num-batched-tokens 2048" in command and "--max-num-seqs 8" in command


# --- the engine's search choices --------------------------------------------------------------


def test_fp8_offered_where_the_gpu_has_fp8_tensor_cores(catalog):
    profile, model = engine("vllm"), catalog.model("llama-3.1-8b")
    hopper = profile.search_choices(model, catalog.sku("h100-sxm"))
    assert hopper.kv_dtypes == ("bf16", "fp8_e4m3") and hopper.weight_dtypes == (None, "fp8")
    ampere = profile.search_choices(model, catalog.sku("a100-80gb"))  # no fp8 in its datasheet
    assert ampere.kv_dtypes == ("bf16",) and ampere.weight_dtypes == (None,)
    # Already quantised releases are served as released (DeepSeek-V3: fp8 blocks).
    released = profile.search_choices(catalog.model("deepseek-v3"), catalog.sku("h100-sxm"))
    assert released.weight_dtypes == (None,)


def test_block_sizes_searched_only_for_plain_attention(catalog):
    profile, h100 = engine("vllm"), catalog.sku("h100-sxm")
    # FlashAttention: multiples of 16; CUDA: at most 32.
    assert profile.search_choices(catalog.model("llama-3.1-8b"), h100).tokens_per_block == (
        16,
        32,
    )
    # MLA page; Mamba-aligned pages (Jamba: state layers; Falcon-H1: attention + state).
    for model in ("deepseek-v2-lite", "jamba-1.5-mini", "falcon-h1-7b"):
        assert profile.search_choices(catalog.model(model), h100).tokens_per_block == (None,)


def test_memory_fractions_stop_where_cuda_graphs_no_longer_fit(catalog):
    # vLLM 0.11 captures CUDA graphs outside its budget: 0.45 GiB + 16.5 MiB per layer of the
    # binding stage. Llama-3.1-70B, 80 layers: 483,183,821 + 80 x 17,301,504 = 1,867,304,141 B.
    # L4, 23,583,784,960 B: at 0.92, 23,583,784,960 - 21,697,082,163 = 1,886,702,797 is left
    # (fits); at 0.95, 1,179,189,248 (does not). With pp 2 a stage has 40 layers:
    # 483,183,821 + 692,060,160 = 1,175,243,981 B, which 1,179,189,248 holds.
    deployment = vllm(catalog, "llama-3.1-70b")
    profile, l4 = deployment.engine, catalog.sku("l4")
    assert profile.utilizations(deployment, catalog.sku("h100-sxm")) == (0.9, 0.92, 0.95)
    assert profile.utilizations(deployment, l4) == (0.9, 0.92)
    assert profile.utilizations(deployment.replace(pp=2), l4) == (0.9, 0.92, 0.95)
    # From 0.20 the estimate is inside the budget and the default is 0.92.
    newer = vllm(catalog, "llama-3.1-70b", version="0.20")
    assert profile.utilizations(newer, l4) == (0.92, 0.95)
    assert engine("sglang").utilizations(deployment, l4) == (None,)  # not searched


# --- the headroom -----------------------------------------------------------------------------


@pytest.mark.parametrize(("headroom", "held"), [(Fraction(0), 10), (Fraction(1, 10), 9)])
def test_headroom_is_a_share_of_the_budget_kept_unused(catalog, headroom, held):
    # A fixed 10 GiB budget; Llama-3.1-8B bf16: 32 x 8 x 128 x 2 x 2 = 131,072 B per token,
    # 2 MiB per 16-token block: 5120 blocks; an 8k request takes 512: 10 requests. Keeping 10 %
    # unused leaves 10,737,418,240 - 1,073,741,824 = 9,663,676,416 B: 4608 blocks, 9 requests.
    base = vllm(catalog, "llama-3.1-8b", kv_memory_bytes=10 * GIB)
    result = search(
        catalog,
        "llama-3.1-8b",
        8192,
        10,
        ["h100-sxm"],
        base=base,
        tp=1,
        pp=1,
        kv_dtypes=("bf16",),
        quantization=False,
        headroom=headroom,
    )
    found = result.chosen or result.closest_miss
    assert found.capacity.pool.num_blocks == 5120
    assert found.score.achieved == held
    assert (result.chosen is not None) == (held >= 10)
    assert result.stats.evaluated == 1  # a fixed budget: the memory fraction is not searched


# --- ranking by price, bad input ----------------------------------------------------------


def test_price_ranks_by_gpus_times_price(catalog):
    prices = (("h100-sxm", 4.0), ("l40s", 1.0))
    result = search(
        catalog, "llama-3.1-8b", 32_768, 32, ["h100-sxm", "l40s"], cost=PricePerHour(prices)
    )
    costs = [r.candidate.cost for r in result.ranked]
    assert costs == sorted(costs)
    for entry in result.ranked:
        c = entry.candidate
        assert c.cost == c.gpus * dict(prices)[c.sku.name]
    assert all(
        loss.kind == "price"
        for r in result.ranked[1:]
        for loss in r.losses[:1]
        if r.candidate.cost > costs[0]
    )


def test_unpriced_skus_are_left_out(catalog):
    result = search(
        catalog, "llama-3.1-8b", 8192, 8, ["h100-sxm", "l4"], cost=PricePerHour((("l4", 0.8),))
    )
    assert result.stats.unpriced == ("h100-sxm",)
    assert {r.candidate.sku.name for r in result.ranked} == {"l4"}


def test_context_beyond_the_native_limit_is_refused(catalog):
    with pytest.raises(KvplanError, match="native limit of 131,072"):
        search(catalog, "llama-3.1-8b", 200_000, 1, ["h100-sxm"])
    with pytest.raises(KvplanError, match="--concurrency"):
        ConcurrencyTarget(8192, 0)


# --- the pruning assumptions, for every engine ---------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(sorted(ENGINES)),
    model=st.sampled_from(["llama-3.1-8b", "qwen3-30b-a3b", "gemma-2-9b", "deepseek-v2-lite"]),
    sku=st.sampled_from(["h100-sxm", "l4", "mi300x"]),
    fractions=st.tuples(st.integers(50, 99), st.integers(50, 99)).map(sorted),
    seqs=st.tuples(st.integers(1, 2048), st.integers(1, 2048)).map(sorted),
)
def test_budget_grows_with_utilization_and_never_with_max_num_seqs(
    catalog, name, model, sku, fractions, seqs
):
    target = catalog.sku(sku)
    base = Deployment(catalog.model(model), engine(name))

    def kv(utilization: float, max_num_seqs: int) -> int:
        """The budget's usable KV bytes: a budget at or below 0 holds nothing, however far
        below (TensorRT-LLM takes its fraction of free memory, negative when weights overflow)."""
        changed = EngineSettings(utilization=utilization, max_num_seqs=max_num_seqs)
        budget = base.engine.budget(base.replace(settings=changed), target, 8192)
        return max(budget.kv_bytes, 0)

    low, high = (f / 100 for f in fractions)
    assert kv(low, seqs[0]) <= kv(high, seqs[0])
    assert kv(low, seqs[0]) >= kv(low, seqs[1])


@settings(max_examples=30, deadline=None)
@given(
    model=st.sampled_from(["llama-3.1-8b", "mistral-7b-v0.1", "gemma-2-9b", "qwen3-30b-a3b"]),
    tokens=st.integers(1, 32_768),
    kv_gib=st.integers(1, 64),
)
def test_smaller_block_never_holds_fewer_requests(catalog, model, tokens, kv_gib):
    h100 = catalog.sku("h100-sxm")

    def held(block: int) -> int:
        d = vllm(catalog, model, tokens_per_block=block, kv_memory_bytes=kv_gib * GIB)
        return Capacity(d, h100, 1, tokens).max_concurrency()

    assert held(16) >= held(32)


# --- the pruned search against brute force ---------------------------------------------------


def brute_force(base: Deployment, context: int, concurrency: int, skus, max_gpus: int):
    """Every point of the stated space, nothing pruned: GPU counts 1, 2, 4, ... up to a node,
    then whole nodes; every tp the engine accepts; pp, or dp with and without ep (MoE); every
    dtype and block offered; every memory fraction offered; max_num_seqs from the need per
    replica, doubling, up to vLLM's default. Returns (point, capacity, held, meets) rows."""
    model, profile = base.model, base.engine
    rows = []
    for sku in skus:
        node = sku.max_gpus_per_node
        counts = [
            g
            for g in range(1, max_gpus + 1)
            if (g <= node and g & (g - 1) == 0) or g == node or (g > node and g % node == 0)
        ]
        choices = profile.search_choices(model, sku)
        for gpus in counts:
            for tp in range(1, min(gpus, node) + 1):
                if gpus % tp or profile.tp_refusal(model, tp):
                    continue
                rest = gpus // tp
                splits = [(rest, 1, False)]
                if model.moe and rest > 1:
                    splits += [(1, rest, True), (1, rest, False)]
                for pp, dp, ep in splits:
                    for weights in choices.weight_dtypes:
                        for kv in choices.kv_dtypes:
                            for block in choices.tokens_per_block:
                                rows += _all_settings(
                                    base,
                                    sku,
                                    context,
                                    concurrency,
                                    dict(
                                        tp=tp,
                                        pp=pp,
                                        dp=dp,
                                        ep=ep,
                                        weight_dtype=weights,
                                        kv_dtype=kv,
                                    ),
                                    block,
                                )
    return rows


def _all_settings(base, sku, context, concurrency, fields, block):
    try:
        d = base.replace(**fields, settings=EngineSettings(tokens_per_block=block))
    except KvplanError:
        return []
    need = -(-concurrency // d.dp)
    default = d.engine.scheduler(d, sku).max_num_seqs
    seqs = [need]
    while seqs[-1] * 2 < default:
        seqs.append(seqs[-1] * 2)
    rows = []
    for utilization in d.engine.utilizations(d, sku):
        for max_num_seqs in {*seqs, default}:
            settings_ = replace(d.settings, utilization=utilization, max_num_seqs=max_num_seqs)
            capacity = Capacity(d.replace(settings=settings_), sku, concurrency, context)
            kv = capacity.budget.kv_bytes
            kept = kv - (kv + 9) // 10 if kv > 0 else kv  # 10 % headroom, rounded up
            blocks = capacity.layout.blocks_for(kept)
            per_request = [s.blocks_per_request(context) for s in capacity.layout.stages]
            held = min(blocks // b for b in per_request if b) * d.dp if kv > 0 else 0
            held = held if capacity.budget.weights_fit else 0
            meets = held >= concurrency and max_num_seqs * d.dp >= concurrency
            rows.append((capacity, held, meets))
    return rows


def _shape(capacity):
    d = capacity.deployment
    return (capacity.sku.name, d.gpus, d.weight_dtype, d.kv_dtype)


def _structure(capacity):
    d = capacity.deployment
    return (_shape(capacity), d.tp, d.pp, d.dp, d.ep, d.settings.tokens_per_block)


CASES = [
    ("llama-3.1-8b", 32_768, 16, ["l4", "a100-80gb"], 4),
    ("qwen1.5-moe-a2.7b", 8192, 100, ["l4", "h100-sxm"], 4),
    ("mistral-7b-v0.1", 32_768, 64, ["l4"], 8),
    ("gemma-2-9b", 8192, 40, ["l4", "l40s"], 2),
    ("llama-3.1-8b", 131_072, 64, ["l4"], 4),  # nothing fits
]


@pytest.mark.parametrize(("model", "context", "concurrency", "skus", "max_gpus"), CASES)
def test_search_agrees_with_brute_force(catalog, model, context, concurrency, skus, max_gpus):
    base = vllm(catalog, model)
    targets = [catalog.sku(s) for s in skus]
    rows = brute_force(base, context, concurrency, targets, max_gpus)
    meeting = [(c, held) for c, held, meets in rows if meets]
    everything = search(catalog, model, context, concurrency, skus, max_gpus=max_gpus, top=999)
    if not meeting:
        assert everything.chosen is None
        # The closest miss holds the most any point of the space holds.
        assert everything.closest_miss.score.achieved == max(held for _, held, _ in rows)
        return
    # Every shape that meets the target somewhere in the space is found, and nothing else.
    assert {c.shape for c in (r.candidate for r in everything.ranked)} == {
        _shape(c) for c, _ in meeting
    }
    # The first costs the least any meeting point costs; each listed candidate meets, at the
    # lowest memory fraction its structure meets at.
    assert everything.chosen.gpus == min(c.deployment.gpus for c, _ in meeting)
    lowest: dict[tuple, float] = {}
    for c, _ in meeting:
        key = _structure(c)
        lowest[key] = min(lowest.get(key, 1.0), c.budget.utilization)
    for entry in everything.ranked:
        c = entry.candidate
        assert c.score.meets
        assert c.capacity.budget.utilization == lowest[_structure(c.capacity)]
    # With a short list the cost bound skips points, but no cheaper shape is missed.
    short = search(catalog, model, context, concurrency, skus, max_gpus=max_gpus, top=2)
    listed = [r.candidate for r in short.ranked]
    assert [c.shape for c in listed] == [r.candidate.shape for r in everything.ranked[:2]]
    cheaper = {_shape(c) for c, _ in meeting if c.deployment.gpus < listed[-1].gpus}
    assert cheaper <= {c.shape for c in listed}


def test_gpu_count_is_the_default_cost(catalog):
    sku = catalog.sku("h100-sxm")
    assert GpuCount().of(sku, 8) == 8.0
    assert PricePerHour((("h100-sxm", 2.5),)).of(sku, 8) == 20.0
    assert PricePerHour().of(sku, 8) is None  # kvplan ships no prices


def test_an_objective_that_is_not_kv_monotone_is_searched_without_pruning(catalog):
    # A goodput objective cannot promise that more KV never hurts; the search then tries
    # every max_num_seqs, block size and MoE split, and every memory fraction from the lowest
    # up until one meets: no more than the brute force's points, and the same shapes meet.
    model, skus = "qwen1.5-moe-a2.7b", ["l4", "h100-sxm"]
    base = vllm(catalog, model)
    rows = brute_force(base, 8192, 100, [catalog.sku(s) for s in skus], 4)
    result = recommend(
        base,
        ConcurrencyTarget(8192, 100, kv_monotone=False),
        SearchSpace(tuple(catalog.sku(s) for s in skus), max_gpus=4),
        top=999,
    )
    assert result.stats.evaluated <= len(rows)
    assert {r.candidate.shape for r in result.ranked} == {_shape(c) for c, _, m in rows if m}


def test_the_python_api_gives_the_same_answer():
    import kvplan

    result = kvplan.recommend(
        "llama-3.1-70b", context="32k", concurrency=64, skus="h100-sxm", max_gpus=8
    )
    first = result.ranked[0]
    assert result.meets and (first.tp, first.kv_dtype) == (8, "fp8_e4m3")
    assert first.kv_budget_bytes_per_gpu == LLAMA_70B_TP8_KV_BUDGET
    assert result.ranked[1].loses_by[0].kind == "weights"
    # A price per GPU-hour for the family ranks by price; 0.1 is the same share as "10%".
    priced = kvplan.recommend(
        "llama-3.1-70b",
        context="32k",
        concurrency=64,
        skus="h100-sxm",
        max_gpus=8,
        prices={"h100": 2.5},
        headroom=0.1,
    )
    assert priced.rank_by == "price" and priced.ranked[0].cost == 8 * 2.5
    assert priced.ranked[0].concurrency_within_headroom == first.concurrency_within_headroom
