"""The shipped catalogue loads, and every kind of bad file gets one exact line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvplan.catalog import Catalog
from kvplan.catalog.store import shipped_dirs
from kvplan.errors import KvplanError
from kvplan.kvmath import param_counts
from kvplan.specs import ModelSpec, SkuSpec

MODELS_DIR, SKUS_DIR = shipped_dirs()


def test_catalogue_sizes(catalog):
    assert len(catalog.models()) >= 90
    assert len(catalog.skus()) >= 24


@pytest.mark.parametrize(
    "path",
    sorted(MODELS_DIR.glob("*.yaml")) + sorted(SKUS_DIR.glob("*.yaml")),
    ids=lambda p: p.stem,
)
def test_shipped_entry_named_after_its_file_and_sourced(path, catalog):
    entry = catalog.model(path.stem) if path.parent == MODELS_DIR else catalog.sku(path.stem)
    assert entry.name == path.stem
    assert entry.source.startswith("https://")


REQUIRED_MODELS = [
    "llama-2-7b",
    "gpt2",
    "llama-3.1-405b",
    "qwen2.5-7b",
    "qwen3-8b",
    "mistral-nemo-12b",
    "yi-34b",
    "command-r",
    "falcon-7b",
    "deepseek-v2-lite",
    "deepseek-v3",
    "mistral-7b-v0.1",
    "gemma-2-9b",
    "gemma-3-27b",
    "gpt-oss-20b",
    "gpt-oss-120b",
    "phi-3-mini-4k",
    "starcoder2-3b",
    "llama-4-scout",
    "llama-4-maverick",
    "mixtral-8x7b",
    "qwen3-30b-a3b",
    "qwen3-next-80b-a3b",
    "jamba-1.5-mini",
    "deepseek-v3.2",
    "kimi-linear-48b-a3b",
    "qwen3.5-397b-a17b",
    "nemotron-h-8b",
    "granite-4.0-h-small",
    "falcon-h1-7b",
    "llama-3.2-11b-vision",
    "qwen3-0.6b",
    "qwen3-1.7b",
    "qwen3-4b",
    "qwen3-14b",
    "qwen3-coder-480b-a35b",
    "glm-4.5",
    "glm-4.5-air",
    "glm-4.6",
    "minimax-m2",
    "mistral-large-3",
    "phi-4",
    "olmo-2-7b",
    "olmo-3-7b",
    "smollm3-3b",
    "opt-13b",
    "opt-66b",
    "opt-175b",
]
REQUIRED_SKUS = [
    "a10g",
    "l4",
    "l40s",
    "a100-40gb",
    "a100-80gb",
    "h100-pcie",
    "h100-sxm",
    "h100-nvl",
    "h200",
    "h20",
    "b200",
    "b300",
    "rtx-4090",
    "rtx-5090",
    "rtx-6000-ada",
    "mi300x",
    "mi325x",
    "mi355x",
    "gaudi3",
]


@pytest.mark.parametrize("name", REQUIRED_MODELS)
def test_required_model_present(name, catalog):
    assert catalog.model(name).name == name


@pytest.mark.parametrize("name", REQUIRED_SKUS)
def test_required_sku_present(name, catalog):
    assert catalog.sku(name).memory_bytes > 0


def _published(catalog) -> list[ModelSpec]:
    return [m for m in catalog.models() if m.params]


def test_computed_params_within_one_percent_of_published(catalog):
    # `params` is the count each YAML cites in params_source (model card / safetensors metadata).
    off = {
        m.name: round(param_counts(m).total / m.params - 1, 4)
        for m in _published(catalog)
        if abs(param_counts(m).total / m.params - 1) > 0.01
    }
    assert len(_published(catalog)) >= 25
    assert off == {}


def test_aliases_and_case(catalog):
    assert catalog.model("META-LLAMA/Llama-3.1-8B-Instruct").name == "llama-3.1-8b"
    assert catalog.sku("NVIDIA H100 80GB HBM3").name == "h100-sxm"


def test_a_hub_repo_name_without_its_org(catalog):
    # llama-3.1-70b.yaml lists meta-llama/Llama-3.1-70B-Instruct among its aliases.
    assert catalog.model("Llama-3.1-70B-Instruct").name == "llama-3.1-70b"
    assert catalog.model("qwen3-8b").name == "qwen3-8b"  # a name still wins


@pytest.mark.parametrize(
    ("hub_id", "entry", "max_context"),
    [
        # Each release's own config.json max_position_embeddings:
        # Mistral-Nemo-Base-2407 128000, Mistral-Nemo-Instruct-2407 1024000;
        # Qwen2.5-{7,14,32}B 131072, their -Instruct releases 32768 (YaRN x4 past it).
        ("mistralai/Mistral-Nemo-Base-2407", "mistral-nemo-12b", 128_000),
        ("mistralai/Mistral-Nemo-Instruct-2407", "mistral-nemo-12b-instruct", 1_024_000),
        ("Qwen/Qwen2.5-7B", "qwen2.5-7b", 131_072),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b-instruct", 32_768),
        ("Qwen/Qwen2.5-14B", "qwen2.5-14b", 131_072),
        ("Qwen/Qwen2.5-14B-Instruct", "qwen2.5-14b-instruct", 32_768),
        ("Qwen/Qwen2.5-32B", "qwen2.5-32b", 131_072),
        ("Qwen/Qwen2.5-32B-Instruct", "qwen2.5-32b-instruct", 32_768),
        ("Qwen/Qwen2.5-72B-Instruct", "qwen2.5-72b", 32_768),
    ],
)
def test_an_alias_carries_its_own_releases_context(catalog, hub_id, entry, max_context):
    spec = catalog.model(hub_id)
    assert (spec.name, spec.max_context) == (entry, max_context)


def test_the_instruct_releases_keep_the_base_shapes(catalog):
    for base in ("qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b", "mistral-nemo-12b"):
        plain, instruct = catalog.model(base), catalog.model(f"{base}-instruct")
        keep = {"name", "aliases", "source", "max_context", "rope_scaling", "notes"}
        assert plain.model_dump(exclude=keep) == instruct.model_dump(exclude=keep)


def test_a_repo_name_shared_by_two_orgs_lists_both(tmp_path):
    first = GOOD_MODEL.replace("name: llama-3.1-8b", "name: ours")
    first = re.sub(r"aliases: .*", "aliases: [acme/Tiny-Chat]", first)
    second = first.replace("name: ours", "name: theirs").replace("acme/", "other/")
    folder = _write(tmp_path, "ours.yaml", first)
    _write(tmp_path, "theirs.yaml", second)
    with pytest.raises(KvplanError) as info:
        Catalog((folder,)).model("tiny-chat")
    assert str(info.value) == (
        "model 'tiny-chat' is ambiguous: acme/Tiny-Chat (ours), other/Tiny-Chat (theirs); "
        "give the org/name"
    )
    assert Catalog((folder,)).model("other/tiny-chat").name == "theirs"


def test_unknown_name_suggests(catalog):
    with pytest.raises(
        KvplanError, match=r"unknown model 'lama-3.1-8b'; did you mean .*llama-3.1-8b"
    ):
        catalog.model("lama-3.1-8b")
    with pytest.raises(KvplanError, match=r"unknown sku 'h100-sxn'; did you mean .*h100-sxm"):
        catalog.sku("h100-sxn")


def test_family_filter(catalog):
    names = {s.name for s in catalog.skus_matching("h100")}
    assert {"h100-sxm", "h100-pcie", "h100-nvl"} <= names


GOOD_MODEL = (MODELS_DIR / "llama-3.1-8b.yaml").read_text()


def _write(tmp_path: Path, name: str, text: str) -> Path:
    folder = tmp_path / "cat"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    return folder


def _errors(folder: Path) -> list[str]:
    with pytest.raises(KvplanError) as info:
        Catalog((folder,)).models()
    return str(info.value).splitlines()


def test_malformed_yaml_line_and_column(tmp_path):
    folder = _write(tmp_path, "bad.yaml", "name: x\nattention: [unclosed\n")
    (line,) = _errors(folder)
    assert line.startswith(f"{folder / 'bad.yaml'}:3:1: malformed YAML")


def test_unknown_key_named_with_line(tmp_path):
    text = GOOD_MODEL.replace("name: llama-3.1-8b", "name: mine").replace(
        "  num_kv_heads: 8\n", "  num_kv_heads: 8\n  head_dims: 64\n"
    )
    folder = _write(tmp_path, "mine.yaml", text)
    (line,) = _errors(folder)
    line_no = text.splitlines().index("  head_dims: 64") + 1
    assert (
        line == f"{folder / 'mine.yaml'}:{line_no}: attention.head_dims: unknown field (value 64)"
    )


def test_zero_and_negative_sizes(tmp_path):
    text = (
        GOOD_MODEL.replace("name: llama-3.1-8b", "name: mine")
        .replace("num_layers: 32", "num_layers: 0")
        .replace("  num_kv_heads: 8", "  num_kv_heads: -8")
    )
    folder = _write(tmp_path, "mine.yaml", text)
    lines = _errors(folder)
    assert any(": num_layers: value 0: Input should be greater than 0" in x for x in lines)
    assert any(
        ": attention.num_kv_heads: value -8: Input should be greater than 0" in x for x in lines
    )


def test_window_larger_than_context(tmp_path):
    text = (MODELS_DIR / "mistral-7b-v0.1.yaml").read_text()
    text = text.replace("name: mistral-7b-v0.1", "name: mine")
    text = "\n".join(
        "  sliding_window: 65536" if line.strip().startswith("sliding_window:") else line
        for line in text.splitlines()
    )
    folder = _write(tmp_path, "mine.yaml", text)
    (line,) = _errors(folder)
    assert "layers.sliding_window 65536 is larger than max_context 32768" in line


def test_every_bad_file_reported(tmp_path):
    folder = _write(tmp_path, "a.yaml", "name: [")
    _write(tmp_path, "b.yaml", "just a string")
    lines = _errors(folder)
    assert len(lines) == 2
    assert "a.yaml" in lines[0] and "b.yaml" in lines[1]


def test_user_entry_overrides_shipped(tmp_path):
    text = GOOD_MODEL.replace("num_layers: 32", "num_layers: 16")
    folder = _write(tmp_path, "llama-3.1-8b.yaml", text)
    assert Catalog((folder,)).model("llama-3.1-8b").num_layers == 16


def test_user_entry_takes_a_shipped_alias(tmp_path):
    # `kvplan import-hf google/gemma-3-4b-it` writes an entry whose alias the shipped
    # gemma-3-4b also carries; the catalogue refused the whole folder for it.
    text = (MODELS_DIR / "gemma-3-4b.yaml").read_text().replace("name: gemma-3-4b", "name: mine")
    text = text.replace(
        "aliases: [google/gemma-3-4b-pt, google/gemma-3-4b-it]", "aliases: [google/gemma-3-4b-it]"
    )
    folder = _write(tmp_path, "mine.yaml", text)
    catalog = Catalog((folder,))
    assert catalog.model("google/gemma-3-4b-it").name == "mine"
    # The shipped entry keeps its name and its other alias.
    assert catalog.model("gemma-3-4b").name == "gemma-3-4b"
    assert catalog.model("google/gemma-3-4b-pt").name == "gemma-3-4b"
    assert {"mine", "gemma-3-4b"} <= {m.name for m in catalog.models()}


def test_a_user_alias_naming_a_shipped_model_is_still_refused(tmp_path):
    text = GOOD_MODEL.replace("name: llama-3.1-8b", "name: mine").replace(
        "aliases: [", "aliases: [gemma-3-4b, "
    )
    assert "gemma-3-4b, " in text
    (line,) = _errors(_write(tmp_path, "mine.yaml", text))
    assert "'gemma-3-4b' is already a name or alias of model 'gemma-3-4b'" in line


def test_two_user_entries_of_one_alias_are_refused(tmp_path):
    text = (MODELS_DIR / "gemma-3-4b.yaml").read_text()
    _write(tmp_path, "a.yaml", text.replace("name: gemma-3-4b", "name: mine-a"))
    folder = _write(tmp_path, "b.yaml", text.replace("name: gemma-3-4b", "name: mine-b"))
    lines = _errors(folder)
    assert any("is already a name or alias of model 'mine-a'" in line for line in lines)


def test_user_sku(tmp_path):
    text = (SKUS_DIR / "h100-sxm.yaml").read_text().replace("name: h100-sxm", "name: my-gpu")
    text = text.replace(
        'aliases: ["NVIDIA H100 80GB HBM3", "H100 SXM5 80GB", "H100 SXM"]', "aliases: []"
    )
    folder = _write(tmp_path, "my-gpu.yaml", text)
    assert isinstance(Catalog((folder,)).sku("my-gpu"), SkuSpec)


def test_missing_catalog_folder(tmp_path):
    with pytest.raises(KvplanError, match="not a folder"):
        Catalog((tmp_path / "nope",)).models()


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("h100-sxm", "h100-sxm"),
        ("H100 SXM", "h100-sxm"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),  # nvidia-smi / torch device name
        ("H100 80GB", "h100-sxm"),  # a unique prefix of the device name
        ("h100-80gb", "h100-sxm"),
        ("nvidia_h100_pcie", "h100-pcie"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("l40s", "l40s"),
        ("mi300", "mi300x"),  # a family of one
        ("GeForce RTX 4090", "rtx-4090"),
    ],
)
def test_sku_names_people_type(catalog, typed, expected):
    assert catalog.sku(typed).name == expected


def test_a_family_of_several_asks_which(catalog):
    with pytest.raises(KvplanError) as error:
        catalog.sku("h100")
    assert str(error.value) == (
        "sku 'h100' is a family of 3 SKUs: h100-nvl, h100-pcie, h100-sxm; name one"
    )
    assert [s.name for s in catalog.skus_matching("H100")] == ["h100-nvl", "h100-pcie", "h100-sxm"]


def test_sku_suggestions_come_from_the_same_family(catalog):
    with pytest.raises(KvplanError, match=r"did you mean one of h100-nvl, h100-pcie, h100-sxm\?"):
        catalog.sku("h100-sxn")


# --- the newer layer kinds and sections: each missing or inconsistent piece is one exact line ---


def _shipped_as_mine(stem: str) -> str:
    """A shipped model's YAML renamed to `mine`, with no aliases to collide with the shipped one."""
    text = (MODELS_DIR / f"{stem}.yaml").read_text().replace(f"name: {stem}\n", "name: mine\n")
    return "\n".join(
        "aliases: []" if line.startswith("aliases:") else line for line in text.splitlines()
    )


