"""`kvplan explain` over every startup log in tests/golden/ (each file cites its source).

Each file's `quote:` is the log; the inputs it records beside the quote (model, GPU, TP, the
settings the excerpt does not print) are what a user passes as options. Every logged number
must come out within its printed rounding, or carry the term that accounts for it; the pool a
logged budget buys must come out exactly (KNOWN_POOL_MISSES names the rules the engine model
lacks). A file kvplan cannot place is listed in NOT_PLACED with the fact it lacks.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kvplan.errors import KvplanError
from kvplan.explain import Given, explain_log
from kvplan.explain.llamacpp import COMPARED as LLAMACPP_ROWS

GOLDEN = Path(__file__).parent / "golden"
FOLDERS = ("vllm_logs", "vllm_memory", "sglang_logs", "trtllm_logs", "llamacpp_logs", "ollama_logs")
KV_KEYS = {row.key for row in LLAMACPP_ROWS}
GOLDEN_LOGS = sorted(p for folder in FOLDERS for p in (GOLDEN / folder).glob("*.yaml"))

# The GPU each file names, as the catalogue's SKU (None: not in the catalogue). llama.cpp's
# cells and buffers do not depend on the GPU's memory: its files take rtx-4090 as a placeholder.
SKU_OF = {
    "NVIDIA L4": "l4",
    "NVIDIA H200": "h200",
    "NVIDIA A100 80GB": "a100-80gb",
    "NVIDIA A100 (80 GB)": "a100-80gb",
    "NVIDIA L40S": "l40s",
    "NVIDIA H100 80GB HBM3": "h100-sxm",
    "NVIDIA H100 80GB HBM3 x4": "h100-sxm",
    "80 GB H100-class (total 79.10 GiB)": "h100-sxm",
    "40 GB A100-class (total 39.39 GiB)": "a100-40gb",
    "NVIDIA GeForce RTX 3090": "rtx-3090",
    "NVIDIA H20": "h20",
    "B200 x8": "b200",
    "H200 x8": "h200",
    "NVIDIA H200 x8 (~140.4 GB each)": "h200",
    "NVIDIA GeForce RTX 5090 x2": "rtx-5090",
    "NVIDIA A10 (24 GB)": "a10",
}
PLACEHOLDER_SKU = "rtx-4090"
# Files whose catalogue model is not among their fields: the architecture their `model:` names
# (vllm_logs as tests/test_vllm_golden.py reads them).
MODEL_OF = {
    "deepseek-v2-lite-l4-tp2-pp2": "deepseek-v2-lite",
    "gemma3-1b-it-v0.13-mml2k": "gemma-3-1b",
    "llama31-8b-eagle-h100-v0.9.1": "llama-3.1-8b",
    "llama31-8b-rtx3090-v0-mml20k": "llama-3.1-8b",
    "llama31-8b-rtx3090-v0-mml29k": "llama-3.1-8b",
    "mistral-small-3.2-24b-h100-bs128-v0.11": "mistral-small-24b",
    "qwen3-235b-a22b-fp8-h100-tp4-lmcache": "qwen3-235b-a22b",
    "qwen3-30b-a3b-fp8kv-mml100k": "qwen3-30b-a3b",
    "qwen3-30b-a3b-fp8kv-mml221k-error": "qwen3-30b-a3b",
    "deepseek-r1-distill-qwen-7b-f16-jamepeng-pr1": "deepseek-r1-distill-qwen-7b",
    "qwen2.5-3b-class-f16-llamasharp-1099": "qwen2.5-3b",
    # Qwen1.5-7B is not catalogued; Llama-2-7B has its KV geometry (32 layers x 32 KV heads x
    # 128), all the pool depends on.
    "qwen1.5-7b-a100-40gb-v0.13-issue2268": "llama-2-7b",
    # the command line names deepseek-ai/DeepSeek-V3.2-Exp: the catalogue's deepseek-v3.2 (its
    # DSA cache), not the MLA geometry the file compares with
    "deepseek-v3.2-exp-dsa-b200-tp8-dp8-pr11309": "deepseek-v3.2",
    # the logs do not name their model; the file's model field does (a Hub id, or the geometry
    # its bytes per token identify)
    "granite31-8b-h100-tp1-v0.19": "granite-3.1-8b",
    "tinyllama-pytorch-backend-tpb32-triton-tutorials-150": "tinyllama-1.1b",
    "llama-30b-f32-kv-llama-cpp-python-66": "llama-30b",
}
# Settings a file records outside the fields read below.
EXTRA = {
    "llama31-8b-eagle-h100-v0.9.1": {"draft_layers": 1},  # EAGLE's layer joins the cache group
    # The 0.6.5 logs print total_gpu_memory 79.22 GiB, an H100's (vllm PR #10511): the pool
    # comes from the logged budget either way.
    "llama3-8b-80gb-tp1-v0.6.5dev": {"sku": "h100-sxm"},
    "llama3-8b-80gb-tp2-v0.6.5dev": {"sku": "h100-sxm"},
    # GPU not stated: the pool bought with the logged budget does not depend on it (as in
    # tests/test_vllm_golden.py); the budget rows then compare with an H100's.
    "gemma3-1b-it-v0.13-mml2k": {"sku": "h100-sxm"},
    "qwen3-30b-a3b-fp8kv-mml100k": {"sku": "h100-sxm"},
    "qwen3-30b-a3b-fp8kv-mml221k-error": {"sku": "h100-sxm"},
    "qwen3-30b-a3b-fp8-musa-s5000-tp2-pr27537": {"sku": "h100-sxm"},  # a Moore Threads S5000
    # GPU not stated (>= 87 GiB free): blocks, tokens and GiB follow from the logged blocks on any
    "tinyllama-pytorch-backend-tpb32-triton-tutorials-150": {"sku": "h200"},
}
# Pool figures kvplan does not reproduce from the logged budget, each with the reason.
KNOWN_POOL_MISSES = {
    # the file's own arithmetic: the summary's model is not the one whose KV the lines
    # describe (229,376 B per token, not Llama-2-7B's 262,144); "not a target"
    ("llama-2-7b-fp8-h100-v0.12-perf-benchmarking-inconsistent", "primary_blocks"),
    ("llama-2-7b-fp8-h100-v0.12-perf-benchmarking-inconsistent", "max_tokens"),
    # the file says reproducible: false (one rank's budget of four, which is unknown)
    ("qwen3-235b-a22b-fp8-h100-tp4-lmcache", "gpu_kv_cache_tokens"),
}
# Files kvplan cannot place, with the words of the one line it prints (the fact missing).
NOT_PLACED = {
    # not logs: the quotes are tables and prose of measured sizes (their own tests read them)
    "gemma-3-270m-np3-np4-rounding-unsloth-7530": "no llama.cpp line",
    "gemma-3-270m-swa-parallel-unsloth-5225": "no startup line",
    "kv-type-sizes-f16-q8_0-q4_0-iq4_nl-pr21551": "no startup line",
    # the model is not in the catalogue (or not named)
    "kv-self-size-rocm-oom-ollama-3418": "--model",
    "deepseek-v4-pro-fp8-h200-tp8-mfs088-error-inferencex-2128": "--model",
    "hybrid-gdn-fp8kv-2x5090-tp2-draft-pool-club3090-1261": "--model",
    "granite4-micro-l40s-v0.11": "--model",
    # the runner's arguments only: no figure to reproduce
    "qwen2-class-rocm-args-ollama-5913": "no ollama line",
}
_PLAIN_DTYPES = (None, "auto", "float16", "bfloat16", "f16", "bf16")


def _first(*values):
    return next((v for v in values if v is not None), None)


def _version(text: object) -> str | None:
    """A golden file's engine version when it is a release number (not "~0.6.x (…)")."""
    import re

    match = re.fullmatch(r"v?(\d+\.\d+(?:\.\d+)?)", str(text or "").strip())
    return match.group(1) if match else None


