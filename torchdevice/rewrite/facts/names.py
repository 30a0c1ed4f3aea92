"""What the names of a module stand for: the import resolver of ``torchdevice.source.names``, reading libcst's
nodes too (the rewriter reads imports and names in both trees), and reading libcst's names."""

from __future__ import annotations

import libcst as cst
from libcst.helpers import get_full_name_for_node

from torchdevice.source.names import ImportMap


class CstImportMap(ImportMap):
    """The module's import map, read from ``ast`` and libcst nodes; ``torch`` stands for ``torch`` unless an
    import binds it to something else."""

    def __init__(self) -> None:
        super().__init__({"torch": "torch"})

    def add_cst(self, node: cst.Import | cst.ImportFrom) -> list[tuple[str, str]]:
        """``bind`` a libcst import statement (a relative ``from`` import binds nothing)."""
        if isinstance(node, cst.Import):
            return self.bind(None, [(get_full_name_for_node(alias.name) or "",
                                     as_name(alias) if alias.asname is not None else None) for alias in node.names])
        if node.relative or node.module is None:
            return []
        module = get_full_name_for_node(node.module) or ""
        if isinstance(node.names, cst.ImportStar):
            return self.bind(module, [("*", None)])
        return self.bind(module, [(get_full_name_for_node(alias.name) or "",
                                   as_name(alias) if alias.asname is not None else None) for alias in node.names])

    def resolve_cst(self, node: cst.BaseExpression) -> str | None:
        """The qualified name of a libcst name or attribute chain rooted at an imported name, else None."""
        if isinstance(node, cst.Name):
            return self._names.get(node.value)
        if isinstance(node, cst.Attribute):
            base = self.resolve_cst(node.value)
            return f"{base}.{node.attr.value}" if base is not None else None
        return None


def root_name(node: cst.BaseExpression) -> str | None:
    """``a`` for ``a.b.c``; None when the chain does not start with a name."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def as_name(alias: cst.ImportAlias) -> str:
    assert alias.asname is not None and isinstance(alias.asname.name, cst.Name)
    return alias.asname.name.value
