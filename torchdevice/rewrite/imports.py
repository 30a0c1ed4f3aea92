"""Removal of the imports a rewrite leaves unused."""

from __future__ import annotations

import libcst as cst
from libcst.helpers import get_full_name_for_node

from torchdevice.rewrite.facts.names import as_name


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
        return as_name(alias) if alias.asname is not None else get_full_name_for_node(alias.name) or ""
