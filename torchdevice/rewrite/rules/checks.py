"""``check`` rules found in expressions: tests against ``"cuda"`` or ``"nccl"`` (``comparison``), command
lines that pick CUDA (``command-line``), CUDA reached through strings (``dynamic``). Left as is, reported."""

from __future__ import annotations

import re

import libcst as cst

from torchdevice.rewrite.rules.base import Rule
from torchdevice.rewrite.spellings import index_of
from torchdevice.rewrite.syntax import code, string_value

_COMMAND_LINE = re.compile(r"--[\w-]*device[= ]cuda\b")


class Checks(Rule):
    kinds = ("comparison", "command-line", "dynamic")
    reads = ("rewritten_tests",)

    def visit_Call(self, node: cst.Call) -> None:
        rw, cuda = self.rw, self.rules.device.rule.match
        func = node.func
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        if method == "startswith" and node.args and string_value(node.args[0].value) == cuda and \
                node not in rw.marks.rewritten_tests:
            rw.check(node, "comparison", f"{code(node)[:60]}")
        elif method == "add_argument" and any(
            a.keyword is not None and a.keyword.value == "choices" and _lists(a.value, cuda) for a in node.args
        ):
            rw.check(node, "command-line", "choices that name CUDA and not the other accelerators")
        elif isinstance(func, cst.Name) and func.value == "getattr" and len(node.args) >= 2:
            name = string_value(node.args[1].value)
            if rw.imports.resolve_cst(node.args[0].value) == "torch" and name and self.rules.mentions(name):
                rw.check(node, "dynamic", f"getattr(torch, {name!r})")
        elif isinstance(func, cst.Name) and func.value in ("eval", "exec"):
            if any(self.rules.mentions(string_value(a.value) or "") for a in node.args):
                rw.check(node, "dynamic", f"code in a string passed to {func.value}()")

    def visit_Comparison(self, node: cst.Comparison) -> None:
        """``device == "cuda"``, ``"cuda" in device``, ``device.type in ("cuda", "xpu")``, ``backend == "nccl"``
        are left as is (a CUDA-only branch stays CUDA-only) and reported: they are false on other devices."""
        if node in self.rw.marks.rewritten_tests or not any(_literal(side) for side in (node.left, *(
                t.comparator for t in node.comparisons))):
            return
        left = node.left
        for target in node.comparisons:
            for side in (left, target.comparator):
                for value in self.rules.values:
                    if _lists(side, value.rule.match) or value.rule.kind == "device" and index_of(side, value.rule):
                        self.rw.check(node, "comparison", code(node)[:60])
                        return
            left = target.comparator

    def visit_List(self, node: cst.List) -> None:
        self._command_line(node)

    def visit_Tuple(self, node: cst.Tuple) -> None:
        self._command_line(node)

    def _command_line(self, node: cst.List | cst.Tuple) -> None:
        """``["--device", "cuda"]``: a command line that picks CUDA."""
        values = [string_value(e.value) for e in node.elements]
        cuda = self.rules.device.rule.match
        for option, value in zip(values, values[1:], strict=False):
            if option and option.startswith("--") and self.rules.device.holds(option.lstrip("-").replace("-", "_")) \
                    and value is not None and (value == cuda or value.startswith(cuda + ":")):
                self.rw.check(node, "command-line", f"{option} {value}")
                return

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self._command_text(node, node.value)

    def visit_FormattedStringText(self, node: cst.FormattedStringText) -> None:
        self._command_text(node, node.value)

    def _command_text(self, node: cst.CSTNode, text: str) -> None:
        """``"python train.py --device cuda"``: a command line that picks CUDA."""
        found = _COMMAND_LINE.search(text) if "--" in text else None
        if found is not None:
            self.rw.check(node, "command-line", found.group(0))


def _literal(node: cst.CSTNode) -> bool:
    """Is ``node`` a string, or a tuple, list or set with one (what a comparison with "cuda" needs)?"""
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return any(isinstance(e.value, cst.SimpleString) for e in node.elements)
    return isinstance(node, cst.SimpleString)


def _lists(node: cst.CSTNode, value: str) -> bool:
    """Is ``node`` the string ``value``, or a tuple, list or set of strings holding it?"""
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return any(string_value(e.value) == value for e in node.elements)
    return string_value(node) == value
