"""The catalogue: shipped model and SKU YAML plus user folders, with name and alias lookup."""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from kvplan.catalog.yaml_files import load_spec, read_yaml
from kvplan.errors import KvplanError
from kvplan.specs import ModelSpec, SkuSpec

CATALOG_ENV = "KVPLAN_CATALOG"


def shipped_dirs() -> tuple[Path, Path]:
    """The model and SKU folders shipped in the package."""
    models = Path(str(resources.files("kvplan.model_specs")))
    skus = Path(str(resources.files("kvplan.sku_profiles")))
    return models, skus


def _key(name: str) -> str:
    return name.strip().lower()


@dataclass
class _Index:
    """Specs of one kind by lower-cased name and alias, in load order."""

    what: str
    by_name: dict[str, ModelSpec | SkuSpec] = field(default_factory=dict)
    origin: dict[str, Path] = field(default_factory=dict)

    def add(self, spec: ModelSpec | SkuSpec, path: Path, problems: list[str]) -> None:
        """Index `spec` by name and aliases; a later file of the same name replaces the earlier."""
        for key in [k for k, s in self.by_name.items() if s.name == spec.name]:
            del self.by_name[key]
        for label in (spec.name, *spec.aliases):
            other = self.by_name.get(_key(label))
            if other is not None and other.name != spec.name:
                problems.append(
                    f"{path}: {label!r} is already a name or alias of {self.what} "
                    f"{other.name!r} ({self.origin[other.name]})"
                )
                continue
            self.by_name[_key(label)] = spec
        self.origin[spec.name] = path

    def get(self, name: str) -> ModelSpec | SkuSpec:
        spec = self.by_name.get(_key(name))
        if spec is not None:
            return spec
        names = sorted({s.name for s in self.by_name.values()})
        close = difflib.get_close_matches(_key(name), list(self.by_name), n=3, cutoff=0.5)
        suggestions = sorted({self.by_name[c].name for c in close})
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        raise KvplanError(
            f"unknown {self.what} {name!r}{hint} ({len(names)} known; "
            f"`kvplan {self.what}s` lists them)"
        )


class Catalog:
    """Models and SKUs from the shipped folders, then `extra_dirs`, then $KVPLAN_CATALOG.

    A user file with the same name as a shipped one replaces it. Every bad file is
    reported, one line each, in a single KvplanError.
    """

    def __init__(self, extra_dirs: tuple[Path, ...] = ()) -> None:
        env_dirs = tuple(Path(p) for p in os.environ.get(CATALOG_ENV, "").split(os.pathsep) if p)
        self.user_dirs = tuple(extra_dirs) + env_dirs
        self._models: _Index | None = None
        self._skus: _Index | None = None

    # --- loading ---------------------------------------------------------------------

    def _files(self) -> list[tuple[Path, str | None]]:
        """(file, kind) pairs; kind None means "tell from the content" (user folders)."""
        models_dir, skus_dir = shipped_dirs()
        files: list[tuple[Path, str | None]] = [
            (p, "model") for p in sorted(models_dir.glob("*.yaml"))
        ]
        files += [(p, "sku") for p in sorted(skus_dir.glob("*.yaml"))]
        for folder in self.user_dirs:
            if not folder.is_dir():
                raise KvplanError(f"--catalog {folder}: not a folder")
            files += [
                (p, None) for p in sorted(folder.rglob("*.yaml")) + sorted(folder.rglob("*.yml"))
            ]
        return files

    def _load(self) -> None:
        models, skus = _Index("model"), _Index("sku")
        problems: list[str] = []
        for path, kind in self._files():
            try:
                kind = kind or _kind_of(path)
                spec_type = ModelSpec if kind == "model" else SkuSpec
                spec = load_spec(path, spec_type)
            except KvplanError as error:
                problems.extend(str(error).splitlines())
                continue
            (models if kind == "model" else skus).add(spec, path, problems)
        if problems:
            raise KvplanError("\n".join(problems))
        self._models, self._skus = models, skus

    @property
    def _model_index(self) -> _Index:
        if self._models is None:
            self._load()
        assert self._models is not None
        return self._models

    @property
    def _sku_index(self) -> _Index:
        if self._skus is None:
            self._load()
        assert self._skus is not None
        return self._skus

    # --- lookup ----------------------------------------------------------------------

    def model(self, name: str) -> ModelSpec:
        """The model called `name` (catalogue name or alias, any case)."""
        fast = self._shipped_file("model", name)
        if fast is not None:
            return load_spec(fast, ModelSpec)
        spec = self._model_index.get(name)
        assert isinstance(spec, ModelSpec)
        return spec

    def sku(self, name: str) -> SkuSpec:
        """The SKU called `name`: a catalogue name or alias in any case or spacing, the device
        name nvidia-smi or torch prints ("NVIDIA H100 80GB HBM3"), a unique prefix of one
        ("H100 80GB"), or a family with a single member. A family of several asks which."""
        fast = self._shipped_file("sku", name)
        if fast is not None:
            return load_spec(fast, SkuSpec)
        index = self._sku_index
        if _key(name) in index.by_name:
            spec = index.get(name)
            assert isinstance(spec, SkuSpec)
            return spec
        return resolve_sku(name, self.skus())

    def models(self) -> list[ModelSpec]:
        """Every model, sorted by name."""
        specs = {s.name: s for s in self._model_index.by_name.values()}
        return [specs[n] for n in sorted(specs)]  # type: ignore[misc]

    def skus(self) -> list[SkuSpec]:
        """Every SKU, sorted by name."""
        specs = {s.name: s for s in self._sku_index.by_name.values()}
        return [specs[n] for n in sorted(specs)]  # type: ignore[misc]

    def skus_matching(self, name: str) -> list[SkuSpec]:
        """Every SKU of family `name` (e.g. 'h100'), or the one SKU `name` resolves to."""
        family = [s for s in self.skus() if _normal(s.family) == _normal(name)]
        return family or [self.sku(name)]

    def _shipped_file(self, kind: str, name: str) -> Path | None:
        """`<name>.yaml` in the shipped folder when no user folder could shadow it.

        This keeps `kvplan size llama-3.1-8b` from parsing the whole catalogue.
        """
        if self.user_dirs or "/" in name or name.startswith("."):
            return None
        models_dir, skus_dir = shipped_dirs()
        path = (models_dir if kind == "model" else skus_dir) / f"{_key(name)}.yaml"
        return path if path.is_file() else None


