"""What the names of a module stand for, as far as its import statements say: the one import resolver of
``torchdevice rewrite`` and ``torchdevice check``.

An import binds local names to qualified ones: ``import torch.nn.functional as F`` binds ``F`` to
``torch.nn.functional``, ``import torch.nn`` binds ``torch`` to ``torch``, ``from torch import cuda as c``
binds ``c`` to ``torch.cuda``; a relative import binds nothing known, ``from m import *`` nothing by name. A
name or attribute chain rooted at a bound name stands for that name's qualified name and the rest of the
chain (``F.relu``: ``torch.nn.functional.relu``). One map per module, filled in the order the caller reads
its imports; scopes and rebinding by assignment are not followed.

``ast``'s nodes are read here; ``torchdevice.rewrite.facts.names`` reads libcst's into the same map.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping


class ImportMap:
    """Local names bound by ``import``/``from ... import`` -> the qualified names they stand for."""

    def __init__(self, predefined: Mapping[str, str] | None = None) -> None:
        self._names: dict[str, str] = dict(predefined or {})
        """Local name -> qualified name; ``predefined``: what the names stand for before any import."""

    def bind(self, module: str | None, aliases: Iterable[tuple[str, str | None]]) -> list[tuple[str, str]]:
        """Record what one import statement binds: ``module`` None for ``import NAME [as ASNAME], ...``, else
        ``from module import NAME [as ASNAME], ...`` (given only when absolute); ``aliases`` its ``(NAME, ASNAME)``
        pairs. Returns the ``(local name, qualified name)`` pairs, ``("*", module)`` for a star import."""
        bound: list[tuple[str, str]] = []
        for name, asname in aliases:
            if module is None:
                bound.append((asname, name) if asname else (name.partition(".")[0],) * 2)
            elif name == "*":
                bound.append(("*", module))
            else:
                bound.append((asname or name, f"{module}.{name}"))
        for local, qualified in bound:
            if local != "*":
                self._names[local] = qualified
        return bound

    def add_ast(self, node: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
        """``bind`` an ``ast`` import statement (a relative ``from`` import binds nothing)."""
        aliases = [(alias.name, alias.asname) for alias in node.names]
        if isinstance(node, ast.Import):
            return self.bind(None, aliases)
        return self.bind(node.module, aliases) if not node.level and node.module is not None else []

    def resolve_ast(self, node: ast.expr) -> str | None:
        """The qualified name of an ``ast`` name or attribute chain rooted at an imported name, else None."""
        if isinstance(node, ast.Name):
            return self._names.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve_ast(node.value)
            return f"{base}.{node.attr}" if base is not None else None
        return None


def dotted(node: ast.expr) -> str | None:
    """``a.b.c`` of an ``ast`` chain of names, else None (what it is written as, not what it stands for)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        value = dotted(node.value)
        return f"{value}.{node.attr}" if value is not None else None
    return None
