"""The catalog and its plan, loaded once per test process: what the per-entry tests are parametrized by."""

from __future__ import annotations

from functools import cache

from codegen.load import load
from codegen.model import Catalog
from codegen.plan import Plan, plan


@cache
def catalog() -> Catalog:
    return load()


@cache
def planned() -> Plan:
    return plan(catalog())
