"""Capacity: budgets, the exact longest-context solver, verdicts, SGLang pools."""

from __future__ import annotations

import pytest
from factories import make_model
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.engine import EngineSettings, engine
from kvplan.engine.deployment import Deployment
from kvplan.engine.vllm_version import parse_version
from kvplan.errors import KvplanError
from kvplan.plan.capacity import Capacity
from kvplan.specs import SkuSpec

GIB = 2**30


def _sku(memory_bytes: int, family: str = "test") -> SkuSpec:
    return SkuSpec.model_validate(
        {
            "name": "gpu",
            "vendor": "other",
            "family": family,
            "memory_bytes": memory_bytes,
            "memory_basis": "test",
            "memory_type": "HBM",
            "bandwidth_bytes_per_s": 10**12,
            "peak_flop_per_s": {"bf16": 10**15},
            "source": "https://example.invalid",
        }
    )


def _capacity(model, engine_name, kv_bytes, batch=1, context=None, tp=1):
    settings = EngineSettings(kv_memory_bytes=kv_bytes)
    deployment = Deployment(model, engine(engine_name), tp=tp, settings=settings)
    return Capacity(deployment, _sku(80 * GIB), batch, context)


@settings(max_examples=50, deadline=None)
@given(
    st.sampled_from(["exact", "vllm", "sglang"]),
    st.integers(0, 2**26),
    st.integers(1, 8),
    st.sampled_from(
        [
            {"pattern": ["full"]},
            {"pattern": ["sliding", "full"], "sliding_window": 300},
            {"pattern": ["chunked", "full"], "chunk_size": 256},
        ]
    ),
)
def test_longest_context_fits_and_one_more_does_not(name, kv_bytes, batch, layers):
    model = make_model(layers=layers, max_context=4096)
    capacity = _capacity(model, name, kv_bytes, batch)
    found = capacity.max_context_tokens

    def fits(n: int) -> bool:
        # One request of n tokens is charged request_bytes(n); the budget holds batch of them
        # when their bytes fit (vLLM: whole blocks of the budget, the same condition).
        return batch * capacity.request_bytes_per_gpu(n) <= kv_bytes

    if found:
        assert fits(found)
    if found < model.max_context:
        assert not fits(found + 1)
    else:
        assert capacity.native_limit_binds


def test_exact_longest_context_by_hand():
    # tiny model: 4 layers x 2 KV heads x 64 x 2 (K,V) x 2 B = 2048 B per token.
    # 10 MiB budget, batch 5: 10_485_760 // (5 x 2048) = 1024 tokens each.
    capacity = _capacity(make_model(), "exact", 10 * 2**20, batch=5)
    assert capacity.max_context_tokens == 1024
    assert capacity.max_concurrency(1024) == 5
    assert capacity.max_concurrency(1025) == 4


def test_vllm_defaults_by_version_and_gpu(catalog):
    assert parse_version("0.11").default_utilization == 0.9
    assert parse_version("0.20.0").default_utilization == 0.92
    assert parse_version("0.6.4").era == "v0"
    assert parse_version("0.22").era == "v1-new"
    big, a100 = _sku(80 * GIB, "h100"), _sku(80 * GIB, "a100")
    deployment = Deployment(catalog.model("llama-3.1-8b"), engine("vllm"))
    assert Capacity(deployment, big).scheduler.max_num_batched_tokens == 8192
    assert Capacity(deployment, a100).scheduler.max_num_batched_tokens == 2048


