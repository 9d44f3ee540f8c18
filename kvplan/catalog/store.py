"""The catalogue: shipped model and SKU YAML plus user folders, with name and alias lookup."""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from kvplan.catalog.yaml_files import YamlDocument, load_spec, read_document, spec_from_document
from kvplan.errors import KvplanError, UnknownNameError, shown
from kvplan.limits import check_name
from kvplan.specs import ModelSpec, SkuSpec

CATALOG_ENV = "KVPLAN_CATALOG"
# Entries walked under one user folder: a catalogue is tens of files; a mistaken
# KVPLAN_CATALOG=/ would otherwise walk the whole disk.
MAX_FOLDER_ENTRIES = 10_000
# Close-match suggestions compare the name with every key (difflib is quadratic in length);
# past this many keys only names, not aliases, are compared.
MAX_SUGGESTION_KEYS = 2_000


def shipped_dirs() -> tuple[Path, Path]:
    """The model and SKU folders shipped in the package."""
    models = Path(str(resources.files("kvplan.model_specs")))
    skus = Path(str(resources.files("kvplan.sku_profiles")))
    return models, skus


def _same(folder: Path) -> str:
    """What tells two names of one folder apart from two folders: its resolved path."""
    try:
        return os.path.realpath(folder)
    except (OSError, ValueError):  # a NUL byte, a loop: kept as given, refused when read
        return str(folder)


def _key(name: str) -> str:
    return name.strip().lower()


