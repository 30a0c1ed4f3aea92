"""The catalog and its plan in the installed release's view, loaded once per test process: what the per-entry tests
are parametrized by (the entries of the release the tests run on, ``catalog/releases/`` for another known one)."""

from __future__ import annotations

from functools import cache

from torchdevice_generated import TORCH_VERSION

from codegen.load import load
from codegen.model import Catalog
from codegen.plan import Plan, plan
from torchdevice.releases import facts_of


@cache
def catalog() -> Catalog:
    version = facts_of()
    return load() if version == TORCH_VERSION else load(release=version)


@cache
def planned() -> Plan:
    return plan(catalog())
