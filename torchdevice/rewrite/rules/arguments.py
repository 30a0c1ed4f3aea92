"""``argument`` rules: arguments that name CUDA devices and are rejected elsewhere (DDP's ``device_ids``):
``value`` -> ``value if <accelerator>.type == "cuda" else None``."""

from __future__ import annotations

import libcst as cst

from torchdevice.rewrite.rules.base import Rule
from torchdevice.rewrite.syntax import string_value


class Arguments(Rule):
    kinds = ("argument",)
    writes = ("rewritten_tests",)

    def visit_Call(self, node: cst.Call) -> None:
        if self.rw.imports.resolve_cst(node.func) in self.rules.arguments:
            for arg in node.args:
                if self._only_on(arg.value):
                    self.rw.marks.rewritten_tests.add(arg.value.test)  # type: ignore[attr-defined]

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        rule = self.rules.arguments.get(self.rw.imports.resolve_cst(original_node.func) or "")
        if rule is None or not self.rw.allowed(original_node, rule):
            return updated_node
        names = iter(rule.params)
        args = []
        for arg in updated_node.args:
            if arg.star:
                names = iter(())  # the positions after *args are unknown
            name = arg.keyword.value if arg.keyword is not None else next(names, None)
            value = arg.value
            if name in rule.keywords and not self._only_on(value) and \
                    not (isinstance(value, cst.Name) and value.value == "None"):
                self.rw.rewrote(rule)
                arg = arg.with_changes(value=self.rw.forms.only_on(self.rw.holder(original_node), value,
                                                                   self.rules.device.rule.match))
            args.append(arg)
        return updated_node.with_changes(args=args)

    def _only_on(self, value: cst.BaseExpression) -> bool:
        """``value if <accelerator>.type == "cuda" else None`` (written by an earlier run)."""
        if not isinstance(value, cst.IfExp) or not isinstance(value.orelse, cst.Name) or value.orelse.value != "None":
            return False
        test = value.test
        return isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and \
            isinstance(test.comparisons[0].operator, cst.Equal) and \
            string_value(test.comparisons[0].comparator) == self.rules.device.rule.match and \
            (isinstance(test.left, cst.Attribute) and test.left.attr.value == "type" or isinstance(test.left, cst.Name))