def _weight_dtype(text: object) -> str | None:
    described = str(text or "")
    if described.startswith("fp8"):
        return "fp8"
    return "int8" if described.startswith("int8") else None


def _settings(case: dict, inputs: dict, llama: bool) -> dict:
    block = _first(case.get("block_size"), inputs.get("tokens_per_block"), inputs.get("page_size"))
    fraction = _first(
        case.get("gpu_memory_utilization"),
        inputs.get("free_gpu_memory_fraction"),
        inputs.get("mem_fraction_static"),
    )
    settings = {
        "tokens_per_block": None if llama else block,
        "utilization": fraction,
        "max_num_batched_tokens": case.get("max_num_batched_tokens"),
    }
    if llama:
        layers = inputs.get("n_gpu_layers")
        settings |= {
            "context_size_tokens": inputs.get("n_ctx"),
            "parallel": inputs.get("n_seq_max"),
            "gpu_layers": layers if isinstance(layers, int) else None,
            "flash_attention": inputs.get("flash_attn"),
        }
    return {k: v for k, v in settings.items() if v is not None} | (inputs.get("settings") or {})


def given_for(stem: str, case: dict) -> tuple[Given, str | None]:
    """The options a user passes beside the file's quote, from the inputs the file records."""
    inputs = case.get("inputs") or {}
    extra = dict(EXTRA.get(stem, {}))
    llama = case.get("engine") in ("llama.cpp", "ollama")
    model = _first(
        MODEL_OF.get(stem),
        inputs.get("model"),
        case.get("catalog_model"),
        case.get("catalogue"),
        case.get("catalog_geometry"),
        case.get("geometry_like"),
    )
    sku = _first(
        extra.pop("sku", None), inputs.get("sku"), case.get("sku"), SKU_OF.get(str(case.get("gpu")))
    )
    kv_dtype = _first(
        inputs.get("kv_cache_dtype"),
        case.get("kv_cache_dtype"),
        inputs.get("type_k") if llama else None,  # llama.cpp's -ctk
    )
    given = Given(
        model=model,
        sku=sku or (PLACEHOLDER_SKU if llama else None),
        version=_version(_first(case.get("vllm_version"), case.get("engine_version"))),
        tp=_first(case.get("tp"), inputs.get("tp")),
        pp=case.get("pp"),
        dp=_first(case.get("dp"), inputs.get("dp")),
        kv_dtype=None if kv_dtype in _PLAIN_DTYPES else kv_dtype,
        weight_dtype=_weight_dtype(case.get("weights_dtype")),
        context_tokens=_first(case.get("max_model_len"), inputs.get("max_seq_len")),
        settings=_settings(case, inputs, llama) | extra,
    )
    return given, "ollama" if case.get("engine") == "ollama" else None


