"""`kvplan recommend` as a user meets it: exit codes, JSON, one-line errors, and its command
fed back into `kvplan report` giving the capacity it claimed."""

from __future__ import annotations

import itertools
import json
import shlex

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()


def run(*args: str, columns: int = 200):
    return runner.invoke(app, list(args), env={"COLUMNS": str(columns)})


QUESTION = (
    "recommend",
    "llama-3.1-70b",
    "--context",
    "32k",
    "--concurrency",
    "64",
    "--sku",
    "h100-sxm",
    "--max-gpus",
    "8",
)


def test_table_answers_with_the_command_and_log_lines():
    result = run(*QUESTION)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "vllm serve meta-llama/Llama-3.1-70B" in out
    assert "--kv-cache-dtype fp8" in out and "--max-num-seqs 64" in out
    # vLLM's own wording for the plan it starts (hand-derived in test_recommend.py).
    assert "Available KV cache memory: 53.80 GiB" in out
    assert "GPU KV cache size: 2,820,848 tokens" in out
    assert "needs fp8 weights" in out


def test_json_is_exact_at_40_columns():
    result = run(*QUESTION, "--format", "json", columns=40)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    first = payload["ranked"][0]
    assert payload["meets"] is True and payload["rank_by"] == "gpus"
    assert payload["headroom_fraction"] == 0.1
    assert first["kv_budget_bytes_per_gpu"] == 57_771_005_707
    assert (first["max_concurrency"], first["concurrency_within_headroom"]) == (86, 77)
    assert first["launch_command"].startswith("vllm serve meta-llama/Llama-3.1-70B ")
    assert payload["ranked"][1]["why_not_first"] == "needs fp8 weights"


@pytest.mark.parametrize("fmt", ["csv", "md"])
def test_other_formats(fmt):
    result = run(*QUESTION, "--format", fmt)
    assert result.exit_code == 0, result.output
    assert "h100-sxm" in result.stdout
    if fmt == "md":
        assert "```" in result.stdout and "vllm serve" in result.stdout


def test_rope_scaling_past_the_native_limit():
    # Qwen3-8B: max_position_embeddings 40,960; its card's YaRN ×4 over 32,768 reaches 131,072
    # and is not in config.json, so vLLM needs it as an override past 40,960.
    args = ("recommend", "qwen3-8b", "-c", "128k", "-n", "4", "-s", "h100-sxm")
    refused = run(*args)
    assert refused.exit_code == 2
    assert "declare the RoPE scaling: --rope-scaling yarn:4" in refused.stderr
    result = run(*args, "--rope-scaling", "yarn:4", "-f", "json")
    assert result.exit_code == 0, result.output
    command = json.loads(result.stdout)["ranked"][0]["launch_command"]
    assert command.endswith(
        """--hf-overrides '{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, """
        """"original_max_position_embeddings": 32768}}'"""
    )
    assert report_args(command)[-2:] == ["--rope-scaling", "yarn:4:32768"]


def test_nothing_meets_exits_1_naming_the_closest_miss():
    args = ("recommend", "llama-3.1-8b", "-c", "128k", "-n", "64", "-s", "l4", "--max-gpus", "4")
    table = run(*args)
    assert table.exit_code == 1
    assert "closest miss" in table.stdout
    payload = json.loads(run(*args, "-f", "json").stdout)
    assert payload["meets"] is False and payload["ranked"] == []
    assert payload["closest_miss"]["sku"] == "l4"
    assert 0 < payload["closest_miss"]["concurrency_within_headroom"] < 64


def test_fixed_options_are_not_searched():
    result = run(*QUESTION, "--utilization", "0.95", "--tp", "8", "--kv-dtype", "fp8", "-f", "json")
    payload = json.loads(result.stdout)
    assert {r["gpu_memory_utilization"] for r in payload["ranked"]} == {0.95}
    assert {r["tp"] for r in payload["ranked"]} == {8}
    assert payload["search"]["searched"]["kv"] == ["fp8_e4m3"]
    plain = json.loads(run(*QUESTION, "--no-quantization", "-f", "json").stdout)
    assert plain["search"]["searched"]["weights"] == ["released"]