def test_new_vllm_token_line_is_concurrency_times_length(catalog):
    # >= 0.22 prints int(X * max_model_len); GPT-OSS at 16k: the one-group pool (old) is smaller.
    model = catalog.model("gpt-oss-120b")

    def capacity(version: str) -> Capacity:
        settings = EngineSettings(version=version, kv_memory_bytes=40 * GIB)
        deployment = Deployment(model, engine("vllm"), tp=4, settings=settings)
        return Capacity(deployment, _sku(80 * GIB, "h100"), context_tokens=16384)

    old, new = capacity("0.11"), capacity("0.22")
    assert new.kv_capacity_tokens == int(new.pool.concurrency_at(16384) * 16384)
    # GPT-OSS: 18 full + 18 sliding layers, two groups sharing one pool of 16-token blocks.
    assert old.kv_capacity_tokens == old.pool.num_blocks // 2 * 16
    assert new.kv_capacity_tokens > old.kv_capacity_tokens


def test_sglang_pool_by_hand(catalog):
    # SGLang 0.5.3: rest = pre-load free x mem_fraction_static - weights; tokens = rest // cell.
    # Pre-load free = runtime total - 0.32 GiB CUDA context (TP 1: no NCCL); f = 0.835 on an
    # 81,559 MiB H100 at TP 1 (see test_sglang_golden); weights 8_030_261_248 x 2 B.
    model, sku = catalog.model("llama-3.1-8b"), catalog.sku("h100-sxm")
    capacity = Capacity(Deployment(model, engine("sglang")), sku)
    total = sku.runtime_memory_bytes or sku.memory_bytes
    budget = int((total - int(0.32 * GIB)) * 0.835) - 16_060_522_496
    assert capacity.budget.kv_bytes == budget
    assert capacity.kv_capacity_tokens == budget // 131_072


def test_sglang_cell_matches_published_log(catalog):
    # vllm#21348: SGLang "#tokens: 367404, K size: 8.23 GB" for Qwen3-235B-A22B at TP 4, bf16 KV:
    # K per token per rank = 1 head x 128 x 94 layers x 2 B; x 367,404 = 8.23 GiB.
    deployment = Deployment(catalog.model("qwen3-235b-a22b"), engine("sglang"), tp=4)
    k_bytes_per_token = sum(c.token_bytes for c in deployment.exact_caches()) // 2
    assert k_bytes_per_token == 128 * 94 * 2
    assert round(367_404 * k_bytes_per_token / GIB, 2) == 8.23


def test_verdicts(catalog):
    l4 = catalog.sku("l4")
    vllm = engine("vllm")
    big = Capacity(Deployment(catalog.model("llama-3.1-70b"), vllm), l4)
    assert big.verdict == "weights don't fit"
    small = Capacity(Deployment(catalog.model("llama-3.1-8b"), vllm), l4, context_tokens=131072)
    assert small.verdict == "KV too small for one request"
    ok = Capacity(
        Deployment(catalog.model("llama-3.1-8b"), vllm),
        catalog.sku("h100-sxm"),
        context_tokens=8192,
    )
    assert ok.verdict == "fits"


def test_verdict_counts_what_fits_and_throughput_uses_it():
    # tiny model: 4 layers x 2 KV heads x 64 x 2 (K,V) x 2 B = 2048 B per token; vLLM blocks of
    # 16 tokens cost 32 KiB. A 1 MiB budget is 32 blocks; a 100-token request is charged
    # ceil(100/16) = 7 blocks, so 32 // 7 = 4 requests fit out of the 6 asked for.
    capacity = _capacity(make_model(), "vllm", 2**20, batch=6, context=100)
    assert capacity.max_concurrency() == 4
    assert capacity.verdict == "fits 4 of 6"
    assert not capacity.fits
    decode = capacity.decode()
    assert decode is not None and decode.batch == 4


