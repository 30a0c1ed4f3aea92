"""generated/ is deterministic and up to date; it and the project's own code pass the linter and type checker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from codegen.load import load
from codegen.render import GENERATED, TemplateError, render_all, stale

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rendered():
    catalog = load()
    return render_all(catalog), render_all(catalog)


def test_render_is_deterministic_and_committed(rendered):
    first, second = rendered
    assert first == second
    assert stale(first) == [], "generated/ is stale: run `make generate`"


def test_generated_package_has_stubs_and_marker(rendered):
    first, _ = rendered
    package = "torchdevice_generated/"
    assert package + "py.typed" in first
    modules = {p for p in first if p.startswith(package) and p.endswith(".py") and not p.endswith("__init__.py")}
    stubs = {p for p in first if p.endswith(".pyi")}
    assert stubs, "no .pyi stubs generated"
    assert {p[:-1] for p in stubs} <= modules


def test_template_error_names_template_and_entry(tmp_path, monkeypatch):
    catalog = load()
    (tmp_path / "broken.txt.j2").write_text("{% for e in track(catalog.entries) %}{{ e.no_such_field }}{% endfor %}\n")
    monkeypatch.setattr("codegen.render.TEMPLATES", tmp_path)
    with pytest.raises(TemplateError) as info:
        render_all(catalog)
    message = str(info.value)
    assert "codegen/templates/broken.txt.j2:1" in message
    assert f"while rendering entry {catalog.entries[0].name}" in message
    assert "no_such_field" in message


def run(*command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env=None if env is None else {**os.environ, **env})


def test_code_passes_linter():
    result = run(sys.executable, "-m", "ruff", "check", ".")  # generated/ included
    assert result.returncode == 0, result.stdout + result.stderr


def test_code_passes_type_check(tmp_path):
    result = run(sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
                 "-p", "torchdevice_generated", "-p", "torchdevice", "-p", "codegen",
                 env={"MYPYPATH": str(GENERATED)})
    assert result.returncode == 0, result.stdout + result.stderr
