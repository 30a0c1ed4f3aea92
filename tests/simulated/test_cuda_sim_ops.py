"""Ops a GPU computes as the CPU does, and the simulated GPU did not: each line against the same line on the CPU."""

from __future__ import annotations

import pytest
import torch

import torchdevice


@pytest.fixture
def gpu():
    with torchdevice.installed("cuda-sim") as device:
        yield device


def outcome(line, *tensors):
    """What ``line`` does with ``tensors``: its result on the host (an error's type and message), and the tensors
    after it, on the host."""
    try:
        result = line(*tensors)
    except RuntimeError as exc:
        return f"{type(exc).__name__}: {exc}", [t.cpu() for t in tensors]
    results = result if isinstance(result, tuple) else (result,)
    return [r.cpu() for r in results], [t.cpu() for t in tensors]


def same(line, *tensors):
    """``line`` on device copies of ``tensors`` does what it does on the host tensors."""
    torch.testing.assert_close(outcome(line, *(t.cuda() for t in tensors)), outcome(line, *tensors))


def test_an_out_form_given_self_checks_it_as_the_in_place_form(gpu):
    # addr_ calls addr.out with out=self: the CPU's kernel refuses a self that is not a matrix rather than resizing it
    vectors = torch.randn(5), torch.randn(10)
    with pytest.raises(RuntimeError, match="2D tensor expected, got 0D tensor for input"):
        torch.tensor(1.0).cuda().addr_(*(v.cuda() for v in vectors))
    same(lambda m, a, b: m.addr_(a, b), torch.randn(5, 10), *vectors)


def test_composite_code_with_a_branch_for_cuda_runs(gpu):
    x = torch.randn(4, 4, dtype=torch.complex64)
    same(lambda t: t.conj_physical_(), x)  # CUDA's DispatchStub
    outs = torch.empty(0, dtype=x.dtype), torch.empty(0), torch.empty(0, dtype=x.dtype)
    same(lambda a, u, s, v: torch.svd(a, out=(u, s, v)), x, *outs)  # conj_physical_ of its V
    values, indices = torch.zeros(5, 5), torch.zeros(5, 5, dtype=torch.long)
    same(lambda t, v, i: torch.mode(t, out=(v, i)), torch.randn(5, 5, 5), values, indices)  # CPU, CUDA and XPU only


def test_a_kernel_that_conjugates_its_out_argument_conjugates_it_on_the_device(gpu):
    # linalg.lu_solve with left=False solves the adjoint system and sets the conjugate bit of its out= tensor
    a, b = torch.randn(3, 3, dtype=torch.complex64), torch.randn(4, 3, dtype=torch.complex64)
    lu, pivots = torch.linalg.lu_factor(a)
    solve = lambda lu, pivots, b, out: torch.linalg.lu_solve(lu, pivots, b, left=False, adjoint=True, out=out)  # noqa: E731
    same(solve, lu, pivots, b, torch.zeros(4, 3, dtype=torch.complex64))
    out = torch.zeros(4, 3, dtype=torch.complex64)
    assert solve(lu.cuda(), pivots.cuda(), b.cuda(), out.cuda()).is_conj() == solve(lu, pivots, b, out).is_conj()
