"""Typed construction of frozen dataclasses from YAML nodes, with errors that name file, line and entry.

Overlay records are validated against the dataclass that describes them: every field's annotation
is checked (str, int, float, bool, ``X | None``, ``tuple[X, ...]``, ``dict[str, X]``, ``Literal[...]``
and nested dataclasses), unknown keys and missing required keys are errors.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import yaml

Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_constructor = yaml.constructor.SafeConstructor()


class FastLoader(Loader):  # type: ignore[misc, valid-type]
    """libyaml's safe loader with eager (non-generator) mapping and list construction.

    Plain data only (no anchors that refer to their own parent), about twice as fast on the scanned catalog.
    """


def _mapping(loader: yaml.BaseLoader, node: yaml.MappingNode) -> dict:
    return {loader.construct_object(k, deep=True): loader.construct_object(v, deep=True) for k, v in node.value}


def _sequence(loader: yaml.BaseLoader, node: yaml.SequenceNode) -> list:
    return [loader.construct_object(v, deep=True) for v in node.value]


FastLoader.add_constructor("tag:yaml.org,2002:map", _mapping)
FastLoader.add_constructor("tag:yaml.org,2002:seq", _sequence)


class CatalogError(ValueError):
    """Bad catalog or overlay data; the message names the file, the line and the entry at fault."""

    def __init__(self, path: Path | str, line: int | None, entry: str | None, message: str):
        where = f"{path}:{line}" if line is not None else str(path)
        what = f" (entry {entry})" if entry else ""
        super().__init__(f"{where}{what}: {message}")
        self.path, self.line, self.entry, self.message = Path(path), line, entry, message

    def __reduce__(self) -> tuple[type, tuple[Path, int | None, str | None, str]]:
        """Made again from its four parts (a release's worker process raises it to ``make generate``'s)."""
        return type(self), (self.path, self.line, self.entry, self.message)

    def short(self) -> str:
        """The message with the file named by its name alone (for generated text: no machine's paths)."""
        where = f"{self.path.name}:{self.line}" if self.line is not None else self.path.name
        return f"{where}{f' (entry {self.entry})' if self.entry else ''}: {self.message}"


def compose(path: Path) -> yaml.Node | None:
    """Parse ``path`` into YAML nodes (which keep line numbers); syntax errors become CatalogError."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(path, None, None, f"cannot read: {exc}") from None
    try:
        return yaml.compose(text, Loader=Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise CatalogError(path, line, None, f"invalid YAML: {getattr(exc, 'problem', exc)}") from None


def line_of(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def build(cls: type, node: yaml.Node, path: Path, entry: str | None = None) -> Any:
    """Construct dataclass ``cls`` from mapping ``node``, validating every field."""
    if not isinstance(node, yaml.MappingNode):
        raise CatalogError(path, line_of(node), entry, f"expected a mapping for {cls.__name__}")
    hints, fields = _fields(cls)
    values: dict[str, Any] = {}
    for key_node, value_node in node.value:
        key = key_node.value
        if key not in fields:
            allowed = ", ".join(fields)
            raise CatalogError(path, line_of(key_node), entry, f"unknown field {key!r} (allowed: {allowed})")
        if key in values:
            raise CatalogError(path, line_of(key_node), entry, f"field {key!r} given twice")
        values[key] = convert(hints[key], value_node, path, entry, key)
    for name, field in fields.items():
        required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        if required and name not in values:
            raise CatalogError(path, line_of(node), entry, f"missing required field {name!r}")
    try:
        return cls(**values)
    except ValueError as exc:  # the record's own checks (``__post_init__``), reported where the record is
        raise CatalogError(path, line_of(node), entry, str(exc)) from None


@functools.cache
def _fields(cls: type) -> tuple[dict[str, Any], dict[str, dataclasses.Field]]:
    return get_type_hints(cls), {f.name: f for f in dataclasses.fields(cls)}


def convert(hint: Any, node: yaml.Node, path: Path, entry: str | None, field: str) -> Any:
    """Convert ``node`` to a value of type ``hint`` or raise CatalogError naming ``field``."""
    origin, args = get_origin(hint), get_args(hint)

    def fail(expected: str) -> typing.NoReturn:
        got = _constructor.construct_object(node, deep=True)
        raise CatalogError(path, line_of(node), entry, f"field {field!r}: expected {expected}, got {got!r}")

    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return build(hint, node, path, entry)
    if origin in (Union, types.UnionType):
        if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
            if type(None) in args:
                return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return convert(options[0], node, path, entry, field)
        for option in options:
            try:
                return convert(option, node, path, entry, field)
            except CatalogError:
                continue
        fail(" or ".join(_describe(a) for a in args))
    if origin is Literal:
        value = _constructor.construct_object(node) if isinstance(node, yaml.ScalarNode) else None
        if value not in args:
            fail("one of " + ", ".join(repr(a) for a in args))
        return value
    if origin is tuple:
        if not isinstance(node, yaml.SequenceNode):
            fail("a list")
        return tuple(convert(args[0], item, path, entry, field) for item in node.value)
    if origin is dict:
        if not isinstance(node, yaml.MappingNode):
            fail("a mapping")
        return {
            convert(args[0], k, path, entry, field): convert(args[1], v, path, entry, field) for k, v in node.value
        }
    if hint is Any:
        return _constructor.construct_object(node, deep=True)
    if not isinstance(node, yaml.ScalarNode):
        fail(_describe(hint))
    value = _constructor.construct_object(node)
    if hint is float and type(value) is int:
        return float(value)
    if type(value) is not hint:
        fail(_describe(hint))
    return value


def _describe(hint: Any) -> str:
    if get_origin(hint) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(hint))
    return "null" if hint is type(None) else getattr(hint, "__name__", str(hint))
