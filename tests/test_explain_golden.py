"""`kvplan explain` over every startup log in tests/golden/ (each file cites its source).

Each file's `quote:` is the log; the inputs it records beside the quote (model, GPU, TP, the
settings the excerpt does not print) are what a user passes as options. Every logged number
must come out within its printed rounding or carry the term that accounts for it, and each log
gets one verdict (see `verdict`): the figures the log itself fixes (the pool its budget buys,
llama.cpp's cells and buffers, the budget its printed terms add up to) come out exact; or the
pool differs and explain names the one fact the log lacks (ONE_TERM, with the setting that
supplies it where one can); or explain refuses in one line naming the missing fact and its
option (NOT_PLACED). A log whose model or GPU the test gives is also explained without it:
placed from its own lines, or refused in one line naming --model / --sku.
`python tests/test_explain_golden.py` prints the verdicts per engine.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from kvplan.errors import KvplanError
from kvplan.explain import ExplainReport, Given, explain_log, read_log
from kvplan.explain.arithmetic import LOGGED_TERMS
from kvplan.explain.llamacpp import COMPARED as LLAMACPP_ROWS
from kvplan.explain.pool_terms import BYTES_PER_TOKEN, NO_BUDGET, ONE_RANK
from kvplan.explain.reading import POOL

GOLDEN = Path(__file__).parent / "golden"
FOLDERS = ("vllm_logs", "vllm_memory", "sglang_logs", "trtllm_logs", "llamacpp_logs", "ollama_logs")
# (llamacpp_quotes/ holds measured sizes quoted in prose and tables, not logs: not read here)
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
    "NVIDIA H100 PCIe": "h100-pcie",
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
# Logs whose pool kvplan does not reproduce, with the one fact the log lacks that explain names
# (kvplan.explain.pool_terms), the setting that supplies it where one can, and why.
ONE_TERM = {
    # "Using 10718 tokens in paged KV cache" is the only line: the free memory the tokens were
    # bought with is not logged. Given as the budget, 10,718 x 524,288 B (32 layers x 2 x 32 x
    # 128 x 2 B per token) buys them back.
    "llama-2-7b-a10-v0.5-tpb16-issue224": (NO_BUDGET, 10_718 * 524_288),
    # The excerpt prints no budget line (the user's 8.69 GiB is the rank they looked at); the
    # error's 81,536 tokens = 5,096 blocks x 1.5 MiB (48 layers x 2 x 16 x 4 KV heads/rank x 128
    # x 2 B): the binding rank's budget, which buys them back.
    "r1-distill-qwen-14b-rtx4090-tp2-v0.7": (NO_BUDGET, 5_096 * 48 * 2 * 16 * 4 * 128 * 2),
    # One rank's "Available KV cache memory" of four was pasted; the logged 178,880 tokens are
    # another (smaller) rank's. The log prints a budget, which no setting replaces.
    "qwen3-235b-a22b-fp8-h100-tp4-lmcache": (ONE_RANK, None),
    # 62.99 GiB for 294,848 tokens is 229,376 B per token (28 layers' worth), not Llama-2-7B's
    # 262,144 at FP8: the summary names another model than the one whose cache the lines
    # describe, and no catalogued model has that geometry.
    "llama-2-7b-fp8-h100-v0.12-perf-benchmarking-inconsistent": (BYTES_PER_TOKEN, None),
}
# Logs kvplan cannot place, with the words of the one line it prints and why no option the test
# could pass places them.
NOT_PLACED = {
    # the model is a blob digest and 128 MiB of f16 KV fits many (model, cells) pairs
    "kv-self-size-rocm-oom-ollama-3418": "--model",
    # DeepSeek-V4-Pro: no public config.json found to catalogue (its cache is neither MLA nor
    # DSA as kvplan models them)
    "deepseek-v4-pro-fp8-h200-tp8-mfs088-error-inferencex-2128": "--model",
    # a hybrid GDN model with a draft: 8,192 B of fp8 K per token and rank (full-attention
    # layers x KV heads per rank x head dim) fits more than one geometry; the excerpt does not
    # name the model and no config found pins it
    "hybrid-gdn-fp8kv-2x5090-tp2-draft-pool-club3090-1261": "--model",
    # the runner's arguments only: no figure to reproduce
    "qwen2-class-rocm-args-ollama-5913": "no ollama line",
}
# The options a refusal may name: the missing fact's option, or the part of the log to give.
OPTIONS = ("--model", "--sku", "--engine", "the startup part of the log")
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


def _pool_rows(report: ExplainReport, engine: str | None) -> list:
    """The rows the log's own figures fix: the pool a budget buys (llama.cpp: cells, buffers)."""
    from kvplan.explain.readers import READERS

    if report.engine in ("llama.cpp", "ollama"):
        return [row for row in report.rows if row.key in KV_KEYS]
    reader = READERS[report.engine]
    pool_keys = {c.key for c in reader.COMPARED if c.basis == POOL}
    return [row for row in report.rows if row.key in pool_keys and row.basis != LOGGED_TERMS]


def _fixed_rows(report: ExplainReport) -> list:
    """The pool rows and the budget from the logged terms (kvplan.explain.arithmetic)."""
    terms = [row for row in report.rows if row.basis == LOGGED_TERMS]
    return _pool_rows(report, report.engine) + terms


