"""The rewrite rules agree with the catalog and the installed torch: what they call exists and accepts the
arguments they write; each rule checks itself and bad records are reported with file and line; the rule
modules run in an order that lets each read the marks the others leave."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from typing import get_args

import pytest
import torch
from torchdevice_generated.rewrite_rules import RULES

from codegen import schema
from codegen.load import CATALOG_DIR, load, load_list
from codegen.schema import CatalogError
from torchdevice.records.rewrite import CHECKS, Kind, RewriteRule
from torchdevice.rewrite.rules import RULES as CLASSES
from torchdevice.rewrite.ruleset import RuleSet, default
from torchdevice.rewrite.source import rewrite_source
from torchdevice.rewrite.state import Marks, Rewrite

OVERLAY = CATALOG_DIR / "overlays" / "rewrite.yaml"


@pytest.fixture(scope="module")
def catalog():
    return load()


def _signatures(entry, skip_self: bool = False) -> list[inspect.Signature]:
    out = []
    for params in (s.params for s in entry.signatures):
        params = params[1:] if skip_self and params and params[0].name == "self" else params
        empty = inspect.Parameter.empty
        out.append(inspect.Signature([
            inspect.Parameter(p.name, p.kind, default=empty if p.default is None else p.default) for p in params
        ]))
    return out


def _positional_names(signature: inspect.Signature) -> list[str]:
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in signature.parameters.values() if p.kind in kinds]


def _binds(call: ast.Call, signatures: list[inspect.Signature]) -> bool:
    args = [ast.unparse(a) for a in call.args]
    kwargs = {k.arg: ast.unparse(k.value) for k in call.keywords}
    for signature in signatures:
        try:
            signature.bind(*args, **kwargs)
            return True
        except TypeError:
            continue
    return False


def _rewritten_call(source: str) -> ast.Call:
    """The last call expression statement of the rewritten ``source`` (guards unwrapped)."""
    tree = ast.parse(rewrite_source(source, default()).code)
    node = tree.body[-1]
    while isinstance(node, ast.If):
        node = node.body[-1]
    assert isinstance(node, ast.Expr), ast.unparse(node)
    call = node.value
    return call.body if isinstance(call, ast.IfExp) else call  # type: ignore[return-value]


CALL_RULES = [r for r in RULES if r.kind == "call"]


def _calling(rule, values: str) -> str:
    """A module calling ``rule.match`` with ``values``; where the rule rewrites only code that runs with an
    accelerator, under a CUDA check."""
    if rule.accelerated_only:
        return f"import torch\nif torch.cuda.is_available():\n    {rule.match}({values})\n"
    return f"import torch\n{rule.match}({values})\n"


@pytest.mark.parametrize("rule", CALL_RULES, ids=lambda r: r.name)
def test_call_rule_writes_calls_its_replacement_accepts(rule, catalog):
    """Every way of calling the CUDA API positionally is rewritten into a call the replacement accepts."""
    original, replacement = _signatures(catalog[rule.match]), _signatures(catalog[rule.to])
    if not original:  # an exception class: only ever renamed
        assert rule.args == "same" and rule.device_type == "none" and rule.without_accelerator is None
        code = rewrite_source(f"import torch\nerror = {rule.match}\n", default()).code
        assert code.endswith(f"error = {rule.to}\n")
        return
    assert rule.params == tuple(_positional_names(original[0])[: len(rule.params)]), "params out of date"
    names = _positional_names(original[0])
    most = len(rule.params) if rule.args != "same" else len(names)
    for count in range(most + 1):
        values = ", ".join(f"a{i}" for i in range(count))
        if not _binds(ast.parse(f"f({values})").body[0].value, original):  # type: ignore[attr-defined]
            continue  # not a valid call of the CUDA API either
        call = _rewritten_call(_calling(rule, values))
        assert ast.unparse(call.func) == rule.to
        assert _binds(call, replacement), f"{ast.unparse(call)} does not fit {rule.to}{replacement}"


def test_method_rule_writes_calls_tensor_to_accepts(catalog):
    rule = next(r for r in RULES if r.kind == "method")
    original = _signatures(catalog[f"torch.Tensor.{rule.match}"], skip_self=True)
    assert rule.params == tuple(_positional_names(original[0]))
    target = _signatures(catalog[f"torch.Tensor.{rule.to}"], skip_self=True)
    for count in range(len(rule.params) + 1):
        values = ", ".join(["0", *(f"a{i}" for i in range(1, count))][:count])
        call = _rewritten_call(f"import torch\nx.{rule.match}({values})\n")
        assert _binds(call, target), ast.unparse(call)


@pytest.mark.parametrize("rule", [r for r in RULES if r.kind in ("device", "backend")], ids=lambda r: r.name)
def test_value_arguments_are_device_parameters(rule, catalog):
    """``arguments`` and ``type_arguments`` point at a device (or backend) parameter of the catalog entry."""
    for name, index in {**rule.arguments, **rule.type_arguments}.items():
        entry = catalog[name]
        expected = {"backend"} if rule.kind == "backend" else set(entry.device_params)
        at = {_positional_names(s)[index] for s in _signatures(entry) if len(_positional_names(s)) > index}
        assert at & expected, f"{name} argument {index} is one of {at}, not a parameter in {expected}"


@pytest.mark.parametrize("rule", [r for r in RULES if r.kind == "argument"], ids=lambda r: r.name)
def test_argument_rule_names_device_parameters(rule, catalog):
    """``params`` are the callable's leading parameters; ``keywords`` are device parameters of it."""
    entry = catalog[rule.match]
    assert rule.params == tuple(_positional_names(_signatures(entry)[0])[: len(rule.params)])
    assert set(rule.keywords) <= set(entry.device_params)


