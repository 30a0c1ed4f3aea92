"""``check`` rule ``version-gate``: a conditional choosing between a device-agnostic API and its CUDA form for
old torch (``if torch_ge_2_7: torch.accelerator... else: torch.cuda...``) keeps its CUDA branch as it is, and
is reported. (A whole unit that is such a fallback is found from the outline: ``Facts.gate``.)"""

from __future__ import annotations

import libcst as cst

from torchdevice.rewrite.rules.base import Rule
from torchdevice.rewrite.syntax import code


class Gates(Rule):
    kinds = ("version-gate",)

    def leave_IfExp(self, original_node: cst.IfExp, updated_node: cst.IfExp) -> cst.BaseExpression:
        gated = self._gate(original_node, (original_node.body, original_node.orelse),
                           (updated_node.body, updated_node.orelse))
        return updated_node if gated is None else updated_node.with_changes(body=gated[0], orelse=gated[1])

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> cst.BaseStatement:
        orelse = updated_node.orelse
        if not isinstance(orelse, cst.Else) or not isinstance(original_node.orelse, cst.Else):
            return updated_node
        gated = self._gate(original_node, (original_node.body, original_node.orelse.body), (updated_node.body,
                                                                                            orelse.body))
        return updated_node if gated is None else \
            updated_node.with_changes(body=gated[0], orelse=orelse.with_changes(body=gated[1]))

    def _gate(self, node: cst.If | cst.IfExp, originals: tuple, updated: tuple) -> tuple | None:
        """The branches of ``node`` with the CUDA one kept as it was; None when ``node`` is no such conditional."""
        if all(o is u for o, u in zip(originals, updated, strict=True)):
            return None
        rw, keep = self.rw, [False] * len(originals)
        if rw.facts.gates.gate_test(code(node.test)):
            agnostic = [any(rw.facts.gates.agnostic_name(q) for _, q in rw.chains(o)) for o in originals]
            cuda = [any(self.rules.lookup(q) is not None for _, q in rw.chains(o)) for o in originals]
            keep = [cuda[i] and any(agnostic[j] for j in range(len(originals)) if j != i) for i in range(len(keep))]
        if not any(keep):
            same = len({code(u) for u in updated}) == 1 and len({code(o) for o in originals}) > 1
            keep = [same and o is not u for o, u in zip(originals, updated, strict=True)]
        if not any(keep):
            return None
        rw.check(node, "version-gate", "a conditional between " + " and ".join(
            code(o).strip().splitlines()[0][:40] for o in originals))
        return tuple(o if k else u for o, u, k in zip(originals, updated, keep, strict=True))
