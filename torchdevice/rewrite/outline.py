"""The line structure of a module, so that only the statements that need it are parsed with libcst.

Parsing and visiting a whole file with libcst costs many times what Python's own parser does, and a
CUDA-using file usually mentions CUDA in a few statements. The outline (from ``ast``, statements
only) finds the *units*: the smallest statements that mention something to rewrite. A compound
statement (``def``, ``class``, ``if``, ``with``...) is entered when its own lines (header, ``elif``,
``except``...) mention nothing; otherwise it is a unit as a whole. Statements sharing a line are
kept together, and so are neighbouring statements of one block that all mention something (so that
what they need can be written once), so units never overlap and text between them is never touched.

Each unit also knows what encloses it: the functions and classes (for names in scope) and the
conditions that hold when it runs (``if`` tests, ``elif`` chains, early ``return``/``raise``), so
that the rewriter knows, without parsing more, whether the code runs only with an accelerator.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import accumulate

import libcst as cst
from libcst.helpers import get_full_name_for_node

from torchdevice.source.parsing import parse_ast

Group = tuple[int, int, list[ast.stmt]]
"""First line, last line, statements."""

_MERGED = 64
"""At most this many neighbouring statements make one unit (a unit's libcst tree is large)."""

Condition = tuple[ast.expr, bool, "ast.If | None"]
"""A test, whether it is true (``if`` body) or false (``else``, after ``if test: return``), and the ``if``
statement choosing between the branches (None after an early ``return``)."""

Scope = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Statement:
    """A top-level statement (or statements sharing lines): 1-based inclusive line range."""

    start: int
    end: int
    defines: bool
    """Only function or class definitions: runs nothing of interest when the module is imported."""
    imports: bool
    """Only imports (or ``try``/``if`` blocks of imports): the helper may follow it."""
    binds_torch: str | None
    """The name an unconditional ``import torch`` (``import torch as th``) binds here."""


@dataclass(frozen=True)
class Unit:
    """Lines parsed and rewritten together; ``top`` is the index of the top-level statement holding them."""

    start: int
    end: int
    top: int
    indented: bool
    sole: bool = False
    """Indented and the whole of its block: it must not vanish (its imports stay)."""
    conditions: tuple[Condition, ...] = ()
    scopes: tuple[Scope, ...] = ()
    """Enclosing functions and classes, outermost first."""
    nodes: tuple[ast.stmt, ...] = ()


@dataclass(frozen=True)
class Outline:
    tree: ast.Module | None
    """The module's ``ast``; None for syntax this Python cannot parse (then libcst outlined it)."""
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


def _mentions(
    source: str, lines: list[str], words: tuple[str, ...], names: Iterable[str], sites: Iterable[int]
) -> list[int]:
    """Sorted numbers of the lines that contain one of ``words``, or one of ``names`` as a name
    (``.record``: as an attribute), or one of the offsets ``sites``; comment lines do not count."""
    parts = [re.escape(w) for w in words]
    parts += [(re.escape(n) if n[0] == "." else rf"(?<![\w.]){re.escape(n)}") + r"\b" for n in sorted(names)]
    starts = list(accumulate((len(line) for line in lines), initial=0))
    offsets = [found.start() for found in re.finditer("|".join(parts), source)]
    found = {bisect_right(starts, offset) for offset in (*offsets, *sites)}
    return sorted(n for n in found if not lines[n - 1].lstrip().startswith("#"))


def outline(
    source: str, lines: list[str], words: tuple[str, ...], methods: Mapping[str, Iterable[str]],
    sites: Iterable[int] = (),
) -> Outline:
    """Outline ``source``; raises SyntaxError (and ValueError) like ``ast.parse``.

    ``words`` are the substrings to look for; ``methods`` maps a name that, when it occurs in the
    source, makes method names worth looking for too (``Event`` -> ``record``, ``elapsed_time``...);
    ``sites`` are more offsets of things to rewrite (found by patterns).
    """
    tree = parse_ast(source)
    imports = tuple(_imports(tree.body))
    names = {n for node in imports for n in _bound(node, words)}
    names |= {"." + m for trigger, found in methods.items() if trigger in source for m in found}
    hits = _mentions(source, lines, words, names, sites)
    groups = _groups(tree.body)
    statements = tuple(
        Statement(start, end, all(_defines(n) for n in nodes), all(_only_imports(n) for n in nodes),
                  next((b for b in map(binds_torch, nodes) if b), None))
        for start, end, nodes in groups
    )
    walk = _Walk(lines, hits)
    units = list(walk.block(groups, None, False, (), ()))
    return Outline(tree, statements, tuple(units), imports, _indent(tree.body, lines))


def outline_cst(module: cst.Module) -> Outline:
    """The outline from a libcst module (for sources ``ast`` cannot parse): every top-level statement a unit."""
    line = len(module.header)
    statements, units = [], []
    for top, node in enumerate(module.body):
        start = line + len(node.leading_lines) + 1
        line += module.code_for_node(node).count("\n")
        imported = _cst_binds_torch(node)
        statements.append(Statement(start, line, isinstance(node, (cst.FunctionDef, cst.ClassDef)),
                                    imported is not None, imported))
        units.append(Unit(start, line, top, False))
    return Outline(None, tuple(statements), tuple(units), (), module.default_indent)


class _Walk:
    """Finds the units of statement groups, with what encloses them."""

    def __init__(self, lines: list[str], hits: list[int]) -> None:
        self.lines, self.hits = lines, hits

    def block(
        self, groups: list[Group], top: int | None, indented: bool, conditions: tuple[Condition, ...],
        scopes: tuple[Scope, ...],
    ) -> Iterator[Unit]:
        """The units of the groups of one block (``top`` None: of the module, each group its own top-level
        statement); neighbouring whole statements become one unit."""
        units: list[tuple[Unit, tuple[bool, bool]]] = []  # with: made of whole statements? of imports?
        for index, (start, end, nodes) in enumerate(groups):
            found = list(self.group((start, end, nodes), index if top is None else top, indented, conditions,
                                    scopes))
            whole = len(found) == 1 and (found[0].start, found[0].end) == (start, end)
            kind = all(map(_only_imports, nodes))  # imports and code never share a unit: the helper goes between
            if whole and units and units[-1][1] == (True, kind) and len(units[-1][0].nodes) < _MERGED and \
                    _between(self.lines, units[-1][0].end, start):
                last = units.pop()[0]
                found = [Unit(last.start, end, last.top, indented, False, last.conditions, scopes,
                              last.nodes + tuple(nodes))]
            units.extend((unit, (whole, kind)) for unit in found)
            conditions += tuple((n.test, False, None) for n in nodes if _exits(n))  # type: ignore[attr-defined]
        if indented and len(units) == 1 and (units[0][0].start, units[0][0].end) == (groups[0][0], groups[-1][1]):
            units = [(dataclasses.replace(units[0][0], sole=True), units[0][1])]
        yield from (unit for unit, _ in units)

    def group(
        self, group: Group, top: int, indented: bool, conditions: tuple[Condition, ...], scopes: tuple[Scope, ...],
    ) -> Iterator[Unit]:
        start, end, nodes = group
        mentioned = self.hits[bisect_left(self.hits, start) : bisect_right(self.hits, end)]
        if not mentioned:
            return
        children = list(blocks(nodes[0], self.lines)) if len(nodes) == 1 else []
        inner = [g for block, _ in children for g in _groups(block)]
        if not inner or inner[0][0] <= start or any(
            not any(s <= line <= e for s, e, _ in inner) for line in mentioned
        ):  # a simple statement, a one-liner, or its own lines mention
            yield Unit(start, end, top, indented, False, conditions, scopes, tuple(nodes))
            return
        node = nodes[0]
        inside = (*scopes, node) if isinstance(node, SCOPES) else scopes
        for block, holds in children:
            yield from self.block(_groups(block), top, True, conditions + holds, inside)


def _between(lines: list[str], end: int, start: int) -> bool:
    """Are the lines after line ``end`` and before line ``start`` only blank lines and comments?"""
    return all(line.strip()[:1] in ("", "#") for line in lines[end : start - 1])


def _exits(node: ast.stmt) -> bool:
    """``if test: ... return`` (no ``else``): the statements after it run only when ``test`` is false."""
    return isinstance(node, ast.If) and not node.orelse and isinstance(
        node.body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break)
    )


