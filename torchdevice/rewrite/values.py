"""Device and backend values: where one is expected, and what it becomes there.

``"cuda"`` where a device is expected becomes the accelerator where it goes straight into torch and
its type (a string) where the program keeps it; ``"cuda:N"`` and its spellings (``f"cuda:{i}"``,
``"cuda:{}".format(i)``, ``"cuda:" + str(i)``) become the accelerator's device N; ``"nccl"`` becomes
the accelerator's default backend. ``X if <accelerator available> else <cpu>`` (expression or ``if``
statement) collapses to ``X``, and as the value of a name it is the one-line idiom. ``"cuda" if "cuda"
in device else "cpu"`` (the device type of ``device``) becomes ``torch.device(device).type``.
"""

from __future__ import annotations

import re

import libcst as cst

from torchdevice.rewrite.base import Context, RewriterBase
from torchdevice.rewrite.forms import Quote
from torchdevice.rewrite.syntax import code, option_name, single_assign, string_value

_INDEX_FORMAT = re.compile(r"\{0?\}|%[dis]")


class ValueRewriting(RewriterBase):
    """The value part of the rewriter (mixed into :class:`~torchdevice.rewrite.transform.Rewriter`)."""

    # --- where values are expected (top-down) --------------------------------------------------------

    def mark_holder(self, name: str | None, value: cst.BaseExpression) -> None:
        """``value`` is stored under ``name`` (a variable, attribute, parameter, key): strings stay strings."""
        for rule in self.rules.values:
            if rule.holds(name):
                self.mark(value, rule, "string", name)

    def propagate(self, node: cst.CSTNode, *parts: cst.BaseExpression) -> None:
        """The parts of an expression where a value is expected expect it too (``a if c else b``, ``a or b``)."""
        context: Context | None = self.contexts.get(id(node))
        if context is not None:
            for part in parts:
                self.contexts.setdefault(id(part), context)

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
                if i == 0 and method in rule.methods or qualified is not None and rule.arguments.get(qualified) == i:
                    self.mark(arg.value, value, "object", qualified)
                elif qualified is not None and rule.type_arguments.get(qualified) == i:
                    self.mark(arg.value, value, "string")
            for keyword, arg in keywords.items():
                if keyword in rule.type_keywords:
                    self.mark(arg.value, value, "string")
                elif keyword in rule.keywords or value.holds(keyword):
                    self.mark(arg.value, value, "object" if into_torch or method in rule.methods else "string", keyword)
            if callee in rule.options and "default" in keywords and any(
                value.holds(option_name(a.value)) for a in positional
            ):
                self.mark(keywords["default"].value, value, "string")
            if callee in rule.lookups and len(positional) >= 2 and value.holds(string_value(positional[0].value)):
                self.mark(positional[1].value, value, "string")

    def visit_Dict(self, node: cst.Dict) -> None:
        for element in node.elements:
            if isinstance(element, cst.DictElement):
                self.mark_holder(string_value(element.key), element.value)

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
            if value != rule.match and rule.match in value:
                self.note(original_node, rule, f"{value!r} names {rule.match} for some devices; left as is")
            if value != rule.match or not self.allowed(original_node, rule) or not self.namable(original_node):
                return updated_node
            self.rewrote(rule)
            return self.forms.backend(rule, self.holder(original_node))
        if value == rule.match:
            return self._device_value(original_node, context, None)
        index = self.index_of(original_node)
        if index is None:
            return updated_node
        if context.form == "object" or context.unindexed:
            return self._device_value(original_node, context, index)
        raw = original_node.raw_value
        if not raw.startswith(rule.match + ":") or not self.allowed(original_node, rule) or \
                not self.namable(original_node, in_string=True):
            return updated_node
        self.rewrote(rule)  # "cuda:1" kept as a string: f"{<type>}:1"
        return self.forms.typed_string(self.holder(original_node), original_node.quote, original_node.prefix,
                                       raw[len(rule.match):])

    def leave_FormattedString(
        self, original_node: cst.FormattedString, updated_node: cst.FormattedString
    ) -> cst.BaseExpression:
        context = self.contexts.get(id(original_node))
        if context is None or context.rule.rule.kind != "device":
            return updated_node
        index = self.index_of(original_node)
        if index is not None:
            return self._device_value(original_node, context, index)
        match, first = context.rule.rule.match, updated_node.parts[0] if updated_node.parts else None
        if not isinstance(first, cst.FormattedStringText) or not (
            first.value == match or first.value.startswith(match + ":")
        ) or not self.allowed(original_node, context.rule.rule) or not self.namable(original_node, in_string=True):
            return updated_node
        self.rewrote(context.rule.rule)
        rest = first.value[len(match):]
        parts: list[cst.BaseFormattedStringContent] = [
            cst.FormattedStringExpression(self.forms.device_type(self.holder(original_node)))]
        if rest:
            parts.append(cst.FormattedStringText(rest))
        return updated_node.with_changes(parts=[*parts, *updated_node.parts[1:]])

    def leave_BinaryOperation(
        self, original_node: cst.BinaryOperation, updated_node: cst.BinaryOperation
    ) -> cst.BaseExpression:
        context = self.contexts.get(id(original_node))
        index = self.index_of(original_node) if context is not None else None
        return updated_node if index is None or context is None else self._device_value(original_node, context, index)

    def formatted_value(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        """``"cuda:{}".format(i)`` where a device is expected, rewritten; None when it is not one."""
        context = self.contexts.get(id(original))
        index = self.index_of(original) if context is not None else None
        return None if index is None or context is None else self._device_value(original, context, index)

    def index_of(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        """The index N of a device string ``"cuda:N"`` spelled as a literal, an f-string, ``.format``, ``+ str()``
        or ``%``; None for anything else."""
        prefix = self.rules.device.rule.match + ":"
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

    def _device_value(
        self, original: cst.BaseExpression, context: Context, index: cst.BaseExpression | None
    ) -> cst.BaseExpression:
        """The accelerator (``index`` None) or its device N, as ``context`` wants it."""
        rule = context.rule.rule
        if context.unindexed:
            index = None
        if not self.allowed(original, rule) or not self.namable(original, in_string=index is not None and
                                                                context.form == "string"):
            return original
        holder = self.holder(original, given=index is None and context.form == "object")
        if index is None or context.form == "object":
            self.rewrote(rule)
            if index is not None:
                return self.forms.indexed(holder, index)
            return self.forms.device(holder) if context.form == "object" else self.forms.device_type(holder)
        quote: Quote = '"' if '"' not in code(index) else "'"
        if quote in code(index):
            self.note(original, rule, "left as is: this device string cannot be written as an f-string")
            return original
        self.rewrote(rule)
        return cst.FormattedString([
            cst.FormattedStringExpression(self.forms.device_type(holder)), cst.FormattedStringText(":"),
            cst.FormattedStringExpression(self.forms.index(index))], start="f" + quote, end=quote)

    # --- "cuda" if torch.cuda.is_available() else "cpu", and "cuda" if "cuda" in device else "cpu" ------------

    def device_type_of(self, node: cst.IfExp) -> cst.BaseExpression | None:
        """``X`` of ``"cuda" if "cuda" in X else "cpu"`` (or ``X.startswith("cuda")``): the device type of X."""
        rule = self.rules.device.rule
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

    def leave_IfExp(self, original_node: cst.IfExp, updated_node: cst.IfExp) -> cst.BaseExpression:
        if id(original_node) in self.finishing:
            subject = self.device_type_of(updated_node)
            if subject is not None:
                self.rewrote(self.rules.device.rule)
                return self.forms.finished_type(subject)
        gated = self.version_gate(original_node, (original_node.body, original_node.orelse),
                                  (updated_node.body, updated_node.orelse))
        if gated is not None:
            body, orelse = gated
            return updated_node.with_changes(body=body, orelse=orelse)
        collapsed = self.collapse(updated_node.test, updated_node.body, updated_node.orelse)
        return updated_node if collapsed is None else collapsed

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> cst.BaseStatement:
        """``if available: x = <accelerator> else: x = <cpu>`` -> ``x = <accelerator>``."""
        orelse = updated_node.orelse
        if not isinstance(orelse, cst.Else) or not isinstance(original_node.orelse, cst.Else):
            return updated_node
        gated = self.version_gate(original_node, (original_node.body, original_node.orelse.body),
                                  (updated_node.body, orelse.body))
        if gated is not None:
            return updated_node.with_changes(body=gated[0], orelse=orelse.with_changes(body=gated[1]))
        then, otherwise = single_assign(updated_node.body), single_assign(orelse.body)
        if then is None or otherwise is None or "#" in code(updated_node.with_changes(leading_lines=())):
            return updated_node  # comments inside would be lost
        (line, assign), (_, other) = then, otherwise
        if code(assign.targets[0].target) != code(other.targets[0].target):
            return updated_node
        collapsed = self.collapse(updated_node.test, assign.value, other.value)
        if collapsed is None:
            return updated_node
        return line.with_changes(leading_lines=updated_node.leading_lines,
                                 body=[self.idiom_value(assign.with_changes(value=collapsed))])

    def collapse(
        self, test: cst.BaseExpression, body: cst.BaseExpression, orelse: cst.BaseExpression
    ) -> cst.BaseExpression | None:
        """``body`` when ``body if <accelerator available> else orelse`` is just ``body``, else None."""
        if self.forms.what(test) != "available":
            return None
        what = self.forms.what(body)
        for value in self.rules.values:
            rule = value.rule
            if rule.kind == "backend" and what == "backend" and string_value(orelse) == rule.cpu or \
                    rule.kind == "device" and (what == "type" and string_value(orelse) == rule.cpu or
                                               what == "device" and self._cpu_device(orelse)):
                self.forms.made[id(body)] = (body, f"collapsed {what}")
                return body
        return None

    def _cpu_device(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, cst.Call) and self.imports.resolve(node.func) == "torch.device" and \
            len(node.args) == 1 and string_value(node.args[0].value) == self.rules.device.rule.cpu

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        return self.idiom_value(self.unparenthesized(updated_node))

    def leave_AnnAssign(self, original_node: cst.AnnAssign, updated_node: cst.AnnAssign) -> cst.AnnAssign:
        return self.unparenthesized(updated_node)

    def idiom_value(self, assign: cst.Assign) -> cst.Assign:
        """``name = <accelerator or cpu>`` (collapsed) is written as the one-line idiom."""
        what = self.forms.what(assign.value)
        if what not in ("collapsed device", "collapsed type") or len(assign.targets) != 1 or \
                not isinstance(assign.targets[0].target, cst.Name):
            return assign
        idiom = self.forms.idiom
        if what == "collapsed type":
            return assign.with_changes(value=cst.Attribute(idiom, cst.Name("type")))
        return assign.with_changes(value=self.forms.bare(idiom))

    def version_gate(self, node: cst.CSTNode, originals: tuple, updated: tuple) -> tuple | None:
        """Branches of a conditional choosing between a device-agnostic API and its CUDA form (for old torch),
        with the CUDA branch kept as it was; None when ``node`` is not such a conditional."""
        if all(o is u for o, u in zip(originals, updated, strict=True)):
            return None
        keep = [False] * len(originals)
        if self.facts.gate_test(code(node.test)):  # type: ignore[attr-defined]
            agnostic = [any(self.facts.agnostic_name(q) for _, q in self.chains(o)) for o in originals]
            cuda = [any(self.rules.lookup(q) is not None for _, q in self.chains(o)) for o in originals]
            keep = [cuda[i] and any(agnostic[j] for j in range(len(originals)) if j != i) for i in range(len(keep))]
        if not any(keep):
            same = len({code(u) for u in updated}) == 1 and len({code(o) for o in originals}) > 1
            keep = [same and o is not u for o, u in zip(originals, updated, strict=True)]
        if not any(keep):
            return None
        self.check(node, "version-gate", "a conditional between " + " and ".join(
            code(o).strip().splitlines()[0][:40] for o in originals))
        return tuple(o if k else u for o, u, k in zip(originals, updated, keep, strict=True))
