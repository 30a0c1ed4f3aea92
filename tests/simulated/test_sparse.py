"""Sparse COO tensors on the simulated Mac: the ops MPS has a sparse kernel of give the CPU target's values on
sparse tensors of the device (``mps:0``), and the others raise the dispatcher's error for ``SparseMPS``, as on a
Mac; float64 ones, which MPS cannot hold, are kept by the host and say they are on the device."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from mac_runs import on_both


def dense() -> torch.Tensor:
    return torch.tensor([[0.0, 1.5, 0.0, -2.0], [3.0, 0.0, 0.0, 0.0], [0.0, -4.0, 5.0, 0.0]], device="cuda")


def coo() -> torch.Tensor:
    """Uncoalesced: (0, 1) appears twice."""
    indices = torch.tensor([[0, 1, 0, 2, 2], [1, 0, 1, 2, 3]])
    return torch.sparse_coo_tensor(indices, torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]), (3, 4), device="cuda",
                                   check_invariants=True)


def _added_in_place() -> torch.Tensor:
    total = dense().to_sparse()
    total.add_(coo())
    return total


def _written_out_and_copied() -> tuple[torch.Tensor, ...]:
    out, copied = (torch.sparse_coo_tensor(size=(3, 4), device="cuda") for _ in range(2))
    torch.add(coo(), dense().to_sparse(), out=out)
    copied.copy_(coo())
    scaled = coo().coalesce()
    scaled.mul_(3)
    return out, copied, scaled


def _mm_gradient() -> torch.Tensor:
    weight = torch.ones(4, 2, device="cuda", requires_grad=True)
    torch.sparse.mm(coo(), weight).pow(2).sum().backward()
    assert weight.grad is not None
    return weight.grad


LINES: dict[str, Callable[[], Any]] = {
    "x.to_sparse()": lambda: dense().to_sparse(),
    "x.to_sparse().to_dense()": lambda: dense().to_sparse().to_dense(),
    "sparse_coo_tensor(i, v, device='cuda')": coo,
    "coalesce": lambda: coo().coalesce(),
    "indices() and values()": lambda: (coo().coalesce().indices(), coo().coalesce().values()),
    "sparse + sparse": lambda: coo() + dense().to_sparse(),
    "sparse * scalar": lambda: coo() * 2.5,
    "sparse.add_(sparse)": _added_in_place,
    "add(out=sparse), copy_, mul_": _written_out_and_copied,
    "dense + sparse": lambda: dense() + coo(),
    "torch.sparse.mm(sparse, dense)": lambda: torch.sparse.mm(coo(), dense().t()),
    "torch.sparse.mm(sparse, sparse)": lambda: torch.sparse.mm(coo(), dense().t().to_sparse()),
    "torch.sparse.mm's gradient": _mm_gradient,
    "sparse @ dense": lambda: coo() @ torch.ones(4, 2, device="cuda"),
    "torch.sparse.sum": lambda: torch.sparse.sum(coo()),
    "torch.sparse.sum(dim=1)": lambda: torch.sparse.sum(coo(), dim=1),
    "torch.sparse.softmax": lambda: torch.sparse.softmax(coo(), dim=1),
    "transpose": lambda: coo().t(),
    ".cpu() and back": lambda: coo().cpu().to("cuda"),
    "float64 x.to_sparse()": lambda: dense().double().to_sparse(),
    "float64 sparse ops": lambda: (torch.sparse.mm(dense().double().to_sparse(), dense().double().t()),
                                   (dense().double().to_sparse() * 2).coalesce().values(),
                                   torch.sparse.sum(dense().to(torch.complex128).to_sparse())),
}


@pytest.mark.parametrize("line", sorted(LINES))
def test_sparse_lines_give_the_cpu_targets_values_on_the_device(line):
    def run() -> Any:
        value = LINES[line]()
        for t in value if isinstance(value, tuple) else (value,):
            assert t.device == dense().device
        return value

    native, mac = on_both(run)
    torch.testing.assert_close(mac, native)


def test_sparse_tensors_of_the_device_say_what_a_macs_say(mac):
    s = dense().to_sparse()
    assert (s.device, s.is_sparse, s.layout, s.is_mps) == (torch.device("mps", 0), True, torch.sparse_coo, True)
    assert (s.indices().device, s.values().layout, s._nnz()) == (torch.device("mps", 0), torch.strided, 5)
    assert "device='mps:0'" in str(s) and "layout=torch.sparse_coo" in str(s)


def test_ops_without_a_sparse_mps_kernel_raise_the_macs_error(mac):
    with pytest.raises(NotImplementedError, match=r"^Could not run 'aten::hspmm' with arguments from the "
                                                  r"'SparseMPS' backend\."):
        torch.hspmm(coo(), torch.ones(4, 2, device="cuda"))
    with pytest.raises(NotImplementedError, match="'aten::_to_sparse_csr' with arguments from the 'SparseMPS'"):
        coo().to_sparse_csr()
    assert torch.hspmm(coo().cpu(), torch.ones(4, 2)).is_sparse  # which the CPU runs
