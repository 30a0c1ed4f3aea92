"""What the rewriter knows about a module beyond the statements it rewrites, from the module's ``ast``.

The transformer sees one unit (statement) at a time; these facts span the module: the name torch is
imported under, which tests mean "an accelerator is present" (so that nothing under them needs a
guard), which names already hold the program's device (so that it is reused, not named again), whether
the members of a rule group (``torch.cuda.Stream`` and ``torch.cuda.stream``) can all be rewritten,
and which counts of accelerators start processes. Each is computed from the units' statements, or from
the whole tree only when the source mentions what it is about.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from torchdevice.rewrite.facts.names import ImportMap
from torchdevice.rewrite.outline import Condition, Outline, Scope, Unit, binds_torch, blocks
from torchdevice.rewrite.rule import RewriteRule
from torchdevice.rewrite.ruleset import RuleSet

Form = Literal["object", "string"]
"""How a value is written: ``object`` where it goes straight into torch (a ``torch.device``),
``string`` where the program keeps it (a string stays a string: the accelerator's type)."""

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_OWN_SCOPE = (*_SCOPES, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_PARAMETER = re.compile(r"(?i)^(\w*_)?(dev|device)$")
"""What a parameter holding the caller's device is called."""
_VERSION = re.compile(r"version|_g[et]_|greater|less|hasattr|torch_\d|TORCH_\d", re.IGNORECASE)
"""What a test choosing between torch releases looks like."""


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


class Facts:
    """Module-wide knowledge, computed on demand."""

    def __init__(self, shape: Outline, imports: ImportMap, rules: RuleSet, source: str) -> None:
        self.shape, self.imports, self.rules, self.source = shape, imports, rules, source
        self.available = {rules.available.match, rules.available.to}
        counts = [r for r in rules.calls.values() if r.match.endswith(".device_count")]
        self.counts = {name for r in counts for name in (r.match, r.to)}
        self.flags: set[str] = set()
        """Names (``use_cuda``, ``args.cuda``) assigned a value that is true only with an accelerator."""
        self.holders: list[Holder] = []
        self.parameters: list[Holder] = []
        """Parameters holding the caller's device, of the functions around the units."""
        self._scope_bindings: dict[Scope, Counter[str]] = {}
        body = shape.tree.body if shape.tree is not None else []
        functions: dict[Scope, None] = {}
        for unit in shape.units:
            scope = unit.scopes[-1] if unit.scopes else None
            self._scan(unit.nodes, scope, set(scope.body if scope is not None else body))
            functions.update((s, None) for s in unit.scopes if not isinstance(s, ast.ClassDef))
        for function in functions:
            self.parameters += _device_parameters(function)  # type: ignore[arg-type]

    # --- the name of torch --------------------------------------------------------------------------

    @cached_property
    def module_torch(self) -> tuple[int, str] | None:
        """Index of the first top-level statement importing torch unconditionally, and the name it binds."""
        return next(((i, s.binds_torch) for i, s in enumerate(self.shape.statements) if s.binds_torch), None)

    @cached_property
    def alias(self) -> str | None:
        """The name torch is imported under: at module level if it is, else anywhere; None when nowhere."""
        if self.module_torch is not None:
            return self.module_torch[1]
        for node in self.shape.imports:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "torch" or (a.asname is None and a.name.startswith("torch.")):
                        return a.asname or "torch"
        return None

    def torch_ready(self, unit: Unit, scopes: tuple[Scope, ...]) -> bool:
        """Is torch imported where code of ``unit`` inside ``scopes`` runs (so that the accelerator can be named
        there)? Code that runs when the module is imported needs an unconditional module-level import before it."""
        in_function = any(not isinstance(s, ast.ClassDef) for s in scopes)
        if self.module_torch is not None:
            return in_function or unit.top > self.module_torch[0] or self.shape.statements[unit.top].defines
        if self.alias is None:
            return True  # ``import torch`` will be added before the first statement that needs it
        return in_function and any(
            binds_torch(node) and (self._module_level(node) or any(
                s.lineno <= node.lineno <= (s.end_lineno or s.lineno) for s in scopes))
            for node in self.shape.imports)

    def _module_level(self, node: ast.stmt) -> bool:
        """Is this statement outside every function (module level, possibly under ``if``/``try``)?"""
        return not any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and
                       s.lineno <= node.lineno <= (s.end_lineno or s.lineno) for s in self._functions)

    @cached_property
    def _functions(self) -> list[ast.stmt]:
        tree = self.shape.tree
        return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))] if tree else []

    # --- does an accelerator exist where this runs? ----------------------------------------------------

    def accelerated(self, conditions: Iterable[Condition]) -> bool:
        """Do these conditions hold only where an accelerator exists (CUDA checks, ``if use_cuda:``...)?"""
        return any(self.guard_of(test) is holds for test, holds, _ in conditions)

    def guard_of(self, test: ast.expr) -> bool | None:
        """True: ``test`` holds only with an accelerator; False: it fails only with one (``not ...``)."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.guard_of(test.operand)
            return None if inner is None else not inner
        if isinstance(test, ast.BoolOp):
            found = [self.guard_of(v) for v in test.values]
            if isinstance(test.op, ast.And):
                return True if True in found else None
            return False if False in found and all(f is False for f in found) else None
        if isinstance(test, ast.Call):
            qualified = self.imports.resolve_ast(test.func)
            if not test.args and qualified in self.available | self.counts:
                return True
            if isinstance(test.func, ast.Attribute) and test.func.attr == "startswith" and test.args:
                return True if self._is_cuda(test.args[0]) else None
            return None
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            return self._compare(test.left, test.ops[0], test.comparators[0])
        if isinstance(test, ast.Attribute) and test.attr == "is_cuda":
            return True
        if isinstance(test, (ast.Name, ast.Attribute)) and ast.unparse(test) in self.flags:
            return True
        return None

    def _compare(self, left: ast.expr, op: ast.cmpop, right: ast.expr) -> bool | None:
        if isinstance(left, ast.Call) and self.guard_of(left) and isinstance(right, ast.Constant) and \
                isinstance(right.value, int):  # torch.cuda.device_count() > 0
            low = {ast.Gt: right.value + 1, ast.GtE: right.value, ast.Eq: right.value}.get(type(op))
            high = {ast.Lt: right.value - 1, ast.LtE: right.value, ast.Eq: right.value}.get(type(op))
            if low is not None and low >= 1 or isinstance(op, ast.NotEq) and right.value == 0:
                return True
            return False if high == 0 else None
        if isinstance(op, (ast.Eq, ast.NotEq)) and (self._is_cuda(left) or self._is_cuda(right)) or \
                isinstance(op, (ast.In, ast.NotIn)) and (self._is_cuda(left) or self._only_accelerators(right)):
            return isinstance(op, (ast.Eq, ast.In))
        return None

    def _is_cuda(self, node: ast.expr) -> bool:
        return isinstance(node, ast.Constant) and node.value == self.rules.device.rule.match

    def _is_cpu(self, node: ast.expr) -> bool:
        return isinstance(node, ast.Constant) and node.value == self.rules.device.rule.cpu

    def _only_accelerators(self, node: ast.expr) -> bool:
        """``("cuda", "xpu")``: device types that include CUDA and not the CPU."""
        if not isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return False
        values = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
        return self.rules.device.rule.match in values and self.rules.device.rule.cpu not in values

    @property
    def guard_words(self) -> tuple[str, ...]:
        """Text a test must contain for ``guard_of`` to find anything in it."""
        flags = (f.rpartition(".")[2] for f in self.flags)
        return (self.rules.device.rule.match, "is_available", "device_count", *flags)

    # --- fallbacks for older torch releases ------------------------------------------------------------

    @staticmethod
    def gate_test(test: str) -> bool:
        """Does a test (source text) choose between torch releases (``torch_ge_2_7``, ``hasattr(torch, ...)``)?"""
        return _VERSION.search(test) is not None

    def agnostic_name(self, qualified: str) -> bool:
        """Is ``qualified`` a device-agnostic API the rules write (``torch.accelerator.*``, ``torch.Stream``...)?"""
        return qualified.startswith("torch.accelerator.") or qualified in self._targets

    @cached_property
    def _targets(self) -> set[str]:
        return {r.to for r in self.rules.calls.values()}

    def gate(self, unit: Unit) -> ast.If | None:
        """The ``if`` whose other branch uses the device-agnostic API for old torch's sake, when ``unit`` is
        the CUDA fallback of it."""
        for test, holds, node in unit.conditions:
            if node is None or not self.gate_test(ast.unparse(test)):
                continue
            other = node.orelse if holds else node.body
            if any(isinstance(n, (ast.Name, ast.Attribute)) and self.agnostic_name(self.imports.resolve_ast(n) or "")
                   for statement in other for n in ast.walk(statement)):
                return node
        return None

    # --- names that hold the program's device ----------------------------------------------------------

    def _scan(self, nodes: Iterable[ast.stmt], scope: Scope | None, direct: set[ast.stmt]) -> None:
        """Find flags and holders among ``nodes`` (statements of ``scope``; ``direct``: its own body)."""
        for node in nodes:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if self.guard_of(node.value) is True:
                    self.flags.update(ast.unparse(t) for t in targets if isinstance(t, (ast.Name, ast.Attribute)))
                form = self.idiom(node.value)
                if form is not None and node in direct and len(targets) == 1 and isinstance(targets[0], ast.Name):
                    self.holders.append(Holder(targets[0].id, node.lineno, form, scope))
            elif isinstance(node, _SCOPES):
                self._scan(node.body, node, set(node.body))
            else:
                for block, _ in blocks(node):
                    self._scan(block, scope, direct)

    def idiom(self, value: ast.expr) -> Form | None:
        """``torch.device("cuda" if torch.cuda.is_available() else "cpu")`` and its kin (already rewritten
        too): the accelerator, or the CPU; ``"cuda" if ... else "cpu"``: its type."""
        if isinstance(value, ast.Call) and self.imports.resolve_ast(value.func) == "torch.device" and \
                len(value.args) == 1 and not value.keywords and self.idiom(value.args[0]) == "string":
            return "object"
        if isinstance(value, ast.IfExp) and isinstance(value.test, ast.Call) and not value.test.args and \
                self.imports.resolve_ast(value.test.func) in self.available:
            if self._is_cuda(value.body) and self._is_cpu(value.orelse):
                return "string"
            body, orelse = (v.args[0] if isinstance(v, ast.Call) and len(v.args) == 1 and
                            self.imports.resolve_ast(v.func) == "torch.device" else None
                            for v in (value.body, value.orelse))
            return "object" if body is not None and orelse is not None and self._is_cuda(body) and \
                self._is_cpu(orelse) else None
        if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or) and len(value.values) == 2:
            first = value.values[0]
            if isinstance(first, ast.Call) and self.imports.resolve_ast(first.func) == \
                    "torch.accelerator.current_accelerator":
                return "object"
        if isinstance(value, ast.Attribute) and value.attr == "type" and self.idiom(value.value) == "object":
            return "string"
        return None

    def holder_at(self, line: int, scopes: tuple[Scope, ...], given: bool = False) -> Holder | None:
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

    # --- rule groups and launchers --------------------------------------------------------------------

    @cached_property
    def _references(self) -> list[tuple[ast.expr, str, ast.Call | None]]:
        """Every reference to something with a rule: the node, its qualified name, the call it is the callee of."""
        found: list[tuple[ast.expr, str, ast.Call | None]] = []
        if self.shape.tree is None:
            return found
        callees: dict[ast.expr, ast.Call] = {}
        for node in ast.walk(self.shape.tree):
            if isinstance(node, ast.Call):
                callees[node.func] = node
            if isinstance(node, (ast.Name, ast.Attribute)):
                qualified = self.imports.resolve_ast(node)
                if qualified is not None and (qualified in self.rules.calls or qualified in self.rules.contexts
                                              or qualified in self.rules.launchers):
                    found.append((node, qualified, callees.get(node)))
        return found

    def group_blocker(self, group: str) -> str | None:
        """Why the rules of ``group`` cannot all be rewritten in this module, or None when they can."""
        members = {r.match: r for r in self.rules.groups[group]}
        makers = {name for r in members.values() for name in r.made_by}
        made: set[str] = set()
        for node in ast.walk(self.shape.tree) if self.shape.tree is not None else ():
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.withitem)):
                value = node.context_expr if isinstance(node, ast.withitem) else node.value
                targets = [node.optional_vars] if isinstance(node, ast.withitem) else (
                    node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(value, ast.Call) and self.imports.resolve_ast(value.func) in makers:
                    made.update(ast.unparse(t) for t in targets if t is not None)
        for node, qualified, call in self._references:
            rule = members.get(qualified)
            if rule is None:
                continue
            line = f"{qualified} at line {node.lineno}"
            if rule.kind == "context":
                if call is None or call.keywords or len(call.args) != 1:
                    return f"{line} is not called with one stream"
                (arg,) = call.args
                if not (isinstance(arg, ast.Call) and self.imports.resolve_ast(arg.func) in makers) and \
                        ast.unparse(arg) not in made:
                    return f"{line} is given {ast.unparse(arg)}, not a stream made by {', '.join(sorted(makers))}"
            elif call is None and not is_rename(rule):
                return f"{line} is used without being called"
        return None

    @cached_property
    def launch_counts(self) -> set[str]:
        """Names assigned an accelerator count that a launcher uses as its number of processes."""
        names: set[str] = set()
        if not any(name.rpartition(".")[2] in self.source for name in self.rules.launchers):
            return names
        for _, qualified, call in self._references:
            rule = self.rules.launchers.get(qualified)
            if rule is None or call is None:
                continue
            count = _argument(call, rule.params, rule.keywords[0])
            if isinstance(count, ast.Name):
                names.add(count.id)
        return names


def _argument(call: ast.Call, params: tuple[str, ...], name: str) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    index = params.index(name)
    return call.args[index] if len(call.args) > index and not any(
        isinstance(a, ast.Starred) for a in call.args[: index + 1]) else None


def _own_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of a scope's body, not entering nested scopes (whose names and defaults are still seen)."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _OWN_SCOPE):
            if isinstance(node, _SCOPES):
                stack.extend(node.decorator_list)
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _count_bindings(body: list[ast.stmt]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for node in _own_nodes(body):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            counts[node.id] += 1
        elif isinstance(node, _SCOPES):
            counts[node.name] += 1
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            counts.update((a.asname or a.name).partition(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            counts[node.name] += 1
    return counts


def scopes_within(nodes: Iterable[ast.stmt], line: int) -> tuple[Scope, ...]:
    """The functions and classes among ``nodes`` (and inside them) that contain ``line``, outermost first."""
    found: list[Scope] = []
    statements = list(nodes)
    while statements:
        node = next((n for n in statements if n.lineno <= line <= (n.end_lineno or n.lineno)), None)
        if node is None:
            break
        if isinstance(node, _SCOPES):
            found.append(node)
        statements = [s for block, _ in blocks(node) for s in block]
    return tuple(found)


def is_rename(rule: RewriteRule) -> bool:
    """A call rule whose replacement also stands for the original where it is not called (a type in
    ``isinstance``, an exception class): no arguments to add, nothing to guard."""
    return (rule.kind == "call" and rule.device_type == "none" and rule.without_accelerator is None
            and not rule.result_methods)


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
