"""The SGLang profile prints the public startup logs in tests/golden/sglang_logs.

None of these logs quotes both free-memory readings SGLang sizes its pool from, so #tokens
itself cannot be reproduced from logged inputs: the tests pin #tokens with --max-total-tokens
(kvplan --max-kv-tokens) and check that the K/V sizes SGLang printed follow, then check the
budget rule against the one log that quotes the memory before weights load.
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
        # K = (1,106,304 + 1) x 2 heads x 128 x 48 x 2 B = 25.321 GiB; 0.5.6 prints the dtype.
        # The MTT S5000 is not catalogued; an 80 GB H100 stands in (K + V = 50.6 GiB fit).
        ("qwen3-30b-a3b-fp8-musa-s5000-tp2-pr27537", "qwen3-30b-a3b", "0.5.6", "h100-sxm"),
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


def test_dsa_log_is_not_reproduced():
    # DeepSeek-V3.2's DSA pool (656 B fp8 latent + 132 B indexer per layer, page 64) is not
    # modelled: kvplan's MLA cache is the 576-element latent. The golden says so too.
    assert _case("deepseek-v3.2-exp-dsa-b200-tp8-dp8-pr11309")["reproducible"] == "partial"


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
