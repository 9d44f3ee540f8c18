"""Hostile inputs, and what kvplan must make of them, shared by the fuzz tests and the campaign.

`bench/fuzz_campaign.py` draws thousands of cases from here (one subprocess each); the tests
in this folder draw a bounded number through hypothesis. The oracles below restate the
documented number grammar (docs/limits.md) with `decimal.Decimal`, independently of
`kvplan.units`: a value kvplan reads differently from its documentation is a wrong value.
"""

from __future__ import annotations

import os
import re
from decimal import Decimal, localcontext
from pathlib import Path

import kvplan.limits as limits

ROOT = Path(__file__).resolve().parents[2]
MODEL_FILES = sorted((ROOT / "model_specs").glob("*.yaml"))
SKU_FILES = sorted((ROOT / "sku_profiles").glob("*.yaml"))
HF_FIXTURES = sorted(p.parent for p in (ROOT / "tests" / "fixtures" / "hf").glob("*/config.json"))
PRODUCTS_FILE = ROOT / "examples" / "products.yaml"

# --- numbers ----------------------------------------------------------------------------

# Spellings a hostile or careless user types where a number is expected.
NUMBER_SPELLINGS = (
    "8k", "128k", "1M", "1m", "4096", "1", "1.5k", "0.5k", "1.25k", " 8k ", "8 k", "08",
    "0", "-1", "-0", "+5", "1e3", "1E3", "0x10", "0o17", "0b11", "1_000", "5.0", "1.",
    ".5", "nan", "NaN", "inf", "-inf", "", " ", "\t", "k", "M", "8kk", "8K", "8KiB",
    "8GiB", "1:20", "yes", "true", "null", "1.0000000000000001k", "9007199254740993",
    "9007199254740992", "1073741824", "1073741825", "1048576", "1048577", "2147483648",
    "4294967296", "18446744073709551616", "9" * 20, "9" * 40, "1" + "0" * 400, "８k",
    "８", "٣", "５GiB", "１２８k", "½", "²", "8\u00a0k", "8\u3000k", "8k\n", "\n8k",
    "0.1k", "2.01GB", "51.38GiB", "80GB", "1TiB", "1TB", "1PiB", "1.5GiB", "0.0001B",
    "1024MiB", "4.35GB", "0.9", "1.0", "0.85", "0.000001", "2", "1.01", "0.99999999",
    "12abc", "abc", "8k8", "--1", "1e-3", "0.11", "0.6", "0.33", "v0.11", "0.10.1.1",
    "0." + "9" * 400, "0.9999999999999999999", "1" * 31, "1" * 32, "1" * 33,
)  # fmt: skip


def _decimal(text: str, suffixes: dict[str, int]) -> Decimal | None:
    """The exact value of `text` in the documented grammar, or None when it is not one."""
    if len(text) > limits.NUMBER_CHARS:
        return None
    body = text.strip(" \t")
    match = re.fullmatch(r"(-?[0-9]+(?:\.[0-9]+)?)[ \t]*([A-Za-z]*)", body, re.ASCII)
    if match is None or match.group(2).lower() not in suffixes:
        return None
    with localcontext() as context:
        context.prec = 200
        value = Decimal(match.group(1)) * suffixes[match.group(2).lower()]
    # docs/limits.md: a sign is refused, and "-0" (int() reads 0) has one.
    return None if body.startswith("-") and value == 0 else value


def expected_tokens(text: str) -> int | None:
    """Tokens `text` denotes (k = 1024, M = 1024²), or None: kvplan must refuse it."""
    value = _decimal(text, {"": 1, "k": 1024, "m": 1024**2})
    if value is None or value != value.to_integral_value():
        return None
    return int(value) if 1 <= value <= limits.CONTEXT.maximum else None


