"""`kvplan verify` end to end on CPU (Triton interpreter), plus its bad inputs.

Every expected byte count is derived by hand in a comment from the model's public config and
vLLM's block rule (16 tokens per block, 64 for MLA; one reserved null page per layer, as
vLLM's null block), never from running kvplan. Shapes are tiny: the interpreter runs one
program at a time (~10 ms per 32-token tile).
"""

from __future__ import annotations

import json
import os

import pytest
import torch

# Read when @triton.jit decorates the kernels, so it must precede their first import.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def verify(*args: str):
    return runner.invoke(app, ["verify", *args], env={"COLUMNS": "200"})


def verify_record(tmp_path, *args: str) -> dict:
    path = tmp_path / "record.json"
    result = verify(*args, "--device", "cpu", "--json", str(path))
    assert result.exit_code == 0, result.output
    assert f"wrote {path}" in result.stderr
    return json.loads(path.read_text())


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_llama_bf16_memory_exact_numerics_pass_timings_flagged(tmp_path):
    record = verify_record(
        tmp_path, "llama-3.1-8b", "--context", "64", "--batch", "2", "--layers", "2"
    )
    # Llama-3.1-8B: 8 KV heads, head_dim 128, bf16 = 2 B. vLLM blocks of 16 tokens:
    # each 64-token sequence holds ceil(64/16) = 4 blocks, 2 sequences = 8, + 1 null = 9.
    # One block of one layer: 16 tokens x 8 heads x 128 x 2 (K and V) x 2 B = 65_536 B.
    # 2 layers x 9 blocks x 65_536 = 1_179_648 B.
    memory = record["memory"]
    assert memory["predicted_pool_bytes"] == 1_179_648
    assert memory["predicted_null_page_bytes"] == 2 * 65_536
    # Measured by the allocator (its own ceil rule on the meta device, plus its null page).
    assert memory["allocator_blocks_per_layer"] == 9 and memory["blocks_passed"]
    # A CPU has no device allocator: the bytes are not measured, and the record says so
    # rather than reporting the shape arithmetic as a measurement.
    assert memory["measured_pool_bytes"] is None and memory["device"] is None
    assert "not measured on CPU" in memory["measurement"]
    assert memory["pool_allocations"] == 2  # one [2, N, P, Hkv, D] buffer per layer
    # kvplan size's whole-model figure for the batch: 32 layers x 8 blocks x 65_536.
    assert memory["plan_kv_bytes_per_gpu_whole_model"] == 32 * 8 * 65_536
    # The blocks were counted, the bytes were not: a check that measured nothing is not a pass.
    assert record["verdict"] == {
        "blocks": "pass",
        "memory": "not-measured",
        "numerics": "pass",
        "bandwidth": "not-measured",
    }
    numerics = record["numerics"]
    assert numerics["passed"] and numerics["max_error"] <= numerics["tolerance"] == 1e-2
    assert numerics["all_outputs_finite"]
    bandwidth = record["bandwidth"]
    assert bandwidth["timings_meaningful"] is False
    assert "not meaningful on CPU" in bandwidth["note"]
    assert "achieved_bytes_per_s" not in bandwidth
    # KV read per step per layer, exact tokens: 128 tokens x 8 x 128 x 2 x 2 B; G = 4 query
    # heads per KV head fit one 16-head program, so the kernel issues each byte once.
    assert bandwidth["kv_bytes_read_per_step_per_layer"] == 128 * 8 * 128 * 2 * 2
    assert bandwidth["kv_bytes_issued_per_step_per_layer"] == 128 * 8 * 128 * 2 * 2
    assert record["scaling"]["statement"] == "verified 2 of 32 layers; whole-model figures are ×16"
    assert record["scaling"]["statement"] in record["notes"]
    environment = record["environment"]
    for key in ("torch", "triton", "kvplan", "commit", "gpu_name", "driver", "sm_count"):
        assert key in environment


