"""Campaign cases for the input classes found after the first campaign: numbers without a
stated range (rates, seeds, prices, RoPE factors, llama.cpp counts, engine versions), file
names with control characters, one folder named twice, config.json keys given twice and
non-finite RoPE factors, and a closed standard output. Each verdict is what docs/limits.md
states.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import fuzz_corpus as corpus
from fuzz_cases import Case

import kvplan.limits as limits

_SIMULATE = ["simulate", "gpt2", "-s", "h100-sxm", "--requests", "5", "-f", "json"]
_LLAMA_CPP = ["size", "gpt2", "-e", "llama.cpp", "-s", "h100-sxm", "-f", "json"]
_LLAMA_COUNTS = (
    ("--ctx-size", limits.CONTEXT, 1), ("--max-kv-tokens", limits.CONTEXT, 1),
    ("--parallel", limits.BATCH, 1), ("--gpu-layers", limits.LAYERS, 0),
    ("--ubatch-size", limits.BATCHED_TOKENS, 1),
)  # fmt: skip
_VERSIONS = (
    ("0.11 ", "refuse"), (" 0.11", "refuse"), ("0.11.0.0.0.0", "refuse"), ("٠.11", "refuse"),
    ("0." + "9" * 60, "refuse"), ("0.11", "accept"), ("0.10.1.1", "accept"),
)  # fmt: skip
_RELEASES = {"vllm": "0.11", "sglang": "0.5.3", "trtllm": "1.0", "ollama": "0.13"}


def _in_range(value: str, minimum: int, limit: limits.Limit) -> str:
    count = corpus.expected_count(value, limit)
    return "accept" if count is not None and count >= minimum else "refuse"


def number_cases(rng: random.Random, count: int) -> Iterator[Case]:
    """--rate, --seed, --price, --rope-scaling factors and llama.cpp counts, drawn at random."""
    for _ in range(count):
        value = rng.choice(corpus.NUMBER_SPELLINGS)
        pick = rng.random()
        if pick < 0.25:
            expected = corpus.expected_decimal(value, "0.000001", 10**9)
            verdict = "refuse" if expected is None else "any"  # a fast rate may not finish
            yield Case("numbers2", [*_SIMULATE, "--rate", value], verdict, "simulate --rate")
        elif pick < 0.4:
            verdict = _in_range(value, 0, limits.SEED)
            argv = [*_SIMULATE, "--rate", "2", "--seed", value]
            yield Case("numbers2", argv, verdict, "simulate --seed")
        elif pick < 0.55:
            expected = corpus.expected_decimal(value, "0.000001", 10**9)
            argv = ["recommend", "gpt2", "-s", "h100-sxm", "--rank", "price", "--price",
                    f"h100-sxm={value}/h", "-f", "json"]  # fmt: skip
            yield Case("numbers2", argv, "refuse" if expected is None else "any", "--price")
        elif pick < 0.7:
            expected = corpus.expected_decimal(value, "1", 1024)
            argv = ["size", "llama-3.1-8b", "--rope-scaling", f"yarn:{value}", "-f", "json"]
            yield Case("numbers2", argv, "refuse" if expected is None else "accept",
                       "--rope-scaling yarn:F")  # fmt: skip
        else:
            option, limit, minimum = rng.choice(_LLAMA_COUNTS)
            # In range, the plan may still refuse it (--gpu-layers above the model's layers).
            verdict = "any" if _in_range(value, minimum, limit) == "accept" else "refuse"
            yield Case("numbers2", [*_LLAMA_CPP, option, value], verdict, f"llama.cpp {option}")
    for engine, release in _RELEASES.items():
        for text, verdict in _VERSIONS:
            version = text.replace("0.11", release) if verdict == "accept" else text
            argv = ["size", "llama-3.1-8b", "-e", engine, "--engine-version", version]
            yield Case("numbers2", argv, verdict if verdict == "refuse" else "any",
                       f"{engine} --engine-version")  # fmt: skip


def file_cases(work: Path) -> Iterator[Case]:
    """Catalogue folders and config.json files of the second round."""
    gpt2 = (corpus.ROOT / "model_specs" / "gpt2.yaml").read_text()
    own = corpus.replace_field(corpus.replace_field(gpt2, "name", "round2") or gpt2,
                               "aliases", "[]") or gpt2  # fmt: skip
    folder = work / "round2-catalogue"
    folder.mkdir()
    (folder / "m.yaml").write_text(own)
    yield Case("catalogue2", ["models", "--catalog", str(folder), "--catalog", f"{folder}/"],
               "accept", "one folder named twice")  # fmt: skip
    yield Case("catalogue2", ["size", "round2", "--catalog", str(folder)], "accept",
               "folder in --catalog and $KVPLAN_CATALOG",
               env={"KVPLAN_CATALOG": str(folder)})  # fmt: skip
    odd = work / "round2-odd-name"
    odd.mkdir()
    (odd / "a\nb\x1b[31m.yaml").write_text("name: [unclosed\n")
    yield Case("catalogue2", ["models", "--catalog", str(odd)], "refuse",
               "file name with control characters")  # fmt: skip
    config = json.loads((corpus.ROOT / "tests/fixtures/hf/llama-3.1-8b/config.json").read_text())
    twice = json.dumps(config).replace(
        '"num_hidden_layers": 32', '"num_hidden_layers": 32, "num_hidden_layers": 3000'
    )
    variants = [("config key given twice", twice)]
    for factor in (float("inf"), 1e308, 2000):
        rope = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": 8192}
        variants.append((f"rope factor {factor}", json.dumps({**config, "rope_scaling": rope})))
    for label, text in variants:
        where = work / f"round2-{label.replace(' ', '-')}"
        where.mkdir()
        (where / "config.json").write_text(text)
        yield Case("config2", ["size", str(where)], "refuse", label)
        yield Case("config2", ["import-hf", str(where)], "refuse", label)


# Found by a per-option sweep ('' and the like for every option of every command): values the
# code read with `if value:` as "not given", and table cells Python's float() reads.
_EMPTY_REFUSED = (
    ["size", "gpt2", "--catalog"], ["size", "gpt2", "--engine-version"],
    ["size", "gpt2", "-e", "llama.cpp", "--v-dtype"],
    *([*_SIMULATE, "--rate", "1", option] for option in (
        "--duration", "--max-model-len", "--kv-window", "--host-link-bandwidth", "--slo-ttft",
        "--slo-tpot")),
    ["pools", "gpt2", "-s", "h100-sxm", "--tp", "1", "--requests", "5", "--rate", "1",
     "--slo-ttft", "2s", "--slo-tpot", "50ms", "--link-bandwidth"],
    ["recommend", "gpt2", "-s", "h100-sxm", "--rank"],
    ["verify", "gpt2", "-c", "1k", "--device"],
)  # fmt: skip


def option_sweep_cases(work: Path) -> Iterator[Case]:
    """Empty option values, and trace and step-time cells kvplan must not read as numbers."""
    for argv in _EMPTY_REFUSED:
        yield Case("options3", [*argv, ""], "refuse", f"{argv[0]} {argv[-1]} ''")
    header = "arrival_s,prompt_tokens,output_tokens\n"
    for label, cell in (("full-width digit", "４"), ("Arabic-Indic digit", "٣"),
                        ("1e308 s after the first", "1e308")):  # fmt: skip
        path = work / f"round3-trace-{len(label)}.csv"
        path.write_text(header + f"0,5,5\n{cell},5,5\n", encoding="utf-8")
        yield Case("options3", [*_SIMULATE, "--trace", str(path)], "refuse", f"arrival {label}")
    grid = "".join(f"{b},{k},{p},0.01\n" for b in (1, 8) for k in (0, 4096) for p in (0, 512))
    for label, cell in (("full-width digit", "４"), ("Arabic-Indic digit", "٣"),
                        ("1e308 s", "1e308")):  # fmt: skip
        path = work / f"round3-steps-{len(label)}.csv"
        text = "batch_size,kv_tokens,prefill_tokens,step_s\n" + grid[: -len("0.01\n")] + cell
        path.write_text(text + "\n", encoding="utf-8")
        argv = [*_SIMULATE, "--rate", "1", "--step-times", str(path)]
        yield Case("options3", argv, "refuse", f"step_s {label}")
