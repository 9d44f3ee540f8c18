"""The cases of `bench/fuzz_campaign.py`: argv, environment, files to set up, and the verdict
the documentation implies (refuse, accept, or either as long as it neither crashes nor hangs).

Each generator takes a seeded `random.Random` and a scratch folder and yields `Case`s. The
expectations come from `tests/fuzz/fuzz_corpus.py` (the number oracles, bad names, bad paths).
Cases that only the engine model can refuse (a TP degree that does not divide the heads, a
zero block size, a KV budget larger than the GPU, a batch of a million) are marked
`owner="plan"` and counted apart.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import fuzz_corpus as corpus

import kvplan.limits as limits


@dataclass
class Case:
    """One run of kvplan and what must come of it."""

    kind: str  # input class: numbers, names, catalogue, config, products, outputs, argv
    argv: list[str]
    expect: str  # "refuse" (exit 2), "accept" (exit 0 or 1) or "any"
    label: str  # what was done to the input, for the report
    env: dict[str, str] = field(default_factory=dict)
    check: Callable[[str], bool] | None = None  # on stdout of an accepted run: a right value?
    owner: str = "input"  # "plan": a refusal that belongs to the engine model


def _json_field(key: str, value: int) -> Callable[[str], bool]:
    def check(stdout: str) -> bool:
        data = json.loads(stdout)
        row = data[0] if isinstance(data, list) else data
        return row.get(key) == value

    return check


def _verdict(value: object) -> str:
    return "refuse" if value is None else "accept"


# --- numbers on the command line -------------------------------------------------------------

_TOKEN_OPTIONS = (
    (["size", "gpt2", "-f", "json", "--context"], "context"),
    (["report", "--model", "gpt2", "--sku", "h100-sxm", "--tp", "1", "-f", "json", "--context"],
     "context"),
    (["claim", "gpt2", "--sku", "h100-sxm", "-f", "json", "--context"], None),
)  # fmt: skip
_BYTE_OPTIONS = ("--kv-memory", "--activation-memory", "--non-torch-memory", "--cudagraph-memory")
_COUNT_OPTIONS = (
    (["size", "gpt2", "-f", "json", "--batch"], limits.BATCH, "batch"),
    (["report", "--model", "gpt2", "--sku", "h100-sxm", "--tp", "1", "-f", "json", "--batch"],
     limits.BATCH, None),
    (["claim", "gpt2", "--sku", "h100-sxm", "-f", "json", "--batch"], limits.BATCH, None),
    (["size", "llama-3.1-8b", "-f", "json", "--pp"], limits.GPUS, None),
    (["size", "llama-3.1-8b", "-f", "json", "--dp"], limits.GPUS, None),
    (["report", "--model", "gpt2", "--sku", "h100-sxm", "--tp", "1", "-f", "json",
      "--max-num-seqs"], limits.BATCH, None),
    (["report", "--model", "gpt2", "--sku", "h100-sxm", "--tp", "1", "-f", "json",
      "--max-num-batched-tokens"], limits.BATCHED_TOKENS, None),
)  # fmt: skip
_FRACTION_OPTIONS = ("--utilization", "--bandwidth-efficiency", "--compute-efficiency")
_REPORT = ["report", "--model", "gpt2", "--sku", "h100-sxm", "--tp", "1", "-f", "json"]


def _number_value(rng: random.Random) -> str:
    if rng.random() < 0.7:
        return rng.choice(corpus.NUMBER_SPELLINGS)
    digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 12)))
    return digits + rng.choice(["", "", "k", "M", ".5", ".5k", "GiB", "GB", "MiB", " "])


def number_cases(rng: random.Random, count: int) -> Iterator[Case]:
    """Token counts, byte sizes, plain counts and fractions on the command line."""
    for _ in range(count):
        value = _number_value(rng)
        pick = rng.random()
        if pick < 0.35:
            argv, key = rng.choice(_TOKEN_OPTIONS)
            expected = corpus.expected_tokens(value)
            check = _json_field(key, expected) if key and expected is not None else None
            yield Case("numbers", [*argv, value], _verdict(expected), f"{argv[0]} --context",
                       check=check)  # fmt: skip
        elif pick < 0.6:
            option = rng.choice(_BYTE_OPTIONS)
            expected = corpus.expected_bytes(value)
            check = None
            if option == "--kv-memory" and expected is not None:
                check = _json_field("kv_budget_bytes_per_gpu", expected)
            # A KV budget above the GPU's memory is the engine model's refusal.
            owner = "plan" if option == "--kv-memory" and (expected or 0) > 80 * 10**9 else "input"
            verdict = "refuse" if owner == "plan" else _verdict(expected)
            yield Case("numbers", [*_REPORT, option, value], verdict, f"report {option}",
                       check=check if owner == "input" else None, owner=owner)  # fmt: skip
        elif pick < 0.9:
            argv, limit, key = rng.choice(_COUNT_OPTIONS)
            expected = corpus.expected_count(value, limit)
            check = _json_field(key, expected) if key and expected is not None else None
            # size materialises one entry per sequence today; the engine model fixes that.
            owner = "plan" if key == "batch" and (expected or 0) > 100_000 else "input"
            # A pp degree within the limit may still exceed the model's layers (plan's refusal).
            verdict = "any" if argv[-1] == "--pp" and expected is not None else _verdict(expected)
            yield Case("numbers", [*argv, value], verdict, f"{argv[0]} {argv[-1]}",
                       check=check, owner=owner)  # fmt: skip
        else:
            option = rng.choice(_FRACTION_OPTIONS)
            expected = corpus.expected_fraction(value)
            yield Case("numbers", [*_REPORT, option, value], _verdict(expected), f"report {option}")
    for value in ("1", "3", "5", "7", "12", "13", "24"):  # gpt2: 12 heads
        verdict = "accept" if 12 % int(value) == 0 else "refuse"
        yield Case("numbers", ["size", "gpt2", "--tp", value], verdict, "size --tp divides heads",
                   owner="plan")  # fmt: skip
    yield Case("numbers", ["size", "gpt2", "-e", "vllm", "--block-size", "0"], "refuse",
               "size --block-size 0", owner="plan")  # fmt: skip
    expected_kv = 1_000_000 * 8192 * 36864  # gpt2: 2 × 12 layers × 768 × 2 bytes per token
    yield Case("numbers", ["size", "gpt2", "--batch", "1000000", "-f", "json"], "accept",
               "size --batch 10^6 (fast)", check=_json_field("kv_bytes", expected_kv),
               owner="plan")  # fmt: skip
    for option, value in (("--draft-layers", "99999999999999999999"), ("--draft-layers", "-1"),
                          ("--vllm-version", "0." + "9" * 400), ("--vllm-version", "０.11"),
                          ("--vllm-version", ""), ("--sort", ""), ("--tp", "0"),
                          ("--tp", "99999999999999999999")):  # fmt: skip
        yield Case("numbers", [*_REPORT[:6], option, value], "refuse", f"report {option}")


# --- names ------------------------------------------------------------------------------


def name_cases(rng: random.Random) -> Iterator[Case]:
    """Bad model, SKU, dtype, engine and format names on the command line."""
    for name in corpus.BAD_NAMES:
        yield Case("names", ["size", name], "refuse", "size MODEL")
        yield Case("names", ["show", name], "refuse", "show NAME")
        yield Case("names", ["size", "gpt2", "--sku", name], "refuse", "size --sku")
        yield Case("names", ["size", "gpt2", "--weight-dtype", name], "refuse", "--weight-dtype")
        yield Case("names", ["size", "gpt2", "--kv-dtype", name], "refuse", "--kv-dtype")
        yield Case("names", ["size", "gpt2", "--engine", name], "refuse", "--engine")
        yield Case("names", ["report", "--model", name, "--sku", "h100-sxm"], "refuse",
                   "report --model")  # fmt: skip
        yield Case("names", ["claim", "gpt2", "--sku", name], "refuse", "claim --sku")
    for name in (
        "GPT2",
        "gpt2",
        "openai-community/gpt2",
        "h100",
        "../gpt2",
        "/",
        ".",
        "*",
        "gpt2.yaml",
        "model_specs/gpt2.yaml",
        "模型",
        "-",
        "--",
        "llama-3.1-8b/",
    ):
        yield Case("names", ["size", name], "any", "size MODEL (odd)")  # fmt: skip


# --- catalogue YAML ---------------------------------------------------------------------


def _yaml_mutations(
    text: str, rng: random.Random, other_name: str
) -> Iterator[tuple[str, str, str]]:
    """(mutated text, verdict, label) for one catalogue file's text."""
    for key in corpus.INT_FIELD_LIMITS:
        value, always = rng.choice(corpus.YAML_INT_MUTATIONS)
        mutated = corpus.replace_field(text, key, value)
        if mutated is not None:
            yield mutated, corpus.int_mutation_verdict(key, value, always), f"{key}: {value[:20]}"
    for key in corpus.BOOL_FIELDS:
        value, refused = rng.choice(corpus.YAML_BOOL_MUTATIONS)
        mutated = corpus.replace_field(text, key, value)
        if mutated is not None:
            verdict = "refuse" if refused else "any"
            yield mutated, verdict, f"{key}: {value}"
    first_key = re.search(r"^(\w+):[^\n]*$", text, re.MULTILINE)
    if first_key:
        duplicated = text + f"\n{first_key.group(1)}: 12345\n"
        yield duplicated, "refuse", "duplicate key"
    for name in ('""', '" padded"', '"padded "', '"two\\nlines"', '"' + "n" * 300 + '"',
                 '"tab\\there"', '"nul\\0"'):  # fmt: skip
        yield corpus.replace_field(text, "name", name) or text, "refuse", f"name: {name[:12]}"
    yield corpus.replace_field(text, "name", other_name) or text, "refuse", "name of another file"
    aliases = ", ".join(f"org/alias-{i}" for i in range(5000))
    yield corpus.replace_field(text, "aliases", f"[{aliases}]") or text, "refuse", "5000 aliases"
    yield corpus.billion_laughs() + text, "refuse", "billion laughs"
    deep = corpus.deep_yaml(rng.choice([100, 999, 5000]))
    yield f"{text}\nx_deep: {deep}\n", "refuse", "deep"
    yield text + "\nx_loop: &r [*r]\n", "refuse", "recursive alias"
    yield text + ("# " + "p" * 1000 + "\n") * 4200, "refuse", "over 4 MiB"
    yield corpus.replace_field(text, "num_layers", "100000") or text, "refuse", "num_layers: 100000"
    kinds = "[" + ", ".join(["full"] * 100000) + "]"
    plan = corpus.replace_field(text, "num_layers", "100000")
    if plan is not None:
        yield plan.replace("pattern: [full]", f"kinds: {kinds}"), "refuse", "100000 kinds"
    huge = corpus.replace_field(text, "vocab_size", "1" + "0" * 400)
    yield huge or text, "refuse", "vocab 10^400"
    yield text + "\nsource: !!python/object/apply:os.system ['true']\n", "refuse", "python tag"
    cut = rng.randrange(len(text))
    yield text[:cut], "any", "truncated"
    noisy = list(text)
    for _ in range(rng.randint(1, 5)):
        noisy.insert(rng.randrange(len(noisy) + 1), rng.choice(":-[]{}&*!|>'\"#%@` \t\n\x00é"))
    yield "".join(noisy), "any", "random characters"


