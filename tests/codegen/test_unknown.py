"""The first-use scan of a torch release the catalog does not know (``codegen/unknown.py``), run as the runtime runs
it, in a process of its own: on the installed release, with that release's own MPS messages and CUDA alerts, it gives
back the very changes ``make generate`` keeps for it (none, on the catalog's own release)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from torchdevice_generated.releases import CHANGES, DIFFERS

from torchdevice import releases

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.processes, pytest.mark.release]


def scan(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "codegen.unknown", str(out), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def test_the_first_use_scan_of_the_installed_release_gives_back_the_changes_kept_for_it(tmp_path):
    version = releases.facts_of()
    done = scan(tmp_path / "scanned.py", "--messages-of", version)
    assert done.returncode == 0, done.stderr
    namespace: dict[str, Any] = {}
    exec((tmp_path / "scanned.py").read_text(encoding="utf-8"), namespace)  # noqa: S102 - the module just written
    assert (namespace["VERSION"], namespace["MESSAGES_OF"]) == (version, version)
    assert namespace["CHANGES"] == CHANGES.get(version, {})
    assert namespace["DIFFERS"] == DIFFERS.get(version, ())


def test_messages_of_a_release_the_catalog_lacks_are_named_and_nothing_is_written(tmp_path):
    done = scan(tmp_path / "scanned.py", "--messages-of", "9.9.0")
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and "releases/9.9.0.yaml: no such release file" in done.stderr, \
        done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "scanned.py").exists()
