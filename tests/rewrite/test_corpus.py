"""The rewriter on real code: pinned releases of packages full of CUDA code, fetched from PyPI (``pip download
--no-deps``, never installed) into ``.bench/corpus``, and a CI-sized sample of each (the files that mention
CUDA most) rewritten. Every output compiles, a second run changes nothing, the rewrite adds at most one line
per rewritten site on average, and what is rewritten and reported matches the golden data in
``corpus-reports/`` (``EXPECTTEST_ACCEPT=1`` rewrites it after a deliberate change)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from corpus import PACKAGES, sources

from torchdevice.rewrite.ruleset import default
from torchdevice.rewrite.source import rewrite_source
from torchdevice.source.parsing import split_lines

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "corpus-reports"
SAMPLE = 30
"""Files per package: the ones that mention CUDA most."""


def _sample(tree: Path) -> list[Path]:
    rules = default()
    found = [p for p in sorted(tree.rglob("*.py")) if rules.may_apply(p.read_bytes())]
    mentions = {p: sum(p.read_bytes().count(t.encode()) for t in rules.triggers) for p in found}
    return sorted(sorted(found, key=lambda p: -mentions[p])[:SAMPLE])


@pytest.fixture
def tree(requirement: str) -> Path:
    """The package's files (fetched in the test's setup: the rewrite itself starts no process)."""
    return sources(requirement)


@pytest.mark.parametrize("requirement", PACKAGES)
def test_real_packages_rewrite_to_compiling_idempotent_mergeable_code(requirement, tree):
    rules = default()
    report = []
    sites = added = reported = 0
    for path in _sample(tree):
        name = path.relative_to(tree).as_posix()
        source = path.read_text(encoding="utf-8")
        result = rewrite_source(source, rules)
        compile(result.code, name, "exec")
        assert rewrite_source(result.code, rules).code == result.code, f"{name}: a second run changes it"
        count, more = sum(result.sites.values()), len(split_lines(result.code)) - len(split_lines(source))
        sites, added, reported = sites + count, added + more, reported + len(result.notes)
        if count or more:
            report.append(f"{name}: {count} rewritten, {more:+d} lines")
        report += [f"{name}:{n.line}:{n.column}: {n.code}" for n in result.notes]
    assert sites and added <= sites, f"{added} lines added for {sites} sites"
    head = f"# {requirement}: {sites} sites rewritten, {added:+d} lines, {reported} reported"
    text = "\n".join([head, *report]) + "\n"
    golden = GOLDEN / f"{requirement.replace('==', '-')}.txt"
    if os.environ.get("EXPECTTEST_ACCEPT"):
        golden.write_text(text)
    assert text == golden.read_text(), f"{golden.name} differs (EXPECTTEST_ACCEPT=1 rewrites it)"
