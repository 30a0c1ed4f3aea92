"""``index`` rules: an integer device index where a device is expected (``model.to(local_rank)``, ``device=0``):
CUDA device N -> the accelerator's device N."""

from __future__ import annotations

import libcst as cst

from torchdevice.rewrite.rules.base import Rule


class Indices(Rule):
    kinds = ("index",)
    reads = ("device_indices",)
    writes = ("device_indices",)

    def visit_Call(self, node: cst.Call) -> None:
        index = self.rules.index
        if index is None or not node.args:
            return
        qualified = self.rw.imports.resolve_cst(node.func)
        method = node.func.attr.value if isinstance(node.func, cst.Attribute) else None
        first = next((a for a in node.args if a.keyword is None and not a.star), None)
        candidates = [first] if method in index.rule.methods and first is not None and first is node.args[0] else []
        if qualified is not None and qualified.startswith("torch.") and self.rules.lookup(qualified) is None:
            candidates += [a for a in node.args if a.keyword is not None and a.keyword.value in index.rule.keywords]
        for arg in candidates:
            if self.rw.index_like(arg.value):
                self.rw.marks.device_indices[arg.value] = index.rule

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        rule = self.rw.marks.device_indices.get(original_node.value)
        if rule is None or not self.rw.allowed(original_node, rule):
            return updated_node
        self.rw.rewrote(rule)
        return updated_node.with_changes(value=self.rw.forms.indexed(self.rw.holder(original_node), updated_node.value))