def _without_section(text: str, key: str) -> str:
    """`text` without the top-level mapping `key:` and its indented lines."""
    lines, skipping = [], False
    for line in text.splitlines():
        if line.startswith(f"{key}:"):
            skipping = True
            continue
        if skipping and line.startswith("  "):
            continue
        skipping = False
        lines.append(line)
    return "\n".join(lines)


def _line_of(text: str, prefix: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith(prefix))


def _one_error(tmp_path: Path, text: str, at: str, where: str, message: str) -> None:
    """`text` as mine.yaml gives exactly one line: the line of `at`, `where`, `message`."""
    folder = _write(tmp_path, "mine.yaml", text)
    (line,) = _errors(folder)
    path = folder / "mine.yaml"
    assert line == f"{path}:{_line_of(text, at)}: {where}: value {{…}}: {message}"


def _good_as_mine(extra: str) -> str:
    text = GOOD_MODEL.replace("name: llama-3.1-8b", "name: mine") + "\n" + extra
    return "\n".join("aliases: []" if x.startswith("aliases:") else x for x in text.splitlines())


@pytest.mark.parametrize(
    ("stem", "section", "message"),
    [
        ("llama-3.2-11b-vision", "vision", "cross layers need a vision section"),
        ("falcon-h1-7b", "state", "parallel layers need a state section"),
    ],
)
def test_kind_without_its_section(tmp_path, stem, section, message):
    text = _without_section(_shipped_as_mine(stem), section)
    _one_error(tmp_path, text, "name:", "(top level)", message)