def test_table_states_scaling_and_not_meaningful_timings():
    result = verify("llama-3.1-8b", "--device", "cpu", "--context", "32", "--layers", "1")
    assert result.exit_code == 0, result.output
    assert "verified 1 of 32 layers; whole-model figures are ×32" in result.stdout
    assert "not meaningful on CPU" in result.stdout
    assert "verdict: blocks pass, memory not-measured, numerics pass, bandwidth not-measured" in (
        result.stdout
    )


def test_fp8_kv(tmp_path):
    record = verify_record(
        tmp_path,
        "llama-3.1-8b",
        "--context",
        "64",
        "--batch",
        "2",
        "--layers",
        "1",
        "--kv-dtype",
        "fp8",
    )
    # fp8 is 1 B per element: 1 layer x 9 blocks x 16 x 8 x 128 x 2 x 1 B = 294_912 B.
    assert record["inputs"]["kv_dtype"] == "fp8_e4m3"
    assert record["inputs"]["q_dtype"] == "bf16"
    assert record["memory"]["predicted_pool_bytes"] == 294_912
    assert record["memory"]["allocator_blocks_per_layer"] == 9
    assert record["verdict"]["numerics"] == "pass"


def test_mla_model(tmp_path):
    record = verify_record(
        tmp_path, "deepseek-v2-lite", "--context", "40", "--batch", "2", "--layers", "2"
    )
    # DeepSeek-V2-Lite: one latent of kv_lora_rank 512 + qk_rope_head_dim 64 = 576 bf16
    # values per token, no x2, no heads. vLLM's MLA blocks hold 64 tokens: each 40-token
    # sequence takes 1 block, 2 sequences + 1 null = 3 blocks per layer.
    # 2 layers x 3 blocks x 64 tokens x 576 x 2 B = 442_368 B.
    assert record["inputs"]["tokens_per_block"] == 64
    assert record["inputs"]["layer_kind"] == "mla"
    assert record["memory"]["predicted_pool_bytes"] == 442_368
    assert record["memory"]["allocator_blocks_per_layer"] == 3
    assert record["memory"]["pool_allocations"] == 2  # one latent per layer, no V pool
    # 16 query heads on one latent fit one 16-head program: read once.
    traffic = record["bandwidth"]["traffic_per_step_per_layer"]
    assert traffic["head_blocks_per_kv_head"] == 1
    assert record["verdict"]["numerics"] == "pass"
    # No --sku on CPU: the page is vLLM's reading without a GPU, and the record says so.
    assert (
        "MLA blocks of 64 tokens (no GPU given: FlashMLA's Hopper page assumed)"
        in (record["notes"])
    )


# DeepSeek-V2-Lite at 100 tokens: 27 layers of one 576-value bf16 latent (1,152 B per token).
# vLLM's MLA page by GPU (platforms/cuda.py): Triton MLA 16 on an A100 (8.0), FlashMLA 64 on an
# H100 (9.0), CUTLASS MLA 128 on a B200 (10.0). 16: ceil(100/16) = 7 blocks = 112 tokens;
# 64: 2 blocks = 128 tokens; 128: 1 block = 128 tokens. x 1,152 B x 27 layers.
@pytest.mark.parametrize(
    ("sku", "block", "whole_model"),
    [("a100-80gb", 16, 3_483_648), ("h100-sxm", 64, 3_981_312), ("b200", 128, 3_981_312)],
)
def test_mla_pages_follow_the_sku(catalog, sku, block, whole_model):
    from kvplan.validate.plan import build_plan

    spec = catalog.model("deepseek-v2-lite")
    plan = build_plan(spec, lengths=[100], layers=2, sku=catalog.sku(sku))
    assert plan.tokens_per_block == block
    assert plan.plan_kv_bytes_per_gpu == whole_model
    assert plan.page_note.startswith(f"MLA blocks of {block} tokens ({sku}, compute capability")


