"""CUDA's kernel table as catalog data: the alerts overlay's records are validated (overloads of the scanned catalog,
clauses of the vocabulary reading arguments every overload has) with errors naming file, line and record; the plan
writes them in the runtime's normal form; the generated table agrees with the scanned kernels."""

from __future__ import annotations

import struct
import textwrap
from pathlib import Path

import pytest
import torch
import yaml
from catalog_release import installed_scanned, known_here
from test_catalog import CUDA, SCANNED
from torchdevice_generated import cuda_kernels_table

from codegen.load import load
from codegen.plan.cuda_kernels import CudaKernels
from codegen.scan import cuda_alerts
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


CALLS = """\
torch_version: 2.13.0
group: cuda_alerts
wheel: torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl
calls:
- {library: libtorch_cuda.so, function: "at::native::add_cuda", alert: add_cuda with an alpha}
- {library: libtorch_cuda.so, function: "at::native::structured_add_cuda::impl", alert: add_always}
"""


def make(tmp_path: Path, alerts: str, calls: str | None = CALLS) -> Path:
    (tmp_path / "scanned").mkdir(parents=True)
    (tmp_path / "scanned" / "torch.yaml").write_text(SCANNED)
    if calls is not None:
        (tmp_path / "scanned" / "cuda_alerts.yaml").write_text(calls)
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
    (("alert: add_always", "alert: add_sometimes"), "no call of torch 2.13.0's CUDA wheel hands"),
    (("Add.cu add_cuda\n  when: always", "Add.cu sub_cuda\n  when: always"), "sub_cuda does not make the call"),
])
def test_a_bad_record_is_an_error_naming_file_line_and_record(tmp_path, change, says):
    old, new = change
    assert old in GOOD
    with pytest.raises(CatalogError) as info:
        load(make(tmp_path, GOOD.replace(old, new)))
    message = str(info.value)
    record = "always_alert" if "always" in old or "source" in old else "add_alert"
    assert "cuda_kernels.yaml:" in message and f"(entry {record})" in message and says in message, message


def test_the_scanned_calls_are_required_and_of_the_same_torch(tmp_path):
    with pytest.raises(CatalogError, match="no scanned CUDA alerts; `make cuda-alerts`"):
        load(make(tmp_path / "a", GOOD, calls=None))
    with pytest.raises(CatalogError, match="cuda_alerts.yaml:1: torch_version 2.12.0 differs from 2.13.0"):
        load(make(tmp_path / "b", GOOD, calls=CALLS.replace("2.13.0\ngroup", "2.12.0\ngroup")))


def elf(address: int, blob: bytes) -> bytes:
    """A 64-bit ELF image with one section holding ``blob`` at virtual ``address``."""
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x28, 64 + len(blob))
    struct.pack_into("<HH", header, 0x3A, 64, 1)
    section = struct.pack("<IIQQQQ", 0, 1, 2, address, 64, len(blob)) + bytes(24)
    return bytes(header) + blob + section


def test_the_scanner_reads_the_string_each_call_hands_over():
    image = elf(0x4000, b"xxput_\0median CUDA with indices output\0")
    disassembly = [
        "0000000000001000 <at::native::put_(at::Tensor&, at::Tensor const&, at::Tensor const&, bool)>:",
        "    1004:\tlea    0x2ffa(%rip),%rax        # 4002 <ignore+0x2>",
        "    100b:\tmovq   $0x4,(%rsp)",
        "    1013:\tcall   2000 <at::Context::alertNotDeterministic(std::basic_string_view<char> const&)@plt>",
        "0000000000001100 <void at::native::(anonymous namespace)::median_impl<float>(at::Tensor&, long)>:",
        "    1104:\tlea    0x2efd(%rip),%r13        # 4007 <ignore+0x7>",
        "    110b:\tmovq   $0x1f,-0x70(%rbp)",
        "    1113:\tcall   2000 <at::Context::alertNotDeterministic(std::basic_string_view<char> const&)@plt>",
        "    1118:\tcall   3000 <at::Context::deterministicAlgorithms() const@plt>",
    ]
    assert cuda_alerts.calls(disassembly, image) == [
        ("at::native::put_", "put_"),
        ("at::native::{anonymous}::median_impl<float>", "median CUDA with indices output")]
    with pytest.raises(cuda_alerts.ScanError, match="without its string"):
        cuda_alerts.calls(disassembly[:1] + disassembly[3:4], image)
    with pytest.raises(cuda_alerts.ScanError, match="not a 64-bit little-endian ELF"):
        cuda_alerts.sections(b"\xcf\xfa\xed\xfe" + bytes(60))


def test_every_call_of_cudas_kernels_is_a_record_but_those_left_out_for_a_reason():
    doc = yaml.safe_load((ROOT / "catalog" / "scanned" / "cuda_alerts.yaml").read_text())
    recorded = {row.alert for row in cuda_kernels_table.ALERTS}
    left_out = {(c["library"], c["alert"]) for c in doc["calls"] if c["alert"] not in recorded}
    assert left_out == {
        ("libtorch_cuda.so", "adaptive_avg_pool2d_backward_out_cuda"),  # no overload dispatches to its function
        ("libtorch_cuda.so", "scatter_cuda_"),  # unreachable while deterministic: scatter takes index_put_
        ("libtorch_cpu.so", "quantized_resize_cpu_"),  # the CPU's (QuantizedCPU) kernel
    }


@pytest.mark.processes  # objdump: minutes over the wheel's two libraries
def test_the_committed_calls_are_the_cuda_wheels(tmp_path):
    wheels = sorted(p for p in cuda_alerts.WHEELS.glob("torch-2.13.0*-manylinux_*x86_64.whl") if "+cpu" not in p.name)
    if not wheels:
        pytest.skip("torch 2.13.0's CUDA wheel is not downloaded (make cuda-alerts)")
    out = tmp_path / "cuda_alerts.yaml"
    cuda_alerts.scan(wheels[0], out)
    assert out.read_text() == (ROOT / "catalog" / "scanned" / "cuda_alerts.yaml").read_text()


def scanned_kernels() -> dict[str, dict[str, str]]:
    """The installed release's scanned aten overloads' kernels, read from the YAML itself (not through codegen)."""
    with installed_scanned() as folder:
        doc = yaml.load((folder / "aten.yaml").read_text(), Loader=yaml.CSafeLoader)
    return {e["name"]: e["kernels"] for e in doc["entries"] if e["kind"] == "op_overload"}


@known_here
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
