"""Which tests hold only where an accelerator exists (``torch.cuda.is_available()``, ``device.type == "cuda"``,
a name assigned such a test), so that nothing under them needs a guard."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence

from torchdevice.rewrite.outline import Condition
from torchdevice.rewrite.ruleset import RuleSet
from torchdevice.source.names import ImportMap


class Guards:
    def __init__(self, imports: ImportMap, rules: RuleSet) -> None:
        self.imports, self.rules = imports, rules
        self.available = {rules.available.match, rules.available.to}
        counts = [r for r in rules.calls.values() if r.match.endswith(".device_count")]
        self.counts = {name for r in counts for name in (r.match, r.to)}
        self.flags: set[str] = set()
        """Names (``use_cuda``, ``args.cuda``) assigned a value that is true only with an accelerator."""

    def learn(self, value: ast.expr, targets: Sequence[ast.expr]) -> None:
        """``targets = value``, in the module's order: names assigned a guard are flags."""
        if self.guard_of(value) is True:
            self.flags.update(ast.unparse(t) for t in targets if isinstance(t, (ast.Name, ast.Attribute)))

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
                return True if self.is_cuda(test.args[0]) else None
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
        if isinstance(op, (ast.Eq, ast.NotEq)) and (self.is_cuda(left) or self.is_cuda(right)) or \
                isinstance(op, (ast.In, ast.NotIn)) and (self.is_cuda(left) or self._only_accelerators(right)):
            return isinstance(op, (ast.Eq, ast.In))
        return None

    def is_cuda(self, node: ast.expr) -> bool:
        return isinstance(node, ast.Constant) and node.value == self.rules.device.rule.match

    def is_cpu(self, node: ast.expr) -> bool:
        return isinstance(node, ast.Constant) and node.value == self.rules.device.rule.cpu

    def _only_accelerators(self, node: ast.expr) -> bool:
        """``("cuda", "xpu")``: device types that include CUDA and not the CPU."""
        if not isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return False
        values = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
        return self.rules.device.rule.match in values and self.rules.device.rule.cpu not in values

    @property
    def words(self) -> tuple[str, ...]:
        """Text a test must contain for ``guard_of`` to find anything in it."""
        flags = (f.rpartition(".")[2] for f in self.flags)
        return (self.rules.device.rule.match, "is_available", "device_count", *flags)
