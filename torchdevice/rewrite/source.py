"""Rewrite the source text of one module.

The module is outlined with ``ast`` (fast); only the units that mention something to rewrite are
parsed with libcst, transformed by one :class:`~torchdevice.rewrite.rewriter.Rewriter` in textual
order, and spliced back. Text outside rewritten units is kept byte for byte. The accelerator helper is
added last, where the rewritten code needs it, and ``import torch`` (by LibCST's ``AddImportsVisitor``)
where the module has none.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import cast

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, ImportItem

from torchdevice.rewrite.facts import Facts
from torchdevice.rewrite.facts.names import CstImportMap
from torchdevice.rewrite.forms import Forms, preferred_quote
from torchdevice.rewrite.imports import RemoveImports
from torchdevice.rewrite.outline import Outline, Unit, outline, outline_cst
from torchdevice.rewrite.prelude import Inline, helper_name, placement, prelude
from torchdevice.rewrite.rewriter import Rewriter
from torchdevice.rewrite.ruleset import RuleSet
from torchdevice.rewrite.selection import Selection, suppressions
from torchdevice.rewrite.state import Note, Rewrite
from torchdevice.source.parsing import parse_ast, split_lines

_WRAPPER = "if True:"
"""Parses the statements of a block on their own (followed by the file's newline)."""


class SourceError(ValueError):
    """The source does not parse; ``line`` is 1-based."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


class RewriteError(RuntimeError):
    """The rewrite produced code that does not parse (a bug); the file is left alone."""


@dataclass(frozen=True)
class Rewritten:
    code: str
    notes: tuple[Note, ...]
    """CUDA-specific choices left in place, in line order."""
    sites: dict[str, int]
    """Rule code -> how many sites it rewrote."""


def rewrite_source(source: str, rules: RuleSet, selection: Selection | None = None) -> Rewritten:
    """The rewritten ``source`` and what was left alone (the rules ``selection`` turns on, default all); raises
    SourceError when it does not parse."""
    lines = split_lines(source)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    wrapper = _WRAPPER + newline
    shape, checked = _outline(source, lines, rules)
    imports = CstImportMap()
    for node in shape.imports:
        imports.add_ast(node)
    facts = Facts(shape, imports, rules, source)
    helper, defined = helper_name(source)
    inline = facts.torch.statement is None and facts.torch.alias is not None  # torch imported, but not at module level
    forms = Forms(facts.torch.alias or "torch", None if inline else helper, shape.indent, preferred_quote(source))
    rw = Rewrite(rules, facts, forms, selection or Selection(), suppressions(lines))
    rewriter = Rewriter(rw)
    codes: dict[Unit, str] = {}
    importing: dict[Unit, cst.Module] = {}  # units whose imports may go once all their uses are rewritten
    gate = rules.check("version-gate")
    for unit in shape.units:
        fallback = facts.gates.fallback_of(unit)
        if fallback is not None:  # the CUDA branch of a choice between torch releases
            text = lines[unit.start - 1]
            rw.note_at(unit.start, len(text) - len(text.lstrip()) + 1, gate,
                             f"the fallback of `if {ast.unparse(fallback.test)}:`: {gate.doc}")
            continue
        module = _parse(wrapper + "".join(lines[unit.start - 1 : unit.end]) if unit.indented else
                        "".join(lines[unit.start - 1 : unit.end]), unit)
        rw.start_unit(unit, module)
        new = module.visit(rewriter)
        if rw.imported:
            importing[unit] = new
        elif rw.changed:
            codes[unit] = _unit_code(new, unit, set(), wrapper)  # only text is kept: a unit's tree is large
    removable = rw.removable_imports()
    codes.update((unit, _unit_code(module, unit, removable, wrapper)) for unit, module in importing.items())
    prelude_at = None
    if not inline and not defined:
        prelude_at = _prelude(codes, lines, shape, forms, helper, newline, wrapper)
    import_torch = facts.torch.alias is None and any(
        _count_torch(text) > _count_torch("".join(lines[unit.start - 1 : unit.end])) for unit, text in codes.items())
    out = list(lines)
    for unit, text in codes.items():
        out[unit.start - 1 : unit.end] = [text] + [""] * (unit.end - unit.start)  # line numbers stay valid
    if prelude_at is not None:
        out.insert(*prelude_at)
    code = "".join(out)
    if import_torch:
        code = _import_torch(code)
    if code != source:
        _verify(code, checked)
    notes = tuple(sorted(set(rw.notes), key=lambda n: (n.line, n.column, n.code)))
    return Rewritten(code, notes, dict(+rw.sites))


def _prelude(
    codes: dict[Unit, str], lines: list[str], shape: Outline, forms: Forms, helper: str, newline: str, wrapper: str,
) -> tuple[int, str] | None:
    """Where to insert the helper definition: where the rewritten units use it (unless the idiom is written at its
    only use instead)."""
    uses = {unit: len(re.findall(rf"\b{helper}\b", text)) for unit, text in codes.items()}
    if sum(uses.values()) == 1:
        unit = next(u for u, n in uses.items() if n)
        inlined = Inline(helper, forms)
        module = _parse(wrapper + codes[unit] if unit.indented else codes[unit], unit).visit(inlined)
        if not inlined.failed:
            codes[unit] = _unit_code(module, unit, set(), wrapper)
            uses[unit] = 0
    needs = [unit.top for unit in codes if uses[unit]]
    if not needs:
        return None
    tree = shape.tree
    docstring = tree is not None and bool(tree.body) and isinstance(tree.body[0], ast.Expr) and \
        isinstance(tree.body[0].value, ast.Constant) and isinstance(tree.body[0].value.value, str)
    after = placement(shape.statements, min(needs), docstring)
    text = prelude(forms, helper, newline, after < 0)
    return (shape.statements[after].end if after >= 0 else shape.statements[0].start - 1), text


def _import_torch(code: str) -> str:
    """``code`` with ``import torch`` added, by LibCST's ``AddImportsVisitor`` (at the end of the module's first
    block of imports); only for the rare module that uses torch nowhere before its rewrite."""
    module = cst.parse_module(code)
    header = list(module.header)
    comments = len(header) - next((i for i, line in enumerate(reversed(header)) if line.comment), len(header))
    if module.body and comments < len(header):
        # the blank lines after the header's comments go with the code, as they did after a removed import
        first = module.body[0]
        module = module.with_changes(header=header[:comments], body=[
            first.with_changes(leading_lines=[*header[comments:], *first.leading_lines]), *module.body[1:]])
    return module.visit(AddImportsVisitor(CodemodContext(), [ImportItem("torch")])).code


def _count_torch(text: str) -> int:
    return len(re.findall(r"(?<![\w.])torch\.", text))


def _outline(source: str, lines: list[str], rules: RuleSet) -> tuple[Outline, bool]:
    """The outline, and whether ``ast`` could parse the source (then it can check the result too)."""
    try:
        return outline(source, lines, rules.triggers, rules.guarded_methods, rules.index_sites(source)), True
    except (SyntaxError, ValueError) as exc:
        error = exc
    try:  # syntax newer than this Python's, or a real error: then Python's own message is the clearest
        return outline_cst(cst.parse_module(source)), False
    except cst.ParserSyntaxError as exc:
        if isinstance(error, SyntaxError) and error.lineno is not None:
            raise SourceError(error.lineno, error.msg) from None
        raise SourceError(exc.raw_line, exc.message) from None


def _parse(text: str, unit: Unit) -> cst.Module:
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        raise SourceError(unit.start + exc.raw_line - 1 - unit.indented, exc.message) from None


def _unit_code(module: cst.Module, unit: Unit, removable: set[str], wrapper: str) -> str:
    """The text of a rewritten unit, without the imports of ``removable``.

    An indented unit is parsed under ``wrapper``; unless it is the whole of its block, it may lose all
    its statements.
    """
    if not unit.indented:
        module = module.visit(RemoveImports(removable)) if removable else module
        return module.code if module.body or module.footer else ""  # libcst writes an empty module as "\n"
    wrapped = cast(cst.If, module.body[0])
    if removable:
        wrapped = cast(cst.If, wrapped.visit(RemoveImports(removable, None if unit.sole else wrapped.body)))
    code = module.with_changes(body=[wrapped]).code.removeprefix(wrapper)
    return code if wrapped.body.body else code.partition("\n")[2]  # libcst writes an empty block as `pass`


def _verify(code: str, checked: bool) -> None:
    try:
        if checked:
            parse_ast(code)
        else:
            cst.parse_module(code)
    except (SyntaxError, ValueError, cst.ParserSyntaxError) as exc:
        raise RewriteError(f"the rewritten code does not parse ({exc}); left unchanged") from None
