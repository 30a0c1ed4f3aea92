"""Device and backend values: finding where one is expected, and writing the accelerator's there.

``"cuda"`` where a device is expected becomes ``_DEVICE`` when it goes straight into torch and
``_DEVICE.type`` (a string) where the program keeps it; ``"cuda:N"`` becomes an indexed device or
an f-string; ``"nccl"`` becomes the accelerator's default backend. ``X if <accelerator available>
else <cpu>`` (expression or ``if`` statement) collapses to ``X``.
"""

from __future__ import annotations

import libcst as cst

from torchdevice.rewrite.base import Context, Form, RewriterBase
from torchdevice.rewrite.syntax import code, held_name, option_name, single_assign, string_value


class ValueRewriting(RewriterBase):
    """The value part of the rewriter (mixed into :class:`~torchdevice.rewrite.transform.Rewriter`)."""

    # --- where values are expected (top-down) --------------------------------------------------------

    def mark_holder(self, name: str | None, value: cst.BaseExpression) -> None:
        """``value`` is stored under ``name`` (a variable, attribute, parameter, key): strings stay strings."""
        if name is None:
            return
        for rule in self.rules.values:
            if rule.holds(name):
                self.mark(value, rule, "string")

    def propagate(self, node: cst.CSTNode, *parts: cst.BaseExpression, form: Form | None = None) -> None:
        """The parts of an expression where a value is expected expect it too (``a if c else b``, ``a or b``)."""
        context: Context | None = self.contexts.get(id(node))
        if context is not None:
            for part in parts:
                self.mark(part, context.rule, form or context.form)

    def mark_arguments(self, node: cst.Call, qualified: str | None, method: str | None) -> None:
        """The arguments of a call that take a device or backend, per the rules."""
        positional = []
        for arg in node.args:
            if arg.star:
                break
            if arg.keyword is None:
                positional.append(arg)
        keywords = {a.keyword.value: a for a in node.args if a.keyword is not None}
        into_torch = qualified is not None and qualified.split(".")[0] == "torch"
        callee = method or (node.func.value if isinstance(node.func, cst.Name) else None)
        for value in self.rules.values:
            rule = value.rule
            for i, arg in enumerate(positional):
                if method in rule.methods or (qualified is not None and rule.arguments.get(qualified) == i):
                    self.mark(arg.value, value, "object")
                elif qualified is not None and rule.type_arguments.get(qualified) == i:
                    self.mark(arg.value, value, "string")
            for keyword, arg in keywords.items():
                if keyword in rule.type_keywords:
                    self.mark(arg.value, value, "string")
                elif keyword in rule.keywords or value.holds(keyword):
                    self.mark(arg.value, value, "object" if into_torch or method in rule.methods else "string")
            if callee in rule.options and "default" in keywords and any(
                value.holds(option_name(a.value)) for a in positional
            ):
                self.mark(keywords["default"].value, value, "string")
            if callee in rule.lookups and len(positional) >= 2 and value.holds(string_value(positional[0].value) or ""):
                self.mark(positional[1].value, value, "string")

    def visit_Dict(self, node: cst.Dict) -> None:
        for element in node.elements:
            if isinstance(element, cst.DictElement):
                self.mark_holder(string_value(element.key), element.value)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        """``device == "cuda"``, ``"cuda" in device``, ``device.type == "cuda"`` are left as is (a CUDA-only
        branch stays CUDA-only) but reported: they are false with another accelerator."""
        if self.device is None or code(node) == self.forms.type_test_code(self.device.rule.match):
            return  # written by the rewriter: CUDA-only on purpose
        left = node.left
        for target in node.comparisons:
            pair = (left, target.comparator)
            if any(string_value(a) == self.device.rule.match and self._holds_device(b) for a, b in (pair, pair[::-1])):
                self.note(node, f'comparison with "{self.device.rule.match}" is false on other devices; left as is')
                return
            left = target.comparator

    def _holds_device(self, node: cst.BaseExpression) -> bool:
        """``device``, ``args.device``, ``device.type``, ``x.device.type``, ``str(device)``."""
        assert self.device is not None
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "str" and node.args:
            node = node.args[0].value
        if isinstance(node, cst.Attribute) and node.attr.value == "type":
            node = node.value
        name = held_name(node)
        return name is not None and self.device.holds(name)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, (cst.Add, cst.Modulo)):
            self.propagate(node, node.left, form="string")  # "cuda:" + str(i), "cuda:%d" % i

    # --- writing them (bottom-up) ----------------------------------------------------------------------

    def leave_SimpleString(
        self, original_node: cst.SimpleString, updated_node: cst.SimpleString
    ) -> cst.BaseExpression:
        context = self.contexts.get(id(original_node))
        value = string_value(original_node)
        if context is None or value is None:
            return updated_node
        rule = context.rule.rule
        if rule.kind == "backend":
            return self.forms.backend(rule) if value == rule.match else updated_node
        if value == rule.match:
            return self.forms.device if context.form == "object" else self.forms.device_type
        raw = original_node.raw_value
        if not (value.startswith(rule.match + ":") and raw.startswith(rule.match + ":")):
            return updated_node
        rest = raw[len(rule.match):]
        if context.form == "object" and rest[1:].isdigit():
            return self.forms.indexed(cst.Integer(rest[1:]))
        return self.forms.typed_string(original_node, rest)

    def leave_FormattedString(
        self, original_node: cst.FormattedString, updated_node: cst.FormattedString
    ) -> cst.BaseExpression:
        context = self.contexts.get(id(original_node))
        if context is None or context.rule.rule.kind != "device" or not updated_node.parts:
            return updated_node
        match, first = context.rule.rule.match, updated_node.parts[0]
        if not isinstance(first, cst.FormattedStringText) or not (
            first.value == match or first.value.startswith(match + ":")
        ):
            return updated_node
        rest = first.value[len(match):]
        parts: list[cst.BaseFormattedStringContent] = [cst.FormattedStringExpression(self.forms.device_type)]
        if rest:
            parts.append(cst.FormattedStringText(rest))
        return updated_node.with_changes(parts=[*parts, *updated_node.parts[1:]])

    # --- "cuda" if torch.cuda.is_available() else "cpu" ---------------------------------------------------

    def leave_IfExp(self, original_node: cst.IfExp, updated_node: cst.IfExp) -> cst.BaseExpression:
        if self.tests_available(updated_node.test) and self.collapses(updated_node.body, updated_node.orelse):
            return updated_node.body
        return updated_node

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> cst.BaseStatement:
        """``if available: x = <accelerator> else: x = <cpu>`` -> ``x = <accelerator>``."""
        orelse = updated_node.orelse
        if not self.tests_available(updated_node.test) or not isinstance(orelse, cst.Else):
            return updated_node
        then, otherwise = single_assign(updated_node.body), single_assign(orelse.body)
        if then is None or otherwise is None:
            return updated_node
        (line, assign), (_, other) = then, otherwise
        if code(assign.targets[0].target) != code(other.targets[0].target):
            return updated_node
        if not self.collapses(assign.value, other.value):
            return updated_node
        if "#" in code(updated_node.with_changes(leading_lines=())):
            return updated_node  # comments inside would be lost
        return line.with_changes(leading_lines=updated_node.leading_lines)

    def tests_available(self, test: cst.BaseExpression) -> bool:
        return isinstance(test, cst.Call) and code(test) == self.forms.available_code

    def collapses(self, body: cst.BaseExpression, orelse: cst.BaseExpression) -> bool:
        """Is ``body if <accelerator available> else orelse`` just ``body``?"""
        written = code(body)
        for value in self.rules.values:
            rule = value.rule
            if rule.kind == "backend":
                if written == self.forms.backend_code(rule) and string_value(orelse) == rule.cpu:
                    return True
            elif written == self.forms.helper:
                return (
                    isinstance(orelse, cst.Call) and self.imports.resolve(orelse.func) == "torch.device"
                    and len(orelse.args) == 1 and string_value(orelse.args[0].value) == rule.cpu
                )
            elif written == self.forms.device_type_code:
                return string_value(orelse) == rule.cpu
        return False
