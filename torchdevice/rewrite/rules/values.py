"""``device`` and ``backend`` rules: device and backend values where one is expected, and what they become.

``"cuda"`` where a device is expected becomes the accelerator where it goes straight into torch and its type (a
string) where the program keeps it; ``"cuda:N"`` and its spellings (``f"cuda:{i}"``, ``"cuda:{}".format(i)``,
``"cuda:" + str(i)``) become the accelerator's device N; ``torch.device("cuda")`` the accelerator; ``"nccl"``
the accelerator's default backend. ``X if <accelerator available> else <cpu>`` (expression or ``if``
statement) collapses to ``X``, and as the value of a name it is the one-line idiom. ``"cuda" if "cuda" in
device else "cpu"`` (the device type of ``device``) becomes ``torch.device(device).type``.

Where a value is expected is marked top-down (``Rewrite.expect``): arguments and keywords the rule names,
values kept under names it names (variables, parameters, dictionary keys, options), and the parts of
``a if c else b`` and ``a or b`` there.
"""

from __future__ import annotations

import libcst as cst

from torchdevice.rewrite.forms import Quote
from torchdevice.rewrite.rules.base import Rule
from torchdevice.rewrite.spellings import device_type_of, index_of
from torchdevice.rewrite.state import Expected
from torchdevice.rewrite.syntax import argument, code, held_name, option_name, single_assign, string_value


