"""More cases of `bench/fuzz_campaign.py`: config.json, products files, output paths, random
command lines, and the simulator (see fuzz_cases.py for the `Case` and the other classes).
"""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Iterator
from pathlib import Path

import fuzz_corpus as corpus
from fuzz_cases import _REPORT, Case

import kvplan.limits as limits

# --- Hugging Face config.json -----------------------------------------------------------

_CONFIG_INTS = (
    "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
    "vocab_size", "intermediate_size", "max_position_embeddings", "head_dim",
)  # fmt: skip
_CONFIG_LIMITS = {
    "num_hidden_layers": limits.LAYERS, "hidden_size": limits.WIDTH,
    "num_attention_heads": limits.HEADS, "num_key_value_heads": limits.HEADS,
    "vocab_size": limits.VOCAB, "intermediate_size": limits.WIDTH,
    "max_position_embeddings": limits.CONTEXT, "head_dim": limits.WIDTH,
}  # fmt: skip


def _config_mutations(config: dict, rng: random.Random) -> Iterator[tuple[str, str, str]]:
    """(config.json text, verdict, label) mutations of one parsed config."""

    def dump(data: object) -> str:
        return json.dumps(data, indent=2)

    text_config = config.get("text_config")
    target = text_config if isinstance(text_config, dict) else config
    present = [k for k in _CONFIG_INTS if isinstance(target.get(k), int)]
    for key in rng.sample(present, min(3, len(present))):
        for value in (1e5, 100000, 10**30, -1, 0, "32", True, 1.5, float("nan"), [], None):
            mutated = {**target, key: value}
            data = {**config, "text_config": mutated} if target is not config else mutated
            if value is None:
                verdict = "any"
            elif value == 100000 and not isinstance(value, bool):
                verdict = "refuse" if _CONFIG_LIMITS[key].maximum < 100000 else "any"
            else:
                verdict = "refuse"
            yield dump(data), verdict, f"{key}: {value!r:.12}"
    yield dump(config)[:-1] + f', "unused_huge": {"7" * 5000}}}', "any", "5000-digit unused int"
    deep = "[" * 999 + "]" * 999
    yield dump(config)[:-1] + f', "unused_deep": {deep}}}', "any", "999-deep unused list"
    deeper = "[" * 100_000 + "]" * 100_000
    yield dump(config)[:-1] + f', "unused_deep": {deeper}}}', "any", "100k-deep unused list"
    layers = target.get("num_hidden_layers", 2) if isinstance(target, dict) else 2
    layers = layers if isinstance(layers, int) and 0 < layers < 1000 else 2
    garbages = ([[]] * layers, [1, "x"] * (layers // 2 + 1), "full", {}, ["full"] * (layers + 1),
                ["nope"] * layers, [None] * layers)  # fmt: skip
    for garbage in garbages:
        mutated = {**target, "layer_types": garbage}
        data = {**config, "text_config": mutated} if target is not config else mutated
        # Refused by the families that read layer_types, tolerated by the rest (an unused key).
        yield dump(data), "any", f"layer_types {str(garbage)[:16]}"
    for model_type in (5, [], "LLAMA", "", None, "llama\n"):
        yield dump({**config, "model_type": model_type}), "refuse", f"model_type {model_type!r}"
    for top in ([], "x", 5, None):
        yield dump(top), "refuse", f"top level {top!r}"
    text = dump(config)
    yield text[: rng.randrange(len(text))], "any", "truncated"
    yield "\ufeff" + text, "any", "byte-order mark"
    yield text.replace("true", "True", 1), "any", "Python True"


def config_cases(rng: random.Random, work: Path, rounds: int) -> Iterator[Case]:
    """Mutations of the test fixtures' config.json files; odd config paths."""
    for index in range(rounds):
        fixture = rng.choice(corpus.HF_FIXTURES)
        config = json.loads((fixture / "config.json").read_text())
        for number, (text, verdict, label) in enumerate(_config_mutations(config, rng)):
            folder = work / f"hf-{index}-{number}"
            folder.mkdir()
            (folder / "config.json").write_text(text)
            command = rng.choice(
                [
                    ["size", str(folder), "-f", "json"],
                    ["import-hf", str(folder)],
                    ["size", str(folder / "config.json"), "-f", "json"],
                ]
            )
            yield Case("config", command, verdict, label)  # fmt: skip
    odd = work / "hf-odd"
    odd.mkdir()
    os.mkfifo(odd / "fifo.json")
    (odd / "zero.json").symlink_to("/dev/zero")
    (odd / "empty").mkdir()
    (odd / "big").mkdir()
    (odd / "big" / "config.json").write_text('{"model_type": "llama"}' + " " * (65 * 2**20))
    yield Case("config", ["size", str(odd / "big")], "refuse", "over 64 MiB")
    for path in (odd / "fifo.json", odd / "zero.json", odd / "empty", odd / ("x" * 300 + ".json"),
                 odd / "missing.json"):  # fmt: skip
        yield Case("config", ["size", str(path)], "refuse", f"config path {path.name[:12]}")
        yield Case("config", ["import-hf", str(path)], "refuse", f"import-hf {path.name[:12]}")


# --- products files ---------------------------------------------------------------------

_PRODUCT_MUTATIONS = (
    ("requests_per_s", "inf", "refuse"), ("requests_per_s", ".inf", "refuse"),
    ("requests_per_s", ".nan", "refuse"), ("requests_per_s", "1e308", "refuse"),
    ("requests_per_s", "-1", "refuse"), ("requests_per_s", "0", "refuse"),
    ("requests_per_s", "yes", "refuse"), ("duration_s", "1e308", "refuse"),
    ("duration_s", ".inf", "refuse"), ("duration_s", "1:20", "refuse"),
    ("tp", "99999999999999999999", "refuse"), ("tp", "0", "refuse"), ("tp", "yes", "refuse"),
    ("tp", "0x2", "refuse"), ("tp", "2.0", "refuse"), ("pp", "100000", "refuse"),
    ("context", "1:20", "refuse"), ("context", "８k", "refuse"), ("context", "0x10", "refuse"),
    ("context", "1" + "0" * 400, "refuse"), ("context", '"1' + "0" * 400 + '"', "refuse"),
    ("context", "1.0000000000000001k", "refuse"), ("context", "-5", "refuse"),
    ("context", "0", "refuse"), ("context", "1.5k", "accept"), ("context", "8k", "accept"),
    ("context", "!!int abc", "refuse"), ("context", "2048", "accept"),
    ("concurrency", "10000000000", "refuse"), ("concurrency", "1:20", "refuse"),
    ("concurrency", "on", "refuse"), ("concurrency", "3", "accept"),
    ("name", '""', "refuse"), ("name", '"chat "', "refuse"), ("name", '"a\\nb"', "refuse"),
    ("name", "n" * 300, "refuse"), ("model", '""', "refuse"), ("model", '"llama-3.1-8b\\n"',
    "refuse"), ("model", "m" * 300, "refuse"), ("sku", '""', "refuse"), ("sku", "h100-sxm ",
    "accept"), ("engine", '""', "refuse"), ("engine", "VLLM", "accept"),
    ("kv_dtype", '""', "refuse"), ("weight_dtype", '""', "refuse"),
    ("kv_memory", "1" + "0" * 400, "refuse"), ("kv_memory", "1:20", "refuse"),
    ("kv_memory", "５GiB", "refuse"), ("utilization", "2", "refuse"),
    ("utilization", ".nan", "refuse"), ("utilization", "yes", "refuse"),
    ("vllm_version", "0." + "9" * 400, "refuse"), ("vllm_version", "0.11", "refuse"),
    ("vllm_version", '"0.11"', "accept"), ("max_num_seqs", "1" + "0" * 30, "refuse"),
    ("max_num_batched_tokens", "1" + "0" * 30, "refuse"),
    ("requests_per_s", "0." + "1" * 400, "refuse"), ("requests_per_s", "2.0000000000000001",
    "refuse"), ("requests_per_s", "0.0000001", "refuse"), ("utilization", "1e-300", "refuse"),
    ("rope_scaling", "yarn:inf", "refuse"), ("rope_scaling", "yarn:1e400", "refuse"),
    ("rope_scaling", "yarn:４", "refuse"), ("rope_scaling", "yarn:2000", "refuse"),
)  # fmt: skip


def products_cases(rng: random.Random, work: Path, rounds: int) -> Iterator[Case]:
    """Mutations of examples/products.yaml, checked with `kvplan check`."""
    text = corpus.PRODUCTS_FILE.read_text()
    entries = text.split("\n  - ")
    number = 0

    def case(body: str, verdict: str, label: str, owner: str = "input") -> Case:
        nonlocal number
        number += 1
        path = work / f"products-{number}.yaml"
        path.write_text(body)
        return Case("products", ["check", str(path), "-f", "json"], verdict, label, owner=owner)

    for _ in range(rounds):
        key, value, verdict = rng.choice(_PRODUCT_MUTATIONS)
        # the second product promises a rate; the others a concurrency
        index = 2 if key in ("requests_per_s", "duration_s") else rng.choice([1, 3])
        body = entries[index]
        if re.search(rf"^\s*{key}:", body, re.MULTILINE):
            body = re.sub(
                rf"^(\s*){key}:[^\n]*",
                lambda m, k=key, v=value: f"{m.group(1)}{k}: {v}",
                body,
                count=1,
                flags=re.MULTILINE,
            )
        else:
            body = body.rstrip("\n") + f"\n    {key}: {value}\n"
        mutated = "\n  - ".join([*entries[:index], body, *entries[index + 1 :]])
        yield case(mutated, verdict if verdict == "refuse" else "any", f"{key}: {value[:16]}")
    yield case(text.replace("concurrency: 4\n", "concurrency: 4\n    concurrency: 400\n"),
               "refuse", "duplicate concurrency")  # fmt: skip
    yield case(text.replace("tp: 1\n", "tp: 7\n", 1), "refuse", "tp 7 (32 heads)", owner="plan")
    yield case(text.replace("context: 8k\n", "context: 8k\n    kv_memory: 1TiB\n"), "refuse",
               "kv_memory 1TiB on 80 GB", owner="plan")  # fmt: skip
    yield case(corpus.billion_laughs() + text, "refuse", "billion laughs")
    yield case(text.replace("  - name: chat-8k", "  - name: assistant-32k"), "refuse",
               "repeated product name")  # fmt: skip
    many = "products:\n" + "".join(
        f"  - {{name: p{i}, model: llama-3.1-8b, sku: h100-sxm, context: 8k, concurrency: 4}}\n"
        for i in range(200)
    )
    yield case(many, "accept", "200 products")
    cut = text[: rng.randrange(len(text))]
    yield case(cut, "any", "truncated")
    yield case("products:\n" + "  - " * 2000 + "x\n", "refuse", "2000-deep list")


# --- output paths -----------------------------------------------------------------------


def output_cases(work: Path) -> Iterator[Case]:
    """Bad and good `import-hf -o` and `report --plot` paths."""
    folder = work / "outputs"
    folder.mkdir()
    config = str(corpus.ROOT / "tests" / "fixtures" / "hf" / "llama-3.1-8b")
    for path in corpus.bad_output_paths(folder):
        yield Case("outputs", ["import-hf", config, "-o", path], "refuse", f"-o {path[-16:]!r}")
        yield Case("outputs", [*_REPORT[:6], "--plot", path], "refuse", "--plot bad path")
    for name in ("m.yaml", "ünï.yaml", "-", "x" * 200 + ".yaml", ".hidden.yaml"):
        path = str(folder / name)
        yield Case("outputs", ["import-hf", config, "-o", path], "accept", f"-o {name[:16]!r}",
                   check=lambda _stdout, p=path: Path(p).is_file())  # fmt: skip


# --- random command lines ---------------------------------------------------------------

_COMMANDS = ("size", "report", "check", "claim", "show", "models", "skus", "schema", "import-hf")
_OPTIONS = (
    "--context",
    "--batch",
    "--tp",
    "--pp",
    "--kv-dtype",
    "--weight-dtype",
    "--engine",
    "--sku",
    "--model",
    "--format",
    "--lengths",
    "--block-size",
    "--kv-memory",
    "--utilization",
    "--draft-layers",
    "--sort",
    "--catalog",
    "--name",
    "-o",
    "--help",
)
_WORDS = ("gpt2", "llama-3.1-8b", "deepseek-v3", "gemma-2-9b", "h100-sxm", "l4", "all", "json",
          "csv", "md", "vllm", "sglang", "exact", "fp8", "int4", "nvfp4", "1k,2k", "1k,,2k", ",",
          "8k", "0", "-1", "", str(corpus.PRODUCTS_FILE), "models", "skus")  # fmt: skip


def argv_cases(rng: random.Random, count: int) -> Iterator[Case]:
    """Random command lines over kvplan's commands, options and words: neither crash nor hang."""
    for _ in range(count):
        argv = [rng.choice(_COMMANDS)]
        for _ in range(rng.randint(0, 6)):
            token = rng.random()
            if token < 0.5:
                argv.append(rng.choice(_OPTIONS))
            elif token < 0.85:
                argv.append(rng.choice(_WORDS))
            else:
                argv.append(rng.choice(corpus.NUMBER_SPELLINGS))
        if "--catalog" in argv or "-o" in argv:
            continue  # paths are the other classes' business
        yield Case("argv", argv, "any", "random command line")


# --- simulate and recommend (their own random stream: adding them moves no other case) -----

_SIMULATE = ["simulate", "gpt2", "-s", "h100-sxm", "-f", "json"]
_TRACE_ROWS = (
    ("0,100,10", "accept"), ("0," + "9" * 22 + ",5", "refuse"), ("0,٣٣,5", "refuse"),
    ("nan,10,10", "refuse"), ("inf,10,10", "refuse"), ("0,0,5", "refuse"), ("0,-5,5", "refuse"),
    ("0," + "1" * 200_000 + ",5", "refuse"), ("x,y,z", "refuse"), ("0,10", "refuse"),
    ("2023-11-16 18:15:46.68,10,10", "accept"), ("0,1\x000,5", "refuse"),
)  # fmt: skip
_SIM_OPTIONS = ("--rate", "--requests", "--duration", "--seed", "--instances",
                "--step-time-factor", "--kv-sinks")  # fmt: skip


def simulate_cases(rng: random.Random, work: Path, count: int) -> Iterator[Case]:
    """Hostile traces, token samples and numbers for `simulate`; numbers for `recommend`."""
    folder = work / "simulate"
    folder.mkdir()
    for index, (row, verdict) in enumerate(_TRACE_ROWS):
        path = folder / f"trace-{index}.csv"
        path.write_text("arrival_s,prompt_tokens,output_tokens\n" + row + "\n")
        yield Case("simulate", [*_SIMULATE, "--trace", str(path)], verdict, f"trace row {index}")
    deep = folder / "deep.jsonl"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    os.mkfifo(folder / "pipe.csv")
    for path in (deep, folder / "pipe.csv", Path("/dev/zero"), folder):
        yield Case("simulate", [*_SIMULATE, "--trace", str(path)], "refuse", f"trace {path.name}")
    for index, text in enumerate(("1" * 5000 + "\n", "n\n5\n٣\n", "n\n" + "9" * 40 + "\n")):
        path = folder / f"sample-{index}.txt"
        path.write_text(text)
        yield Case("simulate", [*_SIMULATE, "--rate", "1", "--requests", "5",
                                "--prompt-tokens", f"empirical:{path}"], "refuse",
                   f"empirical sample {index}")  # fmt: skip
    for _ in range(count):
        option, value = rng.choice(_SIM_OPTIONS), rng.choice(corpus.NUMBER_SPELLINGS)
        argv = [*_SIMULATE, "--requests", "20", option, value]
        argv += [] if option == "--rate" else ["--rate", "2"]
        yield Case("simulate", argv, "any", f"simulate {option}")
    for _ in range(count // 2):
        option = rng.choice(["--max-gpus", "--concurrency", "--tp", "--pp", "--headroom"])
        value = rng.choice([*corpus.NUMBER_SPELLINGS, "10%", "٣%", "9" * 5000 + "%"])
        expected = expected_count_or_share(option, value)
        yield Case("simulate", ["recommend", "gpt2", option, value, "-f", "json"], expected,
                   f"recommend {option}")  # fmt: skip


def expected_count_or_share(option: str, value: str) -> str:
    """The verdict for one `recommend` value: counts are bounded, a headroom is a share."""
    if option == "--headroom":
        return "any"
    limit = limits.BATCH if option == "--concurrency" else limits.GPUS
    return "refuse" if corpus.expected_count(value, limit) is None else "any"
