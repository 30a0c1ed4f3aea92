"""Golden fixtures: ``fixtures/<rule>[-case].in.py`` rewrites to ``.out.py``, with the reports in ``.notes``
(``line:column: CODE message``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from torchdevice_generated.rewrite_rules import RULES

from torchdevice.rewrite.ruleset import default
from torchdevice.rewrite.source import rewrite_source

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CASES = sorted(FIXTURES.glob("*.in.py"))


def _stem(case):
    return case.name[: -len(".in.py")]


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


def test_every_rule_has_a_fixture():
    stems = [_stem(c) for c in CASES]
    missing = [r.name for r in RULES if not any(s == r.name or s.startswith(r.name + "-") for s in stems)]
    assert missing == []


def test_every_fixture_has_an_expected_output():
    assert [c.name for c in CASES if not (FIXTURES / f"{_stem(c)}.out.py").exists()] == []