@dataclass
class _Index:
    """Specs of one kind by lower-cased name and alias, in load order."""

    what: str
    by_name: dict[str, ModelSpec | SkuSpec] = field(default_factory=dict)
    origin: dict[str, Path] = field(default_factory=dict)
    shipped: set[str] = field(default_factory=set)  # names whose spec is the shipped one
    # The keys each name holds in by_name: replacing a spec drops its keys without scanning
    # every key (a scan per file made a folder of 10,000 files take minutes).
    keys: dict[str, list[str]] = field(default_factory=dict)

    def add(
        self, spec: ModelSpec | SkuSpec, path: Path, problems: list[str], shipped: bool
    ) -> None:
        """Index `spec` by name and aliases.

        A user file may replace a shipped spec of the same name (that is how a user corrects
        one), and takes a shipped spec's alias it also gives; two shipped files, or two user
        files, of one name or alias are an error naming both.
        """
        if spec.name in self.origin and (shipped or spec.name not in self.shipped):
            problems.append(
                f"{shown(path)}: {self.what} {spec.name!r} is also defined in "
                f"{shown(self.origin[spec.name])} (names must be unique; remove or rename one)"
            )
            return
        for key in self.keys.pop(spec.name, []):
            del self.by_name[key]
        self.shipped.discard(spec.name)
        if shipped:
            self.shipped.add(spec.name)
        for label in (spec.name, *spec.aliases):
            other = self.by_name.get(_key(label))
            if other is not None and self._user_takes_alias(other, label, shipped):
                self.keys[other.name].remove(_key(label))
                other = None
            if other is not None and other.name != spec.name:
                problems.append(
                    f"{shown(path)}: {label!r} is already a name or alias of {self.what} "
                    f"{other.name!r} ({shown(self.origin[other.name])})"
                )
                continue
            if other is None:
                self.keys.setdefault(spec.name, []).append(_key(label))
            self.by_name[_key(label)] = spec
        self.origin[spec.name] = path

    def _user_takes_alias(self, other: ModelSpec | SkuSpec, label: str, shipped: bool) -> bool:
        """Whether a user spec's `label` takes over from the shipped spec `other`: a user's
        entry (`kvplan import-hf` of a Hub id the catalogue already ships) is what they mean
        by that id. A shipped spec's own name stays its own."""
        return (
            not shipped
            and other.name in self.shipped
            and _key(label) != _key(other.name)
            and _key(label) in self.keys.get(other.name, [])
        )

    def specs(self) -> dict[str, ModelSpec | SkuSpec]:
        """Each spec once, by name, in load order (`by_name` holds it under every alias)."""
        return {spec.name: spec for spec in self.by_name.values()}

    def get(self, name: str) -> ModelSpec | SkuSpec:
        spec = self.by_name.get(_key(name))
        if spec is not None:
            return spec
        names = sorted(self.specs())
        keys = list(self.by_name) if len(self.by_name) <= MAX_SUGGESTION_KEYS else names
        close = difflib.get_close_matches(_key(name), keys, n=3, cutoff=0.5)
        suggestions = sorted({self.by_name[_key(c)].name for c in close})
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        raise UnknownNameError(
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
        named = [(Path(p), "--catalog") for p in extra_dirs]
        named += [(p, f"${CATALOG_ENV}") for p in env_dirs]
        # One folder named twice (`--catalog D --catalog D`, or in $KVPLAN_CATALOG too) is read
        # once: its files would otherwise clash with themselves as duplicate names.
        unique: dict[str, tuple[Path, str]] = {}
        for folder, origin in named:
            unique.setdefault(_same(folder), (folder, origin))
        self.user_dirs = tuple(p for p, _ in unique.values())
        # Where each folder was named, for messages: an option the user typed, or a variable
        # set long ago in a shell profile.
        self._origins = [origin for _, origin in unique.values()]
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
        for folder, origin in zip(self.user_dirs, self._origins, strict=True):
            files += [(p, None) for p in _yaml_files_under(folder, origin)]
        return files

    def _load(self) -> None:
        models, skus = _Index("model"), _Index("sku")
        problems: list[str] = []
        for path, kind in self._files():
            try:
                shipped = kind is not None
                if shipped:
                    spec = _shipped_spec(path, kind)
                else:
                    document = read_document(path)
                    kind = _kind_of(document)
                    spec_type = ModelSpec if kind == "model" else SkuSpec
                    spec = spec_from_document(document, spec_type)
            except KvplanError as error:
                problems.extend(str(error).splitlines())
                continue
            (models if kind == "model" else skus).add(spec, path, problems, shipped)
        problems += _aliases_naming_families(skus)
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
        check_name(name, "model")
        fast = self._shipped_file("model", name)
        if fast is not None:
            return _shipped_spec(fast, "model")  # type: ignore[return-value]
        index = self._model_index
        if _key(name) not in index.by_name and "/" not in name:
            bare = _by_repo_name(index, name)
            if bare is not None:
                return bare
        spec = index.get(name)
        assert isinstance(spec, ModelSpec)
        return spec

    def sku(self, name: str) -> SkuSpec:
        """The SKU called `name`: a catalogue name or alias in any case or spacing, the device
        name nvidia-smi or torch prints ("NVIDIA H100 80GB HBM3"), a unique prefix of one
        ("H100 80GB"), or a family with a single member. A family of several asks which."""
        check_name(name, "sku")
        _refuse_edge_slash(name)
        fast = self._shipped_file("sku", name)
        if fast is not None:
            return _shipped_spec(fast, "sku")  # type: ignore[return-value]
        index = self._sku_index
        if _key(name) in index.by_name:
            spec = index.get(name)
            assert isinstance(spec, SkuSpec)
            return spec
        return resolve_sku(name, self.skus())

    def models(self) -> list[ModelSpec]:
        """Every model, sorted by name."""
        specs = self._model_index.specs()
        return [specs[n] for n in sorted(specs)]  # type: ignore[misc]

    def skus(self) -> list[SkuSpec]:
        """Every SKU, sorted by name."""
        specs = self._sku_index.specs()
        return [specs[n] for n in sorted(specs)]  # type: ignore[misc]

    def skus_matching(self, name: str) -> list[SkuSpec]:
        """The SKU whose name or alias `name` is, else every SKU of family `name` (e.g.
        'h100'), else the one SKU `name` resolves to. A family may share its name with one of
        its SKUs (h200 and h200-nvl are family h200): the exact name means that SKU."""
        check_name(name, "sku")
        _refuse_edge_slash(name)
        skus = self.skus()
        wanted = _normal(name)
        exact = [s for s in skus if wanted in {_normal(x) for x in (s.name, *s.aliases)}]
        if len(exact) == 1:
            return exact
        family = [s for s in skus if _normal(s.family) == wanted]
        return family or [self.sku(name)]

    def skus_named(self, names: list[str]) -> list[SkuSpec]:
        """The SKUs `names` mean (`skus_matching` of each), in order, each once: a SKU named
        twice, or by name and by its family, is one row of a report, not two."""
        found = {s.name: s for name in names for s in self.skus_matching(name)}
        return list(found.values())

    def _shipped_file(self, kind: str, name: str) -> Path | None:
        """`<name>.yaml` in the shipped folder when no user folder could shadow it.

        This keeps `kvplan size llama-3.1-8b` from parsing the whole catalogue.
        """
        if self.user_dirs or "/" in name or name.startswith("."):
            return None
        models_dir, skus_dir = shipped_dirs()
        path = (models_dir if kind == "model" else skus_dir) / f"{_key(name)}.yaml"
        return path if path.is_file() else None


def _by_repo_name(index: _Index, name: str) -> ModelSpec | None:
    """The model whose Hub-id alias ends in `/name` (any case): people type a Hub repo's
    name without its org ("Llama-3.1-70B-Instruct"). None when no alias ends so.

    Raises:
        KvplanError: several models carry such an alias (the message lists their ids).
    """
    tail = "/" + _key(name)
    found = {
        alias: spec
        for spec in index.specs().values()
        for alias in spec.aliases
        if _key(alias).endswith(tail) and isinstance(spec, ModelSpec)
    }
    if len({spec.name for spec in found.values()}) > 1:
        ids = ", ".join(f"{alias} ({spec.name})" for alias, spec in sorted(found.items()))
        raise KvplanError(f"model {name!r} is ambiguous: {ids}; give the org/name")
    return next(iter(found.values()), None)  # type: ignore[return-value]


def _refuse_edge_slash(name: str) -> None:
    """A '/' joins the words of a device name; one at either end is a typo (a folder's
    tab-completion), which `_normal` would otherwise drop and resolve.

    Raises:
        KvplanError: `name` begins or ends with '/'.
    """
    text = name.strip()
    if text.startswith("/") or text.endswith("/"):
        bare = text.strip("/").strip()
        hint = f"; did you mean {bare!r}?" if bare else ""
        raise KvplanError(f"unknown sku {name!r}: a SKU name does not begin or end with '/'{hint}")


def _normal(name: str) -> str:
    """A SKU name as people type it, reduced: lower case, no vendor prefix, one '-' per gap.

    "NVIDIA H100 80GB HBM3", "h100 80gb hbm3" and "H100_80GB-HBM3" all become h100-80gb-hbm3.
    """
    text = re.sub(r"[\s_/]+", "-", name.strip().lower())
    return re.sub(r"^(nvidia|amd|intel|tesla|geforce)-", "", text).strip("-")


def _aliases_naming_families(index: _Index) -> list[str]:
    """An alias that is a family's name would pick one SKU where the family means several
    (`--sku a100`: which A100?): single-SKU commands ask which, reports take them all."""
    specs = {name: s for name, s in index.specs().items() if isinstance(s, SkuSpec)}
    families: dict[str, set[str]] = {}
    for spec in specs.values():
        families.setdefault(_normal(spec.family), set()).add(spec.name)
    problems = []
    for spec in specs.values():
        for alias in spec.aliases:
            if _normal(alias) == _normal(spec.name):
                continue  # what the name already says ("NVIDIA H200" for h200)
            members = families.get(_normal(alias), {spec.name})
            if members != {spec.name}:
                problems.append(
                    f"{index.origin[spec.name]}: alias {alias!r} of sku {spec.name!r} names the "
                    f"family of {', '.join(sorted(members))}; remove it (a family name asks "
                    "which SKU, or expands in reports)"
                )
    return problems


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


# Shipped specs by (file, size, modification time): a process that builds several catalogues
# (the Python API, a test run) parses the ~130 shipped files once; an edited file is re-read.
_SHIPPED: dict[tuple[Path, int, int], ModelSpec | SkuSpec] = {}


def _shipped_spec(path: Path, kind: str) -> ModelSpec | SkuSpec:
    """The spec of one shipped file, parsed once per version of the file."""
    try:
        info = path.stat()
    except OSError as error:
        raise KvplanError(f"{shown(path)}: cannot read: {error.strerror}") from None
    key = (path, info.st_size, info.st_mtime_ns)
    if key not in _SHIPPED:
        _SHIPPED[key] = load_spec(path, ModelSpec if kind == "model" else SkuSpec)
    return _SHIPPED[key]


def _kind_of(document: YamlDocument) -> str:
    data = document.data
    if isinstance(data, dict) and "num_layers" in data:
        return "model"
    if isinstance(data, dict) and "memory_bytes" in data:
        return "sku"
    raise KvplanError(
        f"{shown(document.path)}: neither a model (needs num_layers) nor a SKU (needs memory_bytes)"
    )


def _yaml_files_under(folder: Path, origin: str) -> list[Path]:
    """Every *.yaml / *.yml file under `folder` (named by `origin`), sorted; symlinked
    folders are not entered.

    Raises:
        KvplanError: `folder` is missing or not a folder, holds a folder named *.yaml or
            *.yml, or holds more than MAX_FOLDER_ENTRIES entries (a catalogue is tens of
            files).
    """
    label = f"{origin} {shown(folder)}"
    try:
        if not folder.is_dir():
            missing = not folder.exists() and not folder.is_symlink()
            raise KvplanError(f"{label}: not a folder{' (no such path)' if missing else ''}")
    except (OSError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) else str(error)
        raise KvplanError(f"{label}: cannot read: {reason}") from None
    found: list[Path] = []
    entries = 0
    for root, dirs, names in os.walk(folder):
        entries += len(dirs) + len(names)
        if entries > MAX_FOLDER_ENTRIES:
            raise KvplanError(
                f"{label}: more than {MAX_FOLDER_ENTRIES:,} entries; point it at a folder of "
                "catalogue YAML files"
            )
        dirs.sort()
        named_like_yaml = [d for d in dirs if d.endswith((".yaml", ".yml"))]
        if named_like_yaml:  # meant as an entry, it would be skipped without a word
            raise KvplanError(
                f"{shown(Path(root) / named_like_yaml[0])}: a folder, not a YAML file; a "
                "catalogue entry is a .yaml file (rename the folder)"
            )
        found += [Path(root) / n for n in names if n.endswith((".yaml", ".yml"))]
    return sorted(found)