def test_verify_plans_mla_pages_for_the_given_sku_as_size_does(tmp_path):
    record = verify_record(
        tmp_path, "deepseek-v2-lite", "--sku", "a100-80gb", "--context", "100", "--layers", "1"
    )
    # As above: 16-token pages on an A100, 3,483,648 B over the whole model, which is also
    # `kvplan size deepseek-v2-lite --sku a100-80gb --context 100`'s kv_bytes_per_gpu.
    assert record["inputs"]["tokens_per_block"] == 16
    assert record["memory"]["plan_kv_bytes_per_gpu_whole_model"] == 3_483_648
    sized = runner.invoke(
        app, ["size", "deepseek-v2-lite", "--sku", "a100-80gb", "-c", "100", "-f", "json"]
    )
    assert json.loads(sized.stdout)["kv_bytes_per_gpu"] == 3_483_648
    assert "MLA blocks of 16 tokens (a100-80gb, compute capability 8.0)" in record["notes"]


def test_ragged_lengths_with_split_k(tmp_path):
    record = verify_record(tmp_path, "llama-3.1-8b", "--lengths", "5,600", "--layers", "1")
    # Blocks: ceil(5/16) = 1 and ceil(600/16) = 38, + 1 null = 40; one block of one layer
    # is 65_536 B (as above): 40 x 65_536 = 2_621_440 B.
    assert record["memory"]["predicted_pool_bytes"] == 2_621_440
    assert record["memory"]["allocator_blocks_per_layer"] == 40
    assert record["numerics"]["sequences_checked"] == [0, 1]
    assert record["numerics"]["tokens_checked"] == [5, 600]
    # 600 tokens allow 2 splits of >= 256 tokens: the split-K path and its reduce ran.
    bandwidth = record["bandwidth"]
    assert bandwidth["num_splits"] == 2
    # Partials: 2 (write + read) x B 2 x Hq 32 x S 2 x (128 + 1) x 4 B.
    assert bandwidth["split_partial_bytes_per_step_per_layer"] == 2 * 2 * 32 * 2 * 129 * 4
    assert record["verdict"]["numerics"] == "pass"