def _normal(name: str) -> str:
    """A SKU name as people type it, reduced: lower case, no vendor prefix, one '-' per gap.

    "NVIDIA H100 80GB HBM3", "h100 80gb hbm3" and "H100_80GB-HBM3" all become h100-80gb-hbm3.
    """
    text = re.sub(r"[\s_/]+", "-", name.strip().lower())
    return re.sub(r"^(nvidia|amd|intel|tesla|geforce)-", "", text).strip("-")


def resolve_sku(name: str, skus: list[SkuSpec]) -> SkuSpec:
    """The SKU `name` means among `skus`, or a KvplanError that says what it could mean."""
    wanted = _normal(name)
    labels = {s.name: [_normal(label) for label in (s.name, *s.aliases)] for s in skus}
    exact = [s for s in skus if wanted in labels[s.name]]
    if len(exact) == 1:
        return exact[0]
    family = [s for s in skus if _normal(s.family) == wanted]
    if len(family) == 1:
        return family[0]
    if family:
        members = ", ".join(s.name for s in family)
        raise KvplanError(f"sku {name!r} is a family of {len(family)} SKUs: {members}; name one")
    prefixed = [s for s in skus if any(label.startswith(wanted + "-") for label in labels[s.name])]
    if len(prefixed) == 1:
        return prefixed[0]
    candidates = prefixed or [s for s in skus if wanted.startswith(_normal(s.family))]
    if candidates:
        members = ", ".join(sorted(s.name for s in candidates))
        raise KvplanError(f"unknown sku {name!r}; did you mean one of {members}?")
    every = {label: s.name for s in skus for label in labels[s.name]}
    close = difflib.get_close_matches(wanted, list(every), n=3, cutoff=0.5)
    suggestions = sorted({every[c] for c in close})
    hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
    raise KvplanError(f"unknown sku {name!r}{hint} ({len(skus)} known; `kvplan skus` lists them)")


def _kind_of(path: Path) -> str:
    data = read_yaml(path)
    if isinstance(data, dict) and "num_layers" in data:
        return "model"
    if isinstance(data, dict) and "memory_bytes" in data:
        return "sku"
    raise KvplanError(f"{path}: neither a model (needs num_layers) nor a SKU (needs memory_bytes)")
