"""How code spells a CUDA device: ``"cuda:N"`` and its spellings, and ``"cuda" if "cuda" in x else "cpu"``."""

from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m

from torchdevice.records.rewrite import RewriteRule
from torchdevice.rewrite.syntax import string_value

_INDEX_FORMAT = re.compile(r"\{0?\}|%[dis]")


def index_of(node: cst.BaseExpression, rule: RewriteRule) -> cst.BaseExpression | None:
    """The index N of a device string ``"cuda:N"`` (``rule``: the device rule) spelled as a literal, an f-string,
    ``.format``, ``+ str()`` or ``%``; None for anything else."""
    prefix = rule.match + ":"
    if isinstance(node, cst.SimpleString):
        value = string_value(node)
        if value is not None and value.startswith(prefix) and value[len(prefix):].isdigit():
            return cst.Integer(value[len(prefix):])
    elif isinstance(node, cst.FormattedString) and len(node.parts) == 2:
        text, part = node.parts
        if isinstance(text, cst.FormattedStringText) and text.value == prefix and \
                isinstance(part, cst.FormattedStringExpression) and part.conversion is None and \
                part.format_spec is None:
            return part.expression
    elif isinstance(node, cst.BinaryOperation) and isinstance(node.left, cst.SimpleString):
        left = string_value(node.left) or ""
        right = node.right
        if isinstance(node.operator, cst.Add) and left == prefix and isinstance(right, cst.Call) and \
                isinstance(right.func, cst.Name) and right.func.value == "str" and len(right.args) == 1:
            return right.args[0].value
        if isinstance(node.operator, cst.Modulo) and left.startswith(prefix) and \
                _INDEX_FORMAT.fullmatch(left[len(prefix):]) and not isinstance(right, cst.Tuple):
            return right
    elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
            node.func.attr.value == "format" and isinstance(node.func.value, cst.SimpleString):
        template = string_value(node.func.value) or ""
        if template.startswith(prefix) and _INDEX_FORMAT.fullmatch(template[len(prefix):]) and \
                len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star:
            return node.args[0].value
    return None


def device_type_of(node: cst.IfExp, rule: RewriteRule) -> cst.BaseExpression | None:
    """``X`` of ``"cuda" if "cuda" in X else "cpu"`` (or ``X.startswith("cuda")``): the device type of X."""
    if string_value(node.body) != rule.match or string_value(node.orelse) != rule.cpu:
        return None
    test = node.test
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and \
            isinstance(test.comparisons[0].operator, cst.In) and string_value(test.left) == rule.match:
        return test.comparisons[0].comparator
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Attribute) and \
            test.func.attr.value == "startswith" and len(test.args) == 1 and \
            string_value(test.args[0].value) == rule.match:
        return test.func.value
    return None


def names_cuda(node: cst.CSTNode, rule: RewriteRule) -> bool:
    """Does ``node`` hold the string ``"cuda"`` (or ``"cuda:N"``)?"""
    return any(value == rule.match or value.startswith(rule.match + ":")
               for value in map(string_value, m.findall(node, m.SimpleString())) if value is not None)
