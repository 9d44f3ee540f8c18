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


def test_a_mixed_step_is_timed_as_one_step_of_all_its_tokens(catalog):
    # Colocated interference as the engines schedule it: a prefill chunk shares its step with
    # the decodes, and the step model times the step from all of them at once. Measured
    # table: a decode-only step 10 ms; a step with 2,048 prefill tokens 50 ms alone and 60 ms
    # with one decode beside it (a max of the two parts would give 50).
    from kvplan.simulate import Workload
    from kvplan.simulate.step_table import StepTable

    table = StepTable(
        "hand",
        ((1, 2), (0,), (0, 2048)),
        {(1, 0, 0): 0.010, (2, 0, 0): 0.010, (1, 0, 2048): 0.050, (2, 0, 2048): 0.060},
    )
    # A: 100-token prompt, 50 tokens out, from t = 0; B: 2,048-token prompt at 0.1 s, which
    # fits one step of vLLM's 8,192-token budget beside A's decode.
    workload = Workload(
        (RequestSpec(0.0, 100, 50), RequestSpec(0.1, 2048, 2)), "two requests", kind="trace"
    )
    deployment = Deployment(catalog.model("llama-3.1-8b"), engine("vllm"))
    config = SimConfig(max_model_len=4096, step_table=table)
    result = simulate(deployment, catalog.sku("h100-sxm"), workload, config)
    a = next(r for r in result.requests if r.order == 0)
    # A's 49 decode steps: 48 alone at 10 ms, one beside B's whole prompt at 60 ms.
    assert a.last_token_s - a.first_token_s == pytest.approx(48 * 0.010 + 0.060)