def test_data_parallel_attention_and_expert_parallelism(catalog):
    # DeepSeek-V3 on 8 H200s. TP 8 keeps the whole MLA latent on every rank, so each GPU holds
    # every request's latent; DP 8 with expert parallelism (vLLM --data-parallel-size 8
    # --enable-expert-parallel) runs 8 attention replicas, each holding its own requests, and
    # spreads the routed experts over all 8 GPUs (docs/engines.md).
    model, sku = catalog.model("deepseek-v3"), catalog.sku("h200")
    vllm = engine("vllm")
    tp8 = Capacity(Deployment(model, vllm, tp=8), sku, 64, 32_768)
    dp8 = Capacity(Deployment(model, vllm, dp=8, ep=True), sku, 64, 32_768)
    # One request's latent is the same bytes per GPU either way: 61 layers x 576 x 2 B per
    # token, in 64-token FlashMLA blocks: 32,768 / 64 = 512 blocks x 64 x 70,272 B.
    assert tp8.request_bytes_per_gpu() == dp8.request_bytes_per_gpu() == 512 * 64 * 70_272
    # Capacity: each replica's pool holds its own requests; the deployment holds 8 pools.
    per_replica = dp8.budget.kv_bytes // dp8.request_bytes_per_gpu()
    assert dp8.max_concurrency() == 8 * per_replica
    # Weights per GPU: attention, embeddings and shared experts whole on every GPU (tp 1),
    # routed experts one eighth each; vLLM adds its RoPE table, 163,840 positions x 64 rope
    # dims x 2 B = 20,971,520 B.
    (stage,) = Deployment(model, vllm).weights().stages
    expected = stage.sharded_bytes + -(-stage.routed_expert_bytes // 8) + stage.replicated_bytes
    assert dp8.weights_bytes_per_gpu == expected + 163_840 * 64 * 2
    # With its weights larger per GPU, DP attention still serves more: no latent is repeated.
    assert dp8.max_concurrency() > tp8.max_concurrency()


def test_expert_parallelism_needs_experts(catalog):
    # The engine layer names the setting by its declared name; the CLI prints --ep for it.
    with pytest.raises(KvplanError, match=r"^ep: llama-3.1-8b has no routed experts"):
        Deployment(catalog.model("llama-3.1-8b"), engine("vllm"), ep=True)


def test_tp_the_engine_refuses_is_an_error_with_the_reason(catalog):
    # vLLM: Llama-3.1-8B has 32 query heads and 8 KV heads; tp 3 divides neither.
    with pytest.raises(KvplanError, match=r"heads \(32\) must be divisible by tensor parallel"):
        Deployment(catalog.model("llama-3.1-8b"), engine("vllm"), tp=3)
    # tp 16 > 8 KV heads is fine: each KV head is replicated twice.
    assert Deployment(catalog.model("llama-3.1-8b"), engine("vllm"), tp=16).tp == 16
    # Qwen2.5-7B: 28 query heads, 4 KV heads; tp 14 divides the query heads, not 4 KV heads.
    with pytest.raises(KvplanError, match=r"its 4 KV heads must divide by tp, or tp by them"):
        Deployment(catalog.model("qwen2.5-7b"), engine("vllm"), tp=14)


def test_tp_beyond_a_node_is_noted(catalog):
    deployment = Deployment(catalog.model("llama-3.1-405b"), engine("vllm"), tp=16)
    notes = deployment.engine.notes(deployment, catalog.sku("h100-sxm"))
    assert any("spans 2 nodes of 8 h100-sxm: TP traffic" in note for note in notes)
    staged = deployment.replace(tp=8, pp=2)
    notes = staged.engine.notes(staged, catalog.sku("h100-sxm"))
    assert any("spans 2 nodes of 8 h100-sxm: pipeline traffic" in note for note in notes)


def test_an_overflowing_batch_is_drawn_as_overflow(catalog):
    # Llama-3.1-8B, 64 requests of 32k on one H100: 64 x 32,768 x 131,072 B = 256 GiB of KV
    # against an 80 GB GPU. The bar must not look exactly full: what the KV budget does not
    # hold is overflow, and it runs past the memory.
    from kvplan.api.build import capacity_row
    from kvplan.report.capacity_report import capacity_table, memory_split

    deployment = Deployment(catalog.model("llama-3.1-8b"), engine("vllm"))
    row = capacity_row(Capacity(deployment, catalog.sku("h100-sxm"), 64, 32_768))
    split = memory_split(row)
    assert split.kv_bytes == 64 * 32_768 * 131_072
    assert split.overflow_bytes == split.kv_bytes - row.kv_budget_bytes_per_gpu
    assert split.free_bytes == 0
    (shown,) = capacity_table([row]).display_rows
    assert "!" in shown[-1] and shown[-1].endswith("GiB")
    assert shown[-2].startswith("fits ") and " of 64" in shown[-2]


def _fixed(model, kv_bytes: int, memory_bytes: int, activation_bytes: int | None = None):
    settings = EngineSettings(kv_memory_bytes=kv_bytes, activation_bytes=activation_bytes)
    deployment = Deployment(model, engine("vllm"), settings=settings)
    return Capacity(deployment, _sku(memory_bytes), batch=1, context_tokens=1024)


def test_a_fixed_kv_budget_beside_the_weights_must_fit_the_gpu():
    # vLLM allocates a --kv-cache-memory pool whole at startup: weights + pool past the device
    # memory is a failed plan, however small the batch; the verdict says by how much.
    model = make_model(max_context=4096)
    roomy = _fixed(model, 1 * GIB, 80 * GIB)
    weights = roomy.budget.weights_bytes
    assert roomy.fits and roomy.budget.overcommit_bytes == 0
    memory = weights + 2 * GIB
    over = weights - weights // 2  # a pool of all the memory but half the weights' bytes
    tight = _fixed(model, memory - weights // 2, memory)
    assert tight.overcommit_bytes == tight.budget.overcommit_bytes == over > 0
    assert tight.failure == "memory" and not tight.fits and tight.fitting_batch == 0
    assert tight.verdict == f"weights + KV exceed the GPU by {over / GIB:,.2f} GiB"
    assert _fixed(model, 2 * GIB, memory).fits  # exactly the memory the weights leave


def test_a_reserve_that_takes_what_the_weights_leave_is_not_a_weights_failure():
    # The weights fit the engine's share, but a 100 GiB activation peak leaves no KV: the
    # verdict must not blame the weights. Without the reserve the same plan fits.
    model = make_model(max_context=4096)
    settings = EngineSettings(activation_bytes=100 * GIB)
    deployment = Deployment(model, engine("vllm"), settings=settings)
    starved = Capacity(deployment, _sku(80 * GIB), batch=1, context_tokens=1024)
    assert starved.budget.weights_fit and starved.budget.kv_bytes < 0
    assert starved.verdict == "no memory left for KV"
    plain = Deployment(model, engine("vllm"), settings=EngineSettings(activation_bytes=0))
    assert Capacity(plain, _sku(80 * GIB), batch=1, context_tokens=1024).fits
    heavy = _sku(starved.budget.weights_bytes // 2)  # the weights alone overrun this one
    assert Capacity(plain, heavy, batch=1, context_tokens=1024).verdict == "weights don't fit"


@pytest.mark.parametrize("name", ["vllm", "exact", "llama.cpp", "ollama"])
def test_a_token_cap_is_refused_by_engines_without_one(name):
    # Only SGLang (--max-total-tokens) and TensorRT-LLM (max_tokens) cap the pool in tokens;
    # elsewhere the cap would be silently ignored, so it is refused.
    settings = EngineSettings(max_kv_tokens=1000)
    with pytest.raises(KvplanError, match=r"^max_kv_tokens: .* has no cap"):
        Capacity(Deployment(make_model(), engine(name), settings=settings), _sku(80 * GIB), 1)


@pytest.mark.parametrize("name", ["sglang", "trtllm"])
def test_engines_with_a_token_cap_take_it(name):
    settings = EngineSettings(max_kv_tokens=1000)
    capacity = Capacity(
        Deployment(make_model(), engine(name), settings=settings), _sku(80 * GIB), 1
    )
    block = capacity.layout.tokens_per_block  # TensorRT-LLM keeps the last block whole
    assert 0 < capacity.kv_capacity_tokens <= -(-1000 // block) * block