def test_price_ranking():
    result = run(
        "recommend",
        "llama-3.1-8b",
        "-c",
        "32k",
        "-n",
        "32",
        "-s",
        "h100-sxm,l40s",
        "--price",
        "h100-sxm=4/h",
        "--price",
        "l40s=1/h",
        "-f",
        "json",
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["rank_by"] == "price"
    prices = {"h100-sxm": 4.0, "l40s": 1.0}
    for record in payload["ranked"]:
        assert record["cost"] == record["gpus"] * prices[record["sku"]]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--price", "h100-sxm=abc"], "--price: 'h100-sxm=abc' is not SKU=PRICE/h"),
        (["--price", "h100-sxm=2.5"], "is not SKU=PRICE/h"),
        (["--price", "h100-sxm=0/h"], "0 is below kvplan's minimum of 0.000001"),
        (["--price", "h999=2/h"], "unknown sku 'h999'"),
        (["--rank", "price"], "--rank price: no searched SKU has a price"),
        (["--rank", "cheapest"], "--rank: unknown ranking 'cheapest'"),
        (["--headroom", "150%"], "--headroom: '150%' must be at least 0 and below 100%"),
        (["--headroom", "lots"], "--headroom: 'lots' is not a share"),
        (["--context", "200k"], "native limit of 131,072"),
        (["--concurrency", "0"], "--concurrency: 0 must be between 1"),
        (["--kv-dtype", "fp9"], "unknown dtype 'fp9'"),
        (["--max-gpus", "0"], "--max-gpus: 0 must be between 1 and 4,096"),
        (["--top", "0"], "--top: 0 must be at least 1"),
    ],
)
def test_bad_input_one_line_exit_2(args, fragment):
    result = run("recommend", "llama-3.1-8b", "-s", "h100-sxm", *args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr


# --- the command fed back into `kvplan report` ------------------------------------------------

# `vllm serve` flag -> `kvplan report` option (the same setting under kvplan's name).
FLAGS = {
    "--tensor-parallel-size": "--tp",
    "--pipeline-parallel-size": "--pp",
    "--data-parallel-size": "--dp",
    "--max-model-len": "--context",
    "--gpu-memory-utilization": "--utilization",
    "--max-num-seqs": "--max-num-seqs",
    "--block-size": "--block-size",
    "--max-num-batched-tokens": "--max-num-batched-tokens",
}


def report_args(command: str) -> list[str]:
    """`kvplan report` options that describe what a `vllm serve` line starts."""
    words = shlex.split(command)
    assert words[:2] == ["vllm", "serve"]
    args = ["-m", words[2]]
    if "--tensor-parallel-size" not in words:
        args += ["--tp", "1"]  # vLLM's default; report would otherwise try 1, 2, 4, 8
    i = 3
    while i < len(words):
        flag = words[i]
        if flag == "--enable-expert-parallel":
            args.append("--ep")
            i += 1
            continue
        value = words[i + 1]
        if flag == "--hf-overrides":
            rope = json.loads(value)["rope_scaling"]
            parts = [rope["rope_type"], f"{rope['factor']:g}"]
            parts += [str(rope["original_max_position_embeddings"])] * (
                "original_max_position_embeddings" in rope
            )
            args += ["--rope-scaling", ":".join(parts)]
        elif flag == "--kv-cache-dtype":
            args += ["--kv-dtype", "bf16" if value == "auto" else value]
        elif flag == "--quantization":
            args += ["--weight-dtype", value]
        else:
            args += [FLAGS[flag], value]
        i += 2
    return args


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    model=st.sampled_from(
        [
            "qwen3-8b",
            "llama-3.1-8b",
            "qwen3-30b-a3b",
            "gemma-2-9b",
            "deepseek-v2-lite",
            "mistral-7b-v0.1",
            "qwen3-next-80b-a3b",
            "llama-3.1-70b",
        ]
    ),
    sku=st.sampled_from(["h100-sxm", "a100-80gb", "l40s", "mi300x"]),
    context=st.sampled_from([2048, 8192, 32_768]),
    concurrency=st.integers(1, 300),
)
def test_recommended_command_gives_the_claimed_capacity_in_report(
    catalog, model, sku, context, concurrency
):
    assume(context <= catalog.model(model).max_context)
    args = ["-c", str(context), "-n", str(concurrency), "-s", sku, "--max-gpus", "8"]
    result = run("recommend", model, *args, "--top", "1", "-f", "json")
    assume(result.exit_code == 0)
    claimed = json.loads(result.stdout)["ranked"][0]
    args = report_args(claimed["launch_command"])
    shown = run("report", *args, "-s", sku, "--batch", str(concurrency), "-f", "json")
    assert shown.exit_code == 0, (args, shown.output)
    (row,) = json.loads(shown.stdout)
    assert row["model"] == model
    for key in ("kv_budget_bytes_per_gpu", "kv_blocks", "max_concurrency", "gpus"):
        assert row[key] == claimed[key], (key, args)
    assert row["log_lines"] == claimed["log_lines"]


