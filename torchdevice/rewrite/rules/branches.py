"""CUDA checks that stay (``check`` rules ``requirement`` and ``cuda-only-branch``): ``assert
torch.cuda.is_available()`` and ``if not torch.cuda.is_available(): raise`` state a requirement of CUDA;
``if torch.cuda.is_available():`` around CUDA-only APIs that stay keeps that branch CUDA-only. Both are
reported, and the checks are marked for the ``call`` rule to leave alone."""

from __future__ import annotations

import libcst as cst

from torchdevice.rewrite.rules.base import Rule
from torchdevice.rewrite.spellings import device_type_of, names_cuda
from torchdevice.rewrite.syntax import code, last_statement

_EXITS = ("exit", "sys.exit", "os._exit", "quit")


class Branches(Rule):
    kinds = ("requirement", "cuda-only-branch")
    writes = ("kept_checks",)

    def visit_If(self, node: cst.If) -> None:
        branches = [node.body, *([node.orelse.body] if isinstance(node.orelse, cst.Else) else [])]
        if not (any(map(_exits, branches)) and self._requirement(node.test, node.test)):
            self._keep_checks(node, node.test, node.body)

    def visit_Assert(self, node: cst.Assert) -> None:
        if self.rw.guard_of(node.test) is True:
            self._requirement(node, node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if device_type_of(node, self.rules.device.rule) is None:
            self._keep_checks(node, node.test, node.body)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        if isinstance(node.operator, cst.And):
            self._keep_checks(node, node.left, node.right)

    def _requirement(self, node: cst.CSTNode, test: cst.BaseExpression) -> bool:
        """The checks in ``test`` kept and the requirement reported; False when ``test`` checks nothing of CUDA."""
        checks = self.rw.available_calls(test, counts=True)
        if checks:
            self.rw.marks.kept_checks.update(checks)
            self.rw.check(node, "requirement", f"{code(test).strip()[:60]}")
        return bool(checks)

    def _keep_checks(self, node: cst.CSTNode, test: cst.BaseExpression, guarded: cst.CSTNode) -> None:
        """Keep ``torch.cuda.is_available()`` in ``test`` when what it guards uses CUDA-only APIs that stay."""
        checks = self.rw.available_calls(test)
        if not checks:
            return
        stays = self._cuda_only(guarded)
        if stays is None and not self.rw.torch_ready(node) and names_cuda(guarded, self.rules.device.rule):
            stays = f'"{self.rules.device.rule.match}", which cannot be rewritten here'  # the pair stays together
        if stays is not None:
            self.rw.marks.kept_checks.update(checks)
            self.rw.check(checks[0], "cuda-only-branch", f"{self.rules.available.match}() guarding {stays}")

    def _cuda_only(self, node: cst.CSTNode) -> str | None:
        """A CUDA-only name ``node`` uses that stays as it is (no rule rewrites it here), if any."""
        for _, qualified in self.rw.chains(node):
            rule = self.rules.lookup(qualified)
            if rule is not None and (rule.kind == "report" or
                                     rule.group and self.rw.group_left(rule.group) is not None):
                return qualified
        return None


def _exits(block: cst.BaseSuite) -> bool:
    """Does the block end by raising or leaving the program (``sys.exit``)?"""
    last = last_statement(block)
    return isinstance(last, cst.Raise) or isinstance(last, cst.Expr) and isinstance(last.value, cst.Call) and \
        code(last.value.func) in _EXITS
