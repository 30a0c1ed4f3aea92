"""The line structure of a module, so that only the statements that need it are parsed with libcst.

Parsing and visiting a whole file with libcst costs many times what Python's own parser does, and a
CUDA-using file usually mentions CUDA in a few statements. The outline (from ``ast``, statements
only) finds the *units*: the smallest statements that mention something to rewrite. A compound
statement (``def``, ``class``, ``if``, ``with``...) is entered when its own lines (header, ``elif``,
``except``...) mention nothing; otherwise it is a unit as a whole. Statements sharing a line are
kept together, so units never overlap and text between them is never touched.
"""

from __future__ import annotations

import ast
import re
import warnings
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import accumulate

import libcst as cst
from libcst.helpers import get_full_name_for_node

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")

Group = tuple[int, int, list[ast.stmt]]
"""First line, last line, statements."""


def split_lines(source: str) -> list[str]:
    """Lines with their endings, split where Python's tokenizer splits them (not at form feeds...)."""
    return _LINE.findall(source)


def parse_ast(source: str) -> ast.Module:
    """``ast.parse`` without its warnings (invalid escape sequences and the like are not ours to report)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source)


@dataclass(frozen=True)
class Statement:
    """A top-level statement (or statements sharing lines): 1-based inclusive line range."""

    start: int
    end: int
    defines: bool
    """Only function or class definitions: runs nothing of interest when the module is imported."""
    imports_torch: bool
    """Binds the name ``torch`` (``import torch``, ``import torch.nn``)."""


@dataclass(frozen=True)
class Unit:
    """Lines parsed and rewritten together; ``top`` is the index of the top-level statement holding them."""

    start: int
    end: int
    top: int
    indented: bool
    sole: bool = False
    """Indented and the only statement of its block: it must not vanish (its imports stay)."""


@dataclass(frozen=True)
class Outline:
    statements: tuple[Statement, ...]
    units: tuple[Unit, ...]
    imports: tuple[ast.Import | ast.ImportFrom, ...]
    """Every import statement of the module, in order."""
    indent: str
    """One level of indentation (of the first indented block)."""


def _bound(node: ast.Import | ast.ImportFrom, words: tuple[str, ...]) -> list[str]:
    """Local names an import binds to something CUDA-specific: ``autocast`` in
    ``from torch.cuda.amp import autocast`` (``import torch.cuda`` binds ``torch``: none)."""
    def cuda(name: str) -> bool:
        return any(w in name for w in words)

    if isinstance(node, ast.Import):
        return [a.asname for a in node.names if a.asname and cuda(a.name)]
    everything = cuda(node.module or "")
    return [a.asname or a.name for a in node.names if everything or cuda(a.name)]


def _mentions(source: str, lines: list[str], words: tuple[str, ...], names: Iterable[str]) -> list[int]:
    """Sorted numbers of the lines that contain one of ``words``, or one of ``names`` as a name
    (``.record``: as an attribute)."""
    parts = [re.escape(w) for w in words]
    parts += [(re.escape(n) if n[0] == "." else rf"(?<![\w.]){re.escape(n)}") + r"\b" for n in sorted(names)]
    starts = list(accumulate((len(line) for line in lines), initial=0))
    return sorted({bisect_right(starts, found.start()) for found in re.finditer("|".join(parts), source)})


def outline(source: str, lines: list[str], words: tuple[str, ...], methods: Mapping[str, Iterable[str]]) -> Outline:
    """Outline ``source``; raises SyntaxError (and ValueError) like ``ast.parse``.

    ``words`` are the substrings to look for; ``methods`` maps a name that, when it occurs in the
    source, makes method names worth looking for too (``Event`` -> ``record``, ``elapsed_time``...).
    """
    tree = parse_ast(source)
    imports = tuple(_imports(tree.body))
    names = {n for node in imports for n in _bound(node, words)}
    names |= {"." + m for trigger, found in methods.items() if trigger in source for m in found}
    hits = _mentions(source, lines, words, names)
    groups = _groups(tree.body)
    statements = tuple(
        Statement(start, end, all(_defines(n) for n in nodes), any(imports_torch(n) for n in nodes))
        for start, end, nodes in groups
    )
    units = [unit for top, group in enumerate(groups) for unit in _units(group, top, False, lines, hits)]
    return Outline(statements, tuple(units), imports, _indent(tree.body, lines))


def outline_cst(module: cst.Module) -> Outline:
    """The outline from a libcst module (for sources ``ast`` cannot parse): every top-level statement a unit."""
    line = len(module.header)
    statements, units = [], []
    for top, node in enumerate(module.body):
        start = line + len(node.leading_lines) + 1
        line += module.code_for_node(node).count("\n")
        statements.append(Statement(start, line, isinstance(node, (cst.FunctionDef, cst.ClassDef)),
                                    _cst_imports_torch(node)))
        units.append(Unit(start, line, top, False))
    return Outline(tuple(statements), tuple(units), (), module.default_indent)


def _units(
    group: Group, top: int, indented: bool, lines: list[str], hits: list[int], sole: bool = False
) -> Iterator[Unit]:
    """The units of a statement group; ``hits`` are the (sorted) numbers of the lines that mention something."""
    start, end, nodes = group
    mentioned = hits[bisect_left(hits, start) : bisect_right(hits, end)]
    if not mentioned:
        return
    blocks = [_groups(block) for block in _blocks(nodes[0], lines)] if len(nodes) == 1 else []
    inner = [g for block in blocks for g in block]
    if not inner or inner[0][0] <= start or any(
        not any(s <= line <= e for s, e, _ in inner) for line in mentioned
    ):
        yield Unit(start, end, top, indented, sole)  # a simple statement, a one-liner, or its own lines mention
        return
    for block in blocks:
        for child in block:
            yield from _units(child, top, True, lines, hits, len(block) == 1)


def _indent(body: list[ast.stmt], lines: list[str]) -> str:
    for node in body:
        inner = next(iter(_blocks(node)), None)
        if inner:
            outer, first = lines[node.lineno - 1], lines[inner[0].lineno - 1]
            width = len(outer) - len(outer.lstrip())
            indent = first[width : len(first) - len(first.lstrip())]
            if indent:
                return indent
    return "    "


def _blocks(node: ast.stmt, lines: list[str] | None = None) -> Iterator[list[ast.stmt]]:
    """The statement lists of a compound statement: bodies, ``else``, ``finally``, handlers, cases.

    Given the ``lines``, an ``elif`` (an ``if`` alone in ``else``, on an ``elif`` line) is not a
    statement of its own: its blocks are blocks of the outer ``if``.
    """
    if isinstance(node, ast.If) and lines is not None and len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
        elif_ = node.orelse[0]
        if lines[elif_.lineno - 1].lstrip().startswith("elif"):
            yield node.body
            yield from _blocks(elif_, lines)
            return
    for field in node._fields:
        value = getattr(node, field)
        if isinstance(value, list) and value:
            if isinstance(value[0], ast.stmt):
                yield value
            elif hasattr(value[0], "body"):  # except handlers, match cases
                yield from (item.body for item in value)


def _start(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", ())
    return min([node.lineno, *(d.lineno for d in decorators)])


def _groups(body: list[ast.stmt]) -> list[Group]:
    """Statements with their line ranges, merged where they share a line."""
    groups: list[Group] = []
    for node in body:
        start, end = _start(node), node.end_lineno or node.lineno
        if groups and start <= groups[-1][1]:
            first, last, nodes = groups[-1]
            groups[-1] = (first, max(last, end), [*nodes, node])
        else:
            groups.append((start, end, [node]))
    return groups


def _defines(node: ast.stmt) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))


def imports_torch(node: ast.stmt) -> bool:
    """Does the statement bind the name ``torch`` (``import torch``, ``import torch.nn``)?"""
    return isinstance(node, ast.Import) and any(
        a.asname is None and a.name.partition(".")[0] == "torch" for a in node.names
    )


def _cst_imports_torch(node: cst.BaseStatement) -> bool:
    if not isinstance(node, cst.SimpleStatementLine):
        return False
    return any(
        isinstance(small, cst.Import) and any(
            a.asname is None and (get_full_name_for_node(a.name) or "").partition(".")[0] == "torch"
            for a in small.names
        )
        for small in node.body
    )


def _imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, in order (statements only are walked, not expressions)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        else:
            for block in _blocks(node):
                yield from _imports(block)
