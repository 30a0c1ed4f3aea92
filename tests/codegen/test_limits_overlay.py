"""MPS's limits as catalog data: the scanner reads the messages out of torch's macOS wheel, the overlay's records are
validated (clauses of the vocabulary, arguments of every overload, messages made of the wheel's strings) with errors
naming file, line and entry, and the plan writes them in the runtime's normal form."""

from __future__ import annotations

import struct
import textwrap
from pathlib import Path

import pytest
from test_catalog import CUDA, SCANNED

from codegen.load import load
from codegen.plan.limits import rows
from codegen.scan import mps_messages
from codegen.schema import CatalogError

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = """\
torch_version: 2.13.0
group: mps_messages
wheel: torch-2.13.0-cp311-cp311-macosx_14_0_arm64.whl
library: torch/lib/libtorch_cpu.dylib
strings:
- "add of int64 is not supported on MPS with alpha "
- "Cannot convert a MPS Tensor to float64 dtype"
"""
GOOD = """\
add_alpha:
  overloads: [add.Tensor]
  when: [{dtype: {arg: self, in: [int64]}}, {value: {arg: alpha, above: 1}}, {macos_below: "15.0"}]
  raises: RuntimeError
  message: ["add of int64 is not supported on MPS with alpha ", "{alpha}"]
  source: test
  cuda_runs: true
  why: add with an alpha
  probe: {args: ["int64[3]<4", "int64[3]<4"], kwargs: {alpha: 2}}
"""


def make(tmp_path: Path, limits: str, messages: str | None = MESSAGES) -> Path:
    (tmp_path / "scanned").mkdir(parents=True)
    (tmp_path / "scanned" / "torch.yaml").write_text(SCANNED)
    if messages is not None:
        (tmp_path / "scanned" / "mps_messages.yaml").write_text(messages)
    (tmp_path / "overlays").mkdir()
    (tmp_path / "overlays" / "cuda.yaml").write_text(CUDA)
    (tmp_path / "overlays" / "limits.yaml").write_text(textwrap.dedent(limits))
    return tmp_path


def test_a_record_loads_and_plans_in_normal_form(tmp_path):
    (row,) = rows(load(make(tmp_path, GOOD)))
    assert row.overloads == ("aten::add.Tensor",)
    assert row.when == (("dtype", "self", ("int64",)), ("value", "alpha", "above", 1), ("macos_below", (15, 0)))
    assert row.message == ("add of int64 is not supported on MPS with alpha ", "{alpha}")
    assert row.probe.op == "aten::add.Tensor" and row.probe.kwargs == {"alpha": 2}


def test_dtype_groups_expand_and_generic_refusals_name_no_overload(tmp_path):
    generic = GOOD.replace("overloads: [add.Tensor]", "overloads: [any]").replace(
        "when: [{dtype: {arg: self, in: [int64]}}, {value: {arg: alpha, above: 1}}, {macos_below: \"15.0\"}]",
        "when: [{any_dtype: [complex, float64]}]\n  reason: dtype").replace(', "{alpha}"]', "]").replace(
        "  probe: {args: [\"int64[3]<4\", \"int64[3]<4\"], kwargs: {alpha: 2}}\n", "")
    (row,) = rows(load(make(tmp_path, generic)))
    assert row.overloads == ("*",) and row.reason == "dtype"
    assert row.when == (("any_dtype", ("complex32", "complex64", "complex128", "float64")),)


@pytest.mark.parametrize(("change", "says"), [
    (("{dtype: {arg: self, in: [int64]}}", "{smaller: {arg: self}}"), "unknown clause 'smaller'"),
    (("arg: self, in: [int64]", "arg: input, in: [int64]"), "add.Tensor has no argument input"),
    (("in: [int64]", "in: [int65]"), "'int65' is not a dtype"),
    (('macos_below: "15.0"', "macos_below: fifteen"), "is not a macOS version"),
    (("{value: {arg: alpha, above: 1}}", "{value: {arg: alpha, above: 1, equals: 2}}"), "one of equals, in, above"),
    (("with alpha \"", "with beta \""), "is none of the strings of torch 2.13.0's macOS wheel"),
    (("overloads: [add.Tensor]", "overloads: [add.Scalar]"), "add.Scalar: not an aten overload"),
    (("raises: RuntimeError", "raises: none"), "message is what the Mac raises"),
    (("raises: RuntimeError", "raises: ValueError"), "expected one of"),
    (("cuda_runs: true", "cuda_runs: true\n  reason: kernel"), "reason (kernel or dtype) is for generic refusals"),
    (('"int64[3]<4", "int64[3]<4"', '"int64[3", "int64[3]<4"'), "is not a tensor"),
    (("why: add with an alpha", "why: add with an alpha\n  colour: red"), "unknown field 'colour'"),
])
def test_bad_records_name_file_line_and_entry(tmp_path, change, says):
    old, new = change
    assert old in GOOD
    with pytest.raises(CatalogError) as info:
        load(make(tmp_path, GOOD.replace(old, new)))
    message = str(info.value)
    assert "limits.yaml:" in message and "(entry add_alpha)" in message and says in message, message