def expected_bytes(text: str, maximum: int = limits.MEMORY.maximum) -> int | None:
    """Bytes `text` denotes (a fraction of a byte rounded down), or None: refuse it."""
    units = {"": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
    units |= {"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
    value = _decimal(text, units)
    if value is None:
        return None
    if value < 0:
        return None
    whole = int(value)  # Decimal → int truncates toward zero: the floor for value ≥ 0
    return whole if whole <= maximum else None


def expected_count(text: str, limit: limits.Limit, minimum: int = 1) -> int | None:
    """A plain count (ASCII digits, spaces around), or None: refuse it."""
    if len(text) > limits.NUMBER_CHARS or not re.fullmatch(r"[ \t]*-?[0-9]+[ \t]*", text):
        return None
    value = int(text.strip(" \t"))
    if text.strip(" \t").startswith("-") and value == 0:  # "-0" has a sign
        return None
    return value if minimum <= value <= limit.maximum else None


def expected_fraction(text: str, allow_zero: bool = False) -> float | None:
    """A plain decimal in (0, 1] ([0, 1] with `allow_zero`), or None: refuse it."""
    value = _decimal(text, {"": 1})
    if value is None or value > 1 or value < 0 or (value == 0 and not allow_zero):
        return None
    if 0 < value < Decimal("0.000001"):  # docs/limits.md: the smallest fraction read
        return None
    return float(value)


def expected_decimal(text: str, minimum: str, maximum: int) -> float | None:
    """A plain decimal from `minimum` to `maximum` (a rate, a price), or None: refuse it."""
    value = _decimal(text, {"": 1})
    if value is None or not Decimal(minimum) <= value <= maximum:
        return None
    return float(value)


# --- names ------------------------------------------------------------------------------

# Names that must be refused wherever a model, SKU, dtype or engine name is expected.
BAD_NAMES = (
    "", " ", "gpt2 ", " gpt2", "gpt2\n", "\ngpt2", "gp\tt2", "gpt2\r", "gpt\x1b[31m2",
    "x" * 300, "a" * (limits.NAME_CHARS + 1), "\u200bgpt2\u2028",
)  # fmt: skip

# --- output paths -----------------------------------------------------------------------


def bad_output_paths(work: Path) -> list[str]:
    """Output paths that must be refused with one line, inside the scratch folder `work`."""
    afile = work / "afile"
    afile.write_text("not a folder\n")
    (work / "adir").mkdir(exist_ok=True)
    # Things a rename would destroy: a named pipe, a read-only file, a dangling symlink.
    fifo, readonly, dangling = work / "fifo", work / "readonly.yaml", work / "dangling"
    if not fifo.exists():
        os.mkfifo(fifo)
    if not readonly.exists():
        readonly.write_text("keep\n")
        readonly.chmod(0o444)
    if not dangling.is_symlink():
        dangling.symlink_to(work / "nowhere")
    return [
        str(fifo),
        str(readonly),
        str(dangling),
        "",
        ".",
        "..",
        "/",
        str(work / "adir"),
        str(afile / "m.yaml"),
        str(work / "missing" / "deeper" / "m.yaml"),
        str(work / ("x" * 300 + ".yaml")),
        "/proc/version",
        "/proc/self/nonexistent/m.yaml",
    ]


# --- YAML -------------------------------------------------------------------------------


def billion_laughs(levels: int = 9, width: int = 9) -> str:
    """A YAML alias bomb: `levels` anchors each listing the previous one `width` times."""
    lines = ['lol0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels + 1):
        lines.append(f"lol{level}: &l{level} [{', '.join([f'*l{level - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def deep_yaml(depth: int) -> str:
    """A flow list nested `depth` levels deep."""
    return "[" * depth + "]" * depth


def replace_field(text: str, key: str, value: str) -> str | None:
    """`text` with the first `key:` line's value replaced by `value`; None without such a line."""
    pattern = re.compile(rf"^([ \t]*){re.escape(key)}:[^\n#]*?([ \t]+#[^\n]*)?$", re.MULTILINE)
    if not pattern.search(text):
        return None
    return pattern.sub(lambda m: f"{m.group(1)}{key}: {value}{m.group(2) or ''}", text, count=1)


# Integer fields of shipped catalogue files and the stated maximum of each.
INT_FIELD_LIMITS = {
    "hidden_size": limits.WIDTH, "num_layers": limits.LAYERS, "vocab_size": limits.VOCAB,
    "intermediate_size": limits.WIDTH, "max_context": limits.CONTEXT,
    "num_heads": limits.HEADS, "num_kv_heads": limits.HEADS, "head_dim": limits.WIDTH,
    "memory_bytes": limits.MEMORY, "bandwidth_bytes_per_s": limits.BANDWIDTH,
    "max_gpus_per_node": limits.GPUS,
}  # fmt: skip
BOOL_FIELDS = ("tie_word_embeddings", "qkv_bias", "qk_norm", "o_bias")


def int_mutation_verdict(key: str, value: str, always: bool | None) -> str:
    """ "refuse" when `value` in integer field `key` must be refused, else "any"."""
    if always or (value == "0" and key != "learned_positions"):
        return "refuse"
    if value == "100000" and INT_FIELD_LIMITS[key].maximum < 100000:
        return "refuse"
    return "any"


# Replacements for an integer field: (YAML text, must it be refused whatever the field?).
YAML_INT_MUTATIONS = (
    ("1:20", True), ("0x10", True), ("0o17", True), ("017", True), ("0b101", True),
    ("-1", True), ("0", None), ("1e3", True), (".inf", True), (".nan", True), ("yes", True),
    ('""', True), ("!!int abc", True), ("!!int 0x1A", True), ("[1]", True), ("{a: 1}", True),
    ("1" + "0" * 400, True), ("!!float 1e999", True), ("4096.0", True), ('"12"', True),
    ("100000", None), ("1_000", None), ("12", None), ("~", None), ("!!binary aGVsbG8=", True),
    ("2001-12-14", True), ("!!timestamp 2001-12-14", True), ("&x 5", None),
)  # fmt: skip

# Replacements for a boolean field.
YAML_BOOL_MUTATIONS = (
    ("yes", True), ("no", True), ("on", True), ("off", True), ("y", True), ("n", True),
    ("1", True), ("0", True), ('"true"', True), ("!!bool yes", True), ("True", False),
    ("false", False), ("FALSE", False), ("~", None),
)  # fmt: skip
