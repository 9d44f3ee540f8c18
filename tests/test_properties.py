"""DESIGN §5 properties, checked with hypothesis over small generated models."""

from __future__ import annotations

from factories import make_model
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kvplan.engine import ENGINES, engine
from kvplan.engine.deployment import Deployment
from kvplan.engine.pool import largest_fitting
from kvplan.plan.sizing import size

KINDS = st.sampled_from(["full", "sliding", "chunked"])


@st.composite
def models(draw):
    kv_heads = draw(st.sampled_from([1, 2, 4, 8]))
    group = draw(st.sampled_from([1, 2, 4]))
    pattern = draw(st.lists(KINDS, min_size=1, max_size=4))
    layers = draw(st.integers(len(pattern), 12))
    plan = {"pattern": pattern}
    if "sliding" in pattern:
        plan["sliding_window"] = draw(st.integers(1, 4096))
    if "chunked" in pattern:
        plan["chunk_size"] = draw(st.integers(1, 4096))
    return make_model(
        num_layers=layers,
        attention={
            "num_heads": kv_heads * group,
            "num_kv_heads": kv_heads,
            "head_dim": draw(st.sampled_from([64, 96, 128])),
        },
        layers=plan,
    )


ENGINE_NAMES = st.sampled_from(sorted(ENGINES))


@settings(max_examples=60, deadline=None)
@given(models(), ENGINE_NAMES, st.integers(1, 5000), st.integers(1, 5000), st.integers(1, 4))
def test_kv_never_decreases_with_context_or_batch(model, name, a, b, batch):
    deployment = Deployment(model, engine(name))
    short, long = sorted((a, b))
    assert (
        size(deployment, [long] * batch).kv_bytes <= size(deployment, [long] * (batch + 1)).kv_bytes
    )
    # What the engine charges a request never decreases with its length, for every layer kind.
    assert size(deployment, [short] * batch).kv_bytes <= size(deployment, [long] * batch).kv_bytes
    # The bytes held at exactly L are monotone too, except for chunked layers, which drop back
    # to one token at each chunk boundary (DESIGN §3 "at most C").
    if "chunked" not in set(model.layer_kinds):
        exact = [size(deployment, [n] * batch).exact_kv_bytes for n in (short, long)]
        assert exact[0] <= exact[1]


@settings(max_examples=60, deadline=None)
@given(models(), st.sampled_from([1, 2, 4, 8, 16]), st.integers(1, 3000))
def test_tp_shards_cover_the_whole(model, tp, tokens):
    assume(model.attention.num_heads % tp == 0)  # every engine refuses to split heads unevenly
    whole = size(Deployment(model, engine("exact")), [tokens]).kv_bytes
    sharded = size(Deployment(model, engine("exact"), tp=tp), [tokens])
    assert sharded.kv_bytes >= whole
    assert sharded.kv_bytes_per_gpu * tp == sharded.kv_bytes
    if model.attention.num_kv_heads % tp == 0:
        assert sharded.kv_bytes == whole


@settings(max_examples=60, deadline=None)
@given(models(), st.integers(1, 3000))
def test_quantised_kv_never_exceeds_bf16(model, tokens):
    def kv(dtype: str) -> int:
        return size(Deployment(model, engine("exact"), kv_dtype=dtype), [tokens]).kv_bytes

    assert kv("fp8_e4m3") < kv("bf16") < kv("fp32")
    for dtype in ("int8", "int4", "nvfp4", "mxfp4", "fp8_e5m2"):
        assert kv(dtype) < kv("bf16")


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 10_000))
def test_largest_fitting_is_the_boundary(threshold, upper):
    found = largest_fitting(lambda n: n <= threshold, upper)
    assert found == min(threshold, upper)
