"""Reading libcst nodes: string values, the names values are stored under, arguments."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

_EMPTY = cst.Module(body=[])


def code(node: cst.CSTNode) -> str:
    """The source text of a node."""
    return _EMPTY.code_for_node(node)


def string_value(node: cst.CSTNode) -> str | None:
    """The value of a plain string literal (not bytes, not an f-string), else None."""
    if not isinstance(node, cst.SimpleString):
        return None
    raw = node.value
    if raw[0] in "\"'" and "\\" not in raw and raw[:3] not in ('"""', "'''"):
        return raw[1:-1]  # no prefix, no escapes: what ``evaluated_value`` would give, without parsing it
    value = node.evaluated_value
    return value if isinstance(value, str) else None


def option_name(node: cst.BaseExpression) -> str:
    """``"--dist-backend"`` -> ``"dist_backend"``."""
    return (string_value(node) or "").lstrip("-").replace("-", "_")


def held_name(target: cst.BaseExpression) -> str | None:
    """The name a value is stored under: ``x``, ``obj.x``, ``d["x"]``."""
    if isinstance(target, cst.Name):
        return target.value
    if isinstance(target, cst.Attribute):
        return target.attr.value
    if isinstance(target, cst.Subscript) and len(target.slice) == 1:
        index = target.slice[0].slice
        return string_value(index.value) if isinstance(index, cst.Index) else None
    return None


def argument(args: Sequence[cst.Arg], position: int, keywords: Sequence[str]) -> cst.Arg | None:
    """The argument at ``position`` (counting positional arguments) or given by one of ``keywords``."""
    positional = 0
    for arg in args:
        if arg.star:
            return None
        if arg.keyword is None:
            if positional == position:
                return arg
            positional += 1
        elif arg.keyword.value in keywords:
            return arg
    return None


def single_assign(block: cst.BaseSuite) -> tuple[cst.SimpleStatementLine, cst.Assign] | None:
    """The line and statement of a block that is exactly one ``target = value``."""
    if not isinstance(block, cst.IndentedBlock) or len(block.body) != 1:
        return None
    line = block.body[0]
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        return None
    assign = line.body[0]
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return None
    return line, assign


def last_statement(block: cst.BaseSuite) -> cst.CSTNode | None:
    """The last small statement of a block."""
    last = block.body[-1] if block.body else None
    return last.body[-1] if isinstance(last, cst.SimpleStatementLine) else last


def ends_block(block: cst.BaseSuite) -> bool:
    """Does the block end with ``return``, ``raise``, ``continue`` or ``break``?"""
    return isinstance(last_statement(block), (cst.Return, cst.Raise, cst.Continue, cst.Break))
