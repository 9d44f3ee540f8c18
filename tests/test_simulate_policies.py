"""Each engine's own scheduler rules, against the engines' source.

TensorRT-LLM: tensorrt_llm/_torch/pyexecutor/scheduler.py, GuaranteedNoEvictScheduler
(running requests reserve get_needed_resource_to_completion; a context request is scheduled
only when its needed blocks fit in max_blocks − reserved, and the first that does not stops
the loop). SGLang: python/sglang/srt/environ.py (SGLANG_INIT_NEW_TOKEN_RATIO 0.7,
SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR 0.14, SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS 600) and
scheduler.py (new_token_ratio = max(ratio − decay, min_ratio) per decode batch), sglang
commit 00550cd.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engine import engine
from kvplan.engine.deployment import Deployment
from kvplan.engine.settings import EngineSettings
from kvplan.simulate import SimConfig, parse_distribution, poisson_workload, simulate
from kvplan.simulate.policies import GuaranteedNoEvict, SglangPolicy
from kvplan.simulate.requests import Req
from kvplan.simulate.workload import RequestSpec


def _req(order: int, final_blocks: int) -> Req:
    req = Req(order, RequestSpec(0.0, 100, 100), 0)
    req.final_blocks = final_blocks
    return req


def test_guaranteed_no_evict_reserves_each_running_request_to_completion():
    # A pool of 100 blocks; one running request will hold 60 at completion: a request needing
    # 50 to completion does not fit the 40 left, one needing 40 does.
    rule = GuaranteedNoEvict(100)
    running = _req(0, 60)
    rule.started(running)
    assert not rule.admits(None, _req(1, 50))
    assert rule.admits(None, _req(2, 40))
    rule.stopped(running)  # it returned: its reservation is free again
    assert rule.admits(None, _req(1, 50)) and rule.admits(None, _req(3, 100))


def test_sglang_new_token_ratio_decays_from_0_7_to_its_floor_over_600_steps():
    rule = SglangPolicy(tokens_per_block=1)
    floor = 0.7 * 0.14  # 0.098
    assert rule.ratio == pytest.approx(0.7) and rule.min_ratio == pytest.approx(floor)
    rule.decoded(300)  # halfway: 0.7 − 300 × (0.7 − 0.098) / 600
    assert rule.ratio == pytest.approx(0.7 - 300 * (0.7 - floor) / 600)
    rule.decoded(10_000)
    assert rule.ratio == pytest.approx(floor)


def _tight(catalog, name: str) -> Deployment:
    # 2 GiB of KV (16,384 tokens of Llama-3.1-8B at 128 KiB a token): memory binds.
    settings = EngineSettings(kv_memory_bytes=2 * 2**30)
    return Deployment(catalog.model("llama-3.1-8b"), engine(name), settings=settings)


def test_guaranteed_no_evict_never_preempts_where_vllm_rules_do(catalog):
    workload = poisson_workload(
        20.0,
        parse_distribution("uniform:200-1500", "--prompt-tokens"),
        parse_distribution("uniform:100-1500", "--output-tokens"),
        requests=300,
    )
    sku = catalog.sku("h100-sxm")
    deployment = _tight(catalog, "trtllm")
    own = simulate(deployment, sku, workload, SimConfig(max_model_len=4096))
    assert own.view.config.scheduler == "trtllm-guaranteed-no-evict"
    assert own.preemptions == {} and own.completed == 300
    greedy = simulate(
        deployment, sku, workload, SimConfig(max_model_len=4096, scheduler="trtllm-max-utilization")
    )
    assert sum(greedy.preemptions.values()) > 0


@pytest.mark.parametrize(
    ("name", "scheduler"),
    [("vllm", "continuous"), ("sglang", "sglang"), ("trtllm", "trtllm-guaranteed-no-evict")],
)
def test_the_default_scheduler_is_the_engines_own(name, scheduler):
    result = CliRunner().invoke(
        app,
        ["simulate", "llama-3.1-8b", "--sku", "h100-sxm", "--engine", name, "--rate", "5",
         "--requests", "30", "--max-model-len", "8k", "--format", "json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["runs"][0]["scheduler"] == scheduler


@pytest.mark.parametrize(
    ("name", "version", "scheduler", "a_decoding_s"),
    [
        # vLLM V1 mixes: A's 49 decode steps are 48 alone at 10 ms and one beside B's whole
        # prompt at 60 ms.
        ("vllm", None, "engine", 48 * 0.010 + 0.060),
        # SGLang (no --enable-mixed-chunk) and vLLM V0 (no chunked prefill at 4k) run B's
        # prefill as a step of its own, 40 ms, while A waits; then A's 49 steps at 10 ms.
        ("sglang", None, "engine", 49 * 0.010 + 0.040),
        ("vllm", "0.6.4", "continuous", 49 * 0.010 + 0.040),
    ],
)
def test_a_prefill_shares_its_step_with_decodes_as_the_engine_schedules_it(
    catalog, name, version, scheduler, a_decoding_s
):
    # Colocated interference: the step model times a step from all of its tokens at once.
    # Measured table: a decode-only step 10 ms; 2,048 prefill tokens 40 ms alone and 60 ms
    # with one decode beside them (a max of the two parts would give 40).
    from kvplan.simulate import Workload
    from kvplan.simulate.step_table import StepTable

    table = StepTable(
        "hand",
        ((1, 2), (0,), (0, 2048)),
        {(1, 0, 0): 0.010, (2, 0, 0): 0.010, (1, 0, 2048): 0.040, (2, 0, 2048): 0.060},
    )
    # A: 100-token prompt, 50 tokens out, from t = 0; B: 2,048-token prompt at 0.1 s, which
    # fits one step's token budget beside A's decode.
    workload = Workload(
        (RequestSpec(0.0, 100, 50), RequestSpec(0.1, 2048, 2)), "two requests", kind="trace"
    )
    settings = EngineSettings(version=version)
    deployment = Deployment(catalog.model("llama-3.1-8b"), engine(name), settings=settings)
    config = SimConfig(max_model_len=4096, step_table=table, scheduler=scheduler)
    result = simulate(deployment, catalog.sku("h100-sxm"), workload, config)
    a = next(r for r in result.requests if r.order == 0)
    assert a.last_token_s - a.first_token_s == pytest.approx(a_decoding_s)
