"""``report`` rules with ``keywords``: calls passing one of them are reported (``torch.load(weights_only=...)``
style choices that matter only on CUDA). Reports of CUDA-only names are made where names are resolved
(:mod:`~torchdevice.rewrite.rules.references`)."""

from __future__ import annotations

import libcst as cst

from torchdevice.rewrite.rules.base import Rule
from torchdevice.rewrite.syntax import code


class Reports(Rule):
    kinds = ("report",)

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.rw.imports.resolve_cst(node.func)
        rule = self.rules.reports.get(qualified or "")
        if rule is None or not rule.keywords:
            return
        chosen = [a.keyword.value for a in node.args if a.keyword is not None and a.keyword.value in rule.keywords
                  and code(a.value) not in ("False", "None", "0", '""', "''")]
        if chosen:
            self.rw.note(node, rule, f"{qualified}({', '.join(f'{k}=...' for k in chosen)}): {rule.doc}")
