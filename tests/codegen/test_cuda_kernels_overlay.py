"""CUDA's kernel table as catalog data: the alerts overlay's records are validated (overloads of the scanned catalog,
clauses of the vocabulary reading arguments every overload has) with errors naming file, line and record; the plan
writes them in the runtime's normal form; the generated table agrees with the scanned kernels."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
import yaml
from test_catalog import CUDA, SCANNED
from torchdevice_generated import cuda_kernels_table

from codegen.load import load
from codegen.plan.cuda_kernels import CudaKernels
from codegen.schema import CatalogError

ROOT = Path(__file__).resolve().parents[2]
GOOD = """\
add_alert:
  overloads: [add.Tensor]
  alert: add_cuda with an alpha
  source: ATen/native/cuda/Add.cu add_cuda
  when: [{value: {arg: alpha, in: [2, 3]}}, {dtype: {arg: self, in: [floating, int64]}}, {nonempty: other}]
always_alert:
  overloads: [add.Tensor]
  alert: add_always
  source: ATen/native/cuda/Add.cu add_cuda
  when: always
"""


def make(tmp_path: Path, alerts: str) -> Path:
    (tmp_path / "scanned").mkdir(parents=True)
    (tmp_path / "scanned" / "torch.yaml").write_text(SCANNED)
    (tmp_path / "overlays").mkdir()
    (tmp_path / "overlays" / "cuda.yaml").write_text(CUDA)
    (tmp_path / "overlays" / "cuda_kernels.yaml").write_text(textwrap.dedent(alerts))
    return tmp_path


def test_records_load_and_plan_in_normal_form(tmp_path):
    first, second = CudaKernels.of(load(make(tmp_path, GOOD))).alerts
    assert first.name == "add_alert" and first.overloads == ("aten::add.Tensor",)
    assert first.alert == "add_cuda with an alpha" and first.source == "ATen/native/cuda/Add.cu add_cuda"
    assert first.when == (("value", "alpha", (2, 3)), ("dtype", "self", ("float16", "bfloat16", "float32", "float64",
                                                                        "int64")), ("nonempty", "other"))
    assert second.when == ()


@pytest.mark.parametrize(("change", "says"), [
    (("{nonempty: other}", "{smaller: other}"), "unknown clause 'smaller'"),
    (("{nonempty: other}", "{nonempty: input}"), "add.Tensor has no argument input"),
    (("in: [floating, int64]", "in: [int65]"), "'int65' is not a dtype"),
    (("in: [2, 3]", "above: 2"), "expected {arg: NAME, equals: VALUE}"),
    (("overloads: [add.Tensor]\n  alert: add_cuda", "overloads: [add.Scalar]\n  alert: add_cuda"),
     "add.Scalar: not an aten overload of the scanned catalog"),
    (("when: always", "when: sometimes"), "when: always, or a list of clauses"),
    (("  source: ATen/native/cuda/Add.cu add_cuda\n  when: always", "  when: always"),
     "missing required field 'source'"),
    (("alert: add_always", "alert: ' add_always'"), "without surrounding blanks"),
    (("when: always", "when: always\n  colour: red"), "unknown field 'colour'"),
])
def test_a_bad_record_is_an_error_naming_file_line_and_record(tmp_path, change, says):
    old, new = change
    assert old in GOOD
    with pytest.raises(CatalogError) as info:
        load(make(tmp_path, GOOD.replace(old, new)))
    message = str(info.value)
    record = "always_alert" if "always" in old or "source" in old else "add_alert"
    assert "cuda_kernels.yaml:" in message and f"(entry {record})" in message and says in message, message


def scanned_kernels() -> dict[str, dict[str, str]]:
    """The scanned aten overloads' kernels, read from the YAML itself (not through codegen)."""
    doc = yaml.load((ROOT / "catalog" / "scanned" / "aten.yaml").read_text(), Loader=yaml.CSafeLoader)
    return {e["name"]: e["kernels"] for e in doc["entries"] if e["kind"] == "op_overload"}


def test_missing_on_cuda_is_what_the_scanned_catalog_says_and_the_cpu_really_has_a_kernel():
    expected = set()
    for name, kernels in scanned_kernels().items():
        if kernels["cuda"] == "missing" and kernels["cpu"] in ("native", "composite"):
            op, _, overload = name.removeprefix("torch.ops.aten.").partition(".")
            expected.add(f"aten::{op}" if overload == "default" else f"aten::{op}.{overload}")
    assert cuda_kernels_table.MISSING_ON_CUDA == expected
    # checked by hand against native_functions.yaml: CPU-only kernels, and some that CUDA has
    assert {"aten::histogram.bin_ct", "aten::_add_relu.Tensor", "aten::slow_conv3d_forward",
            "aten::_histogramdd_bin_edges", "aten::from_file"} <= expected
    assert not {"aten::add.Tensor", "aten::histc", "aten::histc.out", "aten::narrow_copy"} & expected
    for name in expected:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(name, "CPU"), name


def test_every_alert_names_real_overloads_and_arguments_of_their_schemas():
    assert len(cuda_kernels_table.ALERTS) == len({row.name for row in cuda_kernels_table.ALERTS})
    for row in cuda_kernels_table.ALERTS:
        for name in row.overloads:
            op, _, overload = name.removeprefix("aten::").partition(".")
            schema = getattr(getattr(torch.ops.aten, op), overload or "default")._schema
            assert {clause[1] for clause in row.when} <= {a.name for a in schema.arguments}, (row.name, name)
