"""The stated maximum of every number kvplan reads, the caps on files it parses, and name rules.

Each maximum sits far above any real model or GPU (the largest shipped value is in `why`), so
real input never meets one. What they stop is input that would make kvplan build a list, a loop
or a number of that size: `num_layers: 100000` expanded layer by layer, a 400-digit context,
a billion-laughs YAML file. `docs/limits.md` prints this table; a test keeps the two equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from kvplan.errors import KvplanError


@dataclass(frozen=True)
class Limit:
    """The largest value kvplan accepts for one kind of quantity."""

    what: str  # the quantity, as messages and docs name it
    unit: str  # the unit of `maximum`, plural ("tokens", "bytes")
    maximum: int
    why: str  # the largest real value, and why the cap is where it is

    def check(self, value: int, where: str) -> int:
        """`value` when it is at most `maximum`; else a one-line KvplanError naming `where`."""
        if value > self.maximum:
            raise KvplanError(f"{where}: {self.describe(value)}")
        return value

    def describe(self, value: int) -> str:
        """The refusal of `value`, without the place (validators add their own)."""
        return self.above(_short(value))

    def above(self, shown: str) -> str:
        """The refusal of a value written `shown` (a decimal prints as it was typed)."""
        unit = f" {self.unit}" if self.unit else ""
        return f"{shown} is above kvplan's limit of {self.maximum:,}{unit} ({self.why})"


def _short(value: int) -> str:
    """`value` with thousands separators, or its digit count when it is too long to print."""
    digits = len(str(abs(value))) if value.bit_length() < 4000 else None
    if digits is not None and digits <= 24:
        return f"{value:,}"
    return f"a number of {digits or 'over 1,200'} digits"


CONTEXT = Limit(
    "a context length", "tokens", 2**30, "the longest native context shipped is 1,048,576"
)
BATCH = Limit("a batch", "sequences", 2**20, "vLLM's max_num_seqs defaults to 256 or 1,024")
BATCHED_TOKENS = Limit(
    "tokens per scheduler step", "tokens", 2**30, "vLLM's default is 2,048 or 8,192"
)
BLOCK = Limit(
    "a KV block", "tokens", 2**12, "vLLM blocks are 16 to 256 tokens; hybrid models' up to about 2k"
)
LAYERS = Limit("layers", "layers", 2**12, "the deepest shipped model, Llama 3.1 405B, has 126")
HEADS = Limit("attention heads", "heads", 2**16, "the most in a shipped model is 128, DeepSeek-V3")
WIDTH = Limit(
    "a layer width: hidden, FFN, head or state size",
    "elements",
    2**20,
    "the widest shipped is Llama 3.1 405B's FFN, 53,248",
)
VOCAB = Limit("a vocabulary", "tokens", 2**24, "the largest shipped is Gemma 3's, 262,208")
EXPERTS = Limit("experts", "experts", 2**16, "the most shipped is Qwen3-Next's 512")
GPUS = Limit(
    "a parallel degree: tp, pp, GPUs per node", "GPUs", 2**12, "one NVL72 rack has 72 GPUs"
)
TILES = Limit(
    "image tiles, images or aspect ratios", "", 2**16, "Llama 3.2 Vision reads 4 tiles an image"
)
PARAMS = Limit(
    "a parameter count",
    "parameters",
    2**50,
    "the largest published count shipped is DeepSeek-R1's, 671 × 10^9",
)
MEMORY = Limit(
    "device memory", "bytes", 2**50, "1 PiB; the largest shipped GPU, MI355X, has 309 GB"
)
BANDWIDTH = Limit(
    "memory bandwidth", "bytes/s", 2**50, "1 PB/s; the fastest shipped GPUs read 8 TB/s"
)
FLOP_RATE = Limit(
    "a peak compute rate",
    "FLOP/s",
    2**60,
    "about 10^18; the fastest shipped is MI355X FP4, 1.01 × 10^16",
)
REQUEST_RATE = Limit("an arrival rate", "requests/s", 10**9, "a billion requests a second")
DURATION = Limit("a request's duration", "s", 10**9, "about 32 years")
SIMULATED_REQUESTS = Limit(
    "simulated requests (--requests, --duration × --rate, trace rows)",
    "requests",
    250_000,
    "about 20 s of simulation on a 2-core machine: 100,000 take 7 s, 1,000,000 took 57 s",
)
REPEATS = Limit("timed repeats", "repeats", 10**6, "verify times 50 steps by default")
SEED = Limit("a seed", "", 2**63 - 1, "the largest seed torch accepts as a signed 64-bit integer")
LISTED = Limit(
    "deployments listed", "deployments", 10**4, "a whole-catalogue search tries about 1,300 points"
)

# The smallest positive values kvplan reads: below them a number is a slip (0.9 written
# 0.0000009), and a simulated clock at one arrival every 10^300 s overflows its averages.
MIN_REQUEST_RATE = Fraction(1, 10**6)  # requests/s: one request in about 11.6 days
MIN_FRACTION = Fraction(1, 10**6)  # utilization, efficiencies: one millionth
MIN_PRICE = Fraction(1, 10**6)  # per GPU-hour
ROPE_FACTOR = Limit(
    "a RoPE scaling factor", "", 1024, "the largest shipped is DeepSeek-V3's YaRN factor, 40"
)
PRICE = Limit("a price", "per GPU-hour", 10**9, "a billion an hour, in any currency")
CONSERVATIVENESS = Limit(
    "a scheduling conservativeness",
    "",
    1000,
    "SGLang's default is 1.0; from 1 / 0.7 its new-token ratio is already capped at 1",
)

NUMBERS: tuple[Limit, ...] = (
    CONTEXT,
    BATCH,
    BATCHED_TOKENS,
    BLOCK,
    LAYERS,
    HEADS,
    WIDTH,
    VOCAB,
    EXPERTS,
    GPUS,
    TILES,
    PARAMS,
    MEMORY,
    BANDWIDTH,
    FLOP_RATE,
    REQUEST_RATE,
    DURATION,
    SIMULATED_REQUESTS,
    REPEATS,
    SEED,
    LISTED,
    ROPE_FACTOR,
    PRICE,
    CONSERVATIVENESS,
)

# --- text kvplan parses ---------------------------------------------------------------------

NUMBER_CHARS = 32  # "1073741824", "51.38GiB": a number longer than this is refused unread
NAME_CHARS = 128  # Hugging Face repo ids ("org/name") stay under 100
YAML_FILE_BYTES = 4 * 2**20  # the largest shipped YAML is ~3 KB; a 5,000-product file ~2 MB
JSON_FILE_BYTES = 64 * 2**20  # config.json and model.safetensors.index.json (the latter ~10 MB)
# Simulator tables (traces, token-count samples, step times): 5,000,000 rows at ~100 bytes
# a row (a trace holds at most SIMULATED_REQUESTS rows; samples and step tables more).
TABLE_FILE_BYTES = 512 * 2**20
NESTING_DEPTH = 64  # real catalogue YAML nests 3 deep, config.json 5
YAML_NODES = 100_000  # values after aliases are expanded; a shipped file has a few hundred

FILES: tuple[tuple[str, str], ...] = (
    ("a number on the command line or in a file", f"{NUMBER_CHARS} characters"),
    ("a model, SKU, product, dtype or engine name", f"{NAME_CHARS} characters"),
    ("a YAML file (catalogue, deployment)", f"{YAML_FILE_BYTES // 2**20} MiB"),
    ("a JSON file (config.json, safetensors index)", f"{JSON_FILE_BYTES // 2**20} MiB"),
    (
        "a simulator table (--trace, empirical:FILE, --step-times)",
        f"{TABLE_FILE_BYTES // 2**20} MiB",
    ),
    ("nesting of YAML or JSON", f"{NESTING_DEPTH} levels"),
    ("YAML values, aliases expanded", f"{YAML_NODES:,}"),
)


def name_problem(text: str) -> str | None:
    """Why `text` cannot be a name (model, SKU, product, dtype, engine), or None when it can.

    A name is looked up and printed: whitespace at either end, a line break or another
    control character would make two names that print the same, and an empty one is a
    value that went missing (`--sku ''`).
    """
    if not text:
        return "a name must not be empty"
    if len(text) > NAME_CHARS:
        return f"a name has at most {NAME_CHARS} characters (this one has {len(text):,})"
    if text != text.strip():
        return "a name must not start or end with whitespace"
    if not text.isprintable():
        return "a name must not contain line breaks or other control characters"
    return None


def check_name(text: str, what: str) -> str:
    """`text` when it is a valid name; else a one-line KvplanError naming `what`."""
    problem = name_problem(text)
    if problem is not None:
        shown = repr(text) if len(text) <= 40 else f"{text[:40]!r}…"
        raise KvplanError(f"{what}: {shown}: {problem}")
    return text
