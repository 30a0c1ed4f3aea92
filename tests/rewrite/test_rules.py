"""The rewrite rules agree with the catalog: what they call exists and accepts the arguments they write."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest
from torchdevice_generated.rewrite_rules import RULES

from codegen.load import load, load_list
from codegen.schema import CatalogError
from torchdevice.rewrite.rule import RewriteRule
from torchdevice.rewrite.rules import RuleSet, default
from torchdevice.rewrite.source import rewrite_source


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
    if isinstance(node, ast.If):
        node = node.body[0]
    assert isinstance(node, ast.Expr), ast.unparse(node)
    call = node.value
    return call.body if isinstance(call, ast.IfExp) else call  # type: ignore[return-value]


CALL_RULES = [r for r in RULES if r.kind == "call"]


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
        call = _rewritten_call(f"import torch\n{rule.match}({values})\n")
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
    assert rules.in_namespace("torch.cuda.amp") and not rules.in_namespace("torch.cudax")
    assert rules.may_apply(b"x.cuda()") and not rules.may_apply(b"x.to('mps')")


def test_rule_fields_must_fit_the_kind():
    with pytest.raises(ValueError, match="'backend-x'.*'methods' does not apply to kind 'backend'"):
        RewriteRule(name="backend-x", kind="backend", doc="", match="nccl", to="f", methods=("to",))
    with pytest.raises(ValueError, match="'call-x'.*needs 'to'"):
        RewriteRule(name="call-x", kind="call", doc="", match="torch.cuda.x")
    with pytest.raises(ValueError, match="'argument-x'.*needs 'keywords', each one of 'params'"):
        RewriteRule(name="argument-x", kind="argument", doc="", match="torch.f", params=("a",), keywords=("b",))


def test_unknown_torch_name_is_reported_with_file_and_line(tmp_path):
    path = tmp_path / "rewrite.yaml"
    path.write_text(textwrap.dedent("""\
        - name: fine
          kind: call
          doc: a rule
          match: torch.cuda.synchronize
          to: torch.accelerator.synchronize
        - name: typo
          kind: call
          doc: a rule
          match: torch.cuda.synchronise
          to: torch.accelerator.synchronize
    """))
    message = r"rewrite\.yaml:6 \(entry typo\): unknown torch name 'torch\.cuda\.synchronise'"
    with pytest.raises(CatalogError, match=message):
        load_list(path, RewriteRule, {"torch.cuda.synchronize", "torch.accelerator.synchronize"})
