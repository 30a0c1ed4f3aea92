"""Sparse compressed tensors (CSR, CSC, BSR) on the simulated GPU: built on "cuda" as a program builds them, they say
what a GPU's say, the ops CUDA has a SparseCsrCUDA kernel of compute the CPU's values, and the others raise the
dispatcher's error for ``SparseCsrCUDA``; the simulated Mac computes none of them, as before."""

from __future__ import annotations

import warnings

import pytest
import torch

import torchdevice


@pytest.fixture
def gpu():
    with torchdevice.installed("cuda-sim") as device, warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta state")
        warnings.filterwarnings("ignore", "Sparse invariant checks are implicitly disabled")
        yield device


def matrix(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A 4×6 host matrix with zeros, of ``dtype``."""
    generator = torch.Generator().manual_seed(0)
    return torch.randn(4, 6, generator=generator).relu().to(dtype)


def test_a_csr_tensor_of_the_gpu_says_what_a_gpus_says(gpu):
    host = matrix().to_sparse_csr()
    for csr in (host.to("cuda"), matrix().cuda().to_sparse_csr(),
                torch.sparse_csr_tensor(host.crow_indices(), host.col_indices(), host.values(), host.shape,
                                        device="cuda")):
        assert (csr.device, csr.is_cuda, csr.layout, csr.shape) == (torch.device("cuda", 0), True,
                                                                     torch.sparse_csr, host.shape)
        assert all(part.device == torch.device("cuda", 0) for part in (csr.crow_indices(), csr.col_indices(),
                                                                        csr.values()))
        assert "device='cuda:0'" in repr(csr) and "layout=torch.sparse_csr" in repr(csr)
        back = csr.cpu()
        assert back.layout == torch.sparse_csr
        torch.testing.assert_close((back.crow_indices(), back.col_indices(), back.values()),
                                   (host.crow_indices(), host.col_indices(), host.values()), rtol=0, atol=0)
        assert csr.to_dense().device == torch.device("cuda", 0)
        torch.testing.assert_close(csr.to_dense().cpu(), matrix(), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
def test_sampled_addmm_computes_what_the_cpu_computes(gpu, dtype):
    generator = torch.Generator().manual_seed(1)
    mat1, mat2 = (torch.randn(shape, generator=generator).to(dtype) for shape in ((4, 5), (5, 6)))
    expected = torch.sparse.sampled_addmm(matrix(dtype).to_sparse_csr(), mat1, mat2, beta=0.5, alpha=2.0)
    found = torch.sparse.sampled_addmm(matrix(dtype).cuda().to_sparse_csr(), mat1.cuda(), mat2.cuda(), beta=0.5,
                                       alpha=2.0)
    assert (found.device, found.layout) == (torch.device("cuda", 0), torch.sparse_csr)
    torch.testing.assert_close(found.to_dense().cpu(), expected.to_dense())
    out = torch.empty(0, 0, device="cuda", dtype=dtype).to_sparse_csr()  # an out= tensor takes the result's parts
    torch.sparse.sampled_addmm(matrix(dtype).cuda().to_sparse_csr(), mat1.cuda(), mat2.cuda(), out=out)
    assert out.values().device == torch.device("cuda", 0)
    torch.testing.assert_close(out.to_dense().cpu(), torch.sparse.sampled_addmm(matrix(dtype).to_sparse_csr(), mat1,
                                                                                mat2).to_dense())


def test_csr_times_dense_and_elementwise_ops_compute_what_the_cpu_computes(gpu):
    csr, dense = matrix().to_sparse_csr(), torch.randn(6, 3, generator=torch.Generator().manual_seed(2))
    on_gpu = csr.cuda()
    torch.testing.assert_close((on_gpu @ dense.cuda()).cpu(), csr @ dense)
    torch.testing.assert_close(torch.sparse.mm(on_gpu, dense.cuda()).cpu(), torch.sparse.mm(csr, dense))
    torch.testing.assert_close(torch.addmm(torch.ones(4, 3).cuda(), on_gpu, dense.cuda()).cpu(),
                               torch.addmm(torch.ones(4, 3), csr, dense))
    written = on_gpu.clone()
    written.mul_(3).sin_()
    torch.testing.assert_close(written.to_dense().cpu(), csr.clone().mul_(3).sin_().to_dense())
    torch.testing.assert_close((on_gpu + on_gpu).to_dense().cpu(), (csr + csr).to_dense())
    torch.testing.assert_close(on_gpu.to_dense().cpu(), matrix(), rtol=0, atol=0)  # its source unchanged


def test_gradients_through_csr_products_are_the_cpus(gpu):
    # the backward passes make CSR tensors sharing their arguments' parts (sparse_mask), freed while theirs live on
    def grads(device: str) -> tuple[torch.Tensor, ...]:
        generator = torch.Generator().manual_seed(3)
        weight, mat1, mat2 = (torch.randn(shape, generator=generator).to(device).requires_grad_()
                              for shape in ((6, 3), (4, 5), (5, 6)))
        csr = matrix().to(device).to_sparse_csr()
        ((csr @ weight).pow(2).sum() + torch.sparse.sampled_addmm(csr, mat1, mat2).to_dense().sum()).backward()
        return tuple(t.grad.cpu() for t in (weight, mat1, mat2))

    torch.testing.assert_close(grads("cuda"), grads("cpu"))


def test_csc_and_bsr_tensors_of_the_gpu_hold_the_cpus_values(gpu):
    square = torch.arange(16.0).reshape(4, 4) * (torch.arange(16).reshape(4, 4) % 3 == 0)
    csc, bsr = square.cuda().to_sparse_csc(), square.cuda().to_sparse_bsr((2, 2))
    assert (csc.layout, bsr.layout, csc.ccol_indices().device, bsr.values().device) == (
        torch.sparse_csc, torch.sparse_bsr, torch.device("cuda", 0), torch.device("cuda", 0))
    torch.testing.assert_close(bsr.values().cpu(), square.to_sparse_bsr((2, 2)).values(), rtol=0, atol=0)
    for compressed in (csc, bsr):
        torch.testing.assert_close(compressed.to_dense().cpu(), square, rtol=0, atol=0)


def test_an_op_cuda_has_no_sparse_csr_kernel_of_raises_cudas_error(gpu):
    csr, dense = matrix().to_sparse_csr(), torch.ones(6, 2)
    assert torch.sparse.mm(csr, dense, "sum").shape == (4, 2)  # the CPU runs it (SparseCsrCPU)
    with pytest.raises(NotImplementedError, match=r"^Could not run 'aten::_sparse_mm_reduce_impl' with arguments "
                                                  r"from the 'SparseCsrCUDA' backend\."):
        torch.sparse.mm(csr.cuda(), dense.cuda(), "sum")


def test_the_simulated_mac_still_has_no_sampled_addmm():
    mat1, mat2 = torch.ones(4, 5), torch.ones(5, 6)
    with torchdevice.installed("mps-sim"), warnings.catch_warnings(), pytest.raises(
            NotImplementedError, match="'aten::sparse_sampled_addmm' with arguments from the"):
        warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta state")
        torch.sparse.sampled_addmm(matrix().cuda().to_sparse_csr(), mat1.cuda(), mat2.cuda())