def test_rule_set_indexes_the_table():
    rules = RuleSet.build(RULES)
    assert set(rules.calls) == {r.match for r in RULES if r.kind == "call"}
    assert set(rules.arguments) == {r.match for r in RULES if r.kind == "argument"}
    assert set(rules.by_code) == {r.code for r in RULES}
    assert rules.lookup("torch.cuda.synchronize").code == "TD205"
    assert rules.lookup("torch.cuda.nvtx.range_push").code == "TD899"  # the report covering torch.cuda
    assert rules.lookup("torch.backends.cuda.sdp_kernel").code == "TD804"  # the narrowest report wins
    assert rules.lookup("torch.cudax") is None and rules.lookup("torch.nn.Linear") is None
    assert rules.may_apply(b"x.cuda()") and not rules.may_apply(b"x.to('mps')")


def test_codes_are_unique():
    with pytest.raises(ValueError, match="'a' and 'b' share code TD101"):
        RuleSet.build([dataclasses.replace(RULES[0], name="a"), dataclasses.replace(RULES[0], name="b")])
    lines: dict[str, int] = {}
    for node in schema.compose(OVERLAY).value:  # type: ignore[union-attr]
        code = next(v.value for k, v in node.value if k.value == "code")
        assert code not in lines, f"{OVERLAY}:{schema.line_of(node)}: code {code} also at line {lines[code]}"
        lines[code] = schema.line_of(node)


@pytest.mark.parametrize(("fields", "message"), [
    ({"kind": "backend", "match": "nccl", "to": "f", "names": "x", "methods": ("to",)},
     "'methods' does not apply to kind 'backend'"),
    ({"kind": "call", "match": "torch.cuda.x"}, "needs 'to'"),
    ({"kind": "argument", "match": "torch.f", "params": ("a",), "keywords": ("b",)},
     "needs 'keywords', each one of 'params'"),
    ({"kind": "call", "match": "torch.cuda.x", "to": "torch.y", "code": "TD1"}, "code 'TD1' is not TD and three"),
    ({"kind": "device", "match": "cuda", "names": "(unclosed"}, "names '\\(unclosed' is not a regular expression"),
    ({"kind": "check", "match": "vibes"}, "check 'vibes' is not one of comparison, requirement"),
    ({"kind": "context", "match": "torch.cuda.stream", "group": "streams"}, "needs 'group' and 'made_by'"),
    ({"kind": "call", "match": "torch.cuda.x", "to": "torch.y", "without_accelerator": "0 +"},
     "'0 \\+' is not a Python expression"),
    ({"kind": "report", "match": "cuda"}, "match 'cuda' is not a qualified name"),
])
def test_a_rule_checks_itself(fields, message):
    with pytest.raises(ValueError, match=message):
        RewriteRule(**{"name": "x", "code": "TD100", "doc": "", **fields})


def test_bad_records_are_reported_with_file_and_line(tmp_path):
    path = tmp_path / "rewrite.yaml"
    path.write_text(textwrap.dedent("""\
        - name: fine
          code: TD205
          kind: call
          doc: a rule
          match: torch.cuda.synchronize
          to: torch.accelerator.synchronize
        - name: typo
          code: TD206
          kind: call
          doc: a rule
          match: torch.cuda.synchronise
          to: torch.accelerator.synchronize
        - name: pattern
          code: TD101
          kind: device
          doc: a rule
          match: cuda
          names: "(dev"
    """))
    known = {"torch.cuda.synchronize", "torch.accelerator.synchronize"}
    message = r"rewrite\.yaml:7 \(entry typo\): unknown torch name 'torch\.cuda\.synchronise'"
    with pytest.raises(CatalogError, match=message):
        load_list(path, RewriteRule, known)
    path.write_text(path.read_text().replace("synchronise", "synchronize"))
    with pytest.raises(CatalogError, match=r"rewrite\.yaml:13 \(entry pattern\): names '\(dev' is not a regular"):
        load_list(path, RewriteRule, known)