def catalogue_cases(rng: random.Random, work: Path, rounds: int) -> Iterator[Case]:
    """Mutations of shipped model and SKU files, read through --catalog; odd catalogue paths."""
    for index in range(rounds):
        source = rng.choice(corpus.MODEL_FILES + corpus.SKU_FILES)
        is_model = source.parent.name == "model_specs"
        text = source.read_text()
        name = f"fz-{index}"
        text = corpus.replace_field(text, "name", name) or text
        other = rng.choice(corpus.MODEL_FILES if is_model else corpus.SKU_FILES).stem
        for number, (mutated, verdict, label) in enumerate(_yaml_mutations(text, rng, other)):
            folder = work / f"cat-{index}-{number}"
            folder.mkdir()
            (folder / "entry.yaml").write_bytes(mutated.encode("utf-8", "surrogatepass"))
            command = ["size", name] if is_model else ["size", "gpt2", "--sku", name]
            if label == "name of another file":
                # A user file may replace a shipped one, unless its name is another model's
                # alias (file stems are not always model names).
                command, verdict = ["models"], "any"
            yield Case("catalogue", [*command, "--catalog", str(folder), "-f", "json"], verdict,
                       label)  # fmt: skip
    yield from _catalogue_paths(work)


def _catalogue_paths(work: Path) -> Iterator[Case]:
    """Odd files and folders in a catalogue, and odd KVPLAN_CATALOG values."""
    good = (corpus.ROOT / "model_specs" / "gpt2.yaml").read_text().replace("name: gpt2", "name: g")
    for label, make in (
        ("fifo", lambda p: os.mkfifo(p)),
        ("symlink to /dev/zero", lambda p: p.symlink_to("/dev/zero")),
        ("symlink loop", lambda p: p.symlink_to(p)),
        ("folder named .yaml", lambda p: p.mkdir()),  # walked into like any folder
        ("empty file", lambda p: p.write_text("")),
        ("not UTF-8", lambda p: p.write_bytes(b"name: \xff\xfe\n")),
        ("a list", lambda p: p.write_text("- a\n- b\n")),
        ("two documents", lambda p: p.write_text(good + "---\n" + good)),
    ):
        folder = work / ("odd-" + re.sub(r"\W+", "-", label))
        folder.mkdir()
        make(folder / "entry.yaml")
        verdict = "any" if label == "folder named .yaml" else "refuse"
        yield Case("catalogue", ["models", "--catalog", str(folder)], verdict, label)
    twins = work / "twins"
    twins.mkdir()
    (twins / "a.yaml").write_text(good)
    (twins / "b.yaml").write_text(good)
    yield Case("catalogue", ["models", "--catalog", str(twins)], "refuse", "two files, one name")
    for value, verdict in (
        ("/", "refuse"),
        ("/nonexistent", "refuse"),
        ("x" * 300, "refuse"),
        (str(twins / "a.yaml"), "refuse"),
        (":", "accept"),
        ("", "accept"),
        ("/proc/self", "any"),
        ("/dev", "any"),
        ("/work", "any"),
    ):
        yield Case("catalogue", ["size", "gpt2"], verdict, f"KVPLAN_CATALOG={value[:20]}",
                   env={"KVPLAN_CATALOG": value})  # fmt: skip


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
_HUGE = 10**5000  # json.dumps cannot write it (Python's 4,300-digit limit): spliced as text


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