def test_price_per_hour_from_a_sku_file(tmp_path):
    from pathlib import Path

    shipped = Path(__file__).resolve().parent.parent / "sku_profiles" / "l4.yaml"
    (tmp_path / "l4.yaml").write_text(shipped.read_text() + "price_per_hour: 0.8\n")
    question = [
        "recommend",
        "llama-3.1-8b",
        "-c",
        "8k",
        "-n",
        "16",
        "-s",
        "l4",
        "-f",
        "json",
        "--catalog",
    ]
    for extra, price in ((["--rank", "price"], 0.8), (["--price", "l4=0.5/h"], 0.5)):
        # --price overrides the file's figure.
        result = run(*question, str(tmp_path), *extra)
        assert result.exit_code == 0, result.output
        for record in json.loads(result.stdout)["ranked"]:
            assert record["cost"] == record["gpus"] * price


@pytest.mark.parametrize(
    ("headroom", "shown"), [("0.5%", "headroom 0.5%"), ("12.5%", "headroom 12.5%")]
)
def test_headroom_is_shown_as_asked(headroom, shown):
    result = run(
        "recommend", "llama-3.1-8b", "--sku", "h100-sxm", "-c", "8k", "--headroom", headroom
    )
    assert result.exit_code == 0, result.output
    assert shown in result.stdout


def first_of(engine: str, sku: str) -> tuple[dict, str]:
    """The JSON of `recommend llama-3.1-8b` for 4 requests of 8k tokens, and #1's command."""
    args = ("-c", "8k", "-n", "4", "-f", "json")
    result = run("recommend", "llama-3.1-8b", "--sku", sku, "--engine", engine, *args)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    return payload, payload["ranked"][0]["launch_command"]


def test_llama_cpp_offers_gguf_file_types_and_launches_for_the_target():
    # llama.cpp loads a GGUF whose weight type is fixed when the file is made: no fp8 at load,
    # but the file types llama-quantize makes; -m takes a file path; 4 requests of 8,192
    # tokens are -c 4 x 8192 -np 4, and the released BF16 fits one L4, so it is first.
    payload, command = first_of("llama.cpp", "l4")
    searched = ["released", "iq4_xs", "q4_k_m", "q5_k_m", "q6_k", "q8_0"]
    assert payload["search"]["searched"]["weights"] == searched
    assert command.startswith("llama-server -m <Llama-3.1-8B-BF16.gguf> -c 32768 -np 4 ")


def test_ollama_parallel_is_the_requests_asked_for():
    # Not the 272 slots an MI355X's memory would hold: the 4 requests asked for.
    _, command = first_of("ollama", "mi355x")
    assert "OLLAMA_CONTEXT_LENGTH=8192 OLLAMA_NUM_PARALLEL=4 " in command
    assert "meta-llama/" not in command


def test_no_log_lines_without_a_command():
    # vLLM has no --kv-cache-dtype for int4: no command, so no startup lines to compare.
    result = run(
        "recommend", "llama-3.1-8b", "--sku", "h100-sxm", "--kv-dtype", "int4", "-c", "8k",
        "-n", "1", "-f", "json",
    )  # fmt: skip
    if result.exit_code == 2:  # the engine refuses the dtype outright
        return
    first = json.loads(result.stdout)["ranked"][0]
    assert first["launch_command"] is None and first["log_lines"] == []


