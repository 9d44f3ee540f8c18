"""The llama.cpp and ollama profiles print the public startup logs in tests/golden/llamacpp_logs.

Each case builds the deployment the log describes (model, build, -c, -np, -ctk/-ctv, -fa, -ngl)
and compares kvplan's printed lines or sizes with the logged ones. Expected values are the
logged figures; the arithmetic behind each is in the YAML file's comment and repeated here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from gguf_files import gemma3_270m, write_gguf

from kvplan.catalog.gguf import read_gguf
from kvplan.engine import ENGINES, EngineSettings
from kvplan.engine.deployment import Deployment
from kvplan.plan.capacity import Capacity

GOLDEN = Path(__file__).parent / "golden" / "llamacpp_logs"
QUOTES = GOLDEN.parent / "llamacpp_quotes"  # measured sizes quoted in prose and tables
LLAMA_CPP, OLLAMA = ENGINES["llama.cpp"], ENGINES["ollama"]


def _quote(name: str) -> str:
    return yaml.safe_load((GOLDEN / f"{name}.yaml").read_text())["quote"]


def _lines(model, profile, sku, kv_dtype="fp16", pp=1, context=None, **settings) -> list[str]:
    deployment = Deployment(
        model, profile, kv_dtype=kv_dtype, pp=pp, settings=EngineSettings(**settings)
    )
    context = context or settings["context_size_tokens"] // settings.get("parallel", 1)
    return Capacity(deployment, sku, 1, context).log_lines()


def _in_quote(line: str, quote: str) -> bool:
    return any(logged.endswith(line) for logged in quote.splitlines())


@pytest.mark.parametrize(
    ("name", "model", "build", "n_ctx"),
    [
        # 36 layers x 2 KV heads x 128 x 2 B x 4096 cells = 72 MiB each of K and V.
        ("qwen2.5-3b-class-f16-llamasharp-1099", "qwen2.5-3b", "b4701", 4096),
        # 28 x 4 x 128 x 2 B x 2048 = 56 MiB each.
        (
            "deepseek-r1-distill-qwen-7b-f16-jamepeng-pr1",
            "deepseek-r1-distill-qwen-7b",
            "b4550",
            2048,
        ),
    ],
)
def test_buffer_and_summary_lines(name, model, build, n_ctx, catalog):
    # n_ctx is not in either excerpt: it is the value the logged size implies (see the YAML).
    lines = _lines(
        catalog.model(model),
        LLAMA_CPP,
        catalog.sku("rtx-4090"),
        version=build,
        context_size_tokens=n_ctx,
    )
    assert lines and all(_in_quote(line, _quote(name)) for line in lines), lines


def test_ollama_premla_deepseek_with_cpu_layers(catalog):
    # ollama ~0.6 (pre-MLA per-head cache): per layer K 8192 x 128 x 192 x 2 B = 384 MiB,
    # V 8192 x 128 x 128 x 2 B = 256 MiB; 61 layers -> K 23,424, V 15,616, total 39,040 MiB;
    # -ngl 12 leaves 49 layers x 640 MiB = 31,360 MiB in the CPU buffer. n_ctx 8192 and
    # -ngl 12 are inferred from the sizes; the three GPU buffers are not in the excerpt.
    quote = _quote("deepseek-r1-671b-q4km-premla-ngl12-ollama-9808")
    lines = _lines(
        catalog.model("deepseek-r1"),
        OLLAMA,
        catalog.sku("h200"),
        pp=3,
        version="0.6.2",
        context_size_tokens=8192,
        gpu_layers=12,
    )
    logged = [line for line in lines if "CUDA" not in line]
    assert len(logged) == 2 and all(_in_quote(line, quote) for line in logged), lines


def test_llama_30b_f32_2023(tmp_path):
    # 2023 loader: 2 x 512 cells x 60 layers x 6656 x 4 B = 1560.00 MB, no padding.
    path = write_gguf(tmp_path / "llama-30b.gguf", "llama", {
        "{arch}.block_count": 60, "{arch}.context_length": 2048, "{arch}.embedding_length": 6656,
        "{arch}.feed_forward_length": 17920, "{arch}.attention.head_count": 52,
        "{arch}.vocab_size": 32000,
    })  # fmt: skip
    model, _ = read_gguf(path)
    from kvplan.catalog import Catalog

    lines = _lines(
        model,
        LLAMA_CPP,
        Catalog().sku("h100-sxm"),
        kv_dtype="fp32",
        version="b1",
        context_size_tokens=512,
    )
    assert lines == ["llama_init_from_file: kv self size  = 1560.00 MB"]
    assert _in_quote(lines[0], _quote("llama-30b-f32-kv-llama-cpp-python-66"))


@pytest.mark.parametrize("kv_dtype", ["fp16", "q8_0", "q4_0"])
def test_kv_type_sizes_mistral_small_geometry(kv_dtype, catalog):
    # Magidonia-24B has Mistral-Small-24B's 40 layers x 8 KV heads x 128; 6656 cells
    # (1040 MiB / (40 x 1024 x 2 x 2 B)). f16 1040.00; q8_0 x 34/64 = 552.50; q4_0 x 18/64 = 292.50.
    logged = {"fp16": "1040.00", "q8_0": "552.50", "q4_0": "292.50"}[kv_dtype]
    lines = _lines(
        catalog.model("mistral-small-24b"),
        LLAMA_CPP,
        catalog.sku("h100-sxm"),
        kv_dtype=kv_dtype,
        version="b7000",
        context_size_tokens=6656,
        flash_attention=True,
    )
    assert re.search(rf"size = +{logged} MiB \(  6656 cells,  40 layers", lines[-1]), lines


@pytest.mark.parametrize(
    ("k", "v", "total"), [("iq4_nl", "iq4_nl", "101.25"), ("q8_0", "q4_0", "146.25")]
)
def test_kv_types_k_and_v_apart(k, v, total, catalog):
    # Bonsai-8B as Qwen3-8B's 36 x 8 x 128 at 2560 cells: f16 360 MiB, K and V 180 each;
    # iq4_nl 180 x 18/64 x 2 = 101.25 (logged). -ctk q8_0 -ctv q4_0 (not logged):
    # 180 x 34/64 + 180 x 18/64 = 95.625 + 50.625 = 146.25.
    lines = _lines(
        catalog.model("qwen3-8b"),
        LLAMA_CPP,
        catalog.sku("h100-sxm"),
        kv_dtype=k,
        v_dtype=v,
        version="b7000",
        context_size_tokens=2560,
        flash_attention=True,
    )
    assert f"size = {total:>7} MiB" in lines[-1], lines


def _gemma_total_mib(lines: list[str]) -> float:
    return sum(float(m) for m in re.findall(r"size = +([0-9.]+) MiB \(", "\n".join(lines)))


@pytest.mark.parametrize(
    ("name", "build"),
    [
        ("gemma-3-270m-swa-parallel-unsloth-5225", "b9500"),
        ("gemma-3-270m-np3-np4-rounding-unsloth-7530", "b10107"),
    ],
)
def test_gemma3_swa_caches_and_slots(name, build, tmp_path, catalog):
    # Per stream: cells pad256(pad256(n_ctx) / np); SWA cells pad256(min(cells, 512 + 512));
    # one cell of one layer K+V f16 = 2 x 256 x 2 B = 1 KiB; 3 full + 15 sliding layers.
    # e.g. -c 4096 -np 1: 3 x 4096 + 15 x 1024 KiB = 27.00 MiB; -c 1024 -np 3: 1536 cells.
    model, _ = read_gguf(gemma3_270m(tmp_path / "gemma-3-270m.gguf"))
    case = yaml.safe_load((QUOTES / f"{name}.yaml").read_text())
    for row in case["cases"]:
        lines = _lines(
            model,
            LLAMA_CPP,
            catalog.sku("h100-sxm"),
            version=build,
            context_size_tokens=row["n_ctx"],
            parallel=row["n_seq_max"],
            context=128,
        )
        assert _gemma_total_mib(lines) == row["total_mib"], (row, lines)
        if "n_ctx_total_cells" in row:
            cells = int(re.search(r"non-SWA KV cache, size = (\d+)", lines[0])[1])
            assert cells * row["n_seq_max"] == row["n_ctx_total_cells"]


def test_padding_by_build(catalog):
    # -c 1100 on qwen2.5-3b (36 layers x 2 KV heads x 128 x 2 x 2 B = 36 KiB per cell):
    # b4000 pads to 32 -> 1120 cells = 39.38 MiB (256 with flash attention -> 1280 = 45.00);
    # b6900 (PR #16812, no padding) 1100 cells = 38.67 MiB; b7000 (PR #17046) 1280 = 45.00.
    model, sku = catalog.model("qwen2.5-3b"), catalog.sku("h100-sxm")
    expected = {("b4000", False): "39.38", ("b4000", True): "45.00",
                ("b6900", True): "38.67", ("b7000", True): "45.00"}  # fmt: skip
    for (build, fa), mib in expected.items():
        lines = _lines(
            model,
            LLAMA_CPP,
            sku,
            version=build,
            context_size_tokens=1100,
            flash_attention=fa,
            context=512,
        )
        assert re.search(rf"size += +{mib} MiB", lines[-1]), (build, fa, lines)


def test_quantised_v_needs_flash_attention(catalog):
    from kvplan.errors import KvplanError

    with pytest.raises(KvplanError, match="needs flash attention"):
        Deployment(
            catalog.model("qwen3-8b"),
            LLAMA_CPP,
            kv_dtype="q8_0",
            settings=EngineSettings(flash_attention=False),
        )


@pytest.mark.parametrize(
    ("name", "model", "profile", "build", "n_ctx", "kv_dtype", "flash"),
    [
        # 64 layers x 1024 x 34/32 B x 32768 cells = 2176 MiB each of K and V (q8_0).
        (
            "qwen2.5-32b-class-q8_0-rocm-ctx32768-issue11337",
            "qwen2.5-32b", LLAMA_CPP, "b4400", 32768, "q8_0", True,
        ),
        # 64 x 1024 x 2 B x 32768 = 4096 MiB each (f16), over five ROCm devices.
        (
            "qwen2.5-32b-class-f16-5xmi50-ctx32768-issue12369",
            "qwen2.5-32b", LLAMA_CPP, "b4800", 32768, "fp16", False,
        ),
        # 32 x 1024 x 2 B x 16000 = 1000 MiB each (f16), ollama's runner of March 2024.
        (
            "mixtral-8x7b-class-2x7900xtx-ctx16000-ollama-3158",
            "mixtral-8x7b", OLLAMA, "0.1.29", 16000, "fp16", False,
        ),
    ],
)  # fmt: skip
def test_rocm_summary_lines(name, model, profile, build, n_ctx, kv_dtype, flash, catalog):
    # The buffer lines name ROCm devices (kvplan prints CUDA0): the summary line is compared.
    folder = "ollama_logs" if profile is OLLAMA else "llamacpp_logs"
    quote = yaml.safe_load((GOLDEN.parent / folder / f"{name}.yaml").read_text())["quote"]
    lines = _lines(
        catalog.model(model),
        profile,
        catalog.sku("h100-sxm"),
        kv_dtype=kv_dtype,
        version=build,
        context_size_tokens=n_ctx,
        flash_attention=flash,
    )
    summary = [line for line in lines if "KV self size" in line]
    assert summary and all(_in_quote(line, quote) for line in summary), lines
