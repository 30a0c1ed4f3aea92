"""The catalog model and its loader: the real catalog loads, bad overlays fail naming file, line and entry."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from codegen.load import load
from codegen.model import POLICIES, parse_signature
from codegen.schema import CatalogError

ROOT = Path(__file__).resolve().parents[2]

SCANNED = """\
torch_version: 2.13.0
group: torch
entries:
- name: torch.zeros
  kind: builtin
  module: torch
  category: factory
  signatures:
  - "(*size: int, out: Tensor | None = None, device: Device = None) -> Tensor"
  device_params: [device]
  aten: [zeros]
  kernels: {cpu: native, cuda: native, mps: native}
  policy: translate-device
- name: torch.add
  kind: builtin
  module: torch
  category: pointwise
  signatures: []
  device_params: []
  aten: [add]
  kernels: {cpu: native, cuda: native, mps: native}
  policy: passthrough
"""


@pytest.fixture(scope="module")
def catalog():
    return load()


def make_catalog(tmp_path: Path, **overlays: str) -> Path:
    (tmp_path / "scanned").mkdir()
    (tmp_path / "scanned" / "torch.yaml").write_text(SCANNED)
    (tmp_path / "overlays").mkdir()
    for stem, text in overlays.items():
        (tmp_path / "overlays" / f"{stem}.yaml").write_text(textwrap.dedent(text))
    return tmp_path


def load_error(tmp_path: Path, **overlays: str) -> str:
    with pytest.raises(CatalogError) as info:
        load(make_catalog(tmp_path, **overlays))
    return str(info.value)


def test_real_catalog_loads_with_overlays(catalog):
    assert len(catalog.entries) >= 4269
    assert len({e.name for e in catalog.entries}) == len(catalog.entries)
    assert all(e.policy in POLICIES for e in catalog.entries)
    assert catalog.mlx_entries, "the MLX overlay attached no mapping"


def test_small_catalog_applies_overlay(tmp_path):
    catalog = load(make_catalog(tmp_path, mlx="torch.add:\n  mlx: mlx.core.add\n  args: {input: a, other: b}\n"))
    assert catalog["torch.add"].mlx.mlx == "mlx.core.add"
    assert catalog["torch.add"].mlx.args == {"input": "a", "other": "b"}
    assert catalog["torch.zeros"].mlx is None
    assert [p.name for p in catalog["torch.zeros"].overloads[0]] == ["size", "out", "device"]


def test_unknown_torch_name(tmp_path):
    msg = load_error(tmp_path, mlx="torch.add:\n  mlx: mlx.core.add\ntorch.nonexistent_op:\n  mlx: mlx.core.abs\n")
    assert "overlays/mlx.yaml:3" in msg and "torch.nonexistent_op" in msg and "unknown torch name" in msg


def test_unknown_field(tmp_path):
    msg = load_error(tmp_path, mlx="torch.add:\n  mlx: mlx.core.add\n  argz: {input: a}\n")
    assert "overlays/mlx.yaml:3" in msg and "torch.add" in msg and "unknown field 'argz'" in msg


def test_wrong_type(tmp_path):
    msg = load_error(tmp_path, mlx="torch.add:\n  mlx: [mlx.core.add]\n")
    assert "overlays/mlx.yaml:2" in msg and "torch.add" in msg and "field 'mlx': expected str" in msg


def test_duplicate_entry(tmp_path):
    msg = load_error(tmp_path, mlx="torch.add:\n  mlx: mlx.core.add\ntorch.add:\n  mlx: mlx.core.subtract\n")
    assert "overlays/mlx.yaml:3" in msg and "duplicate entry (first at line 1)" in msg


def test_missing_required_field(tmp_path):
    msg = load_error(tmp_path, mlx="torch.add:\n  args: {input: a}\n")
    assert "overlays/mlx.yaml:2" in msg and "missing required field 'mlx'" in msg


def test_invalid_yaml(tmp_path):
    msg = load_error(tmp_path, mlx="torch.add:\n  mlx: [unclosed\n")
    assert "overlays/mlx.yaml:" in msg and "invalid YAML" in msg


def test_bad_literal(tmp_path):
    msg = load_error(tmp_path, cuda="torch.add:\n  policy: sometimes\n")
    assert "overlays/cuda.yaml:2" in msg and "expected one of" in msg


def test_scanned_entry_with_bad_kernel(tmp_path):
    root = make_catalog(tmp_path)
    path = root / "scanned" / "torch.yaml"
    bad = path.read_text().replace("mps: native}\n  policy: passthrough", "mps: maybe}\n  policy: passthrough")
    path.write_text(bad)
    with pytest.raises(CatalogError, match=r"torch\.yaml \(entry torch\.add\): bad kernels"):
        load(root)


def test_parse_signature_kinds():
    params = parse_signature("(a, /, b: int = 1, *args, c: str = 'x', **kw) -> None")
    assert [(p.name, p.kind, p.default) for p in params] == [
        ("a", "positional_only", None),
        ("b", "positional_or_keyword", "1"),
        ("args", "var_positional", None),
        ("c", "keyword_only", "'x'"),
        ("kw", "var_keyword", None),
    ]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchdevice", "catalog", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_stats_json_matches_catalog(catalog):
    result = run_cli("stats", "--json")
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["entries"] == len(catalog.entries)
    assert stats["mlx_mapped"] == len(catalog.mlx_entries)
    assert stats["mlx_verified"] == sum(e.status.mlx == "pass" for e in catalog.entries)
    assert sum(stats["by_policy"].values()) == stats["entries"]
    for backend in ("cpu", "cuda", "mps"):
        assert sum(stats["kernels"][backend].values()) == stats["entries"]
    assert {"resolved", "by_namespace", "by_kind", "by_category"} <= set(stats)


def test_show_entry_and_unknown_name(catalog):
    shown = run_cli("show", "torch.zeros")
    assert shown.returncode == 0, shown.stderr
    assert "torch.zeros" in shown.stdout and catalog["torch.zeros"].policy in shown.stdout
    missing = run_cli("show", "torch.no_such_thing")
    assert missing.returncode == 1 and "no catalog entry 'torch.no_such_thing'" in missing.stderr