def _budget_keys(engine: str) -> set[str]:
    """The figures of the memory a pool is bought from (llama.cpp/ollama: the memory the
    runtime reports)."""
    from kvplan.explain.readers import READERS

    return set(READERS[engine].BUDGETS) | {"total_bytes", "available_at_start_bytes"}


def verdict(path: Path) -> str:
    """What explain does with a golden log (each asserted below): 'reproduced' (the figures the
    log fixes come out exact: the pool its budget buys, or the budget its printed terms add up
    to), 'budget terms named' (the log prints no pool and not every term of its budget: each
    predicted term that differs is named), 'one term named' or 'not placed'."""
    if path.stem in NOT_PLACED:
        return "not placed"
    if path.stem in ONE_TERM:
        return "one term named"
    report = _explain(path)
    return "reproduced" if _fixed_rows(report) else "budget terms named"


def _explain(path: Path, **replaced) -> ExplainReport:
    case = yaml.safe_load(path.read_text())
    given, engine = given_for(path.stem, case)
    given = replace(given, **replaced)
    return explain_log(case["quote"].splitlines(), given, engine=engine)


@pytest.mark.parametrize("path", GOLDEN_LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden_log_is_reproduced_or_names_what_it_lacks(path):
    if path.stem in NOT_PLACED:
        with pytest.raises(KvplanError) as refused:
            _explain(path)
        assert NOT_PLACED[path.stem] in str(refused.value)
        assert "\n" not in str(refused.value)
        return
    report = _explain(path)
    assert report.rows
    for row in report.rows:
        # Every logged number: reproduced within its printed rounding, or the term named.
        assert row.matches or row.term, row
    # The budget from the terms the log prints, by the engine model's rule, is exact.
    from_terms = [row for row in report.rows if row.basis == LOGGED_TERMS]
    assert all(row.matches for row in from_terms), from_terms
    pool = _pool_rows(report, report.engine)
    if not pool and not from_terms:  # the budget and some of its terms, each differing one named
        assert any(row.key in _budget_keys(report.engine) for row in report.rows), report.rows
    if path.stem not in ONE_TERM:
        assert all(row.matches for row in pool), [row for row in pool if not row.matches]
        assert not any(
            term in report.unknown_terms for term in (NO_BUDGET, ONE_RANK, BYTES_PER_TOKEN)
        ), report.unknown_terms
        return
    term, budget_bytes = ONE_TERM[path.stem]
    differ = [row for row in pool if not row.matches]
    assert differ and all(row.term.startswith(term) for row in differ), differ
    assert [t for t in report.unknown_terms if t == term] == [term], report.unknown_terms
    if budget_bytes is not None:
        # The fact supplied (the setting kv_memory_bytes): the pool comes out exact.
        given, _ = given_for(path.stem, yaml.safe_load(path.read_text()))
        settings = given.settings | {"kv_memory_bytes": budget_bytes}
        supplied = _pool_rows(_explain(path, settings=settings), report.engine)
        assert supplied and all(row.matches for row in supplied), supplied


@pytest.mark.parametrize("dropped", ["model", "sku"])
@pytest.mark.parametrize("path", GOLDEN_LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_fact_the_log_lacks_is_named_with_its_option(path, dropped):
    # Without the model (or GPU) the file records beside the quote, explain places the log from
    # its own lines or refuses in one line naming the option; a log that does not name it must
    # be refused (falling back to a default model or GPU would be a guess).
    case = yaml.safe_load(path.read_text())
    try:
        reading, _ = read_log(case["quote"].splitlines(), given_for(path.stem, case)[1])
    except KvplanError as refused:  # no line kvplan reads: the refusal names what to give
        assert any(option in str(refused) for option in OPTIONS), refused
        return
    fact = {"model": "model", "sku": "gpu"}[dropped]
    try:
        _explain(path, **{dropped: None})
    except KvplanError as refused:
        assert "\n" not in str(refused)
        assert f"--{dropped}" in str(refused) or path.stem in NOT_PLACED, refused
        return
    assert reading.facts.get(fact) is not None, f"placed without a {fact} the log names"


def test_at_least_five_logs_per_engine_are_placed():
    counts = verdict_counts()
    for engine in ("vllm", "sglang", "trtllm", "llama.cpp", "ollama"):
        placed = sum(n for name, n in counts[engine].items() if name != "not placed")
        assert placed >= 5, counts


def engine_of(path: Path) -> str:
    return (
        "vllm"
        if path.parent.name.startswith("vllm")
        else yaml.safe_load(path.read_text())["engine"]
    )


def verdict_counts() -> dict[str, dict[str, int]]:
    """{engine: {verdict: logs}} over every golden log."""
    counts: dict[str, dict[str, int]] = {}
    for path in GOLDEN_LOGS:
        per_engine = counts.setdefault(engine_of(path), {})
        per_engine[verdict(path)] = per_engine.get(verdict(path), 0) + 1
    return counts


if __name__ == "__main__":  # python tests/test_explain_golden.py: the verdicts per engine
    for engine, counted in sorted(verdict_counts().items()):
        total = sum(counted.values())
        print(f"{engine:10} {total:3} logs: " + ", ".join(f"{n} {v}" for v, n in counted.items()))
