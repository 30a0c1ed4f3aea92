"""Guards for what needs an accelerator: a statement made of such a call goes under
``if <accelerator available>:`` (neighbours share one), and the methods of objects a rewritten call makes that
raise without one (``event.record()``) are guarded like the calls themselves (``Rewrite.guard``)."""

from __future__ import annotations

import libcst as cst

from torchdevice.records.rewrite import RewriteRule
from torchdevice.rewrite.rules.base import Rule
from torchdevice.rewrite.state import Rewrite
from torchdevice.rewrite.syntax import code


class Guards(Rule):
    reads = ("guarded_lines",)
    writes = ("guarded_lines",)

    def __init__(self, rw: Rewrite) -> None:
        super().__init__(rw)
        self.receivers: dict[str, RewriteRule] = {}
        """Source of names bound to objects whose methods are guarded (events) -> the rule creating them."""

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._track(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._track(node.target, node.value)

    def _track(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """Remember names bound to objects a rewritten call creates whose methods are guarded."""
        if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)):
            for t, v in zip(target.elements, value.elements, strict=False):
                self._track(t.value, v.value)
            return
        if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
            value = value.elt
        elif isinstance(value, (cst.List, cst.Tuple)) and value.elements:
            value = value.elements[0].value
        if isinstance(value, cst.Call) and isinstance(target, (cst.Name, cst.Attribute)):
            rule = self.rules.calls.get(self.rw.imports.resolve_cst(value.func) or "")
            if rule is not None and rule.result_methods and self.rw.selection.enabled(rule.code):
                self.receivers[code(target)] = rule

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        """``event.record()`` and ``event.elapsed_time(other)``: guarded."""
        func = original_node.func
        if not isinstance(func, cst.Attribute) or not self.receivers:
            return updated_node
        receiver = func.value.value if isinstance(func.value, cst.Subscript) else func.value
        rule = self.receivers.get(code(receiver))
        if rule is None or func.attr.value not in rule.result_methods:
            return updated_node
        return self.rw.guard(original_node, updated_node, rule.result_methods[func.attr.value])

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.BaseStatement:
        if original_node not in self.rw.marks.guarded_lines:
            return updated_node
        return self.rw.forms.guard_statement(self.rw.forms.available(self.rules.available), updated_node)

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return updated_node.with_changes(body=self._merged(updated_node.body)) if self.rw.marks.guarded_lines \
            else updated_node

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.BaseSuite:
        return updated_node.with_changes(body=self._merged(updated_node.body)) if self.rw.marks.guarded_lines \
            else updated_node

    def _merged(self, body):
        """Neighbouring statements under the same guard share one ``if``."""
        forms = self.rw.forms
        out: list = []
        for statement in body:
            previous = out[-1] if out else None
            if previous is not None and forms.what(previous) == "guard" and forms.what(statement) == "guard":
                inner = statement.body.body[0].with_changes(leading_lines=statement.leading_lines)
                merged = previous.with_changes(body=previous.body.with_changes(body=[*previous.body.body, inner]))
                out[-1] = forms.tag(merged, "guard")
            else:
                out.append(statement)
        return out
