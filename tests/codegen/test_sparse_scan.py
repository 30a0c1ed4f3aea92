"""The overloads MPS has a sparse COO kernel of, as scanned: what ``native_functions.yaml`` says, kernels the simulated
Mac can compute with the CPU's, validated on load."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from catalog_release import INSTALLED, installed_scanned, known_here
from torchgen.model import DispatchKey

from codegen.load import load_sparse_kernels
from codegen.model import Entry, Kernels
from codegen.scan import kernels
from codegen.schema import CatalogError
from torchdevice.records import aten_entry, dispatcher_name

ROOT = Path(__file__).resolve().parents[2]


def test_scanned_overloads_are_sparse_mps_dispatch_entries_with_a_cpu_sparse_kernel() -> None:
    names = [r["name"] for r in kernels.sparse_records(DispatchKey.SparseMPS)]
    assert {"add.Tensor", "mm.default", "_to_dense.default", "_coalesce.default", "sum.default"} <= set(names)
    assert "exp.default" not in names and "_to_sparse_csr.default" not in names  # SparseCPU only; dense only
    assert all(torch._C._dispatch_has_kernel_for_dispatch_key(dispatcher_name(aten_entry(n)), "SparseCPU")
               for n in names)


def _known(*names: str) -> dict[str, Entry]:
    native = Kernels("native", "native", "native")
    return {aten_entry(n): Entry(aten_entry(n), "op_overload", "torch", (), (), (), native) for n in names}


GOOD = "torch_version: 2.13.0\ngroup: sparse_mps\nentries:\n- name: mm.default\n- name: add.Tensor\n"


@pytest.mark.parametrize(("text", "where", "says"), [
    (GOOD.replace("mm.default", "mm.nothing"), "sparse_mps.yaml:4 (entry mm.nothing)", "not an aten overload"),
    (GOOD + "- name: mm.default\n", "sparse_mps.yaml:6 (entry mm.default)", "duplicate entry"),
    (GOOD + "- name: mm.default\n  policy: fp32\n", "sparse_mps.yaml:6", "expected a record {name:"),
    (GOOD.replace("2.13.0", "2.12.0"), "sparse_mps.yaml:1", "differs from 2.13.0"),
])
def test_bad_sparse_data_is_reported_with_file_line_and_entry(tmp_path: Path, text: str, where: str,
                                                              says: str) -> None:
    path = tmp_path / "sparse_mps.yaml"
    path.write_text(text)
    with pytest.raises(CatalogError) as info:
        load_sparse_kernels(path, "2.13.0", _known("mm.default", "add.Tensor"))
    assert where in str(info.value) and says in str(info.value), str(info.value)


@known_here
def test_committed_file_loads_as_scanned() -> None:
    """The installed release's file (its own view, on a release other than the catalog's) is what it scans to."""
    names = [r["name"] for r in kernels.sparse_records(DispatchKey.SparseMPS)]
    with installed_scanned() as scanned:
        assert load_sparse_kernels(scanned / "sparse_mps.yaml", INSTALLED, _known(*names)) == tuple(names)


def test_cudas_sparse_compressed_kernels_are_scanned_without_the_cpu_only_ones() -> None:
    names = [r["name"] for r in kernels.sparse_records(DispatchKey.SparseCsrCUDA)]
    assert {"sparse_sampled_addmm.default", "crow_indices.default", "_to_dense.default", "addmm.default"} <= set(names)
    assert "_sparse_mm_reduce_impl.default" not in names  # SparseCsrCPU only
    assert load_sparse_kernels(ROOT / "catalog" / "scanned" / "sparse_csr_cuda.yaml", "2.13.0",
                               _known(*names)) == tuple(names)
