"""Read one YAML file into a pydantic spec, turning every failure into a one-line KvplanError.

The only place (with `hf.py`) that sees `yaml.YAMLError` and pydantic's
`ValidationError`: each error becomes `file:line: dotted.field: value …: message`,
the line found by walking the composed YAML node tree along the error's `loc`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from kvplan.errors import KvplanError

SpecT = TypeVar("SpecT", bound=BaseModel)

try:  # libyaml's C parser: same safe semantics as yaml.safe_load, several times faster
    _SafeLoader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _SafeLoader = yaml.SafeLoader


def read_yaml(path: Path) -> Any:
    """Parsed YAML of `path` (safe loader only); errors name the file, line and column."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KvplanError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise KvplanError(f"{path}: cannot read: {error}") from None
    try:
        return yaml.load(text, Loader=_SafeLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise KvplanError(f"{path}{where}: malformed YAML: {problem}") from None


def line_of(text: str, loc: tuple[int | str, ...]) -> int | None:
    """1-based line of the YAML node at `loc`, or of its nearest existing parent."""
    try:
        node = yaml.compose(text, Loader=_SafeLoader)
    except yaml.YAMLError:
        return None
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            match = next((v for k, v in node.value if k.value == key), None)
            key_node = next((k for k, v in node.value if k.value == key), None)
            if match is None:
                return line
            line, node = key_node.start_mark.line + 1, match
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def _describe(error: dict[str, Any]) -> str:
    loc = tuple(part for part in error["loc"] if not str(part).startswith("function-after"))
    field = ".".join(str(part) for part in loc) or "(top level)"
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "missing":
        return f"{field}: required field missing"
    if error["type"] == "extra_forbidden":
        return f"{field}: unknown field (value {error['input']!r})"
    value = error.get("input")
    shown = repr(value) if not isinstance(value, dict) else "{…}"
    return f"{field}: value {shown}: {message}"


def validation_lines(path: Path, error: ValidationError, text: str | None = None) -> list[str]:
    """One `file:line: field: value: message` line per error in `error`."""
    lines = []
    for item in error.errors(include_url=False):
        line = line_of(text, tuple(item["loc"])) if text is not None else None
        lines.append((line or 0, f"{path}{f':{line}' if line else ''}: {_describe(item)}"))
    return [message for _, message in sorted(lines, key=lambda pair: pair[0])]


def load_spec(path: Path, spec_type: type[SpecT]) -> SpecT:
    """`spec_type` validated from the YAML mapping in `path`; one KvplanError line per problem."""
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise KvplanError(f"{path}: expected a mapping of fields, got {type(data).__name__}")
    try:
        return spec_type.model_validate(data)
    except ValidationError as error:
        text = path.read_text(encoding="utf-8")
        raise KvplanError("\n".join(validation_lines(path, error, text))) from None