class Values(Rule):
    kinds = ("device", "backend")
    reads = ("expected",)
    writes = ("expected", "rewritten_tests")

    # --- where values are expected (top-down) --------------------------------------------------------

    def visit_Param(self, node: cst.Param) -> None:
        if node.default is not None:
            self._held(node.name.value, node.default)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._held(held_name(target.target), node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._held(held_name(node.target), node.value)

    def visit_Dict(self, node: cst.Dict) -> None:
        for element in node.elements:
            if isinstance(element, cst.DictElement):
                self._held(string_value(element.key), element.value)

    def _held(self, name: str | None, value: cst.BaseExpression) -> None:
        """``value`` is stored under ``name`` (a variable, attribute, parameter, key): strings stay strings."""
        for rule in self.rules.values:
            if rule.holds(name):
                self.rw.expect(value, rule, "string", name)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if device_type_of(node, self.rules.device.rule) is not None:
            self.rw.marks.rewritten_tests.add(node.test)
        else:
            self._propagate(node, node.body, node.orelse)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        self._propagate(node, node.left, node.right)

    def _propagate(self, node: cst.CSTNode, *parts: cst.BaseExpression) -> None:
        """The parts of an expression where a value is expected expect it too (``a if c else b``, ``a or b``)."""
        expected = self.rw.marks.expected.get(node)
        if expected is not None:
            for part in parts:
                self.rw.marks.expected.setdefault(part, expected)

    def visit_Call(self, node: cst.Call) -> None:
        """The arguments of a call that take a device or backend, per the rules."""
        qualified = self.rw.imports.resolve_cst(node.func)
        method = node.func.attr.value if isinstance(node.func, cst.Attribute) else None
        if qualified == "torch.device":
            first = argument(node.args, 0, ("type",))
            if first is not None and (len(node.args) > 1 or index_of(first.value, self.rules.device.rule) is None):
                self.rw.expect(first.value, self.rules.device, "string")
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
                if i == 0 and method in rule.methods or qualified is not None and rule.arguments.get(qualified) == i:
                    self.rw.expect(arg.value, value, "object", qualified)
                elif qualified is not None and rule.type_arguments.get(qualified) == i:
                    self.rw.expect(arg.value, value, "string")
            for keyword, arg in keywords.items():
                if keyword in rule.type_keywords:
                    self.rw.expect(arg.value, value, "string")
                elif keyword in rule.keywords or value.holds(keyword):
                    self.rw.expect(arg.value, value, "object" if into_torch or method in rule.methods else "string",
                                   keyword)
            if callee in rule.options and "default" in keywords and any(
                value.holds(option_name(a.value)) for a in positional
            ):
                self.rw.expect(keywords["default"].value, value, "string")
            if callee in rule.lookups and len(positional) >= 2 and value.holds(string_value(positional[0].value)):
                self.rw.expect(positional[1].value, value, "string")

    # --- writing them (bottom-up) ----------------------------------------------------------------------

    def leave_SimpleString(
        self, original_node: cst.SimpleString, updated_node: cst.SimpleString
    ) -> cst.BaseExpression:
        rw = self.rw
        expected = rw.marks.expected.get(original_node)
        value = string_value(original_node)
        if expected is None or value is None:
            return updated_node
        rule = expected.rule.rule
        if rule.kind == "backend":
            if value != rule.match and rule.match in value:
                rw.note(original_node, rule, f"{value!r} names {rule.match} for some devices; left as is")
            if value != rule.match or not rw.allowed(original_node, rule) or not rw.namable(original_node):
                return updated_node
            rw.rewrote(rule)
            return rw.forms.backend(rule, rw.holder(original_node))
        if value == rule.match:
            return self._device(original_node, expected, None)
        index = index_of(original_node, rule)
        if index is None:
            return updated_node
        if expected.form == "object" or expected.unindexed:
            return self._device(original_node, expected, index)
        raw = original_node.raw_value
        if not raw.startswith(rule.match + ":") or not rw.allowed(original_node, rule) or \
                not rw.namable(original_node, in_string=True):
            return updated_node
        rw.rewrote(rule)  # "cuda:1" kept as a string: f"{<type>}:1"
        return rw.forms.typed_string(rw.holder(original_node), original_node.quote, original_node.prefix,
                                     raw[len(rule.match):])

    def leave_FormattedString(
        self, original_node: cst.FormattedString, updated_node: cst.FormattedString
    ) -> cst.BaseExpression:
        rw = self.rw
        expected = rw.marks.expected.get(original_node)
        if expected is None or expected.rule.rule.kind != "device":
            return updated_node
        rule = expected.rule.rule
        index = index_of(original_node, rule)
        if index is not None:
            return self._device(original_node, expected, index)
        first = updated_node.parts[0] if updated_node.parts else None
        if not isinstance(first, cst.FormattedStringText) or not (
            first.value == rule.match or first.value.startswith(rule.match + ":")
        ) or not rw.allowed(original_node, rule) or not rw.namable(original_node, in_string=True):
            return updated_node
        rw.rewrote(rule)
        rest = first.value[len(rule.match):]
        parts: list[cst.BaseFormattedStringContent] = [
            cst.FormattedStringExpression(rw.forms.device_type(rw.holder(original_node)))]
        if rest:
            parts.append(cst.FormattedStringText(rest))
        return updated_node.with_changes(parts=[*parts, *updated_node.parts[1:]])

    def leave_BinaryOperation(
        self, original_node: cst.BinaryOperation, updated_node: cst.BinaryOperation
    ) -> cst.BaseExpression:
        return self._indexed(original_node, updated_node)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if self.rw.imports.resolve_cst(original_node.func) == "torch.device":
            return self._device_call(original_node, updated_node)
        return self._indexed(original_node, updated_node)  # "cuda:{}".format(i)

    def _indexed(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
        """A device string built from an index (``"cuda:" + str(i)``, ``"cuda:{}".format(i)``) where a device is
        expected, rewritten."""
        expected = self.rw.marks.expected.get(original)
        index = index_of(original, self.rules.device.rule) if expected is not None else None
        return updated if index is None or expected is None else self._device(original, expected, index)

    def _device(self, original: cst.BaseExpression, expected: Expected, index: cst.BaseExpression | None
                ) -> cst.BaseExpression:
        """The accelerator (``index`` None) or its device N, as ``expected`` wants it."""
        rw, rule = self.rw, expected.rule.rule
        if expected.unindexed:
            index = None
        if not rw.allowed(original, rule) or not rw.namable(original, in_string=index is not None and
                                                            expected.form == "string"):
            return original
        holder = rw.holder(original, given=index is None and expected.form == "object")
        if index is None or expected.form == "object":
            rw.rewrote(rule)
            if index is not None:
                return rw.forms.indexed(holder, index)
            return rw.forms.device(holder) if expected.form == "object" else rw.forms.device_type(holder)
        quote: Quote = '"' if '"' not in code(index) else "'"
        if quote in code(index):
            rw.note(original, rule, "left as is: this device string cannot be written as an f-string")
            return original
        rw.rewrote(rule)
        return cst.FormattedString([
            cst.FormattedStringExpression(rw.forms.device_type(holder)), cst.FormattedStringText(":"),
            cst.FormattedStringExpression(rw.forms.index(index))], start="f" + quote, end=quote)

    def _device_call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``torch.device("cuda")`` -> the accelerator; ``torch.device("cuda:N")`` -> the accelerator's device N."""
        rw, rule = self.rw, self.rules.device.rule
        if len(updated.args) != 1 or updated.args[0].keyword is not None:
            return updated
        value = updated.args[0].value
        index = index_of(value, rule) if index_of(original.args[0].value, rule) is not None else None
        if index is not None:
            if not rw.allowed(original, rule):
                return updated
            rw.rewrote(rule)
            return rw.forms.indexed(rw.holder(original), index)
        what = rw.forms.what(value)
        if what in ("type", "collapsed type"):
            device = rw.forms.device(rw.holder(original))
            return rw.forms.tag(device, "collapsed device") if what == "collapsed type" else device
        if isinstance(value, cst.IfExp) and rw.forms.what(value.body) == "type" and \
                string_value(value.orelse) == rule.cpu:
            cpu = updated.with_changes(args=[updated.args[0].with_changes(value=value.orelse)])
            return value.with_changes(body=rw.forms.device(rw.holder(original)), orelse=cpu)
        return updated

    # --- "cuda" if torch.cuda.is_available() else "cpu", and "cuda" if "cuda" in device else "cpu" ------------

    def leave_IfExp(self, original_node: cst.IfExp, updated_node: cst.IfExp) -> cst.BaseExpression:
        if device_type_of(original_node, self.rules.device.rule) is not None:
            subject = device_type_of(updated_node, self.rules.device.rule)
            if subject is not None:
                self.rw.rewrote(self.rules.device.rule)
                return self.rw.forms.finished_type(subject)
        collapsed = self._collapse(updated_node.test, updated_node.body, updated_node.orelse)
        return updated_node if collapsed is None else collapsed

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> cst.BaseStatement:
        """``if available: x = <accelerator> else: x = <cpu>`` -> ``x = <accelerator>``."""
        orelse = updated_node.orelse
        if not isinstance(orelse, cst.Else):
            return updated_node
        then, otherwise = single_assign(updated_node.body), single_assign(orelse.body)
        if then is None or otherwise is None or "#" in code(updated_node.with_changes(leading_lines=())):
            return updated_node  # comments inside would be lost
        (line, assign), (_, other) = then, otherwise
        if code(assign.targets[0].target) != code(other.targets[0].target):
            return updated_node
        collapsed = self._collapse(updated_node.test, assign.value, other.value)
        if collapsed is None:
            return updated_node
        return line.with_changes(leading_lines=updated_node.leading_lines,
                                 body=[self._idiom_value(assign.with_changes(value=collapsed))])

    def _collapse(
        self, test: cst.BaseExpression, body: cst.BaseExpression, orelse: cst.BaseExpression
    ) -> cst.BaseExpression | None:
        """``body`` when ``body if <accelerator available> else orelse`` is just ``body``, else None."""
        forms = self.rw.forms
        if forms.what(test) != "available":
            return None
        what = forms.what(body)
        for value in self.rules.values:
            rule = value.rule
            if rule.kind == "backend" and what == "backend" and string_value(orelse) == rule.cpu or \
                    rule.kind == "device" and (what == "type" and string_value(orelse) == rule.cpu or
                                               what == "device" and self._cpu_device(orelse)):
                return forms.tag(body, f"collapsed {what}")
        return None

    def _cpu_device(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, cst.Call) and self.rw.imports.resolve_cst(node.func) == "torch.device" and \
            len(node.args) == 1 and string_value(node.args[0].value) == self.rules.device.rule.cpu

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        return self._idiom_value(updated_node)

    def _idiom_value(self, assign: cst.Assign) -> cst.Assign:
        """``name = <accelerator or cpu>`` (collapsed) is written as the one-line idiom."""
        what = self.rw.forms.what(assign.value)
        if what not in ("collapsed device", "collapsed type") or len(assign.targets) != 1 or \
                not isinstance(assign.targets[0].target, cst.Name):
            return assign
        idiom = self.rw.forms.idiom
        if what == "collapsed type":
            return assign.with_changes(value=cst.Attribute(idiom, cst.Name("type")))
        return assign.with_changes(value=self.rw.forms.bare(idiom))