@pytest.mark.parametrize(("sku", "concurrency"), [("l4", 4), ("l4", 40), ("h100-sxm", 64)])
def test_llama_cpp_command_gives_the_claimed_capacity_in_report(sku, concurrency):
    # -c and -np fed back as --ctx-size and --parallel (and the GPUs the layers span as --pp,
    # the GGUF's file type and -ctk as --weight-dtype and --kv-dtype): `report` sizes the same
    # cells, holds the same requests and predicts the same log lines.
    args = ("-c", "8k", "-n", str(concurrency), "-s", sku, "--engine", "llama.cpp", "-f", "json")
    result = run("recommend", "llama-3.1-8b", *args, "--top", "1")
    assert result.exit_code == 0, result.output
    claimed = json.loads(result.stdout)["ranked"][0]
    words = shlex.split(claimed["launch_command"])
    cells, slots = words[words.index("-c") + 1], words[words.index("-np") + 1]
    assert int(slots) == concurrency and int(cells) == concurrency * 8192
    feed = ["--ctx-size", cells, "--parallel", slots, "--pp", str(claimed["pp"]), "--tp", "1"]
    feed += ["--kv-dtype", claimed["kv_dtype"]]
    if claimed["weight_dtype"] != "bf16":
        feed += ["--weight-dtype", claimed["weight_dtype"]]
    shown = run("report", "-m", "llama-3.1-8b", "-s", sku, "--engine", "llama.cpp", *feed,
                "-c", "8k", "--batch", str(concurrency), "-f", "json")  # fmt: skip
    assert shown.exit_code == 0, shown.output
    (row,) = json.loads(shown.stdout)
    assert row["max_concurrency"] == claimed["max_concurrency"] == concurrency
    assert row["log_lines"] == claimed["log_lines"]


@pytest.mark.parametrize("page", ["recommend.md", "claim.md"])
def test_the_synopsis_lists_every_engine_the_cli_accepts(page):
    import re
    from pathlib import Path

    from kvplan.engine import ENGINES

    text = (Path(__file__).resolve().parent.parent / "docs" / "commands" / page).read_text()
    (listed,) = re.findall(r"\[--engine ([\w.|]+)\]", text)
    assert listed.split("|") == list(ENGINES)


def test_a_search_the_engine_refuses_entirely_says_why_in_one_line():
    # ollama keeps the KV cache in f16 unless OLLAMA_FLASH_ATTENTION=1 (docs/faq.md, "How can
    # I set the quantization type for the K/V cache?"): q8_0 without it is no deployment at
    # all, so there is no closest miss to show, only the reason (the released weights only:
    # one point).
    args = shlex.split(
        "recommend qwen3-30b-a3b --engine ollama --sku l40s --context 32k --concurrency 4 "
        "--max-gpus 1 --kv-dtype q8_0 --no-quantization"
    )
    result = run(*args)
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ollama refuses every point searched (1)")
    assert "flash" in line and "internal error" not in line
    # The engine's reason keeps naming settings as the CLI spells them, wrapped or not.
    assert line.endswith("add --flash-attn"), line
    # With flash attention the same search has points to evaluate: a closest miss, exit 1.
    assert run(*args, "--flash-attn").exit_code == 1


THROUGHPUT_QUESTION = shlex.split(
    "recommend llama-3.1-70b --rate 5 --slo-ttft 2s --slo-tpot 50ms --sku h100-sxm,h200 "
    "--requests 300 --context 16k -f json"
)


def test_equal_cost_and_slo_share_rank_by_requests_held_then_goodput():
    # docs/commands/recommend.md: among equal costs, ... more requests held wins. An H200
    # (141 GB) holds more 16k requests than an H100 (80 GB) at the same tp 2.
    result = run(*THROUGHPUT_QUESTION)
    assert result.exit_code == 0, result.output
    ranked = json.loads(result.stdout)["ranked"]
    for better, worse in itertools.pairwise(ranked):
        same = ("cost", "weight_dtype", "kv_dtype", "nodes", "pp", "slo_met_fraction")
        if all(better[k] == worse[k] for k in same):
            held = (better["concurrency_within_headroom"], worse["concurrency_within_headroom"])
            assert held[0] >= held[1], (better, worse)
    for row in ranked[1:]:
        kinds = [loss["kind"] for loss in row["loses_by"]]
        # "order" (same figures) only where the figures the ranking weighs are the same.
        if "order" in kinds:
            first = ranked[0]
            keys = ("concurrency_within_headroom", "goodput_requests_per_s", "slo_met_fraction")
            assert all(row[k] == first[k] for k in keys), row
    first = ranked[0]
    assert first["sku"] == "h200" and first["gpus"] == 2
    h100 = next(r for r in ranked if r["sku"] == "h100-sxm" and r["kv_dtype"] == first["kv_dtype"])
    # The H100's smaller pool (11 requests of 16k within headroom against the H200's 31) shows
    # first as fewer requests held or, once steps are long enough that the short pool queues
    # some requests past the TTFT target, as a lower SLO share: either way it ranks second.
    assert h100["loses_by"][0]["kind"] in ("held", "slo_met")
    assert h100["concurrency_within_headroom"] < first["concurrency_within_headroom"]
