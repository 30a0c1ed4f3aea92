"""The libcst transformer that applies the rewrite rules to the statements of one module.

One pass: top-down it learns (imports, where a device or backend value is expected, which names
hold events, which calls a rule rewrites), bottom-up it rewrites. What cannot be rewritten safely
is left as is and recorded in ``notes`` with the node at fault. The work is split by subject:
:mod:`~torchdevice.rewrite.values` (device and backend values), :mod:`~torchdevice.rewrite.calls`
(calls and guards); this module holds names, references and the hooks both need.
"""

from __future__ import annotations

import libcst as cst

from torchdevice.rewrite.calls import CallRewriting, is_rename
from torchdevice.rewrite.imports import root_name
from torchdevice.rewrite.syntax import held_name, string_value
from torchdevice.rewrite.values import ValueRewriting


class Rewriter(ValueRewriting, CallRewriting):
    """Rewrite CUDA-specific constructs; see ``catalog/overlays/rewrite.yaml`` for the rules."""

    # --- imports and references to rewritten namespaces (torch.cuda...) ------------------------------

    def visit_Import(self, node: cst.Import) -> bool:
        self._imports(node)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        self._imports(node)
        return False

    def _imports(self, node: cst.Import | cst.ImportFrom) -> None:
        for local, qualified in self.imports.add(node):
            if not self.rules.in_namespace(qualified):
                continue
            if local == "*":
                self.note(node, f"`from {qualified} import *`: the names it binds are not rewritten")
            else:
                self.namespace_names.add(local)
                self.imported = True

    def visit_Name(self, node: cst.Name) -> None:
        if node.value not in self.namespace_names or id(node) in self.stores:
            return
        self.uses[node.value] += 1
        qualified = self.imports.resolve(node)
        if qualified is not None and self.rules.in_namespace(qualified):
            self.references[id(node)] = qualified

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        qualified = self.references.get(id(original_node))
        return updated_node if qualified is None else self._reference(original_node, updated_node, qualified)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        qualified = self.imports.resolve(node)
        if qualified is not None and self.rules.in_namespace(qualified):
            self.references[id(node)] = qualified
            root = root_name(node)
            if root in self.namespace_names:
                self.uses[root] += 1
            return False
        self._store(node.attr)
        return True

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        qualified = self.references.get(id(original_node))
        return updated_node if qualified is None else self._reference(original_node, updated_node, qualified)

    def _reference(self, original: cst.BaseExpression, updated: cst.BaseExpression, qualified: str):
        """A name or attribute chain in a rewritten namespace (``torch.cuda...``)."""
        rule = self.rules.calls.get(qualified)
        if rule is None:
            if any(r.startswith(qualified + ".") for r in self.rules.calls):
                self.note(original, f"{qualified} is used as a value; what is reached through it is not rewritten")
            else:
                self.note(original, f"{qualified} has no device-agnostic equivalent; left as is")
            return updated
        if id(original) in self.callees:
            return updated  # the call is rewritten as a whole
        if id(original) in self.decorators and rule.device_type != "none":
            self.rewritten(original)
            return cst.Call(self.forms.torch(rule.to), [self.device_type_arg(rule)])
        if is_rename(rule):
            self.rewritten(original)
            return self.forms.torch(rule.to)
        self.note(original, f"{qualified} is used here without being called; left as is")
        return updated

    # Name nodes that are not references: attribute names, keywords, parameters, definitions, stores.

    def _store(self, target: cst.BaseExpression | None) -> None:
        if isinstance(target, cst.Name) and target.value in self.namespace_names:
            self.stores.add(id(target))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._store(element.value)

    def visit_Arg(self, node: cst.Arg) -> None:
        self._store(node.keyword)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._store(node.name)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._store(node.name)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._store(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._store(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._store(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._store(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._store(node.name)

    def visit_Decorator(self, node: cst.Decorator) -> None:
        self.decorators.add(id(node.decorator))

    # --- hooks shared by values and calls ---------------------------------------------------------------

    def visit_Param(self, node: cst.Param) -> None:
        self._store(node.name)
        if node.default is not None:
            self.mark_holder(node.name.value, node.default)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self.mark_holder(held_name(target.target), node.value)
            self.track_results(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._store(node.target)
        if node.value is not None:
            self.mark_holder(held_name(node.target), node.value)
            self.track_results(node.target, node.value)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self.keep_checks(node.test, node.body)
        self.propagate(node, node.body, node.orelse)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        if isinstance(node.operator, cst.And):
            self.keep_checks(node.left, node.right)
        self.propagate(node, node.left, node.right)

    def visit_Call(self, node: cst.Call) -> None:
        self.callees.add(id(node.func))
        qualified = self.imports.resolve(node.func)
        method = node.func.attr.value if isinstance(node.func, cst.Attribute) else None
        self.classify(node, qualified, method)
        if method == "format":
            self.propagate(node, node.func.value, form="string")  # type: ignore[attr-defined] # "cuda:{}".format(i)
        self.mark_arguments(node, qualified, method)
        self._check_dynamic(node)

    def _check_dynamic(self, node: cst.Call) -> None:
        """Report what reaches CUDA through strings the rewriter cannot follow."""
        if not isinstance(node.func, cst.Name):
            return
        if node.func.value == "getattr" and len(node.args) >= 2:
            name = string_value(node.args[1].value)
            if self.imports.resolve(node.args[0].value) == "torch" and name and self.rules.mentions(name):
                self.note(node, f"getattr(torch, {name!r}) is not followed; left as is")
        elif node.func.value in ("eval", "exec"):
            if any(self.rules.mentions(string_value(a.value) or "") for a in node.args):
                self.note(node, f"code in a string passed to {node.func.value}() is not rewritten")
