"""Every catalog entry still resolves, and its recorded signatures are what introspecting the installed
torch gives now: resolution is ``import_module(module)`` then ``getattr`` along the rest of the name;
the signatures are recomputed by the scanner's own rules (``codegen.scan.records.signatures_of``)."""

from __future__ import annotations

import importlib

import pytest
from planned import catalog

from codegen.scan import aten, records
from codegen.scan.walk import Found

STATUS_FIELD = "resolves"


@pytest.mark.parametrize("name", [e.name for e in catalog().entries])
def test_entry_resolves_with_its_recorded_signatures(name):
    entry = catalog()[name]
    owner, obj = None, importlib.import_module(entry.module)
    for part in entry.path:
        owner, obj = obj, getattr(obj, part)
    definer = next((k for k in owner.__mro__ if entry.attr in vars(k)), None) if isinstance(owner, type) else None
    found = Found(entry.name, entry.module, entry.kind, "", obj, definer)
    assert tuple(records.signatures_of(found, aten.reached(found))) == entry.signatures
