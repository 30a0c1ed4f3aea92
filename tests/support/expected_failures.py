"""Expected failures of a consistency suite, as data: a YAML list of records, one per group of cases that
fail for one reason, each with the kind of failure (``group``), what fails and why (``reason``), the cases
(``cases``: a mapping of each op to the checks or dtypes of it that fail) and the fields a suite adds. A
suite marks each listed case a strict expected failure, so a listed case that passes fails the suite."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class ExpectedFailure:
    group: str
    reason: str
    extra: Mapping[str, Any] = field(default_factory=dict)
    """The suite's own fields of the record."""


def load(path: Path, choices: Mapping[str, tuple[str, ...]] | None = None,
         lists: Mapping[str, tuple[str, ...]] | None = None) -> dict[tuple[str, str], ExpectedFailure]:
    """(op, check) -> its record's failure; ``choices``: the suite's own fields, each with the values it
    may take; ``lists``: its fields that hold a list of such values (a tuple in ``extra``). A malformed record is
    an error naming the file and the record."""
    choices, lists = choices or {}, lists or {}
    fields = {"group", "reason", "cases", *choices, *lists}
    out: dict[tuple[str, str], ExpectedFailure] = {}
    for n, record in enumerate(yaml.safe_load(path.read_text(encoding="utf-8")) or [], 1):
        where = f"{path.name}: record {n}"
        assert isinstance(record, dict) and set(record) == fields, (
            f"{where}: fields {sorted(record) if isinstance(record, dict) else record!r}, expected {sorted(fields)}")
        where += f" ({record['group']})"
        for name, allowed in choices.items():
            assert record[name] in allowed, f"{where}: {name} is {record[name]!r}, one of {allowed} expected"
        for name, allowed in lists.items():
            value = record[name]
            assert isinstance(value, list) and value and set(value) <= set(allowed) and len(set(value)) == len(value), (
                f"{where}: {name} is {value!r}, a list of distinct values of {allowed} expected")
        cases = record["cases"]
        assert isinstance(cases, dict) and all(isinstance(v, list) for v in cases.values()), (
            f"{where}: cases must map each op to a list")
        extra = {**{name: record[name] for name in choices}, **{name: tuple(record[name]) for name in lists}}
        failure = ExpectedFailure(str(record["group"]), str(record["reason"]), extra)
        for op, checks in cases.items():
            for check in checks:
                assert (op, check) not in out, f"{where}: ({op}, {check}) listed twice"
                out[op, check] = failure
    return out