def _indent(body: list[ast.stmt], lines: list[str]) -> str:
    for node in body:
        inner = next(iter(blocks(node)), None)
        if inner and inner[0]:
            outer, first = lines[node.lineno - 1], lines[inner[0][0].lineno - 1]
            width = len(outer) - len(outer.lstrip())
            indent = first[width : len(first) - len(first.lstrip())]
            if indent:
                return indent
    return "    "


def blocks(node: ast.stmt, lines: list[str] | None = None) -> Iterator[tuple[list[ast.stmt], tuple[Condition, ...]]]:
    """The statement lists of a compound statement (bodies, ``else``, ``finally``, handlers, cases), each
    with the conditions that hold when it runs.

    Given the ``lines``, an ``elif`` (an ``if`` alone in ``else``, on an ``elif`` line) is not a
    statement of its own: its blocks are blocks of the outer ``if``.
    """
    if isinstance(node, ast.If):
        yield node.body, ((node.test, True, node),)
        orelse = node.orelse
        if lines is not None and len(orelse) == 1 and isinstance(orelse[0], ast.If) and \
                lines[orelse[0].lineno - 1].lstrip().startswith("elif"):
            for block, holds in blocks(orelse[0], lines):
                yield block, ((node.test, False, node), *holds)
        elif orelse:
            yield orelse, ((node.test, False, node),)
        return
    for field in node._fields:
        value = getattr(node, field)
        if isinstance(value, list) and value:
            if isinstance(value[0], ast.stmt):
                yield value, ()
            elif hasattr(value[0], "body"):  # except handlers, match cases
                yield from ((item.body, ()) for item in value)


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


