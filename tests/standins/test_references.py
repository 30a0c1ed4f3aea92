"""Each stand-in against a plain-torch reference written from its library's documentation
(``tests/support/standin_references.py``; mamba-ssm's and causal-conv1d's own references,
``tests/support/mamba_references.py``), on every case of its grid in ``catalog/overlays/standins.yaml``;
and each covered name has the library's signature, as the overlay records it."""

from __future__ import annotations

import ast
import inspect

import pytest
from mamba_references import CHECKS as MAMBA_CHECKS
from planned import planned
from standin_references import CHECKS as DOCUMENTED_CHECKS
from torch.optim.optimizer import required

CASES = planned().standins.cases
CHECKS = {**DOCUMENTED_CHECKS, **MAMBA_CHECKS}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_standin_matches_its_reference(case, standin):
    CHECKS[case.reference](standin(case.name), case.name, dict(case.args))


@pytest.mark.parametrize("name", sorted(planned().standins.covered))
def test_standin_has_the_library_signature(name, standin):
    signature = planned().standins.covered[name][0]
    args = ast.parse(f"def f{signature}: pass").body[0].args
    actual = list(inspect.signature(standin(name)).parameters.values())
    every = [*args.posonlyargs, *args.args, *([args.vararg] if args.vararg else []), *args.kwonlyargs,
             *([args.kwarg] if args.kwarg else [])]
    assert [p.name for p in actual] == [a.arg for a in every]
    defaults = dict(zip([a.arg for a in args.args][len(args.args) - len(args.defaults):], args.defaults, strict=True))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None})
    for p in actual:
        if p.name not in defaults:
            assert p.default is inspect.Parameter.empty, p.name
        elif isinstance(defaults[p.name], ast.Name):
            assert defaults[p.name].id == "required" and p.default is required
        else:
            assert p.default == ast.literal_eval(defaults[p.name]), p.name


def test_every_reference_named_by_the_overlay_exists():
    assert {c.reference for c in CASES} <= set(CHECKS)
