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

from pydantic import BaseModel

from kvplan.catalog.store import Catalog
from kvplan.catalog.yaml_files import YamlDocument, read_document, spec_from_document
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
    index: int,
    product: _Product,
    field: str,
) -> tuple[SpecT | None, str | None]:
    """(spec, None) for a known name, (None, one error line) for an unknown one."""
    try:
        return find(getattr(product, field)), None
    except KvplanError as error:
        where = document.where(("products", index, field))
        return None, f"{where}: products.{index}.{field} (product {product.name!r}): {error}"


def _model(catalog: Catalog) -> Callable[[str], ResolvedModel]:
    """Products name models as the CLI takes them: catalogue names, configs, GGUF files or Hub
    ids; the checkpoint's exact weights travel with the spec, as in `size`."""
    from kvplan.catalog.resolve import resolve_model

    return lambda name: resolve_model(catalog, name)


def load_deployments(path: Path, schema: type[FileT], catalog: Catalog) -> LoadedDeployments[FileT]:
    """`schema` validated from `path`, with every product's model and SKU resolved.

    Product names must be unique: results and CI logs refer to products by name.

    Raises:
        KvplanError: one line per problem (malformed YAML, a bad field, an unknown name),
            each naming the file, line and dotted field.
    """
    document = read_document(path)
    file = spec_from_document(document, schema)
    models: list[ResolvedModel] = []
    skus: list[SkuSpec] = []
    problems: list[str] = []
    first_index: dict[str, int] = {}
    for index, product in enumerate(_products(file)):
        if product.name in first_index:
            problems.append(
                f"{document.where(('products', index, 'name'))}: products.{index}.name: value "
                f"{product.name!r}: repeats products.{first_index[product.name]}'s name "
                "(product names must be unique)"
            )
        first_index.setdefault(product.name, index)
        model, model_problem = _lookup(_model(catalog), document, index, product, "model")
        sku, sku_problem = _lookup(catalog.sku, document, index, product, "sku")
        problems += [p for p in (model_problem, sku_problem) if p is not None]
        if model is not None and sku is not None:
            models.append(model)
            skus.append(sku)
    if problems:
        raise KvplanError("\n".join(problems))
    lines = tuple(document.line_of(("products", i)) for i in range(len(models)))
    return LoadedDeployments(path, file, tuple(models), tuple(skus), lines)
