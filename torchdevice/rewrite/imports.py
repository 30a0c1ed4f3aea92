"""What the names of a module stand for, as far as its import statements say, and removal of imports."""

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
                    bound.append((_as_name(alias), full))
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
                    bound.append((_as_name(alias) if alias.asname is not None else name, f"{module}.{name}"))
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


def _as_name(alias: cst.ImportAlias) -> str:
    assert alias.asname is not None and isinstance(alias.asname.name, cst.Name)
    return alias.asname.name.value


class RemoveImports(cst.CSTTransformer):
    """Drop the given local names from import statements and the statements they leave empty.

    Comments above a dropped statement move to the statement after it; a block that would be left
    empty keeps its imports, unless it is ``emptiable`` (statements cut out of a longer block).
    """

    def __init__(self, names: set[str], emptiable: cst.BaseSuite | None = None) -> None:
        self.names = names
        self.emptiable = emptiable

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        body, carry = self._body(updated_node.body)
        return updated_node.with_changes(body=body, footer=[*carry, *updated_node.footer])

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        body, carry = self._body(updated_node.body)
        if not body and original_node is not self.emptiable:
            return updated_node
        return updated_node.with_changes(body=body, footer=[*carry, *updated_node.footer])

    def _body(self, body):
        out: list = []
        carry: list[cst.EmptyLine] = []
        for statement in body:
            kept = self._statement(statement)
            if kept is None:
                carry.extend(statement.leading_lines)
                comment = statement.trailing_whitespace.comment
                if comment is not None:
                    carry.append(cst.EmptyLine(comment=comment))
                continue
            if carry:
                kept = kept.with_changes(leading_lines=[*carry, *kept.leading_lines])
                carry = []
            out.append(kept)
        return out, carry

    def _statement(self, statement):
        if not isinstance(statement, cst.SimpleStatementLine):
            return statement
        small = [s for s in (self._small(s) for s in statement.body) if s is not None]
        if not small:
            return None
        if len(small) < len(statement.body):
            small[-1] = small[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return statement.with_changes(body=small)

    def _small(self, node):
        if not isinstance(node, (cst.Import, cst.ImportFrom)) or isinstance(node.names, cst.ImportStar):
            return node
        kept = [a for a in node.names if self._local(a) not in self.names]
        if len(kept) == len(node.names):
            return node
        if not kept:
            return None
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return node.with_changes(names=kept)

    @staticmethod
    def _local(alias: cst.ImportAlias) -> str:
        return _as_name(alias) if alias.asname is not None else get_full_name_for_node(alias.name) or ""
