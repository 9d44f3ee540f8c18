"""The SGLang profile prints the public startup logs in tests/golden/sglang_logs.

None of these logs quotes both free-memory readings SGLang sizes its pool from, so #tokens
itself cannot be reproduced from logged inputs: the tests pin #tokens with --max-total-tokens
(kvplan --max-kv-tokens) and check that the K/V sizes SGLang printed follow, then check the
budget rule against the one log that quotes the memory before weights load, and the rule
with both readings given (--avail-mem-before-load / --avail-mem-after-load) against SGLang's
own `profile_max_num_token`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from factories import pinned_pool

from kvplan.engine import ENGINES, EngineSettings
from kvplan.engine.deployment import Deployment
from kvplan.engine.sglang_memory import mem_fraction_static
from kvplan.plan.capacity import Capacity
from kvplan.units import parse_bytes

GOLDEN = Path(__file__).parent / "golden" / "sglang_logs"
SGLANG = ENGINES["sglang"]
GIB = 2**30


def _case(name: str) -> dict:
    return yaml.safe_load((GOLDEN / f"{name}.yaml").read_text())


@pytest.mark.parametrize(
    ("name", "model", "version", "sku"),
    [
        # K = (367,404 + 1) x 1 head x 128 x 94 layers x 2 B = 8.234 GiB -> "8.23 GB".
        ("qwen3-235b-a22b-fp8-h100-tp4", "qwen3-235b-a22b", "0.4.9", "h100-sxm"),
        # K = (2,795,207 + 1) x 20,480 B = 53.314 GiB -> "53.31 GB".
        ("llama-70b-class-h200-tp8-pr11716", "llama-3.3-70b", "0.5.3", "h200"),
        # K = (1,106,304 + 1) x 2 heads x 128 x 48 x 2 B = 25.321 GiB. The line has the dtype,
        # which PyPI's memory_pool.py prints from 0.5.13 (not 0.5.6 - 0.5.12.post1): the venv is
        # named 0.5.6, its SGLang prints 0.5.13's wording. The MTT S5000 is not catalogued; an
        # 80 GB H100 stands in (K + V = 50.6 GiB fit).
        ("qwen3-30b-a3b-fp8-musa-s5000-tp2-pr27537", "qwen3-30b-a3b", "0.5.13", "h100-sxm"),
    ],
)
def test_kv_cache_line_from_logged_tokens(name, model, version, sku, catalog):
    case = _case(name)
    gpu = catalog.sku(sku)
    settings = pinned_pool(gpu, version=version, max_kv_tokens=case["expected"]["tokens"])
    deployment = Deployment(
        catalog.model(model), SGLANG, tp=case["inputs"]["tp"], settings=settings
    )
    lines = Capacity(deployment, gpu, 1, 4096).log_lines()
    kv_line = next(line for line in lines if line.startswith("KV Cache is allocated."))
    assert any(logged.endswith(kv_line) for logged in case["quote"].splitlines()), kv_line


def test_default_fraction_h100_tp1():
    # SGLang >= 0.5.3 (PR #10975) on an 81,559 MiB H100 at TP 1: chunked prefill 8192,
    # cuda_graph_max_bs 256: reserved = 512 + 8192 x 1.5 + 256 x 2 + 1/8 x 1024 = 13,440 MiB;
    # f = round((81,559 - 13,440) / 81,559, 3) = 0.835.
    from kvplan.catalog import Catalog

    assert mem_fraction_static((0, 5, 3), Catalog().sku("h100-sxm"), 1, 1, 0) == 0.835
    # H200 (143,771 MiB) at TP 8: bs 512; 512 + 12,288 + 1,024 + 1,024 = 14,848 -> 0.897.
    assert mem_fraction_static((0, 5, 3), Catalog().sku("h200"), 8, 1, 0) == 0.897
    # <= 0.4.7: by TP alone.
    assert mem_fraction_static((0, 4, 6), Catalog().sku("h200"), 8, 1, 0) == 0.81


def test_h200_tp8_budget_against_the_log(catalog):
    # PR #11716 quotes "Load weight begin. avail mem=137.29 GB" (lowest rank) and the pool:
    # 2,795,207 tokens, then "Memory pool end. avail mem=11.87 GB". kvplan's pre-load memory is
    # fitted on this very log (not a prediction); the pool it then buys with the 0.5.3 default
    # f = 0.897 and Llama-3.3-70B's bf16 weights / 8 must land within 0.5 % of the logged
    # tokens, and the memory left within 0.3 GiB (SGLang's pool end also pays the
    # req_to_token map, (4,096 + 1) x (131,072 + 4) x 4 B = 2.0 GiB, which kvplan counts).
    deployment = Deployment(
        catalog.model("llama-3.3-70b"), SGLANG, tp=8, settings=EngineSettings(version="0.5.3")
    )
    capacity = Capacity(deployment, catalog.sku("h200"), 1, 131_072)
    lines = capacity.log_lines()
    assert lines[0] == "Load weight begin. avail mem=137.29 GB"
    assert abs(capacity.kv_capacity_tokens - 2_795_207) / 2_795_207 < 0.005
    pool_end = float(lines[-1].split("=")[1].split()[0])
    assert abs(pool_end - 11.87) <= 0.3


def test_not_enough_memory(catalog):
    # rest = pre x f - weights < 0: SGLang refuses to start.
    deployment = Deployment(
        catalog.model("llama-3.1-70b"), SGLANG, tp=1, settings=EngineSettings(utilization=0.5)
    )
    lines = Capacity(deployment, catalog.sku("h100-sxm"), 1, 4096).log_lines()
    assert lines == [
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    ]


def test_page_rounding_and_rows(catalog):
    # Page 64: tokens floored to a multiple of 64 (--max-total-tokens 1000 -> 960 = 15 pages);
    # each buffer holds 960 + 64 rows. Llama-3.1-8B: K row 32 x 8 x 128 x 2 B = 64 KiB,
    # 1024 rows x 64 KiB = 64 MiB = 0.06 GB.
    h100 = catalog.sku("h100-sxm")
    settings = pinned_pool(h100, version="0.5.3", tokens_per_block=64, max_kv_tokens=1000)
    deployment = Deployment(catalog.model("llama-3.1-8b"), SGLANG, settings=settings)
    capacity = Capacity(deployment, h100, 1, 512)
    assert capacity.kv_capacity_tokens == 960
    assert capacity.log_lines() == [
        "KV Cache is allocated. #tokens: 960, K size: 0.06 GB, V size: 0.06 GB"
    ]


def test_dsa_fp8_pool_line(catalog):
    # PR #11309 (8 x B200, --tp 8 --dp 8 --enable-dp-attention, fp8 KV, page 64): "KV Cache is
    # allocated. #tokens: 975424, KV size: 43.67 GB". SGLang's fp8 DSA row per layer
    # (calculate_mla_kv_cache_dim): 512 + 512 // 128 x 4 + 64 x 2 B = 656, plus the indexer's
    # 128 + 128 // 128 x 4 = 132; (975,424 + 64) rows x 788 B x 61 layers = 43.669 GiB.
    b200 = catalog.sku("b200")
    settings = pinned_pool(b200, version="0.5.3", max_kv_tokens=975_424)
    deployment = Deployment(
        catalog.model("deepseek-v3.2"),
        SGLANG,
        kv_dtype="fp8_e4m3",
        tp=1,
        dp=8,
        ep=True,
        settings=settings,
    )
    lines = Capacity(deployment, b200, 1, 4096).log_lines()
    assert lines == ["KV Cache is allocated. #tokens: 975424, KV size: 43.67 GB"]
    assert pytest.approx(43.67, abs=0.005) == (975_424 + 64) * 788 * 61 / GIB


@pytest.mark.parametrize(
    ("version", "line"),
    [
        # PyPI wheels, sglang/srt/mem_cache/memory_pool.py MHATokenToKVPool.__init__:
        # 0.4.3.post2: f"KV Cache is allocated. K size: {k} GB, V size: {v} GB."
        ("0.4.3.post2", "KV Cache is allocated. K size: 0.06 GB, V size: 0.06 GB."),
        # 0.4.3.post3 - 0.5.12.post1: f"KV Cache is allocated. #tokens: {size}, K size: ..."
        ("0.4.3.post3", "KV Cache is allocated. #tokens: 960, K size: 0.06 GB, V size: 0.06 GB"),
        ("0.5.12.post1", "KV Cache is allocated. #tokens: 960, K size: 0.06 GB, V size: 0.06 GB"),
        # 0.5.13: f"KV Cache is allocated. dtype: {self.dtype}, #tokens: {num_tokens}, ..."
        (
            "0.5.13",
            "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 960, K size: 0.06 GB, "
            "V size: 0.06 GB",
        ),
    ],
)
def test_kv_line_wording_by_release(catalog, version, line):
    # Llama-3.1-8B, 960 tokens, page 64 (0.4.4+: 960 + 64 rows; 0.4.3: 960 + 1): 0.06 GB each.
    h100 = catalog.sku("h100-sxm")
    settings = pinned_pool(h100, version=version, tokens_per_block=64, max_kv_tokens=960)
    deployment = Deployment(catalog.model("llama-3.1-8b"), SGLANG, settings=settings)
    assert Capacity(deployment, h100, 1, 512).log_lines() == [line]


def test_both_readings_give_the_pool_by_sglangs_rule(catalog):
    # model_runner.py profile_max_num_token (sgl-project/sglang v0.4.6 – 0.5.x):
    #   rest_memory = available_gpu_memory - total_gpu_memory * (1 - mem_fraction_static)
    #   max_num_token = int(rest_memory * (1 << 30) // cell_size)
    # where total_gpu_memory is the free memory before the weights load ("Load weight begin.
    # avail mem=X GB") and available_gpu_memory the free memory after ("Load weight end. ...
    # avail mem=Y GB"). Llama-3.1-8B bf16: cell = 8 heads x (128 + 128) x 32 layers x 2 B.
    before, after, fraction = 78.60, 63.55, 0.85
    cell = 8 * (128 + 128) * 32 * 2
    expected = int((after - before * (1 - fraction)) * (1 << 30) // cell)
    settings = EngineSettings(
        version="0.5.3",
        utilization=fraction,
        avail_mem_before_load_bytes=parse_bytes(f"{before}GiB"),
        avail_mem_after_load_bytes=parse_bytes(f"{after}GiB"),
    )
    deployment = Deployment(catalog.model("llama-3.1-8b"), SGLANG, settings=settings)
    capacity = Capacity(deployment, catalog.sku("h100-sxm"), 1, 4096)
    assert abs(capacity.kv_capacity_tokens - expected) <= 1
    assert capacity.log_lines()[0] == f"Load weight begin. avail mem={before:.2f} GB"
    record = capacity.startup_figures()
    assert abs(record["avail_bytes_after_weights"] / GIB - after) < 1e-6


def test_readings_out_of_order_are_refused(catalog):
    from kvplan.errors import SettingError

    settings = EngineSettings(
        version="0.5.3", avail_mem_before_load_bytes=60 * GIB, avail_mem_after_load_bytes=70 * GIB
    )
    deployment = Deployment(catalog.model("llama-3.1-8b"), SGLANG, settings=settings)
    with pytest.raises(SettingError, match=r"^avail_mem_after_load_bytes: "):
        _ = Capacity(deployment, catalog.sku("h100-sxm"), 1, 4096).kv_capacity_tokens


@pytest.mark.parametrize(
    ("sku", "tp", "nccl_gib"),
    [
        # Fully NVLinked, PR #11716 (H200 TP 8): "Init torch distributed ends. mem usage=1.96 GB".
        ("h200", 8, 1.96),
        # PCIe only, sgl-project/sglang issue #7212 (three or more PCIe GPUs): "Custom allreduce
        # is disabled because it's not supported on more than two PCIe-only GPUs" and then
        # "Init torch distributed ends. mem usage=0.19 GB".
        ("l4", 4, 0.19),
        ("rtx-3090", 2, 0.19),
        # One GPU: no communicator.
        ("l4", 1, 0.0),
    ],
)
def test_pre_load_memory_by_link(catalog, sku, tp, nccl_gib):
    # "Load weight begin. avail mem" = runtime total - CUDA context (0.32 GiB) - the
    # communicators' init, which SGLang's NVLS-off, custom-all-reduce-on-NVLink-only setup
    # makes depend on the links (sglang_memory.py).
    gpu = catalog.sku(sku)
    deployment = Deployment(
        catalog.model("llama-3.1-8b"), SGLANG, tp=tp, settings=EngineSettings(version="0.5.3")
    )
    record = Capacity(deployment, gpu, 1, 4096).startup_figures()
    expected = gpu.runtime_memory_bytes - int(0.32 * GIB) - int(nccl_gib * GIB)
    assert record["avail_bytes_before_weights"] == expected


def test_v4_error_log_from_its_readings(catalog):
    # InferenceX issue #2128 (DeepSeek-V4-Pro FP8, 8 x H200, --tp 8): "Load weight end. ...
    # avail mem=12.25 GB, mem usage=125.65 GB" (so 137.90 GB before loading) and, at
    # --mem-fraction-static 0.88, "ValueError: Loaded weights leave no GPU memory for the KV
    # cache"; the issue says SGLang suggests 0.9113. rest = 12.25 - 137.90 x (1 - f): -4.30 GiB
    # at 0.88, +0.02 GiB at 0.9113. V4 is not catalogued; the readings decide the pool, so
    # DeepSeek-V3 in fp8 at TP 8 stands in for the model.
    case = _case("deepseek-v4-pro-fp8-h200-tp8-mfs088-error-inferencex-2128")
    inputs = case["inputs"]

    def capacity(fraction: float) -> Capacity:
        settings = EngineSettings(
            version="0.5.3",
            utilization=fraction,
            avail_mem_before_load_bytes=parse_bytes(f"{inputs['pre_load_avail_gib']}GiB"),
            avail_mem_after_load_bytes=parse_bytes(f"{inputs['post_load_avail_gib']}GiB"),
        )
        deployment = Deployment(
            catalog.model("deepseek-v3"), SGLANG, tp=8, weight_dtype="fp8", settings=settings
        )
        return Capacity(deployment, catalog.sku("h200"), 1, 4096)

    refused = capacity(inputs["mem_fraction_static"])
    assert refused.budget.kv_bytes < 0
    assert refused.log_lines()[0].startswith("RuntimeError: Not enough memory")
    assert capacity(case["expected"]["min_mem_fraction_static"]).budget.kv_bytes > 0


def test_gemma3_pool_from_the_logs_readings(catalog):
    # PR #4826 (Gemma-3-4B, one H200, main of 2025-03-27): "Load weight end. ... avail
    # mem=131.08 GB, mem usage=8.13 GB", so 139.21 GB before loading, and "#tokens: 834615".
    # That build's model_runner.py lowers the default 0.88 (TP 1) by 0.95 for a multimodal
    # model: rest = 131.08 - 139.21 x (1 - 0.836) = 108.250 GiB; cell = 34 layers x 4 heads x
    # (256 + 256) x 2 B = 139,264 B; 108.250 x 2**30 // 139,264 = 834,620 (the readings are
    # rounded to 0.01 GB: +-51 tokens). Without the 0.95 the pool would be 881,848 (+5.7 %).
    case = _case("gemma-3-4b-h200-tp1-load-weight-end-pr4826")
    expected = case["expected"]
    after = expected["avail_after_weights_gib"]
    before = after + expected["weights_gib"]
    settings = EngineSettings(
        version="0.4.4",
        avail_mem_before_load_bytes=parse_bytes(f"{before:.2f}GiB"),
        avail_mem_after_load_bytes=parse_bytes(f"{after}GiB"),
    )
    deployment = Deployment(catalog.model("gemma-3-4b"), SGLANG, settings=settings)
    capacity = Capacity(deployment, catalog.sku("h200"), 1, 4096)
    assert abs(capacity.kv_capacity_tokens - expected["tokens"]) / expected["tokens"] < 0.001
    assert capacity.budget.utilization == pytest.approx(0.88 * 0.95)


@pytest.mark.parametrize(
    ("model", "vit_factor"),
    [
        # server_args.py adjust_mem_fraction_for_vlm (PR #6881): 0.95 x clamp(1 - 0.1 x (L x
        # H^2 / (24 x 1024^2) - 1), 0.8, 1.05). SigLIP 27 x 1152^2: ratio 1.423828 -> 0.957617.
        ("gemma-3-4b", 0.95 * (1 - 0.1 * (27 * 1152**2 / (24 * 1024**2) - 1))),
        # Pixtral 24 x 1024: ViT-L/14 itself, ratio 1 -> 0.95.
        ("mistral-small-3.1-24b", 0.95),
        # Llama 4's 34 x 1408^2: ratio 2.678 -> 0.832.
        ("llama-4-scout-instruct", 0.95 * (1 - 0.1 * (34 * 1408**2 / (24 * 1024**2) - 1))),
    ],
)
def test_vlm_default_fraction_by_vit_size(catalog, model, vit_factor):
    h200 = catalog.sku("h200")
    deployment = Deployment(catalog.model(model), SGLANG, settings=EngineSettings(version="0.5.3"))
    # H200 at TP 1, 0.5.3: 512 + 8192 x 1.5 + 256 x 2 + 128 = 13,440 MiB -> 0.907 of 143,771.
    text_default = mem_fraction_static((0, 5, 3), h200, 1, 1, 0)
    assert text_default == 0.907
    assert SGLANG.utilization(deployment, h200) == pytest.approx(text_default * vit_factor)


def test_given_fraction_is_lowered_only_by_old_releases(catalog):
    # <= 0.4.6 model_runner.py multiplies any fraction by 0.95; from 0.4.7 only the default.
    h100 = catalog.sku("h100-sxm")
    gemma = catalog.model("gemma-3-4b")
    old = Deployment(gemma, SGLANG, settings=EngineSettings(version="0.4.4", utilization=0.8))
    new = Deployment(gemma, SGLANG, settings=EngineSettings(version="0.5.3", utilization=0.8))
    assert SGLANG.utilization(old, h100) == pytest.approx(0.76)
    assert SGLANG.utilization(new, h100) == 0.8