def test_format_json_prints_the_record():
    result = verify(
        "llama-3.1-8b", "--device", "cpu", "--context", "16", "--layers", "1", "--format", "json"
    )
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    # 16 tokens: one block + the null page, both by hand and by the allocator.
    assert record["memory"]["predicted_blocks_per_layer"] == 2
    assert record["memory"]["allocator_blocks_per_layer"] == 2


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["no-such-model"], ["unknown model"]),
        (["llama-3.1-8b", "--context", "1M", "--batch", "8"], ["does not fit", "GiB"]),
        (["llama-3.1-8b", "--layers", "0"], ["--layers", "must be between 1 and"]),
        (["llama-3.1-8b", "--layers", "-3"], ["--layers"]),
        (["llama-3.1-8b", "--layers", "33"], ["--layers", "32 layers"]),
        (["llama-3.1-8b", "--kv-dtype", "int4"], ["--kv-dtype"]),
        (["llama-3.1-8b", "--engine", "hf"], ["--engine"]),
        (["gemma-2-9b"], ["sliding"]),
        (["llama-3.1-8b", "--bandwidth-pass", "1.5"], ["--bandwidth-pass"]),
        (["llama-3.1-8b", "--context", "4k", "--batch", "32"], ["too large for a CPU run"]),
        (["llama-3.1-8b", "--capacity"], ["--capacity", "--sku"]),
        (["llama-3.1-8b", "--capacity", "--sku", "h200", "--engine", "sglang"], ["vllm"]),
        (["llama-3.1-8b", "--capacity", "--sku", "h200", "--layers", "2"], ["--layers"]),
        (["llama-3.1-8b", "--capacity", "--sku", "h200", "--batch", "2"], ["--context only"]),
        (["llama-3.1-8b", "--utilization", "0.8"], ["--utilization", "--capacity"]),
        (["llama-3.1-8b", "--capacity", "--sku", "h200"], ["CPU run", "cap"]),
        (
            ["llama-3.1-8b", "--capacity", "--sku", "h200", "--utilization", "1.5"],
            ["--utilization", "(0, 1]"],
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(args, fragments):
    result = verify(*args, "--device", "cpu")
    assert_one_line_error(result, *fragments)


@pytest.mark.parametrize(
    ("args", "tiles"),
    [
        # gpt2 has 12 KV heads; 2 layers on CPU; numerics + 2 repeats = 3 steps. A 1-token
        # sequence is still one 32-token tile: 2,000 × 1 × 12 × 2 × 3 = 144,000.
        (["--lengths", ",".join(["1"] * 2000)], 144_000),
        # 1k = 32 tiles a sequence: 2 × 32 × 12 × 2 × 3 = 4,608.
        (["--lengths", "1k,1k"], 4_608),
        # 64 tokens = 2 tiles: 1 × 2 × 12 × 2 × (1 + 100) = 4,848.
        (["--context", "64", "--repeats", "100"], 4_848),
    ],
)
def test_cpu_runs_are_bounded_by_tiles(args, tiles):
    result = verify("gpt2", *args, "--device", "cpu")
    assert_one_line_error(result, "too large for a CPU run", f"{tiles:,} kernel tiles", "2,048")


def test_unknown_device():
    assert_one_line_error(verify("llama-3.1-8b", "--device", "tpu"), "--device")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA refusal")
def test_device_cuda_without_cuda():
    assert_one_line_error(verify("llama-3.1-8b", "--device", "cuda"), "--device cuda")


def test_plan_too_large_is_refused_before_allocating(monkeypatch):
    from kvplan.validate import memory

    def must_not_allocate(*args, **kwargs):
        pytest.fail("the pool was allocated for a plan that does not fit")

    monkeypatch.setattr(memory, "allocate_pools", must_not_allocate)
    # 8 x 1M tokens x 131_072 B per token (Llama-3.1-8B bf16, all 32 layers) is 1 TiB;
    # even 2 layers are 64 GiB, over the 2 GiB CPU cap.
    result = verify("llama-3.1-8b", "--device", "cpu", "--context", "1M", "--batch", "8")
    assert_one_line_error(result, "does not fit", "2.00 GiB")


def test_plan_module_predicts_by_hand():
    from kvplan.catalog import Catalog
    from kvplan.validate.plan import build_plan

    spec = Catalog().model("llama-3.1-8b")
    plan = build_plan(spec, lengths=[17, 32], kv_dtype="bf16", tp=2, layers=4)
    # tp 2: 4 KV heads and 16 query heads per GPU. Blocks: ceil(17/16) = 2, ceil(32/16) = 2,
    # + 1 null = 5 per layer. One block: 16 x 4 x 128 x 2 x 2 B = 32_768 B. 4 layers: 655_360.
    assert plan.num_kv_heads_per_gpu == 4 and plan.num_heads_per_gpu == 16
    assert plan.predicted_blocks_per_layer == 5
    assert plan.predicted_pool_bytes == 4 * 5 * 32_768
    assert plan.scaling_statement == "verified 4 of 32 layers; whole-model figures are ×8"


@pytest.mark.gpu
@needs_gpu
def test_gpu_verify_small_plan(tmp_path):
    path = tmp_path / "gpu.json"
    result = verify(
        "llama-3.1-8b",
        "--device",
        "cuda",
        "--context",
        "4k",
        "--batch",
        "8",
        "--layers",
        "4",
        "--repeats",
        "10",
        "--json",
        str(path),
    )
    assert result.exit_code in (0, 1), result.output  # 1: bandwidth below the band is a result
    record = json.loads(path.read_text())
    assert record["verdict"]["memory"] == "pass"
    assert record["verdict"]["numerics"] == "pass"
    device = record["memory"]["device"]
    assert device["passed"], device["failed_terms"]
    assert record["bandwidth"]["timings_meaningful"] is True
    assert record["bandwidth"]["copy_bytes_per_s"] > 0


def test_detect_sku_from_the_gpu_name(catalog):
    from kvplan.validate.harness import detect_sku

    skus = catalog.skus()
    assert detect_sku(skus, "NVIDIA H200").name == "h200"
    assert detect_sku(skus, "NVIDIA H200 NVL").name == "h200-nvl"
    assert detect_sku(skus, "Some Future GPU") is None


def test_gpu_bandwidth_figures_and_table_from_synthetic_timings(catalog):
    """The CUDA branch of the record and table, fed made-up timings (no GPU here)."""
    from kvplan.report.verify_report import verify_table
    from kvplan.validate.bandwidth import CopyCeiling, Timing
    from kvplan.validate.plan import build_plan
    from kvplan.validate.record_bandwidth import TimedRun, bandwidth_section
    from kvplan.validate.traffic import step_traffic

    spec = catalog.model("llama-3.1-8b")
    plan = build_plan(spec, lengths=[8192] * 32, layers=32)
    # KV read per layer: 32 x 8192 tokens x 4_096 B (8 heads x 128 x 2 x 2 B) = 1 GiB.
    assert plan.kv_bytes_read_per_layer == 2**30
    traffic = step_traffic(plan, num_splits=1)
    # q and out: 32 x 32 heads x 128 x 2 B = 262_144 B each; table: 32 x 512 entries x 4 B
    # + 32 seq_lens x 4 B = 65_664 B.
    assert traffic.unique_bytes == 2**30 + 2 * 262_144 + 65_664
    step_s = 32 * 2**30 / 4.0e12  # as if the kernel streamed 4.0 TB/s
    timing = Timing(step_s, step_s, step_s, 50, 5, "cuda_graph")
    copy = CopyCeiling(2 * 10**9, 4.3e12, 2 * 2 * 10**9 / 4.3e12)
    h200 = catalog.sku("h200")
    run = TimedRun("cuda", traffic, timing, timing, copy, h200, 60 * 2**20, False, 132)
    section = bandwidth_section(plan, run, 0.8)
    useful = traffic.unique_bytes * 32
    assert section["achieved_bytes_per_s"] == pytest.approx(useful / step_s)
    assert section["achieved_fraction_of_copy"] == pytest.approx(useful / step_s / 4.3e12)
    assert "shortfall" not in section  # 93% of copy passes the 0.8 band
    # Predicted attention time: 32 layers x 1 GiB over the 4.8 TB/s datasheet.
    assert section["predicted_attention_time_whole_model_s"] == pytest.approx(32 * 2**30 / 4.8e12)
    assert section["decode_tokens_per_s_attention_only"] == pytest.approx(32 / step_s)
    record = {
        "inputs": {
            "model": "llama-3.1-8b",
            "engine": "vllm",
            "kv_dtype": "bf16",
            "tp": 1,
            "lengths_tokens": list(plan.lengths),
            "layers_verified": 32,
            "model_layers": 32,
        },
        "environment": {"gpu_name": "NVIDIA H200"},
        "scaling": {"whole_model_factor": 1.0},
        "memory": {
            "predicted_blocks_per_layer": 16_385,
            "allocator_blocks_per_layer": 16_385,
            "blocks_passed": True,
            "predicted_pool_bytes": plan.predicted_pool_bytes,
            "predicted_pool_bytes_whole_model": plan.predicted_pool_bytes,
            "device": None,
            "fit": {
                "required_bytes": 1,
                "available_bytes": 2,
                "fits": True,
                "non_torch_bytes": 600 * 2**20,
            },
        },
        "numerics": {"max_error": 1e-3, "tolerance": 1e-2},
        "bandwidth": section,
        "verdict": {"memory": "pass", "numerics": "pass", "bandwidth": "pass"},
        "notes": [plan.scaling_statement],
    }
    shown = "\n".join(" | ".join(row) for row in verify_table(record).display_rows)
    assert "4,800 GB/s" in shown and "4,300 GB/s" in shown
    assert "of datasheet" in shown and "tokens/s" in shown
    assert "re-read ×1" in shown


def test_verify_refuses_a_batch_it_cannot_lay_out_before_loading_torch():
    # verify allocates every sequence; 10^5 of them (within kvplan's batch limit, above
    # verify's own) would take minutes laying out block tables.
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from kvplan.cli import app\n"
        "r = CliRunner().invoke(app, ['verify', 'llama-3.1-8b', '--device', 'cpu',"
        " '--batch', '100000'])\n"
        "print(r.exit_code, 'torch' in sys.modules)\n"
        "print(r.stderr.strip())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    first, message = done.stdout.splitlines()[:2]
    assert first == "2 False"
    assert message.startswith("error: --batch: verify runs every sequence on the device")
