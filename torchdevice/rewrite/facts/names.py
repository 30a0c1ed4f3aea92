"""What the names of a module stand for, as far as its import statements say."""

from __future__ import annotations

import ast

import libcst as cst
from libcst.helpers import get_full_name_for_node


class ImportMap:
    """Local names bound by ``import``/``from ... import`` -> the qualified names they stand for.

    One map per file, filled in textual order; scopes and rebinding by assignment are not followed
    (``torch`` always stands for ``torch`` unless an import binds it to something else).
    """

    def __init__(self) -> None:
        self._names: dict[str, str] = {"torch": "torch"}

    def add(self, node: cst.Import | cst.ImportFrom) -> list[tuple[str, str]]:
        """Record the names ``node`` binds; return ``(local name, qualified name)`` pairs (``*`` as local name)."""
        bound: list[tuple[str, str]] = []
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = get_full_name_for_node(alias.name) or ""
                if alias.asname is not None:
                    bound.append((as_name(alias), full))
                else:
                    root = full.partition(".")[0]
                    bound.append((root, root))
        elif not node.relative and node.module is not None:
            module = get_full_name_for_node(node.module) or ""
            if isinstance(node.names, cst.ImportStar):
                bound.append(("*", module))
            else:
                for alias in node.names:
                    name = get_full_name_for_node(alias.name) or ""
                    bound.append((as_name(alias) if alias.asname is not None else name, f"{module}.{name}"))
        return self._bind(bound)

    def add_ast(self, node: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
        """``add`` for an ``ast`` import statement."""
        bound: list[tuple[str, str]] = []
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound.append((alias.asname, alias.name) if alias.asname else (alias.name.partition(".")[0],) * 2)
        elif not node.level and node.module is not None:
            for alias in node.names:
                local = "*" if alias.name == "*" else alias.asname or alias.name
                bound.append((local, node.module if alias.name == "*" else f"{node.module}.{alias.name}"))
        return self._bind(bound)

    def _bind(self, bound: list[tuple[str, str]]) -> list[tuple[str, str]]:
        for local, qualified in bound:
            if local != "*":
                self._names[local] = qualified
        return bound

    def resolve(self, node: cst.BaseExpression) -> str | None:
        """The qualified name of a name or attribute chain rooted at an imported name, else None."""
        if isinstance(node, cst.Name):
            return self._names.get(node.value)
        if isinstance(node, cst.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr.value}" if base is not None else None
        return None

    def resolve_ast(self, node: ast.expr) -> str | None:
        """``resolve`` for an ``ast`` expression."""
        if isinstance(node, ast.Name):
            return self._names.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve_ast(node.value)
            return f"{base}.{node.attr}" if base is not None else None
        return None


def root_name(node: cst.BaseExpression) -> str | None:
    """``a`` for ``a.b.c``; None when the chain does not start with a name."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def as_name(alias: cst.ImportAlias) -> str:
    assert alias.asname is not None and isinstance(alias.asname.name, cst.Name)
    return alias.asname.name.value
