"""What the parts of the rewriter share: the rules, the module's facts, the expressions it writes, where
each node is, whether an accelerator is present there, and what it reports."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from torchdevice.rewrite.facts import Facts, Holder, scopes_within
from torchdevice.rewrite.forms import Forms
from torchdevice.rewrite.imports import ImportMap, root_name
from torchdevice.rewrite.outline import Scope, Unit
from torchdevice.rewrite.rule import RewriteRule
from torchdevice.rewrite.rules import RuleSet, ValueRule
from torchdevice.rewrite.selection import Selection, suppressed
from torchdevice.rewrite.syntax import code, ends_block


@dataclass(frozen=True)
class Context:
    """A place where a value of ``rule`` is expected, how to write it there (``object``, ``string``), and
    whether a device index is dropped there (``map_location``: see ``RewriteRule.unindexed``)."""

    rule: ValueRule
    form: str
    unindexed: bool = False


_BINDS: dict[type[cst.CSTNode], str] = {
    cst.AssignTarget: "target", cst.AugAssign: "target", cst.AnnAssign: "target", cst.For: "target",
    cst.CompFor: "target", cst.Param: "name", cst.FunctionDef: "name", cst.ClassDef: "name", cst.AsName: "name",
    cst.Arg: "keyword", cst.Attribute: "attr",
}
"""The field of a node that holds a name it binds or names without reading it."""


@dataclass(frozen=True)
class Note:
    """A CUDA-specific choice left in place, at ``line``:``column`` (1-based), and why."""

    line: int
    column: int
    code: str
    message: str


class _Chains(cst.CSTVisitor):
    """The longest names and attribute chains of an expression that resolve to a qualified name."""

    def __init__(self, rewriter: RewriterBase) -> None:
        super().__init__()
        self.rewriter = rewriter
        self.found: list[tuple[cst.BaseExpression, str]] = []

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        qualified = self.rewriter.imports.resolve(node)
        if qualified is not None:
            self.found.append((node, qualified))
            return False
        return True

    def visit_Name(self, node: cst.Name) -> None:
        qualified = self.rewriter.imports.resolve(node)
        if qualified is not None:
            self.found.append((node, qualified))


class RewriterBase(cst.CSTTransformer):
    """State of one rewrite: what lasts for the file, and what is keyed by the nodes of one unit.

    What encloses the node being visited is the traversal's own path (``ancestors``), the same answer as
    LibCST's ``ParentNodeProvider`` without a second walk of every unit (resolving it per unit cost a quarter
    more CPU time over transformers' CUDA files, and three fifths with ``ExpressionContextProvider``).
    """

    def __init__(self, rules: RuleSet, facts: Facts, forms: Forms, selection: Selection,
                 suppressions: dict[int, frozenset[str] | None]) -> None:
        super().__init__()
        self.rules, self.facts, self.forms = rules, facts, forms
        self.selection, self.suppressions = selection, suppressions
        self.imports: ImportMap = facts.imports
        self.notes: list[Note] = []
        self.sites: Counter[str] = Counter()
        """Code -> how many sites were rewritten."""
        self.receivers: dict[str, RewriteRule] = {}
        """Source of names bound to objects whose methods are guarded (events) -> the rule creating them."""
        self.namespace_names: set[str] = set()
        """Local names an import binds to something with a rule (``autocast``)."""
        self.uses: Counter[str] = Counter()
        self.rewritten_uses: Counter[str] = Counter()
        self.guards_by_text: dict[str, bool | None] = {}
        self.groups: dict[str, str | None] = {}
        """Rule group -> why it is left in this module (None: rewritten)."""
        self.unit = Unit(0, 0, 0, False)
        self.module = cst.Module([])
        self.start_unit(self.unit, self.module)

    def start_unit(self, unit: Unit, module: cst.Module) -> None:
        """Forget what is keyed by node identity (``id()`` of original nodes): the previous unit's nodes may be gone."""
        self.unit, self.module, self.offset = unit, module, unit.start - 1 - unit.indented
        self.forms.forget()
        self.positions: Mapping[cst.CSTNode, CodeRange] | None = None
        self.contexts: dict[int, Context] = {}
        self.references: dict[int, str] = {}
        self.kept: set[int] = set()
        """Original nodes left as they are (CUDA checks a CUDA-only branch needs, version gates)."""
        self.ours: set[int] = set()
        """Original nodes that are part of a rewrite already decided (no report of their own)."""
        self.finishing: set[int] = set()
        self.unit_accelerated = self.facts.accelerated(unit.conditions)
        """Do the conditions around the unit hold only with an accelerator?"""
        self.launch_values: dict[int, RewriteRule] = {}
        self.index_args: dict[int, RewriteRule] = {}
        self.guard_lines: set[int] = set()
        self.guards: set[int] = set()
        self.parenthesized: set[int] = set()
        self.changed = False  # a node of this unit was replaced
        self.path: list[cst.CSTNode] = []
        """The original nodes from the unit's module down to the node being visited."""
        self.imported = False  # this unit imports a name from a rewritten namespace

    # --- traversal hooks ---------------------------------------------------------------------------------

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.path.append(node)
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):
        result = super().on_leave(original_node, updated_node)
        self.path.pop()
        if result is not updated_node:
            self.changed = True
        return result

    @property
    def accelerated(self) -> bool:
        """Does the node being visited run only where an accelerator exists: under conditions of the unit that
        say so, in the branch of a check (``if torch.cuda.is_available():``, ``use_cuda and ...``), or after
        ``if not <available>: return``?"""
        return self.unit_accelerated or any(map(self._guarded, self.path, self.path[1:]))

    def _guarded(self, parent: cst.CSTNode, child: cst.CSTNode) -> bool:
        """Does ``child`` run only with an accelerator, as far as ``parent`` (the node around it) says?"""
        if isinstance(parent, (cst.If, cst.IfExp)):
            holds = True if child is parent.body else False if child is parent.orelse else None
            return holds is not None and self.guard_of(parent.test) is holds
        if isinstance(parent, cst.BooleanOperation):
            return isinstance(parent.operator, cst.And) and child is parent.right and self.guard_of(parent.left) is True
        if isinstance(parent, (cst.Module, cst.IndentedBlock)):
            for statement in parent.body:
                if statement is child:
                    return False
                if isinstance(statement, cst.If) and statement.orelse is None and ends_block(statement.body) and \
                        self.guard_of(statement.test) is False:
                    return True
        return False

    # --- where nodes are -----------------------------------------------------------------------------------

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The node enclosing ``node``, an original node on the path being visited (None for the module)."""
        for i in range(len(self.path) - 1, 0, -1):
            if self.path[i] is node:
                return self.path[i - 1]
        return None

    def read(self, node: cst.Name) -> bool:
        """Is the name being visited read (not bound, a call's keyword or an attribute's name)?"""
        child: cst.CSTNode = node
        for parent in reversed(self.path[:-1]):
            if not isinstance(parent, (cst.Tuple, cst.List, cst.BaseElement)):  # (a, b) = ...
                field = _BINDS.get(type(parent))
                return field is None or getattr(parent, field) is not child
            child = parent
        return True

    def callee(self, node: cst.CSTNode) -> bool:
        """Is ``node`` the function a call calls?"""
        parent = self.parent(node)
        return isinstance(parent, cst.Call) and parent.func is node

    def statement(self, call: cst.Call) -> cst.SimpleStatementLine | None:
        """The statement line made of ``call`` alone, or of a chain of calls on its result (``a(x).b()``)."""
        node: cst.CSTNode = call
        parent = self.parent(node)
        while isinstance(parent, (cst.Call, cst.Attribute, cst.Subscript)) and \
                (parent.func if isinstance(parent, cst.Call) else parent.value) is node:
            node, parent = parent, self.parent(parent)
        line = self.parent(parent) if isinstance(parent, cst.Expr) else None
        return line if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 else None

    def span(self, node: cst.CSTNode) -> tuple[int, int, int]:
        """First line, column (1-based) and last line of an original node of the unit, in the file."""
        if self.positions is None:
            self.positions = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
        where = self.positions[node]  # type: ignore[index]
        return where.start.line + self.offset, where.start.column + 1, where.end.line + self.offset

    def scopes(self, node: cst.CSTNode) -> tuple[Scope, ...]:
        """The functions and classes around ``node``, outermost first."""
        line = self.span(node)[0]
        return self.unit.scopes + scopes_within(self.unit.nodes, line)

    def holder(self, node: cst.CSTNode, given: bool = False) -> Holder | None:
        """The program's own name for its device where ``node`` is, if it has one; ``given``: ``node`` is a device
        that goes straight into torch, where the enclosing function's device parameter can stand for it."""
        if not self.facts.holders and not (given and self.facts.parameters):
            return None
        return self.facts.holder_at(self.span(node)[0], self.scopes(node), given)

    def namable(self, node: cst.CSTNode, in_string: bool = False) -> bool:
        """Can the accelerator be named at ``node``? Not where torch is imported only after it runs, nor in an
        f-string where it would be the idiom itself (its quotes); reported there."""
        if not self.torch_ready(node):
            self.check(node, "no-torch", code(node).strip()[:40])
            return False
        if in_string and not self.forms.helper and self.holder(node) is None:
            self.note(node, self.rules.device.rule, "left as is: the accelerator cannot be named inside this string "
                                                    "where torch is not imported at module level")
            return False
        return True

    def torch_ready(self, node: cst.CSTNode) -> bool:
        """Is torch imported where ``node`` runs?"""
        return self.facts.torch_ready(self.unit, self.unit.scopes) or self.facts.torch_ready(
            self.unit, self.scopes(node))

    def guard_of(self, test: cst.BaseExpression) -> bool | None:
        """``Facts.guard_of`` for a libcst expression (remembered by its text for the file)."""
        text = code(test)
        if text not in self.guards_by_text:
            tree = None
            if any(word in text for word in self.facts.guard_words):
                try:
                    tree = ast.parse(f"(\n{text}\n)", mode="eval")
                except SyntaxError:
                    pass
            self.guards_by_text[text] = None if tree is None else self.facts.guard_of(tree.body)
        return self.guards_by_text[text]

    # --- what is allowed, what is reported --------------------------------------------------------------

    def allowed(self, node: cst.CSTNode, rule: RewriteRule) -> bool:
        """Is ``rule`` on for the run, and not turned off by a comment on the lines of ``node``?"""
        if not self.selection.enabled(rule.code):
            return False
        if not any(self.unit.start <= line <= self.unit.end for line in self.suppressions):
            return True
        first, _, last = self.span(node)
        return not suppressed(self.suppressions, range(first, last + 1), rule.code)

    def rewrote(self, rule: RewriteRule) -> None:
        """A site was rewritten by ``rule``."""
        self.sites[rule.code] += 1

    def note(self, node: cst.CSTNode, rule: RewriteRule, message: str) -> None:
        """Report ``message`` at ``node`` under ``rule``'s code, unless the rule is off there."""
        if self.allowed(node, rule):
            line, column, _ = self.span(node)
            self.notes.append(Note(line, column, rule.code, message))

    def note_at(self, line: int, column: int, rule: RewriteRule, message: str) -> None:
        """``note`` for a place outside the units (found by the outline)."""
        if self.selection.enabled(rule.code) and not suppressed(self.suppressions, (line,), rule.code):
            self.notes.append(Note(line, column, rule.code, message))

    def check(self, node: cst.CSTNode, analysis: str, what: str) -> None:
        """Report a construct left in place, found by ``analysis`` (a ``check`` rule)."""
        rule = self.rules.check(analysis)
        self.note(node, rule, f"{what}: {rule.doc}")

    def mark(self, node: cst.BaseExpression, rule: ValueRule, form: str, place: str | None = None) -> None:
        """A value of ``rule`` is expected at ``node``, given to or kept under ``place`` (a name)."""
        self.contexts.setdefault(id(node), Context(rule, form, rule.drops_index(place)))

    def rewritten(self, reference: cst.BaseExpression) -> None:
        """A reference to a name an import binds was rewritten (the import may go when all are)."""
        root = root_name(reference)
        if root in self.namespace_names:
            self.rewritten_uses[root] += 1

    def removable_imports(self) -> set[str]:
        """Names imported from a rewritten namespace whose every use was rewritten."""
        return {n for n, k in self.rewritten_uses.items() if k and self.uses[n] == k}

    def unparenthesized(self, holder):
        """Drop the parentheses of a guard or idiom that is a whole argument, assigned value or returned value."""
        value = holder.value
        if value is None:
            return holder
        if id(value) in self.parenthesized:
            return holder.with_changes(value=value.with_changes(lpar=(), rpar=()))
        return holder.with_changes(value=self.forms.bare(value))

    def chains(self, node: cst.CSTNode) -> list[tuple[cst.BaseExpression, str]]:
        """The names and attribute chains in ``node`` that resolve to qualified names, with them."""
        visitor = _Chains(self)
        node.visit(visitor)
        return visitor.found
