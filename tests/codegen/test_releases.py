"""Other releases' facts: a release file gives back that release's scanned files, a release's view of the catalog
leaves out the overlay records that do not hold there, and each table change gives back the release's value."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from codegen.load import load
from codegen.releases import change, literal
from codegen.scan import release
from codegen.schema import CatalogError
from torchdevice.records.determinism import AlertRow
from torchdevice.records.releases import changed

ROOT = Path(__file__).resolve().parents[2]
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read(path: Path) -> dict[str, Any]:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=LOADER)


def edit(path: Path, how: Any) -> None:
    doc = read(path)
    how(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")


@pytest.fixture
def catalog_copy(tmp_path: Path) -> Path:
    """A copy of the real catalog."""
    shutil.copytree(ROOT / "catalog", tmp_path / "catalog")
    return tmp_path / "catalog"


def a_release(catalog: Path, tmp_path: Path, version: str = "9.9.0") -> Path:
    """Release ``version``: the catalog's scanned files with an entry gone, one changed and one new, a message and
    an alert gone, a string new and an autocast policy changed; written as a release file. Returns its own files."""
    theirs = tmp_path / "theirs"
    shutil.copytree(catalog / "scanned", theirs)
    for path in theirs.glob("*.yaml"):
        edit(path, lambda d: d.update(torch_version=version))

    def aten(doc: dict[str, Any]) -> None:
        entries = doc["entries"]
        entries[:] = [e for e in entries if e["name"] != "torch.ops.aten._adaptive_avg_pool2d.default"]
        first = next(e for e in entries if e["name"] == "torch.ops.aten.abs.default")
        first["kernels"] = {**first["kernels"], "mps": "missing"}
        entries.append({**first, "name": "torch.ops.aten.abs.newer", "aten": ["abs.newer"]})

    edit(theirs / "aten.yaml", aten)
    edit(theirs / "cuda_device_checks.yaml",  # its facts about the overload go with it, as a release's scan has them
         lambda d: d["entries"].__setitem__(slice(None), [e for e in d["entries"]
                                                          if e["name"] != "_adaptive_avg_pool2d.default"]))
    edit(theirs / "mps_messages.yaml", lambda d: d["strings"].__setitem__(slice(0, 1), ["a message only 9.9 has"]))
    edit(theirs / "cuda_alerts.yaml", lambda d: d["calls"].pop())
    edit(theirs / "autocast.yaml", lambda d: d["entries"][0].update(policy="fp32"))
    files = release.diff(catalog / "scanned", theirs)
    wheels = {"mps_messages": "torch-macos.whl", "cuda_alerts": "torch-cuda.whl"}
    (catalog / "releases" / f"{version}.yaml").write_text(release.render(version, "2.13.0", wheels, files))
    return theirs


def records(path: Path) -> list[Any]:
    doc = read(path)
    return sorted(map(repr, doc.get("entries") or doc.get("strings") or doc.get("calls")))


def test_a_release_file_gives_back_that_releases_scanned_files(catalog_copy, tmp_path):
    theirs = a_release(catalog_copy, tmp_path)
    kept = read(catalog_copy / "releases" / "9.9.0.yaml")["files"]
    assert set(kept) == {"aten", "mps_messages", "cuda_alerts", "autocast", "cuda_device_checks"}  # what differs
    assert kept["aten"]["removed"] == ["torch.ops.aten._adaptive_avg_pool2d.default"]
    assert [e["name"] for e in kept["aten"]["added"]] == ["torch.ops.aten.abs.newer"]
    with release.view("9.9.0", catalog_copy / "scanned", catalog_copy / "releases") as view:
        assert sorted(p.name for p in view.glob("*.yaml")) == sorted(p.name for p in theirs.glob("*.yaml"))
        for path in theirs.glob("*.yaml"):
            assert records(view / path.name) == records(path), path.name
            assert read(view / path.name)["torch_version"] == "9.9.0"


def test_a_releases_view_leaves_out_the_overlay_records_that_do_not_hold_there(catalog_copy, tmp_path):
    a_release(catalog_copy, tmp_path)
    ours, theirs = load(catalog_copy), load(catalog_copy, release="9.9.0")
    assert theirs.torch_version == "9.9.0" and not ours.differs
    assert theirs["torch.ops.aten.abs.default"].kernels.mps == "missing"
    assert "torch.ops.aten._adaptive_avg_pool2d.default" not in theirs.by_name
    # its limits are gone with it; the overlays keep their records for the release that has the overload
    assert any("adaptive_avg_pool_not_divisible" in r.name for r in ours.limits)
    assert not any(r.name == "adaptive_avg_pool_not_divisible" for r in theirs.limits)
    assert any("limits.yaml (adaptive_avg_pool_not_divisible): this release lacks _adaptive_avg_pool2d.default" in why
               for why in theirs.differs)
    lost = read(catalog_copy / "scanned" / "cuda_alerts.yaml")["calls"][-1]["alert"]
    if any(r.rule.alert == lost for r in ours.alerts):  # the last call's alert, where the overlay curates it
        assert any(f"alert {lost!r}" in why for why in theirs.differs)
    assert theirs.entries[0].signatures == ours.entries[0].signatures


def test_a_missing_or_foreign_release_file_is_named(catalog_copy):
    with pytest.raises(Exception, match=r"releases/2\.99\.0\.yaml: no such release file"):
        load(catalog_copy, release="2.99.0")
    (catalog_copy / "releases" / "2.98.0.yaml").write_text("torch_version: 2.13.0\nfiles: []\n")
    with pytest.raises(Exception, match=r"2\.98\.0\.yaml: expected a mapping with torch_version 2\.98\.0"):
        load(catalog_copy, release="2.98.0")


ROW = AlertRow("put_", "always", ("aten::put",), (), "put_", False)


@pytest.mark.parametrize("ours, theirs, kind", [
    (frozenset({"a", "b"}), frozenset({"b", "c"}), "set"),
    ({"a": 1, "b": 2}, {"a": 1, "b": 3, "c": 4}, "dict"),
    ({"a": 1, "b": 2}, {"b": 2}, "dict"),
    ((1, 2, 3, 4), (1, 5, 3, 4, 6), "rows"),
    ((1, 2, 3), (3, 1, 2), "value"),  # reordered: the whole value
    ((ROW,), (ROW._replace(alert="put"), ROW), "rows"),
    (3, 4, "value"),
])
def test_each_change_gives_back_the_releases_value(ours, theirs, kind):
    found = change(ours, theirs)
    assert found[0] == kind and changed(ours, found) == theirs


def test_a_change_is_python_text_that_reads_back_equal_in_a_fixed_order():
    value = ("rows", (ROW,), ((0, ROW._replace(when=(("value", "reduce", ("prod",)),))),),
             frozenset({"z", "a", "m"}), {"k": frozenset()})
    imports: set[tuple[str, str]] = set()
    text = literal(value, imports)
    assert imports == {("torchdevice.records.determinism", "AlertRow")}
    assert eval(text, {"AlertRow": AlertRow}) == value  # noqa: S307 - the text just made
    assert "frozenset({'a', 'm', 'z'})" in text


def test_a_catalog_error_raised_in_a_releases_worker_reaches_make_generate_whole():
    """The releases render in worker processes, whose exceptions come back pickled: a CatalogError names its file,
    line and entry there too (unpickled, it once broke the pool instead)."""
    error = CatalogError(Path("catalog/releases/2.10.0.yaml"), 7, "mm.default", "not an aten overload")
    back = pickle.loads(pickle.dumps(error))
    assert (str(back), back.path, back.line, back.entry) == (str(error), error.path, 7, "mm.default")
