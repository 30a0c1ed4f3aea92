"""CUDA's autocast policy as scanned: faithful to the dispatcher, and validated on load."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
import yaml
from catalog_release import scanned_here

from codegen.load import load_autocast
from codegen.model import Entry, Kernels
from codegen.scan import autocast
from codegen.schema import CatalogError

ROOT = Path(__file__).resolve().parents[2]


@scanned_here
def test_every_scanned_overload_is_one_cudas_autocast_registers() -> None:
    """What the scanner reads from the header is what ATen registers under AutocastCUDA: every listed
    overload has a kernel there, and every kernel there is listed, banned, or unusable off CUDA."""
    records = {r["name"]: r for r in autocast.records()}
    registered = set()
    for qualified in torch._C._dispatch_get_all_op_names():
        if qualified.startswith("aten::") and torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "AutocastCUDA"):
            op, _, overload = qualified.removeprefix("aten::").partition(".")
            registered.add(f"{op}.{overload or 'default'}")
    assert set(records) <= registered
    assert {name.partition(".")[0] for name in registered - set(records)} <= {"cudnn_convolution",
                                                                             "cudnn_convolution_transpose"}
    banned = records["binary_cross_entropy.default"]
    assert banned["policy"] == "banned" and "binary_cross_entropy_with_logits" in banned["message"]
    assert {records[n]["policy"] for n in ("softmax.int", "sum.default", "mm.default", "exp.default", "dot.default")} \
        == {"fp32_set_opt_dtype", "lower_precision_fp", "fp32", "promote"}


def test_an_op_list_the_scanner_does_not_know_stops_the_scan(tmp_path: Path) -> None:
    header = tmp_path / "autocast_mode.h"
    header.write_text("#define AT_FORALL_FP8(_) \\\n  _(mm)\n")
    with pytest.raises(autocast.ScanError, match="unknown op list AT_FORALL_FP8"):
        autocast.records(header)


def _known(*names: str) -> dict[str, Entry]:
    return {f"torch.ops.aten.{n}": Entry(f"torch.ops.aten.{n}", "op_overload", "torch", (), (), (),
                                         Kernels("native", "native", "native")) for n in names}


GOOD = """\
torch_version: 2.13.0
group: autocast
entries:
- name: mm.default
  policy: lower_precision_fp
- name: norm.Scalar
  policy: fp32_append_dtype
  redispatch: norm.ScalarOpt_dtype
"""


@pytest.mark.parametrize(("text", "where", "says"), [
    (GOOD.replace("lower_precision_fp", "fp8"), "autocast.yaml:5 (entry mm.default)", "expected one of"),
    (GOOD.replace("  redispatch: norm.ScalarOpt_dtype\n", ""), "autocast.yaml:6 (entry norm.Scalar)", "redispatch"),
    (GOOD.replace("mm.default", "mm.nothing"), "autocast.yaml:4 (entry mm.nothing)", "not an aten overload"),
    (GOOD + "- name: mm.default\n  policy: fp32\n", "autocast.yaml:9 (entry mm.default)", "duplicate entry"),
    (GOOD.replace("2.13.0", "2.12.0"), "autocast.yaml:1", "differs from 2.13.0"),
    (GOOD + "- name: mm.default\n  policy: banned\n", "autocast.yaml:9 (entry mm.default)", "message"),
])
def test_bad_policy_data_is_reported_with_file_line_and_entry(tmp_path: Path, text: str, where: str,
                                                              says: str) -> None:
    path = tmp_path / "autocast.yaml"
    path.write_text(textwrap.dedent(text))
    with pytest.raises(CatalogError) as info:
        load_autocast(path, "2.13.0", _known("mm.default", "norm.Scalar", "norm.ScalarOpt_dtype"))
    assert where in str(info.value) and says in str(info.value), str(info.value)


def test_committed_policy_loads() -> None:
    rules = load_autocast(ROOT / "catalog" / "scanned" / "autocast.yaml", "2.13.0",
                          _known(*(r["name"] for r in yaml.safe_load(
                              (ROOT / "catalog" / "scanned" / "autocast.yaml").read_text())["entries"]),
                                 "norm.ScalarOpt_dtype", "norm.ScalarOpt_dim_dtype"))
    assert {r.policy for r in rules} == {"lower_precision_fp", "fp32", "fp32_set_opt_dtype", "fp32_append_dtype",
                                         "promote", "banned"}