def _only_imports(node: ast.stmt) -> bool:
    """An import, or a ``try``/``if`` whose blocks hold only imports (and ``pass``)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(node, (ast.Try, ast.If)):
        inner = [s for block, _ in blocks(node) for s in block]
        return all(isinstance(s, ast.Pass) or _only_imports(s) for s in inner) and any(
            isinstance(s, (ast.Import, ast.ImportFrom)) for s in inner)
    return False


def binds_torch(node: ast.stmt) -> str | None:
    """The name an import statement binds to ``torch`` itself (``import torch``, ``import torch.nn``,
    ``import torch as th``), else None."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname is None and alias.name.partition(".")[0] == "torch":
                return "torch"
            if alias.asname is not None and alias.name == "torch":
                return alias.asname
    return None


def _cst_binds_torch(node: cst.BaseStatement) -> str | None:
    if not isinstance(node, cst.SimpleStatementLine):
        return None
    for small in node.body:
        if isinstance(small, cst.Import):
            for alias in small.names:
                name = get_full_name_for_node(alias.name) or ""
                if alias.asname is None and name.partition(".")[0] == "torch":
                    return "torch"
                if alias.asname is not None and name == "torch" and isinstance(alias.asname.name, cst.Name):
                    return alias.asname.name.value
    return None


def _imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, in order (statements only are walked, not expressions)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        else:
            for block, _ in blocks(node):
                yield from _imports(block)


def scopes_within(nodes: Iterable[ast.stmt], line: int) -> tuple[Scope, ...]:
    """The functions and classes among ``nodes`` (and inside them) that contain ``line``, outermost first."""
    found: list[Scope] = []
    statements = list(nodes)
    while statements:
        node = next((n for n in statements if n.lineno <= line <= (n.end_lineno or n.lineno)), None)
        if node is None:
            break
        if isinstance(node, SCOPES):
            found.append(node)
        statements = [s for block, _ in blocks(node) for s in block]
    return tuple(found)

