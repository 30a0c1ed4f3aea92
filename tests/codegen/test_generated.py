"""generated/ is deterministic and up to date; it and the project's own code pass the linter and type checker."""

from __future__ import annotations

import ast
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codegen.load import load
from codegen.plan import plan
from codegen.render import GENERATED, RELEASES, TemplateError, generate, recover, render_all, stale, write
from torchdevice.records import CatalogRow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def planned():
    return plan(load())


@pytest.fixture(scope="module")
def rendered(planned):
    """Everything generated (the known releases' changes computed in processes of their own, each with its own hash
    seed), and the catalog's plan rendered again."""
    return generate(), render_all(plan(load()))


def test_render_is_deterministic_and_committed(rendered):
    first, second = rendered
    own = {path: text for path, text in second.items() if f"{path}.j2" not in RELEASES}  # the releases': none here
    assert {path: first[path] for path in own} == own
    assert stale(first) == [], "generated/ is stale: run `make generate`"


def test_generated_package_has_stubs_and_marker(rendered):
    first, _ = rendered
    package = "torchdevice_generated/"
    assert package + "py.typed" in first
    modules = {p for p in first if p.startswith(package) and p.endswith(".py") and not p.endswith("__init__.py")}
    stubs = {p for p in first if p.endswith(".pyi")}
    assert stubs, "no .pyi stubs generated"
    assert {p[:-1] for p in stubs} <= modules


def test_every_generated_file_is_marked_generated(rendered):
    first, _ = rendered
    unmarked = [p for p, text in first.items() if "@generated" not in text[:500]]
    assert unmarked == ["torchdevice_generated/py.typed"]  # an empty marker file
    attributes = (ROOT / ".gitattributes").read_text().splitlines()
    assert "generated/** linguist-generated=true" in attributes  # review tools collapse their diffs


@pytest.mark.processes
def test_shared_records_need_neither_torch_nor_codegen():
    code = ("import sys, torchdevice.records, torchdevice.records.rewrite, torchdevice.records.check; "
            "print(sorted(m for m in ('torch', 'codegen', 'libcst') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def test_codegen_imports_of_torchdevice_only_the_shared_records():
    imported = set()
    for path in sorted((ROOT / "codegen").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {(path.name, a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level:
                imported |= {(path.name, f"{node.module}.{a.name}") for a in node.names}
    ours = {(file, name) for file, name in imported if name.split(".")[0] == "torchdevice"}
    assert ours, "codegen writes the tables from the shared records"
    shared = ("torchdevice.records.", "torchdevice.atomic", "torchdevice.source.pool.")  # the pool: its workers' watch
    assert sorted((file, name) for file, name in ours if not name.startswith(shared)) == []


def test_catalog_rows_read_back_as_written(planned):
    assert [CatalogRow.from_json(row.to_json()) for row in planned.entries] == list(planned.entries)


def test_template_error_names_template_and_entry(tmp_path, monkeypatch, planned):
    (tmp_path / "broken.txt.j2").write_text("{% for w in track(plan.wrappers) %}{{ w.no_such_field }}{% endfor %}\n")
    monkeypatch.setattr("codegen.render.TEMPLATES", tmp_path)
    with pytest.raises(TemplateError) as info:
        render_all(planned)
    message = str(info.value)
    assert "codegen/templates/broken.txt.j2:1" in message
    assert f"while rendering entry {planned.wrappers[0].name}" in message
    assert "no_such_field" in message


def test_write_replaces_the_tree_whole_and_leaves_nothing_beside_it(tmp_path):
    target = tmp_path / "generated"
    assert write({"a.py": "A = 1\n", "pkg/b.py": "B = 1\n"}, target) == ["a.py", "pkg/b.py"]
    assert write({"a.py": "A = 2\n"}, target) == ["a.py", "pkg/b.py"]  # changed, and one no longer rendered
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["generated", "generated/a.py"]
    assert write({"a.py": "A = 2\n"}, target) == []


def test_an_interrupted_write_is_undone_by_the_next_run(tmp_path):
    target = tmp_path / "generated"
    write({"a.py": "A = 1\n"}, target)
    # killed between its two renames: the old tree set aside, the new one complete beside it
    target.rename(tmp_path / ".generated.old")
    (tmp_path / ".generated.new").mkdir()
    (tmp_path / ".generated.new" / "a.py").write_text("A = 2\n")
    recover(target)
    assert (target / "a.py").read_text() == "A = 1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["generated"]


@pytest.mark.processes
def test_make_generate_killed_midway_leaves_generated_old_or_new(tmp_path):
    """A real ``python -m codegen`` killed at several moments: ``generated/`` is the old tree or the new one."""
    copy = tmp_path / "repo"
    for folder in ("codegen", "catalog", "generated"):
        shutil.copytree(ROOT / folder, copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "generated" / "torchdevice_generated" / "fallback_table.py").write_text("stale\n")
    old, new = _tree(copy / "generated"), _tree(GENERATED)
    for delay in (0.5, 2.0, 4.0):
        process = subprocess.Popen([sys.executable, "-m", "codegen"], cwd=copy, stdout=subprocess.DEVNULL)
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait()
        recover(copy / "generated")
        assert _tree(copy / "generated") in (old, new)
        assert sorted(p.name for p in copy.iterdir()) == ["catalog", "codegen", "generated"]
    deadline = time.monotonic() + 10
    while _working_in(copy) and time.monotonic() < deadline:  # its workers end once they see it gone
        time.sleep(0.2)
    assert _working_in(copy) == []


def _working_in(folder: Path) -> list[int]:
    """The processes whose working directory is ``folder`` (Linux's /proc; none elsewhere)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if Path(os.readlink(entry / "cwd")) == folder:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}
