"""What every rule is: hooks named as libcst's (``visit_Call(node)``, ``leave_Call(original, updated)``) on
the state of the rewrite they share, and the marks it reads and leaves for the other rules."""

from __future__ import annotations

from torchdevice.rewrite.state import Rewrite


class Rule:
    """One kind of rewrite rule (``catalog/overlays/rewrite.yaml``), applied by ``rewriter.Rewriter`` in the one
    traversal of each unit, in the order of ``RULES``.

    ``visit_<Node>(node)`` runs top-down (False: do not enter ``node``; the other rules still see ``node``
    itself); ``leave_<Node>(original, updated)`` runs bottom-up and gets what the rules before it made of
    the node. What a rule leaves on a node for later, for itself or another rule, is a mark
    (``self.rw.marks``, :class:`~torchdevice.rewrite.state.Marks`); ``reads`` and ``writes`` name the marks
    it uses, and ``RULES`` runs every rule that writes a mark before every other rule that reads it.
    """

    kinds: tuple[str, ...] = ()
    """The kinds of rule it applies (for ``check`` rules, their analyses); their golden fixtures are in
    ``tests/rewrite/fixtures/<module>/``, the module named as the rule's."""
    reads: tuple[str, ...] = ()
    """The marks (fields of ``Marks``) it reads."""
    writes: tuple[str, ...] = ()
    """The marks it writes, itself or through ``Rewrite.expect`` (``expected``) and ``Rewrite.guard``
    (``guarded_lines``)."""

    def __init__(self, rw: Rewrite) -> None:
        self.rw = rw
        self.rules = rw.rules
