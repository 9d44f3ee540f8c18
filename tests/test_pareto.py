"""`recommend --pareto`: the frontier against brute force, a hand-timed point, the CLI."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engine import EngineSettings, engine
from kvplan.engine.batch import Batch
from kvplan.engine.deployment import Deployment
from kvplan.errors import KvplanError
from kvplan.perf.estimates import batched_step, decode_step
from kvplan.plan.recommend import SearchSpace
from kvplan.plan.recommend.pareto import ParetoWorkload, frontier_flags, pareto, staggered


def dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] >= b[0] and a[1] >= b[1] and a != b


def brute_force(values):
    return [not any(dominates(other, v) for other in values) for v in values]


# Small integer grids make ties and exact duplicates common, where a sweep goes wrong.
pairs = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(pairs)
def test_frontier_is_exactly_the_undominated_points(values):
    flags = frontier_flags(values)
    on = [v for v, f in zip(values, flags, strict=True) if f]
    # No point on the frontier is dominated by any point ...
    assert not any(dominates(other, v) for v in on for other in values)
    # ... and every dominated point is left out.
    assert flags == brute_force(values)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5000), st.integers(1, 300), st.integers(1, 300))
def test_staggered_counts_are_one_length_per_sequence(prompt, output, batch):
    # Sequence j of the closed loop holds P + ⌊j · (O − 1) / B⌋ tokens.
    one_by_one = Batch.of(prompt + j * (output - 1) // batch for j in range(batch))
    assert staggered(prompt, output, batch) == one_by_one


def test_frontier_by_hand():
    # (5, 1) and (1, 5) are the ends; (3, 3) sits between them; (3, 3) twice both stay (equal
    # points do not dominate each other); (3, 2) loses to (3, 3), (1, 4) to (1, 5), (0, 0) to all.
    values = [(5, 1), (3, 3), (1, 5), (3, 2), (1, 4), (3, 3), (0, 0), (5, 0.5)]
    assert frontier_flags(values) == [True, True, True, False, False, True, False, False]


@pytest.fixture(scope="module")
def sweep(catalog):
    base = Deployment(catalog.model("llama-3.1-8b"), engine("vllm"), settings=EngineSettings())
    space = SearchSpace(skus=(catalog.sku("h100-sxm"),), max_gpus=2)
    return pareto(base, ParetoWorkload(1024, 256, 1280), space)


def test_sweep_frontier_undominated_and_dominated_excluded(sweep):
    values = [(p.output_tokens_per_s_per_gpu, p.tokens_per_s_per_user) for p in sweep.points]
    assert [p.on_frontier for p in sweep.points] == brute_force(values)
    # tp 1 and 2 (32 heads, 8 KV heads divide), bf16 and fp8 KV, released and fp8 weights.
    assert sweep.configurations == 8
    assert len(sweep.frontier) >= 2


def test_sweep_batches_stop_at_what_the_pool_holds(sweep):
    for p in sweep.points:
        assert p.batch <= p.max_batch
    largest = {p.deployment.kv_dtype: p.max_batch for p in sweep.points if p.deployment.tp == 1}
    # fp8 KV: half the bytes per token, so (about) twice the requests of bf16.
    assert 1.9 < largest["fp8_e4m3"] / largest["bf16"] <= 2.1


def test_one_point_by_hand(catalog):
    """llama-3.1-8b, engine exact, h100-sxm, tp 1, bf16, batch 2, 1000 prompt + 3 output.

    The steady state by hand, from the speed model's own decode step and prefill (what
    `report` and `simulate` time with): the two sequences stagger over the outputs,
    1000 + ⌊j · 2 / 2⌋ = 1000 and 1001 tokens; one prompt of 1000 tokens is one chunk
    (8,192-token steps). One request's life is 2 decode steps + 2 prefills; it emits 3
    tokens, the two slots 6. KV per token (Llama-3.1-8B config.json: 32 layers, 8 KV heads,
    head_dim 128, bf16): 2 × 32 × 8 × 128 × 2 = 131,072 B.
    """
    base = Deployment(catalog.model("llama-3.1-8b"), engine("exact"), settings=EngineSettings())
    sku = catalog.sku("h100-sxm")
    space = SearchSpace(skus=(sku,), tp=1, kv_dtypes=("bf16",), quantization=False)
    result = pareto(base, ParetoWorkload(1000, 3, 1003), space)
    (point,) = [p for p in result.points if p.batch == 2]
    decode_s = decode_step(point.deployment, Batch.of([1000, 1001]), sku).step_s
    prefill_s = batched_step(point.deployment, sku, None, [(0, 1000)]).step_s
    request_s = 2 * decode_s + 2 * prefill_s
    assert point.times.decode_s == pytest.approx(decode_s, rel=1e-12)
    assert point.times.prefill_s == pytest.approx(prefill_s, rel=1e-12)
    assert point.request_s == pytest.approx(request_s, rel=1e-12)
    assert point.tokens_per_s_per_user == pytest.approx(3 / request_s, rel=1e-12)
    assert point.output_tokens_per_s_per_gpu == pytest.approx(6 / request_s, rel=1e-12)
    assert point.kv_bytes_per_token == 131_072


def test_long_prompts_prefill_in_chunks(catalog):
    # 20,000 prompt tokens in 8,192-token steps: chunks (0, 8192), (8192, 8192), (16384, 3616).
    base = Deployment(catalog.model("llama-3.1-8b"), engine("exact"), settings=EngineSettings())
    sku = catalog.sku("h100-sxm")
    space = SearchSpace(skus=(sku,), tp=1, kv_dtypes=("bf16",), quantization=False)
    result = pareto(base, ParetoWorkload(20_000, 2, 20_002), space)
    point = result.points[0]
    chunks = [(0, 8192), (8192, 8192), (16384, 3616)]
    expected = sum(batched_step(point.deployment, sku, None, [c]).step_s for c in chunks)
    assert point.times.prefill_s == pytest.approx(expected, rel=1e-12)


def test_workload_shorter_context_refused():
    with pytest.raises(KvplanError, match="shorter than prompt \\+ output"):
        ParetoWorkload(1000, 100, 1024)


def run(*args: str):
    return CliRunner().invoke(app, ["recommend", *args])


def test_cli_json_is_the_table_rows(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    args = ["llama-3.1-8b", "--pareto", "--prompt-tokens", "1k", "--output-tokens", "256"]
    args += ["-s", "h100-sxm", "--max-gpus", "2", "--no-quantization"]
    result = run(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    rows = payload["frontier"]
    assert rows and all(isinstance(r["kv_bytes_per_token"], int) for r in rows)
    per_user = [r["tokens_per_s_per_user"] for r in rows]
    assert per_user == sorted(per_user, reverse=True)
    csv = run(*args, "--format", "csv")
    assert csv.exit_code == 0
    assert len(csv.stdout.strip().splitlines()) == len(rows) + 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--output-tokens", "256"], "--pareto: give --prompt-tokens N"),
        (["--prompt-tokens", "1k", "--output-tokens", "256", "--rate", "2"], "--rate: does not"),
        (["--prompt-tokens", "1k", "--output-tokens", "256", "-n", "4"], "--concurrency: does"),
        (["--prompt-tokens", "lognormal:mean=5,sigma=1", "--output-tokens", "9"], "--prompt"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(extra, message):
    result = run("llama-3.1-8b", "--pareto", "-s", "h100-sxm", *extra)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
