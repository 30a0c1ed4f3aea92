"""``call`` and ``context`` rules: ``torch.cuda.X(...)`` -> its replacement (arguments moved as the rule says,
the device type added, guarded where it needs an accelerator), ``with torch.cuda.stream(s):`` -> ``with s:``.
A rule group (streams) is rewritten in a module only when all its members can be."""

from __future__ import annotations

import libcst as cst

from torchdevice.records.rewrite import RewriteRule
from torchdevice.rewrite.arguments import comma, convert, keyword_arg, with_commas
from torchdevice.rewrite.rules.base import Rule
from torchdevice.rewrite.state import Rewrite


class Calls(Rule):
    kinds = ("call", "context")
    reads = ("kept_checks", "expected")
    writes = ("guarded_lines",)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        qualified = self.rw.imports.resolve_cst(original_node.func)
        rule = self.rules.calls.get(qualified or "") or self.rules.contexts.get(qualified or "")
        if rule is None or original_node in self.rw.marks.kept_checks:
            return updated_node
        if rule.kind == "context":
            return self._context(rule, original_node, updated_node)
        return self._call(rule, original_node, updated_node)

    def _left(self, original: cst.Call, rule: RewriteRule) -> bool:
        """Report and say so when ``rule`` may not rewrite ``original`` here (its group stays, or it needs an
        accelerator that this code does not guarantee)."""
        if rule.group:
            reason = self.rw.group_left(rule.group)
            if reason is not None:
                self.rw.note(original, rule, f"left as is with the rest of its group ({reason})")
                return True
        if rule.accelerated_only and not self.rw.accelerated:
            self.rw.note(original, rule, f"left as is: {rule.to} raises without an accelerator and this code does "
                                         "not run only with one")
            return True
        return False

    def _call(self, rule: RewriteRule, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``torch.cuda.X(...)`` -> ``rule.to(...)``."""
        rw = self.rw
        if not rw.allowed(original, rule) or self._left(original, rule):
            return updated
        expected = rw.marks.expected.get(original)
        if rule.current and not original.args and expected is not None and expected.rule is self.rules.device and \
                expected.form == "object" and rw.namable(original):
            rw.rewritten(original.func)
            rw.rewrote(rule)
            return rw.forms.device(rw.holder(original, given=True))
        args = convert(rule, list(updated.args))
        if args is not None:
            args = self._indices(rule, list(updated.args), args)
        if args is None:
            rw.note(original, rule, f"{rule.match}() called with arguments that cannot be mapped to {rule.to}(); "
                                    "left as is")
            return updated
        if rule.device_type == "first":
            separator = args[0].comma if len(args) > 1 and isinstance(args[0].comma, cst.Comma) else comma()
            args.insert(0, cst.Arg(rw.forms.device_type(rw.holder(original)), comma=separator))
        elif rule.device_type == "keyword":
            args.insert(sum(1 for a in args if a.keyword is None), device_type_arg(rw, rule, original))
        rw.rewritten(original.func)
        rw.rewrote(rule)
        new = rw.forms.call(rule, updated, with_commas(args, updated.args))
        return rw.guard(original, new, rule.without_accelerator)

    def _indices(self, rule: RewriteRule, original: list[cst.Arg], args: list[cst.Arg]) -> list[cst.Arg]:
        """The arguments of a rewritten call, with a device index (``set_device(local_rank)``) taken as
        ``Forms.index`` does; ``original`` are the arguments before ``convert``."""
        names = iter(rule.params)
        given = {}
        for arg in original:
            if arg.star:
                break
            given[arg.keyword.value if arg.keyword is not None else next(names, None)] = arg.value
        device = given.get("device")
        if device is None or not self.rw.index_like(device):
            return args
        return [a.with_changes(value=self.rw.forms.index(a.value)) if a.value is device else a for a in args]

    def _context(self, rule: RewriteRule, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``torch.cuda.stream(s)`` -> ``s``: the stream is its own context."""
        if not self.rw.allowed(original, rule) or self._left(original, rule):
            return updated
        self.rw.rewritten(original.func)
        self.rw.rewrote(rule)
        return updated.args[0].value


def device_type_arg(rw: Rewrite, rule: RewriteRule, site: cst.CSTNode) -> cst.Arg:
    """The accelerator's device type as the argument ``rule`` adds (``device_type=`` or first)."""
    value = rw.forms.device_type(rw.holder(site))
    return keyword_arg("device_type", value) if rule.device_type == "keyword" else cst.Arg(value)