def test_vision_without_cross_layers(tmp_path):
    vision = (MODELS_DIR / "llama-3.2-11b-vision.yaml").read_text()
    text = _good_as_mine(vision[vision.index("vision:\n") : vision.index("layers:\n")])
    message = "a vision section is given but no layer is cross"
    _one_error(tmp_path, text, "name:", "(top level)", message)


def test_mixer_only_layers_need_mlp_layers(tmp_path):
    text = _good_as_mine("ffn_per_mixer_layer: false\n")
    message = "ffn_per_mixer_layer is false but no layer is mlp (no FFN at all)"
    _one_error(tmp_path, text, "name:", "(top level)", message)


def test_mamba2_conv_channels_must_add_up(tmp_path):
    # Nemotron-H-8B: 8192 + 2 x 8 groups x 128 = 10_240 conv channels, not 10_000.
    text = _shipped_as_mine("nemotron-h-8b").replace("conv_channels: 10240", "conv_channels: 10000")
    message = (
        "mamba2 conv_channels 10000 is not inner_size + 2 x num_groups x ssm_state_size = 10240"
    )
    _one_error(tmp_path, text, "state:", "state", message)


def test_indexer_needs_the_query_latent(tmp_path):
    text = _shipped_as_mine("deepseek-v3.2").replace("  q_lora_rank: 1536\n", "")
    message = "mla.indexer needs q_lora_rank (its queries project from it)"
    _one_error(tmp_path, text, "mla:", "mla", message)
