"""``torchdevice check`` on real code: a pinned timm release (the rewriter's corpus) and code written in the idioms of
nanoGPT, improved-diffusion and pytorch/examples (``projects/``): nothing blocks, and every file is read."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus import sources

from torchdevice.check.scan import check_files
from torchdevice.source.files import discover

PROJECTS = Path(__file__).resolve().parent / "projects"


@pytest.mark.parametrize("tree", ["timm==1.0.31", "nanogpt", "diffusion", "examples"])
@pytest.mark.processes
def test_real_code_has_no_blocker(tree):
    root = sources(tree) if "==" in tree else PROJECTS / tree
    found = list(discover([str(root)]))
    reports = check_files(found, "mps", jobs=2, max_bytes=1_000_000)
    assert len(reports) == len(found) and len(found) >= (300 if "==" in tree else 1)
    assert not [r.error for r in reports if r.error]
    blockers = [f"{f.path}:{f.line}: {f.name} {f.message}" for r in reports for f in r.findings
                if f.severity == "blocker"]
    assert blockers == []
    assert any(r.findings for r in reports)  # the CUDA code in it was seen, not skipped
