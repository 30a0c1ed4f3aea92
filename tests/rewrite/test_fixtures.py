"""Golden fixtures: ``fixtures/<module>/<rule>[-case].in.py`` rewrites to ``.out.py``, with the reports in
``.notes`` (``line:column: CODE message``). ``<module>`` is the module of ``torchdevice/rewrite/rules/`` that
applies the rule; ``module/`` holds what concerns a module as a whole (the helper, ``import torch``,
suppression comments), ``references/`` the imports of rewritten names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from torchdevice_generated.rewrite_rules import RULES

from torchdevice.rewrite.rules import RULES as RULE_CLASSES
from torchdevice.rewrite.ruleset import default
from torchdevice.rewrite.source import rewrite_source

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CASES = sorted(FIXTURES.glob("*/*.in.py"))


def _stem(case):
    return f"{case.parent.name}/{case.name[: -len('.in.py')]}"


def _notes(result) -> str:
    return "".join(f"{n.line}:{n.column}: {n.code} {n.message}\n" for n in result.notes)


@pytest.mark.parametrize("case", CASES, ids=_stem)
def test_golden(case):
    result = rewrite_source(case.read_text(encoding="utf-8"), default())
    assert result.code == (FIXTURES / f"{_stem(case)}.out.py").read_text(encoding="utf-8")
    notes = FIXTURES / f"{_stem(case)}.notes"
    assert _notes(result) == (notes.read_text(encoding="utf-8") if notes.exists() else "")


@pytest.mark.parametrize("case", CASES, ids=_stem)
def test_idempotent(case):
    once = rewrite_source(case.read_text(encoding="utf-8"), default())
    twice = rewrite_source(once.code, default())
    assert twice.code == once.code
    assert {(n.code, n.message) for n in twice.notes} <= {(n.code, n.message) for n in once.notes}


@pytest.mark.parametrize("case", CASES, ids=_stem)
def test_expected_output_is_valid_python(case):
    ast.parse((FIXTURES / f"{_stem(case)}.out.py").read_text(encoding="utf-8"))


def test_every_rule_has_a_fixture_beside_its_module():
    owner = {kind: c.__module__.rpartition(".")[2] for c in RULE_CLASSES for kind in c.kinds}
    stems = [_stem(c) for c in CASES]
    missing = []
    for r in RULES:
        folder = owner.get(r.match if r.kind == "check" else r.kind, "module")
        if not any(s == f"{folder}/{r.name}" or s.startswith(f"{folder}/{r.name}-") for s in stems):
            missing.append(f"{folder}/{r.name}")
    assert missing == []


def test_fixture_folders_are_rule_modules():
    modules = {c.__module__.rpartition(".")[2] for c in RULE_CLASSES}
    assert {c.parent.name for c in CASES} <= modules | {"module"}


def test_every_fixture_has_an_expected_output():
    assert [c.name for c in CASES if not (FIXTURES / f"{_stem(c)}.out.py").exists()] == []
