"""The text prefilter of ``torchdevice check`` hides no finding: over real code (the releases of transformers, timm,
accelerate and diffusers the rewriter is tried on, the projects and fixtures of these tests), every file it sets
aside unread for a target has no finding for that target when parsed anyway, so the parser finds the same with
the prefilter as without it; and it sets most files of the releases aside."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus import PACKAGES, sources

from torchdevice.check.analyze import check_tree, may_find
from torchdevice.source import files
from torchdevice.source.parsing import parse_ast
from torchdevice.source.pool import parallel

pytestmark = pytest.mark.processes  # the checker's worker pool

HERE = Path(__file__).resolve().parent
TARGETS = ("mps", "cpu")
"""``mps-sim`` looks for what ``mps`` does."""


def _hidden(path: str) -> tuple[int, list[str]]:
    """How many targets the file is set aside for, and the findings that hides (parsed once for all)."""
    data, _ = files.read(Path(path))
    aside = [target for target in TARGETS if not may_find(data, target)]
    if not aside:
        return 0, []
    try:
        source, _ = files.decode(Path(path), data)
        tree = parse_ast(source)
    except (files.Unreadable, SyntaxError):
        return len(aside), []
    return len(aside), [f"{target} {f.path}:{f.line}: {f.severity} {f.name}"
                        for target in aside for f in check_tree(tree, source, path, target)]


@pytest.mark.parametrize("tree", [*PACKAGES, "projects and fixtures"])
def test_the_parser_finds_the_same_with_the_prefilter_as_without(tree):
    roots = [sources(tree)] if "==" in tree else [HERE / "projects", HERE / "fixtures"]
    paths = sorted(str(p) for root in roots for p in root.rglob("*.py"))
    with parallel(_hidden, paths, jobs=2) as done:
        results = list(done)
    assert [finding for _, hidden in results for finding in hidden] == []
    if "==" in tree:  # mostly files without CUDA code: the prefilter earns its keep
        aside = sum(n for n, _ in results)
        assert aside > len(paths) * len(TARGETS) / 2, f"{aside} of {len(paths)} files x {len(TARGETS)} targets aside"
