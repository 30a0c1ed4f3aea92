"""The names that hold the program's device (assigned the device idiom once, unconditionally; a function's
``device`` parameter), so that the rewrite reuses them instead of naming the accelerator again."""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from torchdevice.rewrite.facts.guards import Guards
from torchdevice.rewrite.outline import SCOPES, Outline, Scope
from torchdevice.source.names import ImportMap

Form = Literal["object", "string"]
"""How a value is written: ``object`` where it goes straight into torch (a ``torch.device``),
``string`` where the program keeps it (a string stays a string: the accelerator's type)."""

_OWN_SCOPE = (*SCOPES, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_PARAMETER = re.compile(r"(?i)^(\w*_)?(dev|device)$")
"""What a parameter holding the caller's device is called."""


@dataclass(frozen=True)
class Holder:
    """A name the program assigns its device to with the device idiom, once, unconditionally."""

    name: str
    line: int
    form: Form
    scope: Scope | None
    """The function or class whose body assigns it; None: the module."""
    given: bool = False
    """A parameter of ``scope``: whatever device the caller gives (a ``torch.device`` or a string), named only
    where a device goes straight into torch (``x.to(device)``, ``device=device``)."""


class Devices:
    def __init__(self, shape: Outline, imports: ImportMap, guards: Guards, source: str) -> None:
        self.shape, self.imports, self.guards, self.source = shape, imports, guards, source
        self.available = guards.available
        self.holders: list[Holder] = []
        self.parameters: list[Holder] = []
        """Parameters holding the caller's device, of the functions around the units."""
        self._scope_bindings: dict[Scope, Counter[str]] = {}
        functions = {s: None for unit in shape.units for s in unit.scopes if not isinstance(s, ast.ClassDef)}
        for function in functions:
            self.parameters += _device_parameters(function)  # type: ignore[arg-type]

    def learn(self, node: ast.Assign | ast.AnnAssign, targets: Sequence[ast.expr], scope: Scope | None,
              direct: bool) -> None:
        """``node`` assigns ``targets`` in ``scope`` (``direct``: in its own body, not under a condition)."""
        form = self.idiom(node.value)  # type: ignore[arg-type]
        if form is not None and direct and len(targets) == 1 and isinstance(targets[0], ast.Name):
            self.holders.append(Holder(targets[0].id, node.lineno, form, scope))

    def idiom(self, value: ast.expr) -> Form | None:
        """``torch.device("cuda" if torch.cuda.is_available() else "cpu")`` and its kin (already rewritten
        too): the accelerator, or the CPU; ``"cuda" if ... else "cpu"``: its type."""
        if isinstance(value, ast.Call) and self.imports.resolve_ast(value.func) == "torch.device" and \
                len(value.args) == 1 and not value.keywords and self.idiom(value.args[0]) == "string":
            return "object"
        if isinstance(value, ast.IfExp) and isinstance(value.test, ast.Call) and not value.test.args and \
                self.imports.resolve_ast(value.test.func) in self.available:
            if self.guards.is_cuda(value.body) and self.guards.is_cpu(value.orelse):
                return "string"
            body, orelse = (v.args[0] if isinstance(v, ast.Call) and len(v.args) == 1 and
                            self.imports.resolve_ast(v.func) == "torch.device" else None
                            for v in (value.body, value.orelse))
            return "object" if body is not None and orelse is not None and self.guards.is_cuda(body) and \
                self.guards.is_cpu(orelse) else None
        if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or) and len(value.values) == 2:
            first = value.values[0]
            if isinstance(first, ast.Call) and self.imports.resolve_ast(first.func) == \
                    "torch.accelerator.current_accelerator":
                return "object"
        if isinstance(value, ast.Attribute) and value.attr == "type" and self.idiom(value.value) == "object":
            return "string"
        return None

    def at(self, line: int, scopes: tuple[Scope, ...], given: bool = False) -> Holder | None:
        """The holder visible on ``line`` inside ``scopes`` (outermost first), if any; a device parameter first
        where ``given`` allows one."""
        for holder in (*self.parameters, *self.holders) if given else self.holders:
            if holder.scope is None:
                within, visible = scopes, holder.line < line or any(not isinstance(s, ast.ClassDef) for s in scopes)
                once = self._module_bindings[holder.name] == 1 and not re.search(
                    rf"\b(global|nonlocal)\b[^\n]*\b{holder.name}\b", self.source)
            elif holder.scope in scopes:
                within = scopes[scopes.index(holder.scope) + 1 :]
                visible, once = holder.line < line, self._bindings(holder.scope)[holder.name] == 1
            else:
                continue
            if visible and once and not any(holder.name in self._bindings(s) for s in within):
                return holder
        return None

    @cached_property
    def _module_bindings(self) -> Counter[str]:
        return _count_bindings(self.shape.tree.body if self.shape.tree is not None else [])

    def _bindings(self, scope: Scope) -> Counter[str]:
        """Names bound in a function's or class's own scope (parameters included), with how often."""
        counts = self._scope_bindings.get(scope)
        if counts is None:
            counts = self._scope_bindings[scope] = _count_bindings(scope.body)
            if not isinstance(scope, ast.ClassDef):
                a = scope.args
                counts.update(p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if p)
        return counts


def _own_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of a scope's body, not entering nested scopes (whose names and defaults are still seen)."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _OWN_SCOPE):
            if isinstance(node, SCOPES):
                stack.extend(node.decorator_list)
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _count_bindings(body: list[ast.stmt]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for node in _own_nodes(body):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            counts[node.id] += 1
        elif isinstance(node, SCOPES):
            counts[node.name] += 1
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            counts.update((a.asname or a.name).partition(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            counts[node.name] += 1
    return counts



def _device_parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[Holder]:
    """The parameters of ``function`` that hold the caller's device: called ``device`` (``dev``, ``*_device``),
    without a default (``"cpu"`` would say the function means a device of its own, ``None`` no device:
    ``x.to(None)`` leaves ``x`` where it is)."""
    a = function.args
    positional = [*a.posonlyargs, *a.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for arg, default in (*zip(positional, defaults, strict=True), *zip(a.kwonlyargs, a.kw_defaults, strict=True)):
        if default is None and _PARAMETER.match(arg.arg):
            yield Holder(arg.arg, function.lineno, "object", function, given=True)
