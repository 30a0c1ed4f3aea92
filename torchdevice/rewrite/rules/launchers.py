"""``launcher`` rules: a launcher starting one process per accelerator (``mp.spawn(fn, nprocs=<count>)``, or a
name assigned the count) starts at least one: ``max(<count>, 1)``."""

from __future__ import annotations

import libcst as cst

from torchdevice.rewrite.arguments import comma
from torchdevice.rewrite.rules.base import Rule
from torchdevice.rewrite.syntax import argument


class Launchers(Rule):
    kinds = ("launcher",)
    reads = ("launch_counts",)
    writes = ("launch_counts",)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._count(target.target, node.value)

    def _count(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """``world_size = torch.cuda.device_count()`` where a launcher starts that many processes."""
        rw = self.rw
        if not isinstance(target, cst.Name) or target.value not in rw.facts.groups.launch_counts or rw.accelerated:
            return
        rule = next(iter(self.rules.launchers.values()))
        if rw.counts(value):
            rw.marks.launch_counts[value] = rule
        elif any(rw.counts(c) for c in rw.available_calls(value, counts=True)):
            rw.note(value, rule, f"{target.value} counts accelerators and starts that many processes: none "
                                 "where there is no accelerator; left as is")

    def visit_Call(self, node: cst.Call) -> None:
        rule = self.rules.launchers.get(self.rw.imports.resolve_cst(node.func) or "")
        if rule is None:
            return
        count = argument(node.args, rule.params.index(rule.keywords[0]), rule.keywords)
        if count is not None and self.rw.counts(count.value) and not self.rw.accelerated:
            self.rw.marks.launch_counts[count.value] = rule

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        rule = self.rw.marks.launch_counts.get(original_node)
        if rule is None or not self.rw.allowed(original_node, rule):
            return updated_node
        self.rw.rewrote(rule)
        return cst.Call(cst.Name("max"), [cst.Arg(updated_node, comma=comma()), cst.Arg(cst.Integer("1"))])