# Public torch.accelerator APIs no CUDA construct maps to, and why.
_NO_CUDA_FORM = {
    "current_accelerator": "what the rewritten code names the accelerator with",
    "current_device_idx": "deprecated alias of current_device_index",
    "set_device_idx": "deprecated alias of set_device_index",
    "empty_host_cache": "torch.cuda has no host-cache call of that name",
}


def test_every_torch_accelerator_api_is_known_to_the_rules():
    """The reports stay current with the installed torch: each torch.accelerator API is the replacement of a
    rule or named by a report, and a torch.cuda function of the same name is never called "without equivalent"."""
    mentioned = " ".join(f"{r.to} {r.doc}" for r in RULES)
    public = [n for n in dir(torch.accelerator) if not n.startswith("_")
              and getattr(getattr(torch.accelerator, n), "__module__", "").startswith("torch.accelerator")]
    assert [n for n in public if n not in _NO_CUDA_FORM and f"torch.accelerator.{n}" not in mentioned] == []
    generic = default().lookup("torch.cuda.no_such_function")
    assert generic is not None
    same_name = [n for n in public if hasattr(torch.cuda, n) and default().lookup(f"torch.cuda.{n}") is generic]
    assert same_name == []


def test_every_kind_of_rule_is_applied_by_one_rule_module():
    claimed = [kind for c in CLASSES for kind in c.kinds]
    assert len(claimed) == len(set(claimed))
    wanted = (set(get_args(Kind)) - {"check"}) | set(CHECKS) - {"no-torch"}  # no-torch: wherever torch is named
    assert set(claimed) == wanted


_WRITES = ("add", "update", "setdefault")
"""Methods of a mark (a set or a dictionary) that write it; every other use reads it."""


def _marks_used(code: str, helpers: dict[str, tuple[set[str], set[str]]]) -> tuple[set[str], set[str], list[int]]:
    """The marks ``code`` reads and writes (``....marks.<mark>``, and through the methods of ``Rewrite`` it calls:
    ``helpers``, method -> marks read and written), and the lines that use ``marks`` otherwise."""
    tree = ast.parse(textwrap.dedent(code))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    reads: set[str] = set()
    writes: set[str] = set()
    opaque = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "marks":
            use = parents[node]
            if not isinstance(use, ast.Attribute):
                opaque.append(node.lineno)
                continue
            how = parents[use]
            written = isinstance(how, ast.Attribute) and how.attr in _WRITES or \
                isinstance(how, ast.Subscript) and isinstance(how.ctx, (ast.Store, ast.Del))
            (writes if written else reads).add(use.attr)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in helpers and \
                ast.unparse(node.func.value) in ("rw", "self.rw", "self"):
            reads |= helpers[node.func.attr][0]
            writes |= helpers[node.func.attr][1]
    return reads, writes, opaque


def _helpers() -> dict[str, tuple[set[str], set[str]]]:
    """The marks each method of ``Rewrite`` reads and writes, itself or through the others."""
    methods = {name: inspect.getsource(f) for name, f in vars(Rewrite).items() if inspect.isfunction(f)}
    helpers: dict[str, tuple[set[str], set[str]]] = {name: (set(), set()) for name in methods}
    while True:
        found = {name: _marks_used(code, helpers)[:2] for name, code in methods.items()}
        if found == helpers:
            return helpers
        helpers = found


def _order_broken(rules) -> list[str]:
    """Where a rule reads a mark that a rule running after it writes."""
    return [f"{r.__name__} reads {mark!r}, which {w.__name__} writes after it"
            for i, r in enumerate(rules) for mark in r.reads for w in rules[i + 1:] if mark in w.writes]


def test_each_rule_runs_after_every_rule_that_writes_a_mark_it_reads():
    assert _order_broken(CLASSES) == []
    assert _order_broken(CLASSES[::-1])  # the order matters: reversed, some rules would read marks not yet left
    marks = {f.name for f in dataclasses.fields(Marks)}
    read = {m for r in CLASSES for m in r.reads}
    written = {m for r in CLASSES for m in r.writes}
    assert read == written == marks  # every mark is left by some rule for some rule


def test_each_rule_declares_the_marks_its_code_reads_and_writes():
    helpers = _helpers()
    assert helpers["expect"][1] == {"expected"} and helpers["guard"][1] == {"guarded_lines"}
    for rule in CLASSES:
        reads, writes, opaque = _marks_used(inspect.getsource(rule), helpers)
        assert opaque == [], f"{rule.__name__}: marks used other than as marks.<mark> (lines {opaque})"
        assert (set(rule.reads), set(rule.writes)) == (reads, writes), rule.__name__
        module = _marks_used(inspect.getsource(inspect.getmodule(rule)), helpers)
        assert module[:2] == (reads, writes), f"{rule.__module__}: marks used outside {rule.__name__}"