def test_the_scanned_messages_are_required_and_of_the_same_torch(tmp_path):
    with pytest.raises(CatalogError, match="no scanned MPS messages; `make mps-messages`"):
        load(make(tmp_path / "a", GOOD, messages=None))
    with pytest.raises(CatalogError, match="mps_messages.yaml:1: torch_version 2.12.0 differs from 2.13.0"):
        load(make(tmp_path / "b", GOOD, messages=MESSAGES.replace("2.13.0\ngroup", "2.12.0\ngroup")))


def mach_o(strings: list[bytes]) -> bytes:
    """A 64-bit Mach-O image with one segment, __TEXT, holding a __text and a __cstring section."""
    blob = b"\0".join(strings) + b"\0"
    header_size, command_size = 32, 72 + 2 * 80
    start = header_size + command_size
    header = struct.pack("<IiiIIIII", 0xFEEDFACF, 0, 0, 0, 1, command_size, 0, 0)
    command = struct.pack("<II16sQQQQiiII", 0x19, command_size, b"__TEXT", 0, 0, 0, 0, 0, 0, 2, 0)

    def section(name: bytes, offset: int, size: int) -> bytes:
        return struct.pack("<16s16sQQIIIIIIII", name, b"__TEXT", 0, size, offset, 0, 0, 0, 0, 0, 0, 0)

    return header + command + section(b"__text", start, 4) + section(b"__cstring", start + 4, len(blob)) \
        + b"\x00" * 4 + blob


def test_the_scanner_reads_the_c_strings_of_a_mach_o_image():
    image = mach_o([b"first", b"", b"second one"])
    assert mps_messages.cstrings(image) == ["first", "", "second one", ""]
    with pytest.raises(mps_messages.ScanError, match="not a 64-bit Mach-O"):
        mps_messages.cstrings(b"\x7fELF" + bytes(64))


def test_the_scanner_keeps_mps_units_messages_and_strings_naming_mps():
    strings = [
        "/Users/runner/work/pytorch/pytorch/aten/src/ATen/native/cpu/Sort.cpp", "sort of a bool tensor is slow",
        "/Users/runner/work/pytorch/pytorch/aten/src/ATen/native/mps/operations/Pooling.mm",
        "Max pooling for complex is not supported for MPS", "max_pool2d_indices",
        'x INTERNAL ASSERT FAILED at "Pooling.mm":3, please report a bug to PyTorch. ',
        "/Users/runner/work/pytorch/pytorch/aten/src/ATen/native/Linear.cpp", "a message of the CPU's",
        "MPS supports tensors with dimensions <= ", "Could not run '", "' with arguments",
        "/Users/runner/work/pytorch/pytorch/aten/src/ATen/native/DispatchStub.cpp",
        'false INTERNAL ASSERT FAILED at "/Users/r/aten/src/ATen/native/DispatchStub.cpp":282, please report a '
        'bug to PyTorch. ', "DispatchStub: missing kernel for ", "DispatchStub: missing default kernel",
    ]
    assert mps_messages.messages(strings) == sorted([
        "Max pooling for complex is not supported for MPS", "MPS supports tensors with dimensions <= ",
        "Could not run '", "' with arguments", "DispatchStub: missing kernel for ",
        'false INTERNAL ASSERT FAILED at "/Users/r/aten/src/ATen/native/DispatchStub.cpp":282, please report a '
        'bug to PyTorch. '])


def test_the_committed_messages_are_the_wheels(tmp_path):
    """Where the wheel has been downloaded (`make mps-messages`), scanning it again gives the committed file."""
    wheels = sorted(mps_messages.WHEELS.glob("torch-2.13.0-*-macosx_*_arm64.whl"))
    if not wheels:
        pytest.skip("torch 2.13.0's macOS wheel is not downloaded (make mps-messages)")
    out = tmp_path / "mps_messages.yaml"
    mps_messages.scan(wheels[0], out)
    assert out.read_text() == (ROOT / "catalog" / "scanned" / "mps_messages.yaml").read_text()
