"""What the rules of one rewrite share: the module's facts, what is known about the node being visited, the
marks rules leave on the unit's nodes for later, and what is reported."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import libcst as cst
import libcst.matchers as m
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from torchdevice.records.rewrite import RewriteRule
from torchdevice.rewrite.facts import Facts
from torchdevice.rewrite.facts.devices import Holder
from torchdevice.rewrite.facts.names import CstImportMap, root_name
from torchdevice.rewrite.forms import Forms
from torchdevice.rewrite.outline import Scope, Unit, scopes_within
from torchdevice.rewrite.ruleset import RuleSet, ValueRule
from torchdevice.rewrite.selection import Selection, suppressed
from torchdevice.rewrite.syntax import code, ends_block, held_name


@dataclass(frozen=True)
class Expected:
    """A place where a value of ``rule`` is expected, how to write it there (``object``, ``string``), and
    whether a device index is dropped there (``map_location``: see ``RewriteRule.unindexed``)."""

    rule: ValueRule
    form: str
    unindexed: bool = False


@dataclass(frozen=True)
class Note:
    """A CUDA-specific choice left in place, at ``line``:``column`` (1-based), and why; in a notebook, ``line`` is
    in its code cell number ``cell``."""

    line: int
    column: int
    code: str
    message: str
    cell: int | None = None


@dataclass
class Marks:
    """What rules leave on the original nodes of one unit for later: learnt on the way down, for the way up
    or for the nodes below; ``guarded_lines`` on the way up, for the statement around.

    Each rule names the marks it reads and writes (``Rule.reads``, ``Rule.writes``), and runs after every
    rule that writes what it reads. Keyed by the nodes themselves (libcst nodes hash by identity, and a key
    keeps its node alive); a new ``Marks`` per unit.
    """

    expected: dict[cst.CSTNode, Expected] = field(default_factory=dict)
    """Where a device or backend value is expected (the first mark wins)."""
    kept_checks: set[cst.CSTNode] = field(default_factory=set)
    """CUDA checks left as they are (a CUDA-only branch needs them, a requirement)."""
    rewritten_tests: set[cst.CSTNode] = field(default_factory=set)
    """Tests against ``"cuda"`` that are part of a rewrite, written now or by an earlier run (not reported)."""
    launch_counts: dict[cst.CSTNode, RewriteRule] = field(default_factory=dict)
    """Counts of accelerators a launcher starts that many processes of."""
    device_indices: dict[cst.CSTNode, RewriteRule] = field(default_factory=dict)
    """Integer device indices where a device is expected."""
    guarded_lines: set[cst.CSTNode] = field(default_factory=set)
    """Statement lines to put under ``if <accelerator available>:``."""


_BINDS: dict[type[cst.CSTNode], str] = {
    cst.AssignTarget: "target", cst.AugAssign: "target", cst.AnnAssign: "target", cst.For: "target",
    cst.CompFor: "target", cst.Param: "name", cst.FunctionDef: "name", cst.ClassDef: "name", cst.AsName: "name",
    cst.Arg: "keyword", cst.Attribute: "attr",
}
"""The field of a node that holds a name it binds or names without reading it."""


class _Chains(cst.CSTVisitor):
    """The longest names and attribute chains of an expression that resolve to a qualified name."""

    def __init__(self, imports: CstImportMap) -> None:
        super().__init__()
        self.imports = imports
        self.found: list[tuple[cst.BaseExpression, str]] = []

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        qualified = self.imports.resolve_cst(node)
        if qualified is not None:
            self.found.append((node, qualified))
            return False
        return True

    def visit_Name(self, node: cst.Name) -> None:
        qualified = self.imports.resolve_cst(node)
        if qualified is not None:
            self.found.append((node, qualified))


class Rewrite:
    """The state of one module's rewrite: what lasts for the file, and what is known about the current unit.

    What encloses the node being visited is the traversal's own path (``path``), the same answer as LibCST's
    ``ParentNodeProvider`` without a second walk of every unit (resolving it per unit cost a quarter more CPU
    time over transformers' CUDA files).
    """

    def __init__(self, rules: RuleSet, facts: Facts, forms: Forms, selection: Selection,
                 suppressions: dict[int, frozenset[str] | None]) -> None:
        self.rules, self.facts, self.forms = rules, facts, forms
        self.selection, self.suppressions = selection, suppressions
        self.imports: CstImportMap = facts.imports
        self.notes: list[Note] = []
        self.sites: Counter[str] = Counter()
        """Code -> how many sites were rewritten."""
        self.namespace_names: set[str] = set()
        """Local names an import binds to something with a rule (``autocast``)."""
        self.uses: Counter[str] = Counter()
        self.rewritten_uses: Counter[str] = Counter()
        self.guards_by_text: dict[str, bool | None] = {}
        self.groups: dict[str, str | None] = {}
        """Rule group -> why it is left in this module (None: rewritten)."""
        self.start_unit(Unit(0, 0, 0, False), cst.Module([]))

    def start_unit(self, unit: Unit, module: cst.Module) -> None:
        """Begin the unit ``unit``, parsed as ``module``."""
        self.unit, self.module, self.offset = unit, module, unit.start - 1 - unit.indented
        self.forms.forget()
        self.marks = Marks()
        self.positions: Mapping[cst.CSTNode, CodeRange] | None = None
        self.unit_accelerated = self.facts.guards.accelerated(unit.conditions)
        """Do the conditions around the unit hold only with an accelerator?"""
        self.changed = False  # a node of this unit was replaced
        self.path: list[cst.CSTNode] = []
        """The original nodes from the unit's module down to the node being visited."""
        self.imported = False  # this unit imports a name from a rewritten namespace

    # --- where the node being visited is --------------------------------------------------------------

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
                found = _BINDS.get(type(parent))
                return found is None or getattr(parent, found) is not child
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
        if not self.facts.devices.holders and not (given and self.facts.devices.parameters):
            return None
        return self.facts.devices.at(self.span(node)[0], self.scopes(node), given)

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
        return self.facts.torch.ready(self.unit, self.unit.scopes) or self.facts.torch.ready(
            self.unit, self.scopes(node))

    # --- what code means ---------------------------------------------------------------------------------

    def guard_of(self, test: cst.BaseExpression) -> bool | None:
        """``Facts.guard_of`` for a libcst expression (remembered by its text for the file)."""
        text = code(test)
        if text not in self.guards_by_text:
            tree = None
            if any(word in text for word in self.facts.guards.words):
                try:
                    tree = ast.parse(f"(\n{text}\n)", mode="eval")
                except SyntaxError:
                    pass
            self.guards_by_text[text] = None if tree is None else self.facts.guards.guard_of(tree.body)
        return self.guards_by_text[text]

    def chains(self, node: cst.CSTNode) -> list[tuple[cst.BaseExpression, str]]:
        """The names and attribute chains in ``node`` that resolve to qualified names, with them."""
        visitor = _Chains(self.imports)
        node.visit(visitor)
        return visitor.found

    def counts(self, node: cst.BaseExpression) -> bool:
        """Is ``node`` a call counting the accelerators (``torch.cuda.device_count()``)?"""
        return isinstance(node, cst.Call) and not node.args and \
            (self.imports.resolve_cst(node.func) or "") in self.facts.guards.counts

    def available_calls(self, test: cst.BaseExpression, counts: bool = False) -> list[cst.Call]:
        """The CUDA availability checks in ``test`` (and, with ``counts``, the counts of accelerators)."""
        wanted = {self.rules.available.match} | (self.facts.guards.counts if counts else set())
        return [c for c in m.findall(test, m.Call()) if isinstance(c, cst.Call)
                and self.imports.resolve_cst(c.func) in wanted]

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
                self.facts.groups.blocker(group)
            )
        return self.groups[group]

    def index_like(self, value: cst.BaseExpression) -> bool:
        """Is ``value`` a device index: an integer, or a name that holds one (``local_rank``, ``args.gpu``)?"""
        index = self.rules.index
        return index is not None and (isinstance(value, cst.Integer) or isinstance(value, (cst.Name, cst.Attribute))
                                      and index.holds(held_name(value)))

    # --- what rules leave for each other ------------------------------------------------------------------

    def expect(self, node: cst.BaseExpression, rule: ValueRule, form: str, place: str | None = None) -> None:
        """A value of ``rule`` is expected at ``node``, given to or kept under ``place`` (a name)."""
        self.marks.expected.setdefault(node, Expected(rule, form, rule.drops_index(place)))

    def guard(self, original: cst.Call, new: cst.Call, fallback: str | None) -> cst.BaseExpression:
        """Make a call that needs an accelerator give ``fallback`` where there is none.

        Nothing is needed where the code runs only with an accelerator. A statement made of the call (or a
        chain of calls on its result) is put under ``if <accelerator available>:`` (by the ``guards`` rule);
        any other call becomes ``(call if <accelerator available> else fallback)``.
        """
        if fallback is None or self.accelerated:
            return new
        line = self.statement(original)
        if line is not None:
            self.marks.guarded_lines.add(line)
            return new
        return self.forms.guarded(new, self.forms.available(self.rules.available), fallback)

    def rewritten(self, reference: cst.BaseExpression) -> None:
        """A reference to a name an import binds was rewritten (the import may go when all are)."""
        root = root_name(reference)
        if root in self.namespace_names:
            self.rewritten_uses[root] += 1

    def removable_imports(self) -> set[str]:
        """Names imported from a rewritten namespace whose every use was rewritten."""
        return {n for n, k in self.rewritten_uses.items() if k and self.uses[n] == k}

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

