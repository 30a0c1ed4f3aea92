"""``method`` rules: ``x.cuda(...)`` -> ``x.to(<device>, ...)``, its device argument a device of the accelerator."""

from __future__ import annotations

import libcst as cst

from torchdevice.records.rewrite import RewriteRule
from torchdevice.rewrite.arguments import keyword_arg, with_commas
from torchdevice.rewrite.rules.base import Rule
from torchdevice.rewrite.syntax import argument, held_name

_STRINGS = (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString, cst.BinaryOperation, cst.IfExp)


class Methods(Rule):
    kinds = ("method",)
    writes = ("expected",)

    def _rule(self, node: cst.Call) -> RewriteRule | None:
        func = node.func
        return self.rules.methods.get(func.attr.value) if isinstance(func, cst.Attribute) else None

    def visit_Call(self, node: cst.Call) -> None:
        rule = self._rule(node)
        if rule is None:
            return
        qualified = self.rw.imports.resolve_cst(node.func)
        if qualified in self.rules.calls or qualified in self.rules.contexts:
            return
        if self.rw.imports.resolve_cst(node.func.value) is None:  # type: ignore[attr-defined]
            device = argument(node.args, 0, rule.params[:1])
            if device is not None:
                self.rw.expect(device.value, self.rules.device, "object")
        elif qualified is not None and qualified.startswith("torch."):
            self.rw.note(node, rule, f"{qualified} called unbound; left as is")

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        rule = self._rule(original_node)
        if rule is None or self.rw.imports.resolve_cst(original_node.func.value) is not None:  # type: ignore[attr-defined]
            return updated_node
        return self._method(rule, original_node, updated_node)

    def _method(self, rule: RewriteRule, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``x.cuda(...)`` -> ``x.to(<device>, ...)``."""
        rw = self.rw
        if any(a.star or (a.keyword is not None and a.keyword.value not in rule.params) for a in original.args):
            rw.note(original, rule, f".{rule.match}() called with arguments torch's .{rule.match}() does not "
                                    "take; left as is")
            return updated
        if not rw.allowed(original, rule):
            return updated
        device_name = rule.params[0]
        rest: list[cst.Arg] = []
        device: tuple[cst.Arg, cst.Arg] | None = None
        position = 0
        for old, new in zip(original.args, updated.args, strict=True):
            if old.keyword is not None and old.keyword.value == device_name and device is not None:
                rw.note(original, rule, f".{rule.match}() given its device twice; left as is")
                return updated
            if device is None and (old.keyword is None or old.keyword.value == device_name):
                device = (old, new)
                position += old.keyword is None
            elif new.keyword is None:
                position += 1
                if position > len(rule.params):
                    rw.note(original, rule, f".{rule.match}() called with too many arguments; left as is")
                    return updated
                rest.append(keyword_arg(rule.params[position - 1], new.value).with_changes(comma=new.comma))
            else:
                rest.append(new)
        if device is None:
            first = cst.Arg(rw.forms.bare(rw.forms.device(rw.holder(original, given=True))))
        else:
            value = self._device(original, device[0].value, device[1].value)
            first = device[1].with_changes(value=value, keyword=None, equal=cst.MaybeSentinel.DEFAULT)
        rw.rewrote(rule)
        func = updated.func.with_changes(attr=cst.Name(rule.to))  # type: ignore[attr-defined]
        return updated.with_changes(func=func, args=with_commas([first, *rest], updated.args))

    def _device(self, site: cst.Call, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
        """The device argument of ``x.cuda(d)`` as an argument of ``x.to``."""
        if isinstance(original, _STRINGS) or self.rw.forms.what(updated) is not None:
            return updated  # a device value (rewritten where it names CUDA)
        if isinstance(original, cst.Call) and self.rw.imports.resolve_cst(original.func) == "torch.device":
            return updated
        if self.rules.device.holds(held_name(original)):
            return updated  # a variable that holds a device
        return self.rw.forms.indexed(self.rw.holder(site), updated)  # an index: 0, rank, args.gpu...
