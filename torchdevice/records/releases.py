"""How a generated table's constant becomes another release's: the one change :mod:`codegen.releases` writes and
:mod:`torchdevice.releases` applies at import."""

from __future__ import annotations

from typing import Any


def changed(value: Any, change: tuple[Any, ...]) -> Any:
    """``value`` (a generated table's constant) with one release's ``change``: ``("set", added, removed)`` of a
    frozenset, ``("dict", set, removed keys)`` of a mapping, ``("rows", removed, inserted (position, row)...)`` of a
    tuple, ``("value", new)``."""
    kind, *args = change
    if kind == "set":
        return (value - args[1]) | args[0]
    if kind == "dict":
        out = {k: v for k, v in value.items() if k not in args[1]}
        out.update(args[0])
        return out
    if kind == "rows":
        rows = [r for r in value if r not in args[0]]
        for position, row in args[1]:
            rows.insert(position, row)
        return tuple(rows)
    return args[0]
