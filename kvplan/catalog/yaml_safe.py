"""A YAML loader for hostile input: safe tags only, YAML 1.2 scalars, bounded, no duplicate keys.

PyYAML's safe loader is safe from code execution, not from mistakes or bombs:

- It reads YAML 1.1 scalars: `1:20` is the sexagesimal integer 80, `yes`/`no`/`on`/`off` are
  booleans, `017` is octal 15 and `2024-01-01` a date. Here only `true`/`false` are booleans
  and a plain integer is decimal digits (`_` between groups allowed: `8_000_000_000_000`);
  anything else stays a string, which the schema then refuses, naming the field and value.
- A repeated key silently keeps the last value; here it is refused, naming both lines.
- Aliases share one object, so a "billion laughs" file is small to load but every walk over
  it (validation, error messages) is exponential: the values an expanded walk would visit are
  counted on the node graph before anything is built, and refused past a budget, as are
  recursive aliases and nesting deeper than kvplan.limits.NESTING_DEPTH.
- `!!int abc` raises ValueError from the constructor; here every construction failure is a
  YAMLError with the node's position, like any other malformed YAML.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from kvplan import limits

try:  # libyaml's C parser: same safe semantics as yaml.SafeLoader, several times faster
    _Base: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Base = yaml.SafeLoader

# No leading zero: YAML 1.1 reads 017 as octal 15, YAML 1.2 as 17; kvplan refuses to guess.
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*(?:_[0-9]+)*)", re.ASCII)
_FLOAT = re.compile(
    r"[-+]?[0-9]+(?:_[0-9]+)*\.[0-9]*(?:[eE][-+]?[0-9]+)?"  # 1.  1.5  1.5e3
    r"|[-+]?\.[0-9]+(?:[eE][-+]?[0-9]+)?"  # .5
    r"|[-+]?[0-9]+(?:_[0-9]+)*[eE][-+]?[0-9]+"  # 1e3
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
    re.ASCII,
)
_BOOL = re.compile(r"true|True|TRUE|false|False|FALSE")
_NULL = re.compile(r"~|null|Null|NULL|")


class YamlLimitError(yaml.YAMLError):
    """A file beyond kvplan's stated YAML limits, or a value the constructor cannot build."""

    def __init__(self, problem: str, mark: yaml.Mark | None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


class _Loader(_Base):  # type: ignore[misc, valid-type]
    """Safe loader with YAML 1.2 core scalars (see the module docstring)."""

    yaml_implicit_resolvers: dict = {}  # noqa: RUF012 - PyYAML's class-level table

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, OverflowError) as error:
            shown = node.value if isinstance(node, yaml.ScalarNode) else node.id
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            raise YamlLimitError(
                f"cannot read {str(shown)[:40]!r} as {tag}: {str(error)[:80]}",
                node.start_mark,
            ) from None

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> Any:
        _refuse_duplicate_keys(node)
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node: yaml.Node) -> int:
        text = self.construct_scalar(node)
        if not _INT.fullmatch(text):
            raise ValueError("not a decimal integer")
        digits = text.replace("_", "").lstrip("+-")
        if len(digits) > limits.NUMBER_CHARS:
            raise ValueError(f"{len(digits):,} digits; a number has at most {limits.NUMBER_CHARS}")
        return int(text.replace("_", ""), 10)

    def construct_yaml_bool(self, node: yaml.Node) -> bool:
        text = self.construct_scalar(node)
        if not _BOOL.fullmatch(text):
            raise ValueError("a boolean is true or false")
        return text.lower() == "true"


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:bool", _Loader.construct_yaml_bool)
for _tag, _pattern, _first in (
    ("tag:yaml.org,2002:bool", _BOOL, "tTfF"),
    ("tag:yaml.org,2002:int", _INT, "-+0123456789"),
    ("tag:yaml.org,2002:float", _FLOAT, "-+0123456789."),
    ("tag:yaml.org,2002:null", _NULL, ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:merge", re.compile(r"<<"), "<"),
):
    # PyYAML matches with .match(): anchor at the end too, or "1:20" would resolve as int 1.
    _Loader.add_implicit_resolver(_tag, re.compile(f"(?:{_pattern.pattern})\\Z"), list(_first))


def _refuse_duplicate_keys(node: yaml.MappingNode) -> None:
    """A YamlLimitError naming a key that appears twice in one mapping, with both lines."""
    first_line: dict[tuple[str, str], int] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
            continue
        line = key.start_mark.line + 1
        identity = (key.tag, key.value)
        if identity in first_line:
            raise YamlLimitError(
                f"duplicate key {key.value[:40]!r}: first on line {first_line[identity]}, "
                f"again on line {line} (YAML would keep only the last; remove one)",
                key.start_mark,
            )
        first_line[identity] = line


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    return []


def check_graph(root: yaml.Node) -> None:
    """Refuse a node graph whose expanded walk is too big, too deep, or endless.

    Sizes and depths are computed once per distinct node (aliases share nodes), so the check
    costs the file's size, not the expansion's.

    Raises:
        YamlLimitError: more than kvplan.limits.YAML_NODES values once aliases are expanded,
            nesting deeper than kvplan.limits.NESTING_DEPTH, or an alias inside itself.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_nodes: set[int] = set()  # the current node's ancestors (and itself)
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            open_nodes.discard(key)
            children = _children(node)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            if size[key] > limits.YAML_NODES:
                raise YamlLimitError(
                    f"more than {limits.YAML_NODES:,} values once aliases are expanded "
                    "(kvplan's limit; an alias bomb?)",
                    node.start_mark,
                )
            if depth[key] > limits.NESTING_DEPTH:
                raise YamlLimitError(
                    f"nested deeper than {limits.NESTING_DEPTH} levels (kvplan's limit)",
                    node.start_mark,
                )
            continue
        if key in size:
            continue
        open_nodes.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in open_nodes:
                raise YamlLimitError("an alias refers to a value that contains it", node.start_mark)
            if id(child) not in size:
                stack.append((child, False))


def load(text: str) -> tuple[Any, yaml.Node | None]:
    """The data of the one YAML document in `text`, and its node tree (for line numbers).

    Raises:
        yaml.YAMLError: malformed YAML, a duplicate key, a bad tagged value, or a limit
            exceeded (YamlLimitError); each with the position it was found at.
    """
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, None
        check_graph(root)
        return loader.construct_document(root), root
    except RecursionError:  # the pure-Python parser (no libyaml) recurses per nesting level
        raise YamlLimitError(
            f"nested deeper than {limits.NESTING_DEPTH} levels (kvplan's limit)", None
        ) from None
    finally:
        loader.dispose()
