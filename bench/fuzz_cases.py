"""The cases of `bench/fuzz_campaign.py`: argv, environment, files to set up, and the verdict
the documentation implies (refuse, accept, or either as long as it neither crashes nor hangs).
Numbers, names and catalogue files here; the file-based classes in fuzz_cases_files.py.

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
