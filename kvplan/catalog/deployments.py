"""Read a deployment file (`kvplan check`) and resolve its model and SKU names.

The schema lives with the guardrail (`kvplan.plan.guardrail.DeploymentFile`); this module
only reads files, so it takes the schema as an argument and never imports `plan`. YAML and
pydantic errors come out of `load_spec` as `file:line: field: …` lines; unknown model and
SKU names are reported the same way, every one in a single KvplanError.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from kvplan.catalog.store import Catalog
from kvplan.catalog.yaml_files import (
    YamlDocument,
    problem_lines,
    read_document,
    spec_from_document,
    validation_problems,
)
from kvplan.errors import KvplanError, shown
from kvplan.specs import SkuSpec

if TYPE_CHECKING:
    from kvplan.catalog.resolve import ResolvedModel


class _Product(Protocol):
    """What the loader needs of a product entry."""

    @property
    def name(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def sku(self) -> str: ...


FileT = TypeVar("FileT", bound=BaseModel)
SpecT = TypeVar("SpecT", "ResolvedModel", SkuSpec)


@dataclass(frozen=True)
class LoadedDeployments(Generic[FileT]):
    """A validated deployment file with each product's model and SKU looked up."""

    path: Path
    file: FileT
    models: tuple[ResolvedModel, ...]  # one per product, in file order (checkpoint included)
    skus: tuple[SkuSpec, ...]
    lines: tuple[int | None, ...]  # 1-based line where each product starts

    def where(self, index: int) -> str:
        """`file:line: products.i (name)`: the prefix of a message about one product."""
        line = self.lines[index]
        name = _products(self.file)[index].name
        return f"{shown(self.path)}{f':{line}' if line else ''}: products.{index} ({name})"


def _products(file: BaseModel) -> Sequence[_Product]:
    return file.products  # type: ignore[attr-defined, no-any-return]


def _lookup(
    find: Callable[[str], SpecT],
    document: YamlDocument,
    entry: _Entry,
    field: str,
) -> tuple[SpecT | None, tuple[int, str] | None]:
    """(spec, None) for a known name, (None, (line, error line)) for an unknown one."""
    try:
        return find(getattr(entry, field)), None
    except KvplanError as error:
        loc = ("products", entry.index, field)
        product = f" (product {entry.name!r})" if entry.name is not None else ""
        message = f"{document.where(loc)}: products.{entry.index}.{field}{product}: {error}"
        return None, (document.line_of(loc) or 0, message)


@dataclass(frozen=True)
class _Entry:
    """One product as written, before (or despite) the schema: its names where they are
    strings the schema took, so a file's unknown names are told with its other problems."""

    index: int
    name: str | None
    model: str | None
    sku: str | None


def _entries(data: object, invalid: set[tuple[object, ...]]) -> list[_Entry]:
    """Each product mapping of the raw document, with the fields the schema refused dropped."""
    products = data.get("products") if isinstance(data, dict) else None
    entries = []
    for index, raw in enumerate(products if isinstance(products, list) else []):
        if not isinstance(raw, dict):
            continue

        def text(field: str, raw: dict = raw, index: int = index) -> str | None:
            value = raw.get(field)
            valid = ("products", index, field) not in invalid
            return value if isinstance(value, str) and valid else None

        entries.append(_Entry(index, text("name"), text("model"), text("sku")))
    return entries


def _model(catalog: Catalog) -> Callable[[str], ResolvedModel]:
    """Products name models as the CLI takes them: catalogue names, configs, GGUF files or Hub
    ids; the checkpoint's exact weights travel with the spec, as in `size`."""
    from kvplan.catalog.resolve import resolve_model

    return lambda name: resolve_model(catalog, name)


def load_deployments(path: Path, schema: type[FileT], catalog: Catalog) -> LoadedDeployments[FileT]:
    """`schema` validated from `path`, with every product's model and SKU resolved.

    Product names must be unique: results and CI logs refer to products by name. Names are
    looked up even when other fields are wrong, so one run tells every problem.

    Raises:
        KvplanError: one line per problem (malformed YAML, a bad field, an unknown name),
            each naming the file, line and dotted field, in the file's order.
    """
    document = read_document(path)
    if not isinstance(document.data, dict):
        spec_from_document(document, schema)  # raises: not a mapping
    problems: list[tuple[int, str]] = []
    file: FileT | None = None
    invalid: set[tuple[object, ...]] = set()
    try:
        file = schema.model_validate(document.data)
    except ValidationError as error:
        problems += validation_problems(document, error)
        invalid = {tuple(item["loc"][:3]) for item in error.errors(include_url=False)}
    models: list[ResolvedModel] = []
    skus: list[SkuSpec] = []
    first_index: dict[str, int] = {}
    for entry in _entries(document.data, invalid):
        if entry.name is not None and entry.name in first_index:
            loc = ("products", entry.index, "name")
            problems.append(
                (
                    document.line_of(loc) or 0,
                    f"{document.where(loc)}: products.{entry.index}.name: value {entry.name!r}: "
                    f"repeats products.{first_index[entry.name]}'s name (product names must be "
                    "unique)",
                )
            )
        if entry.name is not None:
            first_index.setdefault(entry.name, entry.index)
        model, model_problem = (None, None)
        sku, sku_problem = (None, None)
        if entry.model is not None:
            model, model_problem = _lookup(_model(catalog), document, entry, "model")
        if entry.sku is not None:
            sku, sku_problem = _lookup(catalog.sku, document, entry, "sku")
        problems += [p for p in (model_problem, sku_problem) if p is not None]
        if model is not None and sku is not None:
            models.append(model)
            skus.append(sku)
    if problems or file is None:
        raise KvplanError("\n".join(problem_lines(document, problems)))
    lines = tuple(document.line_of(("products", i)) for i in range(len(models)))
    return LoadedDeployments(path, file, tuple(models), tuple(skus), lines)
