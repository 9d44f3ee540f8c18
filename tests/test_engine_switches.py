"""Engine switches the step model, the launch lines and the simulated schedulers read.

CUDA graphs: vLLM ModelConfig `enforce_eager` (default False; `--enforce-eager`), SGLang
ServerArgs `disable_cuda_graph` (default False; `--disable-cuda-graph`), TensorRT-LLM
TorchLlmArgs `cuda_graph_config` (default on; `null` in --extra_llm_api_options turns it
off). SGLang `schedule_conservativeness` (default 1.0): scheduler.py / NewTokenRatioTracker
init = min(0.7 × it, 1), floor = init × 0.14. TensorRT-LLM `enable_chunked_prefill`
(default False in the LLM API and trtllm-serve; without it a prompt longer than
max_num_tokens, 8192 by default, is refused by llmapi/llm.py _check_arguments).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engine import engine
from kvplan.engine.deployment import Deployment
from kvplan.engine.settings import EngineSettings
from kvplan.perf.constants import shipped_constants
from kvplan.perf.step_model import StepShape, step_model
from kvplan.simulate import SimConfig, Workload, simulate
from kvplan.simulate.engine_view import instance_model
from kvplan.simulate.instance import Instance
from kvplan.simulate.metrics import Metrics
from kvplan.simulate.workload import RequestSpec

EAGER = EngineSettings(cuda_graphs=False)


def test_without_cuda_graphs_each_kernel_pays_the_eager_launch_cost(catalog):
    model, sku = catalog.model("llama-3.1-8b"), catalog.sku("h100-sxm")
    c = shipped_constants().value
    graphs = step_model(Deployment(model, engine("vllm")), sku)
    eager = step_model(Deployment(model, engine("vllm"), settings=EAGER), sku)
    shape = StepShape(8, 0.0)
    extra = graphs.parts(shape)["engine_overhead"] - eager.parts(shape)["engine_overhead"]
    # 32 layers of 10 kernels (norm, QKV GEMM, rotary, KV write, attention, output GEMM; norm,
    # gate-up, activation, down), each launch × (eager factor − 1) more without graphs.
    expected = 32 * 10 * c("kernel_overhead_s") * (c("eager_overhead_factor") - 1)
    assert -extra == pytest.approx(expected)
    assert expected > 0


@pytest.mark.parametrize(
    ("name", "flag"),
    [
        ("vllm", "--enforce-eager"),
        ("sglang", "--disable-cuda-graph"),
        ("trtllm", "# kv.yaml: cuda_graph_config: null"),
    ],
)
def test_the_launch_line_turns_cuda_graphs_off_with_the_engines_flag(catalog, name, flag):
    model, sku = catalog.model("llama-3.1-8b"), catalog.sku("h100-sxm")
    plain = engine(name).launch_command(Deployment(model, engine(name)), sku, 8192)
    eager = engine(name).launch_command(Deployment(model, engine(name), settings=EAGER), sku, 8192)
    assert flag not in plain and flag in eager


def test_sglang_launch_line_carries_a_schedule_conservativeness_other_than_1(catalog):
    model, sku = catalog.model("llama-3.1-8b"), catalog.sku("h100-sxm")
    settings = EngineSettings(schedule_conservativeness=0.3)
    line = engine("sglang").launch_command(
        Deployment(model, engine("sglang"), settings=settings), sku, 8192
    )
    assert "--schedule-conservativeness 0.3" in line
    plain = engine("sglang").launch_command(Deployment(model, engine("sglang")), sku, 8192)
    assert "--schedule-conservativeness" not in plain


@pytest.mark.parametrize(("conservativeness", "init"), [(1.0, 0.7), (0.5, 0.35), (2.0, 1.0)])
def test_sglang_scheduler_scales_its_new_token_ratio(catalog, conservativeness, init):
    settings = EngineSettings(schedule_conservativeness=conservativeness)
    deployment = Deployment(catalog.model("llama-3.1-8b"), engine("sglang"), settings=settings)
    view = instance_model(deployment, catalog.sku("h100-sxm"), SimConfig(max_model_len=8192))
    rule = Instance(view, Metrics(None)).policy
    assert rule.ratio == pytest.approx(init)
    assert rule.min_ratio == pytest.approx(init * 0.14)


def _long_prompt_run(catalog, chunked: bool | None):
    # One prompt of 10,000 tokens: over TensorRT-LLM's default max_num_tokens of 8,192.
    workload = Workload((RequestSpec(0.0, 10_000, 10),), "one long prompt", kind="trace")
    deployment = Deployment(catalog.model("llama-3.1-8b"), engine("trtllm"))
    config = SimConfig(max_model_len=16_384, chunked_prefill=chunked)
    return simulate(deployment, catalog.sku("h100-sxm"), workload, config)


def test_trtllm_refuses_a_prompt_over_max_num_tokens_unless_chunked_prefill_is_on(catalog):
    default = _long_prompt_run(catalog, None)
    assert default.view.config.chunked_prefill is False
    assert default.completed == 0 and sum(default.rejected.values()) == 1
    assert default.view.max_num_batched_tokens == 8192
    chunked = _long_prompt_run(catalog, True)
    assert chunked.completed == 1 and not chunked.rejected


def test_vllm_and_sglang_chunk_by_default(catalog):
    for name in ("vllm", "sglang"):
        deployment = Deployment(catalog.model("llama-3.1-8b"), engine(name))
        view = instance_model(deployment, catalog.sku("h100-sxm"), SimConfig(max_model_len=8192))
        assert view.config.chunked_prefill is True


def _simulate(*extra: str):
    return CliRunner().invoke(
        app,
        ["simulate", "llama-3.1-8b", "--sku", "h100-sxm", "--rate", "5", "--requests", "20",
         "--max-model-len", "16k", "--format", "json", *extra],
    )  # fmt: skip


def test_trtllm_chunked_prefill_is_off_in_the_json_and_on_when_asked():
    off = _simulate("--engine", "trtllm")
    assert off.exit_code == 0, off.output
    assert json.loads(off.stdout)["runs"][0]["chunked_prefill"] is False
    on = _simulate("--engine", "trtllm", "--chunked-prefill")
    assert json.loads(on.stdout)["runs"][0]["chunked_prefill"] is True


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-1", "--schedule-conservativeness: -1 is below kvplan's minimum of 0"),
        ("abc", "--schedule-conservativeness: 'abc' is not a number"),
        ("5000", "--schedule-conservativeness: 5000 is above kvplan's limit of 1,000"),
    ],
)
def test_a_bad_schedule_conservativeness_is_one_line_and_exit_2(value, message):
    result = _simulate("--engine", "sglang", "--schedule-conservativeness", value)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr


def test_no_cuda_graphs_on_an_engine_without_them_is_said_to_be_ignored():
    result = _simulate("--engine", "exact", "--no-cuda-graphs")
    assert result.exit_code == 0, result.output
    assert "--no-cuda-graphs" in result.stderr and "ignored" in result.stderr


def test_trtllm_bench_unchunked_raises_max_num_tokens_to_the_longest_prompt_and_a_batch(catalog):
    # trtllm-bench (bench/benchmark/utils/general.py get_settings): without chunked prefill
    # max_num_tokens = max(its pick, max ISL + max_batch_size), so every prompt fits whole.
    from kvplan.simulate import parse_distribution, poisson_workload
    from kvplan.simulate.trtllm_bench import bench_limits

    deployment = Deployment(catalog.model("llama-3.1-8b"), engine("trtllm"))
    workload = poisson_workload(
        5.0, parse_distribution("6000", "p"), parse_distribution("2000", "o"), requests=10
    )
    sku = catalog.sku("h100-sxm")
    unchunked = simulate(
        deployment, sku, workload, SimConfig(max_model_len=8192, trtllm_bench=True)
    )
    batch, tokens = bench_limits(unchunked.view.capacity_tokens, 6000, 2000)
    assert unchunked.view.max_num_batched_tokens == max(tokens, 6000 + batch) > tokens
    assert unchunked.completed == 10
    config = SimConfig(max_model_len=8192, trtllm_bench=True, chunked_prefill=True)
    chunked = simulate(deployment, sku, workload, config)
    assert chunked.view.max_num_batched_tokens == tokens