@pytest.mark.parametrize("path", GOLDEN_LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden_log_is_reproduced_or_names_what_it_lacks(path):
    case = yaml.safe_load(path.read_text())
    given, engine = given_for(path.stem, case)
    if path.stem in NOT_PLACED:
        with pytest.raises(KvplanError) as refused:
            explain_log(case["quote"].splitlines(), given, engine=engine)
        assert NOT_PLACED[path.stem] in str(refused.value)
        assert "\n" not in str(refused.value)
        return
    report = explain_log(case["quote"].splitlines(), given, engine=engine)
    assert report.rows
    for row in report.rows:
        # Every logged number: reproduced within its printed rounding, or the term named.
        assert row.matches or row.term, row
        if row.basis == "logged budget":
            assert row.matches == ((path.stem, row.key) not in KNOWN_POOL_MISSES), row
    if report.engine in ("llama.cpp", "ollama"):
        # Cells and buffers follow from the settings alone: exact.
        kv_rows = [row for row in report.rows if row.key in KV_KEYS]
        assert all(row.matches for row in kv_rows), kv_rows


def test_at_least_five_logs_per_engine():
    engines: dict[str, int] = {}
    for path in GOLDEN_LOGS:
        case = yaml.safe_load(path.read_text())
        name = case.get("engine")
        name = "vllm" if path.parent.name.startswith("vllm") else name
        engines[name] = engines.get(name, 0) + 1
    assert all(engines.get(e, 0) >= 5 for e in ("vllm", "sglang", "trtllm", "ollama")), engines
    assert engines.get("llama.cpp", 0) >= 5, engines
