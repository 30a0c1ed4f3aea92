"""Calls: ``torch.cuda.X(...)`` to their replacements, ``x.cuda()`` to ``x.to(...)``, ``torch.device("cuda")``,
arguments that only apply on CUDA (DDP's ``device_ids``), and guards for what needs an accelerator
(``if torch.accelerator.is_available(): ...``)."""

from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m

from torchdevice.rewrite.arguments import comma, convert, keyword_arg, with_commas
from torchdevice.rewrite.base import RewriterBase
from torchdevice.rewrite.rule import RewriteRule
from torchdevice.rewrite.syntax import argument, code, held_name, string_value

_STRINGS = (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString, cst.BinaryOperation, cst.IfExp)


def is_rename(rule: RewriteRule) -> bool:
    """A rule that only renames (valid for plain references, not only calls)."""
    return (rule.args == "same" and rule.device_type == "none" and rule.without_accelerator is None
            and not rule.result_methods)


class CallRewriting(RewriterBase):
    """The call part of the rewriter (mixed into :class:`~torchdevice.rewrite.transform.Rewriter`)."""

    def classify(self, node: cst.Call, qualified: str | None, method: str | None) -> None:
        """Remember which rule rewrites ``node`` (top-down, before its arguments are visited)."""
        if qualified in self.rules.calls:
            if id(node) not in self.kept:
                self.call_rules[id(node)] = self.rules.calls[qualified]
        elif isinstance(node.func, cst.Attribute) and method in self.rules.methods:
            if self.imports.resolve(node.func.value) is None:
                rule = self.rules.methods[method]
                self.method_rules[id(node)] = rule
                device = argument(node.args, 0, rule.params[:1])
                if device is not None and self.device is not None:
                    self.mark(device.value, self.device, "object")
            elif qualified is not None and qualified.startswith("torch."):
                self.note(node, f"{qualified} called unbound; left as is")
        elif qualified in self.rules.arguments and self.device is not None:
            self.argument_rules[id(node)] = self.rules.arguments[qualified]
        elif qualified == "torch.device" and self.device is not None:
            self.device_calls.add(id(node))
            first = argument(node.args, 0, ("type",))
            if first is not None:
                self.mark(first.value, self.device, "string")

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        key = id(original_node)
        if key in self.call_rules:
            return self._call(self.call_rules[key], original_node, updated_node)
        if key in self.method_rules:
            return self._method(self.method_rules[key], original_node, updated_node)
        if key in self.device_calls:
            return self._device_call(original_node, updated_node)
        if key in self.argument_rules:
            return self._cuda_arguments(self.argument_rules[key], updated_node)
        return self._result_method(original_node, updated_node)

    def _call(self, rule: RewriteRule, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``torch.cuda.X(...)`` -> ``rule.to(...)``."""
        args = convert(rule, list(updated.args))
        if args is None:
            self.note(original, f"{rule.match}() called with arguments that cannot be mapped to {rule.to}(); "
                                "left as is")
            return updated
        if rule.device_type == "first":
            separator = args[0].comma if len(args) > 1 and isinstance(args[0].comma, cst.Comma) else comma()
            args.insert(0, cst.Arg(self.forms.device_type, comma=separator))
        elif rule.device_type == "keyword":
            args.insert(sum(1 for a in args if a.keyword is None), self.device_type_arg(rule))
        self.rewritten(original.func)
        new = updated.with_changes(func=self.forms.torch(rule.to), args=with_commas(args, updated.args))
        return self._guard(original, new, rule.without_accelerator)

    def device_type_arg(self, rule: RewriteRule) -> cst.Arg:
        if rule.device_type == "keyword":
            return keyword_arg("device_type", self.forms.device_type)
        return cst.Arg(self.forms.device_type)

    def _method(self, rule: RewriteRule, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``x.cuda(...)`` -> ``x.to(<device>, ...)``."""
        if any(a.star or (a.keyword is not None and a.keyword.value not in rule.params) for a in original.args):
            self.note(original, f".{rule.match}() called with arguments torch's .{rule.match}() does not take; "
                                "left as is")
            return updated
        device_name = rule.params[0]
        rest: list[cst.Arg] = []
        device: tuple[cst.Arg, cst.Arg] | None = None
        position = 0
        for old, new in zip(original.args, updated.args, strict=True):
            if old.keyword is not None and old.keyword.value == device_name and device is not None:
                self.note(original, f".{rule.match}() given its device twice; left as is")
                return updated
            if device is None and (old.keyword is None or old.keyword.value == device_name):
                device = (old, new)
                position += old.keyword is None
            elif new.keyword is None:
                position += 1
                if position > len(rule.params):
                    self.note(original, f".{rule.match}() called with too many arguments; left as is")
                    return updated
                rest.append(keyword_arg(rule.params[position - 1], new.value).with_changes(comma=new.comma))
            else:
                rest.append(new)
        if device is None:
            first = cst.Arg(self.forms.device)
        else:
            first = device[1].with_changes(value=self._method_device(device[0].value, device[1].value),
                                           keyword=None, equal=cst.MaybeSentinel.DEFAULT)
        func = updated.func.with_changes(attr=cst.Name(rule.to))  # type: ignore[attr-defined]
        return updated.with_changes(func=func, args=with_commas([first, *rest], updated.args))

    def _method_device(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
        """The device argument of ``x.cuda(d)`` as an argument of ``x.to``."""
        if isinstance(original, cst.Integer):
            return self.forms.indexed(updated)
        if isinstance(original, _STRINGS):
            return updated  # rewritten as a device value
        if isinstance(original, cst.Call) and self.imports.resolve(original.func) == "torch.device":
            return updated
        name = held_name(original)
        if name is not None and self.device is not None and self.device.holds(name):
            return updated  # a variable that holds a device
        return self.forms.indexed(updated)  # an index: rank, args.gpu...

    def _device_call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``torch.device("cuda")`` -> the accelerator; ``torch.device("cuda:N")`` -> ``torch.device(<type>, N)``."""
        assert self.device is not None
        match = self.device.rule.match
        if len(original.args) == 1 and original.args[0].keyword is None:
            value = string_value(original.args[0].value)
            if value is not None and re.fullmatch(rf"{re.escape(match)}:\d+", value):
                return self.forms.indexed(cst.Integer(value[len(match) + 1:]))
        if len(updated.args) == 1 and code(updated.args[0].value) == self.forms.device_type_code:
            return self.forms.device
        return updated

    def _cuda_arguments(self, rule: RewriteRule, updated: cst.Call) -> cst.Call:
        """``DDP(m, device_ids=[i])`` -> ``DDP(m, device_ids=[i] if <accelerator>.type == "cuda" else None)``."""
        assert self.device is not None
        device_type = self.device.rule.match
        test = self.forms.type_test_code(device_type)
        names = iter(rule.params)
        args = []
        for arg in updated.args:
            if arg.star:
                names = iter(())  # the positions after *args are unknown
            name = arg.keyword.value if arg.keyword is not None else next(names, None)
            value = arg.value
            done = isinstance(value, cst.IfExp) and code(value.test) == test
            if name in rule.keywords and not done and not (isinstance(value, cst.Name) and value.value == "None"):
                arg = arg.with_changes(value=self.forms.only_on(value, device_type))
            args.append(arg)
        return updated.with_changes(args=args)

    # --- objects whose methods need an accelerator (events) ------------------------------------------

    def track_results(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """Remember names bound to objects a rewritten call creates whose methods are guarded."""
        if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)):
            for t, v in zip(target.elements, value.elements, strict=False):
                self.track_results(t.value, v.value)
            return
        if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
            value = value.elt
        elif isinstance(value, (cst.List, cst.Tuple)) and value.elements:
            value = value.elements[0].value
        if isinstance(value, cst.Call) and isinstance(target, (cst.Name, cst.Attribute)):
            rule = self.rules.calls.get(self.imports.resolve(value.func) or "")
            if rule is not None and rule.result_methods:
                self.receivers[code(target)] = rule

    def _result_method(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``event.record()`` and ``event.elapsed_time(other)``: guarded."""
        func = original.func
        if not isinstance(func, cst.Attribute) or not self.receivers:
            return updated
        receiver = func.value.value if isinstance(func.value, cst.Subscript) else func.value
        rule = self.receivers.get(code(receiver))
        if rule is None or func.attr.value not in rule.result_methods:
            return updated
        return self._guard(original, updated, rule.result_methods[func.attr.value])

    # --- guards -------------------------------------------------------------------------------------------

    def _guard(self, original: cst.Call, new: cst.Call, fallback: str | None) -> cst.BaseExpression:
        """Make a call that needs an accelerator give ``fallback`` where there is none.

        A call that is a statement of its own and gives nothing (``"None"``) gets ``if``; any other
        becomes ``(call if <available> else fallback)``. Inside ``if torch.cuda.is_available():``
        nothing is needed.
        """
        if fallback is None or self.guarded_depth:
            return new
        line = self.statements.get(id(original))
        if line is not None and fallback == "None":
            self.guard_lines.add(line)
            self.forms.torch_used()
            return new
        guarded = self.forms.guarded(new, fallback)
        self.parenthesized.add(id(guarded))
        return guarded

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if len(node.body) == 1 and isinstance(node.body[0], cst.Expr) and isinstance(node.body[0].value, cst.Call):
            self.statements[id(node.body[0].value)] = id(node)

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.BaseStatement:
        if id(original_node) in self.guard_lines:
            return self.forms.guard_statement(updated_node)
        return updated_node

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        return self._unparenthesized(updated_node)

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        return self._unparenthesized(updated_node)

    def leave_Return(self, original_node: cst.Return, updated_node: cst.Return) -> cst.Return:
        return self._unparenthesized(updated_node)

    def _unparenthesized(self, holder):
        """Drop the parentheses of a guard that is a whole argument, assigned value or returned value."""
        if id(holder.value) not in self.parenthesized:
            return holder
        return holder.with_changes(value=holder.value.with_changes(lpar=(), rpar=()))

    def visit_If(self, node: cst.If) -> None:
        test = node.test
        if isinstance(test, cst.Call) and not test.args and self.imports.resolve(test.func) in (
            self.rules.available_match, self.rules.available,
        ):
            self.guarded_blocks.add(id(node.body))
        self.keep_checks(node.test, node.body)

    def keep_checks(self, test: cst.BaseExpression, guarded: cst.CSTNode) -> None:
        """Keep ``torch.cuda.is_available()`` in ``test`` when what it guards uses CUDA-only APIs that stay:
        a CUDA-only branch must stay CUDA-only."""
        checks = [c for c in m.findall(test, m.Call()) if isinstance(c, cst.Call)
                  and self.imports.resolve(c.func) == self.rules.available_match]
        if checks and self._cuda_only(guarded):
            self.kept.update(id(c) for c in checks)

    def _cuda_only(self, node: cst.CSTNode) -> bool:
        for found in m.findall(node, m.Attribute() | m.Name()):
            qualified = self.imports.resolve(found)  # type: ignore[arg-type]
            if qualified is not None and self.rules.in_namespace(qualified) and qualified not in self.rules.calls \
                    and not any(r.startswith(qualified + ".") for r in self.rules.calls):
                return True
        return False

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.guarded_depth += id(node) in self.guarded_blocks

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.BaseSuite:
        self.guarded_depth -= id(original_node) in self.guarded_blocks
        return updated_node

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self.guarded_depth += id(node) in self.guarded_blocks

    def leave_SimpleStatementSuite(
        self, original_node: cst.SimpleStatementSuite, updated_node: cst.SimpleStatementSuite
    ) -> cst.BaseSuite:
        self.guarded_depth -= id(original_node) in self.guarded_blocks
        return updated_node
