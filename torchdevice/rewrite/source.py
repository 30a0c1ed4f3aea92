"""Rewrite the source text of one module.

The module is outlined with ``ast`` (fast); only the units that mention something to rewrite are
parsed with libcst, transformed by one :class:`~torchdevice.rewrite.transform.Rewriter` in textual
order, and spliced back. Text outside rewritten units is kept byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from torchdevice.rewrite.forms import Forms
from torchdevice.rewrite.imports import RemoveImports
from torchdevice.rewrite.outline import Outline, Unit, imports_torch, outline, outline_cst, parse_ast, split_lines
from torchdevice.rewrite.prelude import helper_name, prelude
from torchdevice.rewrite.rules import RuleSet
from torchdevice.rewrite.transform import Rewriter

_WRAPPER = "if True:"
"""Parses the statements of a class body on their own (followed by the file's newline)."""


class SourceError(ValueError):
    """The source does not parse; ``line`` is 1-based."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


class RewriteError(RuntimeError):
    """The rewrite produced code that does not parse (a bug); the file is left alone."""


@dataclass(frozen=True)
class Note:
    """Something left as is because it cannot be rewritten safely."""

    line: int
    message: str


@dataclass(frozen=True)
class Rewritten:
    code: str
    notes: tuple[Note, ...]


def rewrite_source(source: str, rules: RuleSet) -> Rewritten:
    """The rewritten ``source`` and what was left alone; raises SourceError when it does not parse."""
    lines = split_lines(source)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    wrapper = _WRAPPER + newline
    shape, checked = _outline(source, lines, rules)
    helper, defined = helper_name(source)
    forms = Forms(helper, rules.available, shape.indent)
    rewriter = Rewriter(rules, forms)
    for node in shape.imports:
        rewriter.imports.add_ast(node)
    parsed: list[tuple[Unit, cst.Module]] = []
    notes: list[Note] = []
    first_use = None
    for unit in shape.units:
        text = "".join(lines[unit.start - 1 : unit.end])
        module = _parse(wrapper + text if unit.indented else text, unit)
        uses, noted = forms.helper_uses + forms.torch_uses, len(rewriter.notes)
        rewriter.start_unit()
        new = module.visit(rewriter)
        if rewriter.changed or rewriter.imported:  # imports may go once all their uses are rewritten
            parsed.append((unit, new))
        if first_use is None and forms.helper_uses + forms.torch_uses > uses:
            first_use = unit.top
        notes += _notes(module, unit, rewriter.notes[noted:])
    out = list(lines)
    removable = rewriter.removable_imports()
    for unit, module in parsed:
        code = _unit_code(module, unit, removable, wrapper)
        out[unit.start - 1 : unit.end] = [code] + [""] * (unit.end - unit.start)  # line numbers stay valid
    if first_use is not None:
        notes += _add_prelude(out, shape, first_use, helper if forms.helper_uses and not defined else None, newline)
    code = "".join(out)
    if code != source:
        _verify(code, checked)
    return Rewritten(code, tuple(sorted(set(notes), key=lambda n: (n.line, n.message))))


def _add_prelude(out: list[str], shape: Outline, first_use: int, helper: str | None, newline: str) -> list[Note]:
    """Insert the helper and ``import torch`` as needed into the lines ``out``.

    ``torch.…`` written where the original used ``torch`` works where it did; the module-level helper
    needs a module-level import, and so does a module that imports torch nowhere.
    """
    elsewhere = any(imports_torch(node) for node in shape.imports)
    after, text, imported = prelude(shape.statements, first_use, helper, helper is not None or not elsewhere,
                                    newline)
    if text:
        out.insert(after, text)
    if imported and elsewhere:
        message = "`import torch` added for the accelerator helper: torch was not imported at module level before it"
        return [Note(shape.statements[first_use].start, message)]
    return []


def _outline(source: str, lines: list[str], rules: RuleSet) -> tuple[Outline, bool]:
    """The outline, and whether ``ast`` could parse the source (then it can check the result too)."""
    try:
        return outline(source, lines, rules.triggers, rules.guarded_methods), True
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

    An indented unit is parsed under ``wrapper``; unless it is the only statement of its block, it
    may lose all its statements.
    """
    if not unit.indented:
        module = module.visit(RemoveImports(removable)) if removable else module
        return module.code if module.body or module.footer else ""  # libcst writes an empty module as "\n"
    wrapped = cast(cst.If, module.body[0])
    if removable:
        wrapped = cast(cst.If, wrapped.visit(RemoveImports(removable, None if unit.sole else wrapped.body)))
    code = module.with_changes(body=[wrapped]).code.removeprefix(wrapper)
    return code if wrapped.body.body else code.partition("\n")[2]  # libcst writes an empty block as `pass`


def _notes(module: cst.Module, unit: Unit, found: list[tuple[cst.CSTNode, str]]) -> list[Note]:
    if not found:
        return []
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    offset = unit.start - 1 - unit.indented
    return [Note(positions[node].start.line + offset, message) for node, message in found]


def _verify(code: str, checked: bool) -> None:
    try:
        if checked:
            parse_ast(code)
        else:
            cst.parse_module(code)
    except (SyntaxError, ValueError, cst.ParserSyntaxError) as exc:
        raise RewriteError(f"the rewritten code does not parse ({exc}); left unchanged") from None
