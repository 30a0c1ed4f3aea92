"""The libcst transformer that applies the rewrite rules to the statements of one module.

One pass: top-down it learns (imports, where a device or backend value is expected, which names
hold events, which calls a rule rewrites, which code runs only with an accelerator), bottom-up it
rewrites. What cannot be rewritten safely, and every CUDA-specific choice it leaves, is reported
under the code of its rule. The work is split by subject: :mod:`~torchdevice.rewrite.values` (device
and backend values), :mod:`~torchdevice.rewrite.calls` (calls and guards); this module holds names,
references, reports and the hooks both need.
"""

from __future__ import annotations

import re

import libcst as cst

from torchdevice.rewrite.calls import CallRewriting, exits
from torchdevice.rewrite.facts import is_rename
from torchdevice.rewrite.imports import root_name
from torchdevice.rewrite.syntax import code, held_name, string_value

_COMMAND_LINE = re.compile(r"--[\w-]*device[= ]cuda\b")


class Rewriter(CallRewriting):
    """Rewrite CUDA-specific constructs; see ``catalog/overlays/rewrite.yaml`` for the rules."""

    # --- imports and references to names with rules (torch.cuda...) ---------------------------------------

    def visit_Import(self, node: cst.Import) -> bool:
        self._imports(node)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        self._imports(node)
        return False

    def _imports(self, node: cst.Import | cst.ImportFrom) -> None:
        for local, qualified in self.imports.add(node):
            if self.rules.lookup(qualified) is None and not self.rules.reaches(qualified):
                continue
            if local == "*":
                self.check(node, "dynamic", f"from {qualified} import *")
            else:
                self.namespace_names.add(local)
                self.imported = True

    def visit_Name(self, node: cst.Name) -> None:
        if node.value not in self.namespace_names or not self.read(node):
            return
        self.uses[node.value] += 1
        qualified = self.imports.resolve(node)
        if qualified is not None:
            self.references[id(node)] = qualified

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        qualified = self.references.get(id(original_node))
        return updated_node if qualified is None else self._reference(original_node, updated_node, qualified)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        qualified = self.imports.resolve(node)
        if qualified is not None and (self.rules.lookup(qualified) is not None or self.rules.reaches(qualified)):
            self.references[id(node)] = qualified
            root = root_name(node)
            if root in self.namespace_names:
                self.uses[root] += 1
            return False
        return True

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        qualified = self.references.get(id(original_node))
        return updated_node if qualified is None else self._reference(original_node, updated_node, qualified)

    def _reference(self, original: cst.BaseExpression, updated: cst.BaseExpression, qualified: str):
        """A name or attribute chain with a rule (``torch.cuda...``)."""
        rule = self.rules.lookup(qualified)
        if rule is None:
            return updated
        if rule.kind == "report":
            if self.rules.reaches(qualified):
                self.note(original, rule, f"{qualified} is used as a value; what is reached through it is not "
                                          "rewritten")
            elif not rule.keywords:
                self.note(original, rule, f"{qualified}: {rule.doc}")
            return updated
        if self.callee(original):
            return updated  # the call is rewritten as a whole
        if not self.allowed(original, rule) or rule.group and self.group_left(rule.group) is not None:
            return updated
        if isinstance(self.parent(original), cst.Decorator) and rule.device_type != "none":
            self.rewritten(original)
            self.rewrote(rule)
            return cst.Call(self.forms.torch(rule.to), [self.device_type_arg(rule, original)])
        if is_rename(rule):
            self.rewritten(original)
            self.rewrote(rule)
            return self.forms.torch(rule.to)
        self.note(original, rule, f"{qualified} is used here without being called; left as is")
        return updated

    # --- hooks shared by values and calls ---------------------------------------------------------------

    def visit_Param(self, node: cst.Param) -> None:
        if node.default is not None:
            self.mark_holder(node.name.value, node.default)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self.mark_holder(held_name(target.target), node.value)
            self.track_results(target.target, node.value)
            self._launch_count(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self.mark_holder(held_name(node.target), node.value)
            self.track_results(node.target, node.value)

    def _launch_count(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """``world_size = torch.cuda.device_count()`` where a launcher starts that many processes."""
        if not isinstance(target, cst.Name) or target.value not in self.facts.launch_counts or self.accelerated:
            return
        rule = next(iter(self.rules.launchers.values()))
        if self.counts(value):
            self.launch_values[id(value)] = rule
        elif any(self.counts(c) for c in self.available_calls(value, counts=True)):
            self.note(value, rule, f"{target.value} counts accelerators and starts that many processes: none "
                                   "where there is no accelerator; left as is")

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if self.device_type_of(node) is not None:
            self.finishing.add(id(node))
            self.ours.add(id(node.test))
            return
        self.keep_checks(node, node.test, node.body)
        self.propagate(node, node.body, node.orelse)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        if isinstance(node.operator, cst.And):
            self.keep_checks(node, node.left, node.right)
        self.propagate(node, node.left, node.right)

    def visit_If(self, node: cst.If) -> None:
        branches = [node.body, *([node.orelse.body] if isinstance(node.orelse, cst.Else) else [])]
        if not (any(map(exits, branches)) and self.requirement(node.test, node.test)):
            self.keep_checks(node, node.test, node.body)

    def visit_Assert(self, node: cst.Assert) -> None:
        if self.guard_of(node.test) is True:
            self.requirement(node, node.test)

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return updated_node.with_changes(body=self.merge_guards(updated_node.body)) if self.guards else updated_node

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.BaseSuite:
        return updated_node.with_changes(body=self.merge_guards(updated_node.body)) if self.guards else updated_node

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.imports.resolve(node.func)
        method = node.func.attr.value if isinstance(node.func, cst.Attribute) else None
        self.classify(node, qualified, method)
        self.mark_arguments(node, qualified, method)
        self._report_call(node, qualified, method)

    # --- reports -----------------------------------------------------------------------------------------

    def _report_call(self, node: cst.Call, qualified: str | None, method: str | None) -> None:
        """Reports that depend on a call's arguments, and CUDA reached through strings."""
        rule = self.rules.reports.get(qualified or "")
        if rule is not None and rule.keywords:
            chosen = [a.keyword.value for a in node.args if a.keyword is not None and a.keyword.value in rule.keywords
                      and code(a.value) not in ("False", "None", "0", '""', "''")]
            if chosen:
                self.note(node, rule, f"{qualified}({', '.join(f'{k}=...' for k in chosen)}): {rule.doc}")
        cuda = self.rules.device.rule.match
        if method == "startswith" and node.args and string_value(node.args[0].value) == cuda and \
                id(node) not in self.ours:
            self.check(node, "comparison", f"{code(node)[:60]}")
        elif method == "add_argument" and any(
            a.keyword is not None and a.keyword.value == "choices" and _lists(a.value, cuda) for a in node.args
        ):
            self.check(node, "command-line", "choices that name CUDA and not the other accelerators")
        elif isinstance(node.func, cst.Name) and node.func.value == "getattr" and len(node.args) >= 2:
            name = string_value(node.args[1].value)
            if self.imports.resolve(node.args[0].value) == "torch" and name and self.rules.mentions(name):
                self.check(node, "dynamic", f"getattr(torch, {name!r})")
        elif isinstance(node.func, cst.Name) and node.func.value in ("eval", "exec"):
            if any(self.rules.mentions(string_value(a.value) or "") for a in node.args):
                self.check(node, "dynamic", f"code in a string passed to {node.func.value}()")

    def visit_Comparison(self, node: cst.Comparison) -> None:
        """``device == "cuda"``, ``"cuda" in device``, ``device.type in ("cuda", "xpu")``, ``backend == "nccl"``
        are left as is (a CUDA-only branch stays CUDA-only) and reported: they are false on other devices."""
        if id(node) in self.ours or not any(_literal(side) for side in (node.left, *(
                t.comparator for t in node.comparisons))):
            return
        left = node.left
        for target in node.comparisons:
            for side in (left, target.comparator):
                for value in self.rules.values:
                    if _lists(side, value.rule.match) or value.rule.kind == "device" and self.index_of(side):
                        self.check(node, "comparison", code(node)[:60])
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
                self.check(node, "command-line", f"{option} {value}")
                return

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self._command_text(node, node.value)

    def visit_FormattedStringText(self, node: cst.FormattedStringText) -> None:
        self._command_text(node, node.value)

    def _command_text(self, node: cst.CSTNode, text: str) -> None:
        """``"python train.py --device cuda"``: a command line that picks CUDA."""
        found = _COMMAND_LINE.search(text) if "--" in text else None
        if found is not None:
            self.check(node, "command-line", found.group(0))


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
