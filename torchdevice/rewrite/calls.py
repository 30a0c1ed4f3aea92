"""Calls: ``torch.cuda.X(...)`` to their replacements, ``x.cuda()`` to ``x.to(...)``, ``torch.device("cuda")``,
integer device indices, arguments that only apply on CUDA (DDP's ``device_ids``), process counts of
launchers, and guards for what needs an accelerator (``if torch.accelerator.is_available(): ...``),
written only where the code does not already run only with an accelerator."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from torchdevice.rewrite.arguments import comma, convert, keyword_arg, with_commas
from torchdevice.rewrite.rule import RewriteRule
from torchdevice.rewrite.syntax import argument, code, held_name, last_statement, string_value
from torchdevice.rewrite.values import ValueRewriting

_STRINGS = (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString, cst.BinaryOperation, cst.IfExp)
_EXITS = ("exit", "sys.exit", "os._exit", "quit")


class CallRewriting(ValueRewriting):
    """The call part of the rewriter (mixed into :class:`~torchdevice.rewrite.transform.Rewriter`)."""

    def classify(self, node: cst.Call, qualified: str | None, method: str | None) -> None:
        """What a call rewritten on the way back up (``_rewrite_call``) needs known top-down, before its
        arguments are visited: where they take a device, and what they are."""
        if qualified in self.rules.calls or qualified in self.rules.contexts:
            pass  # rewritten as a whole on the way up
        elif isinstance(node.func, cst.Attribute) and method in self.rules.methods:
            rule = self.rules.methods[method]
            if self.imports.resolve(node.func.value) is None:
                device = argument(node.args, 0, rule.params[:1])
                if device is not None:
                    self.mark(device.value, self.rules.device, "object")
            elif qualified is not None and qualified.startswith("torch."):
                self.note(node, rule, f"{qualified} called unbound; left as is")
        elif qualified in self.rules.arguments:
            for arg in node.args:
                if self._only_on(arg.value):
                    self.ours.add(id(arg.value.test))  # type: ignore[attr-defined]
        elif qualified == "torch.device":
            first = argument(node.args, 0, ("type",))
            if first is not None and (len(node.args) > 1 or self.index_of(first.value) is None):
                self.mark(first.value, self.rules.device, "string")
        elif qualified in self.rules.launchers:
            rule = self.rules.launchers[qualified]
            count = argument(node.args, rule.params.index(rule.keywords[0]), rule.keywords)
            if count is not None and self.counts(count.value) and not self.accelerated:
                self.launch_values[id(count.value)] = rule
        self._mark_index(node, qualified, method)

    def counts(self, node: cst.BaseExpression) -> bool:
        """Is ``node`` a call counting the accelerators (``torch.cuda.device_count()``)?"""
        return isinstance(node, cst.Call) and not node.args and \
            (self.imports.resolve(node.func) or "") in self.facts.counts

    def _mark_index(self, node: cst.Call, qualified: str | None, method: str | None) -> None:
        """Integer device indices where a device is expected: ``x.to(local_rank)``, ``device=0``."""
        index = self.rules.index
        if index is None:
            return
        first = next((a for a in node.args if a.keyword is None and not a.star), None) if node.args else None
        candidates = [first] if method in index.rule.methods and first is not None and first is node.args[0] else []
        if qualified is not None and qualified.startswith("torch.") and self.rules.lookup(qualified) is None:
            candidates += [a for a in node.args if a.keyword is not None and a.keyword.value in index.rule.keywords]
        for arg in candidates:
            if self.index_like(arg.value):
                self.index_args[id(arg.value)] = index.rule

    def index_like(self, value: cst.BaseExpression) -> bool:
        """Is ``value`` a device index: an integer, or a name that holds one (``local_rank``, ``args.gpu``)?"""
        index = self.rules.index
        return index is not None and (isinstance(value, cst.Integer) or isinstance(value, (cst.Name, cst.Attribute))
                                      and index.holds(held_name(value)))

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
        if device is None or not self.index_like(device):
            return args
        return [a.with_changes(value=self.forms.index(a.value)) if a.value is device else a for a in args]

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        result = self._rewrite_call(original_node, updated_node)
        rule = self.launch_values.get(id(original_node))
        if rule is not None and self.allowed(original_node, rule):
            self.rewrote(rule)
            return cst.Call(cst.Name("max"), [cst.Arg(result, comma=comma()), cst.Arg(cst.Integer("1"))])
        return result

    def _rewrite_call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """The call as its rule rewrites it: ``torch.cuda.X(...)`` (unless a CUDA check kept as is), ``x.cuda()``,
        DDP's CUDA-only arguments, ``torch.device(...)``, a device string built by ``.format``, a method of an
        object that needs an accelerator."""
        qualified = self.imports.resolve(original.func)
        func = original.func
        if qualified in self.rules.calls or qualified in self.rules.contexts:
            if id(original) not in self.kept:
                rule = self.rules.calls.get(qualified) or self.rules.contexts[qualified]  # type: ignore[index]
                return self._context(rule, original, updated) if rule.kind == "context" else \
                    self._call(rule, original, updated)
        elif isinstance(func, cst.Attribute) and func.attr.value in self.rules.methods:
            if self.imports.resolve(func.value) is None:
                return self._method(self.rules.methods[func.attr.value], original, updated)
        elif qualified in self.rules.arguments:
            return self._cuda_arguments(self.rules.arguments[qualified], original, updated)  # type: ignore[index]
        elif qualified == "torch.device":
            return self._device_call(original, updated)
        formatted = self.formatted_value(original, updated)
        if formatted is not None:
            return formatted
        return self._result_method(original, updated)

    def _left(self, original: cst.Call, rule: RewriteRule) -> bool:
        """Report and say so when ``rule`` may not rewrite ``original`` here (its group stays, or it needs an
        accelerator that this code does not guarantee)."""
        if rule.group:
            reason = self.group_left(rule.group)
            if reason is not None:
                self.note(original, rule, f"left as is with the rest of its group ({reason})")
                return True
        if rule.accelerated_only and not self.accelerated:
            self.note(original, rule, f"left as is: {rule.to} raises without an accelerator and this code does "
                                      "not run only with one")
            return True
        return False

    def group_left(self, group: str) -> str | None:
        """Why the rules of ``group`` stay in this module (a member that cannot be rewritten, or is off)."""
        if group not in self.groups:
            members = self.rules.groups[group]
            off = [r.code for r in members if not self.selection.enabled(r.code)]
            commented = any(codes is None or any(r.code.startswith(c) for c in codes for r in members)
                            for codes in self.suppressions.values())
            self.groups[group] = (
                f"{', '.join(off)} not selected" if off else
                "a `# torchdevice: ignore` comment keeps one of them" if commented else
                self.facts.group_blocker(group)
            )
        return self.groups[group]

    def _call(self, rule: RewriteRule, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``torch.cuda.X(...)`` -> ``rule.to(...)``."""
        if not self.allowed(original, rule) or self._left(original, rule):
            return updated
        context = self.contexts.get(id(original))
        if rule.current and not original.args and context is not None and context.rule is self.rules.device and \
                context.form == "object" and self.namable(original):
            self.rewritten(original.func)
            self.rewrote(rule)
            return self.forms.device(self.holder(original, given=True))
        args = convert(rule, list(updated.args))
        if args is not None:
            args = self._indices(rule, list(updated.args), args)
        if args is None:
            self.note(original, rule, f"{rule.match}() called with arguments that cannot be mapped to {rule.to}(); "
                                      "left as is")
            return updated
        if rule.device_type == "first":
            separator = args[0].comma if len(args) > 1 and isinstance(args[0].comma, cst.Comma) else comma()
            args.insert(0, cst.Arg(self.forms.device_type(self.holder(original)), comma=separator))
        elif rule.device_type == "keyword":
            args.insert(sum(1 for a in args if a.keyword is None), self.device_type_arg(rule, original))
        self.rewritten(original.func)
        self.rewrote(rule)
        new = self.forms.call(rule, updated, with_commas(args, updated.args))
        return self.guard(original, new, rule.without_accelerator)

    def device_type_arg(self, rule: RewriteRule, site: cst.CSTNode) -> cst.Arg:
        value = self.forms.device_type(self.holder(site))
        return keyword_arg("device_type", value) if rule.device_type == "keyword" else cst.Arg(value)

    def _context(self, rule: RewriteRule, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``torch.cuda.stream(s)`` -> ``s``: the stream is its own context."""
        if not self.allowed(original, rule) or self._left(original, rule):
            return updated
        self.rewritten(original.func)
        self.rewrote(rule)
        return updated.args[0].value

    def _method(self, rule: RewriteRule, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``x.cuda(...)`` -> ``x.to(<device>, ...)``."""
        if any(a.star or (a.keyword is not None and a.keyword.value not in rule.params) for a in original.args):
            self.note(original, rule, f".{rule.match}() called with arguments torch's .{rule.match}() does not "
                                      "take; left as is")
            return updated
        if not self.allowed(original, rule):
            return updated
        device_name = rule.params[0]
        rest: list[cst.Arg] = []
        device: tuple[cst.Arg, cst.Arg] | None = None
        position = 0
        for old, new in zip(original.args, updated.args, strict=True):
            if old.keyword is not None and old.keyword.value == device_name and device is not None:
                self.note(original, rule, f".{rule.match}() given its device twice; left as is")
                return updated
            if device is None and (old.keyword is None or old.keyword.value == device_name):
                device = (old, new)
                position += old.keyword is None
            elif new.keyword is None:
                position += 1
                if position > len(rule.params):
                    self.note(original, rule, f".{rule.match}() called with too many arguments; left as is")
                    return updated
                rest.append(keyword_arg(rule.params[position - 1], new.value).with_changes(comma=new.comma))
            else:
                rest.append(new)
        if device is None:
            first = cst.Arg(self.forms.bare(self.forms.device(self.holder(original, given=True))))
        else:
            value = self._method_device(original, device[0].value, device[1].value)
            first = device[1].with_changes(value=value, keyword=None, equal=cst.MaybeSentinel.DEFAULT)
        self.rewrote(rule)
        func = updated.func.with_changes(attr=cst.Name(rule.to))  # type: ignore[attr-defined]
        return updated.with_changes(func=func, args=with_commas([first, *rest], updated.args))

    def _method_device(
        self, site: cst.Call, original: cst.BaseExpression, updated: cst.BaseExpression
    ) -> cst.BaseExpression:
        """The device argument of ``x.cuda(d)`` as an argument of ``x.to``."""
        if isinstance(original, _STRINGS) or self.forms.what(updated) is not None:
            return updated  # a device value (rewritten where it names CUDA)
        if isinstance(original, cst.Call) and self.imports.resolve(original.func) == "torch.device":
            return updated
        if self.rules.device.holds(held_name(original)):
            return updated  # a variable that holds a device
        return self.forms.indexed(self.holder(site), updated)  # an index: 0, rank, args.gpu...

    def _device_call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``torch.device("cuda")`` -> the accelerator; ``torch.device("cuda:N")`` -> the accelerator's device N."""
        rule = self.rules.device.rule
        if len(updated.args) != 1 or updated.args[0].keyword is not None:
            return updated
        value = updated.args[0].value
        index = self.index_of(value) if self.index_of(original.args[0].value) is not None else None
        if index is not None:
            if not self.allowed(original, rule):
                return updated
            self.rewrote(rule)
            return self.forms.indexed(self.holder(original), index)
        what = self.forms.what(value)
        if what in ("type", "collapsed type"):
            device = self.forms.device(self.holder(original))
            if what == "collapsed type":
                self.forms.made[id(device)] = (device, "collapsed device")
            return device
        if isinstance(value, cst.IfExp) and self.forms.what(value.body) == "type" and \
                string_value(value.orelse) == rule.cpu:
            cpu = updated.with_changes(args=[updated.args[0].with_changes(value=value.orelse)])
            return value.with_changes(body=self.forms.device(self.holder(original)), orelse=cpu)
        return updated

    def _only_on(self, value: cst.BaseExpression) -> bool:
        """``value if <accelerator>.type == "cuda" else None`` (written by an earlier run)."""
        if not isinstance(value, cst.IfExp) or not isinstance(value.orelse, cst.Name) or value.orelse.value != "None":
            return False
        test = value.test
        return isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and \
            isinstance(test.comparisons[0].operator, cst.Equal) and \
            string_value(test.comparisons[0].comparator) == self.rules.device.rule.match and \
            (isinstance(test.left, cst.Attribute) and test.left.attr.value == "type" or isinstance(test.left, cst.Name))

    def _cuda_arguments(self, rule: RewriteRule, original: cst.Call, updated: cst.Call) -> cst.Call:
        """``DDP(m, device_ids=[i])`` -> ``DDP(m, device_ids=[i] if <accelerator>.type == "cuda" else None)``."""
        if not self.allowed(original, rule):
            return updated
        names = iter(rule.params)
        args = []
        for arg in updated.args:
            if arg.star:
                names = iter(())  # the positions after *args are unknown
            name = arg.keyword.value if arg.keyword is not None else next(names, None)
            value = arg.value
            if name in rule.keywords and not self._only_on(value) and \
                    not (isinstance(value, cst.Name) and value.value == "None"):
                self.rewrote(rule)
                arg = arg.with_changes(value=self.forms.only_on(self.holder(original), value,
                                                                self.rules.device.rule.match))
            args.append(arg)
        return updated.with_changes(args=args)

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        rule = self.index_args.get(id(original_node.value))
        if rule is not None and self.allowed(original_node, rule):
            self.rewrote(rule)
            updated_node = updated_node.with_changes(
                value=self.forms.indexed(self.holder(original_node), updated_node.value))
        return self.unparenthesized(updated_node)

    def leave_Return(self, original_node: cst.Return, updated_node: cst.Return) -> cst.Return:
        return self.unparenthesized(updated_node)

    def leave_Param(self, original_node: cst.Param, updated_node: cst.Param) -> cst.Param:
        default = updated_node.default
        return updated_node if default is None else updated_node.with_changes(default=self.forms.bare(default))

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
            if rule is not None and rule.result_methods and self.selection.enabled(rule.code):
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
        return self.guard(original, updated, rule.result_methods[func.attr.value])

    # --- guards -------------------------------------------------------------------------------------------

    def guard(self, original: cst.Call, new: cst.Call, fallback: str | None) -> cst.BaseExpression:
        """Make a call that needs an accelerator give ``fallback`` where there is none.

        Nothing is needed where the code runs only with an accelerator. A statement made of the call (or a
        chain of calls on its result) is put under ``if <accelerator available>:``; any other call becomes
        ``(call if <accelerator available> else fallback)``.
        """
        if fallback is None or self.accelerated:
            return new
        line = self.statement(original)
        if line is not None:
            self.guard_lines.add(id(line))
            return new
        guarded = self.forms.guarded(new, self.forms.available(self.rules.available), fallback)
        self.parenthesized.add(id(guarded))
        return guarded

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.BaseStatement:
        if id(original_node) not in self.guard_lines:
            return updated_node
        guard = self.forms.guard_statement(self.forms.available(self.rules.available), updated_node)
        self.guards.add(id(guard))
        return guard

    def merge_guards(self, body):
        """Neighbouring statements under the same guard share one ``if``."""
        out: list = []
        for statement in body:
            previous = out[-1] if out else None
            if previous is not None and id(previous) in self.guards and id(statement) in self.guards:
                inner = statement.body.body[0].with_changes(leading_lines=statement.leading_lines)
                merged = previous.with_changes(body=previous.body.with_changes(body=[*previous.body.body, inner]))
                self.guards.add(id(merged))
                out[-1] = merged
            else:
                out.append(statement)
        return out

    # --- what already holds only with an accelerator ---------------------------------------------------------

    def keep_checks(self, node: cst.CSTNode, test: cst.BaseExpression, guarded: cst.CSTNode) -> None:
        """Keep ``torch.cuda.is_available()`` in ``test`` when what it guards uses CUDA-only APIs that stay:
        a CUDA-only branch must stay CUDA-only."""
        checks = self.available_calls(test)
        if not checks:
            return
        stays = self.cuda_only(guarded)
        if stays is None and not self.torch_ready(node) and self._names_cuda(guarded):
            stays = f'"{self.rules.device.rule.match}", which cannot be rewritten here'  # the pair stays together
        if stays is not None:
            self.kept.update(id(c) for c in checks)
            self.check(checks[0], "cuda-only-branch", f"{self.rules.available.match}() guarding {stays}")

    def _names_cuda(self, node: cst.CSTNode) -> bool:
        """Does ``node`` hold the string ``"cuda"`` (or ``"cuda:N"``)?"""
        match = self.rules.device.rule.match
        return any(value == match or value.startswith(match + ":")
                   for value in map(string_value, m.findall(node, m.SimpleString())) if value is not None)

    def requirement(self, node: cst.CSTNode, test: cst.BaseExpression) -> bool:
        """``assert torch.cuda.is_available()``, ``if not torch.cuda.is_available(): raise``: the checks in ``test``
        are kept and the requirement reported; False when ``test`` checks nothing of CUDA."""
        checks = self.available_calls(test, counts=True)
        if checks:
            self.kept.update(id(c) for c in checks)
            self.check(node, "requirement", f"{code(test).strip()[:60]}")
        return bool(checks)

    def cuda_only(self, node: cst.CSTNode) -> str | None:
        """A CUDA-only name ``node`` uses that stays as it is (no rule rewrites it here), if any."""
        for _, qualified in self.chains(node):
            rule = self.rules.lookup(qualified)
            if rule is None:
                continue
            if rule.kind == "report" or rule.group and self.group_left(rule.group) is not None:
                return qualified
        return None

    def available_calls(self, test: cst.BaseExpression, counts: bool = False) -> list[cst.Call]:
        wanted = {self.rules.available.match} | (self.facts.counts if counts else set())
        return [c for c in m.findall(test, m.Call()) if isinstance(c, cst.Call)
                and self.imports.resolve(c.func) in wanted]


def exits(block: cst.BaseSuite) -> bool:
    """Does the block end by raising or leaving the program (``sys.exit``)?"""
    last = last_statement(block)
    return isinstance(last, cst.Raise) or isinstance(last, cst.Expr) and isinstance(last.value, cst.Call) and \
        code(last.value.func) in _EXITS
