"""The one libcst transformer of a rewrite: it walks a unit once and runs every rule's hooks on each node.

LibCST composes visitors in one pass (``BatchableCSTVisitor``) but not transformers; this does the same for
the rules of :mod:`~torchdevice.rewrite.rules`: their ``visit_*`` hooks run in the rules' order on the way
down, their ``leave_*`` hooks chain on the way up. Written nodes are then tidied (parentheses that a
written guard or idiom does not need where it is a whole argument, value or default).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, partial

import libcst as cst

from torchdevice.rewrite.rules import RULES
from torchdevice.rewrite.state import Rewrite

Visit = Callable[[cst.CSTNode], "bool | None"]
Leave = Callable[[cst.CSTNode, cst.CSTNode], cst.CSTNode]


class Rewriter(cst.CSTTransformer):
    """Apply the rules to the units of one module, in textual order, sharing ``rw``."""

    def __init__(self, rw: Rewrite) -> None:
        super().__init__()
        self.rw = rw
        self.visits: dict[type[cst.CSTNode], list[Visit]] = {}
        self.leaves: dict[type[cst.CSTNode], list[Leave]] = {}
        for make in RULES:
            rule = make(rw)
            for kind, node_type, name in _hooks(make):
                table: dict = self.visits if kind == "visit" else self.leaves
                table.setdefault(node_type, []).append(getattr(rule, name))
        for node_type, tidy in _TIDY.items():
            self.leaves.setdefault(node_type, []).append(partial(_tidied, tidy, rw))

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.rw.path.append(node)
        enter = True
        for hook in self.visits.get(type(node), ()):
            if hook(node) is False:
                enter = False
        return enter

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[override]
        result = updated_node
        for hook in self.leaves.get(type(original_node), ()):
            result = hook(original_node, result)
        self.rw.path.pop()
        if result is not updated_node:
            self.rw.changed = True
        return result


@cache
def _hooks(rule: type) -> tuple[tuple[str, type[cst.CSTNode], str], ...]:
    """``(visit or leave, node type, method name)`` of each hook a rule class defines."""
    found = (name.partition("_") for name in dir(rule))
    return tuple((kind, getattr(cst, node), f"{kind}_{node}") for kind, _, node in found if kind in ("visit", "leave"))


def _tidied(tidy, rw: Rewrite, original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:
    return tidy(rw, updated)


def _unparenthesized(rw: Rewrite, holder):
    """A written guard or idiom that is a whole argument, assigned or returned value, without parentheses."""
    value = holder.value
    if value is None:
        return holder
    if rw.forms.what(value) == "guarded":
        return holder.with_changes(value=value.with_changes(lpar=(), rpar=()))
    return holder.with_changes(value=rw.forms.bare(value))


def _bare_default(rw: Rewrite, param: cst.Param) -> cst.Param:
    default = param.default
    return param if default is None else param.with_changes(default=rw.forms.bare(default))


_TIDY: dict[type[cst.CSTNode], Callable] = {
    cst.Arg: _unparenthesized, cst.Return: _unparenthesized, cst.Assign: _unparenthesized,
    cst.AnnAssign: _unparenthesized, cst.Param: _bare_default,
}
