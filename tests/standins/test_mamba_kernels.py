"""The stand-ins for ``selective_scan_cuda`` and ``causal_conv1d_cuda`` through mamba-ssm's and causal-conv1d's own
Python API (their autograd functions, layouts and buffers), against the packages' references; what the grids of
``test_references.py`` do not reach: several 2048-step chunks, states through the API, refusals."""

from __future__ import annotations

import pytest
import torch

import torchdevice
from torchdevice.reporting import counts as report


@pytest.fixture(scope="module")
def scan_api(standin):
    """mamba-ssm's selective scan module, imported under the runtime (its ``selective_scan_cuda``: the stand-in)."""
    return pytest.importorskip("mamba_ssm.ops.selective_scan_interface",
                               reason="mamba-ssm (or Triton, which it imports) is not installed")


@pytest.fixture(scope="module")
def conv_api(standin):
    return pytest.importorskip("causal_conv1d.causal_conv1d_interface", reason="causal-conv1d is not installed")


def test_the_state_at_each_chunk_end_and_its_decay(standin, scan_api):
    """``fwd``'s ``x``: per 2048-step chunk, the product of ``exp(delta A)`` and the state at the chunk's end; the
    backward pass needs no chunk boundary."""
    torch.manual_seed(0)
    u, delta = torch.randn(1, 2, 2100), 0.02 * torch.rand(1, 2, 2100)
    A, B, C = -0.5 * torch.rand(2, 3), torch.randn(1, 1, 3, 2100), torch.randn(1, 1, 3, 2100)
    out, x = standin("selective_scan_cuda.fwd")(u, delta, A, B, C, None, None, None, False)
    assert x.shape == (1, 2, 2, 6)
    ref = scan_api.selective_scan_ref
    _, at_2047 = ref(u[..., :2048], delta[..., :2048], A, B[:, 0, :, :2048], C[:, 0, :, :2048], return_last_state=True)
    expected, last = ref(u, delta, A, B[:, 0], C[:, 0], return_last_state=True)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(x[:, :, 0, 1::2], at_2047, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(x[:, :, 1, 1::2], last, rtol=1e-4, atol=1e-5)
    decay = (delta[..., 2048:, None] * A[:, None]).sum(2).exp()
    torch.testing.assert_close(x[:, :, 1, 0::2], decay)
    dout = torch.randn_like(out)
    du, ddelta, dA, *_ = standin("selective_scan_cuda.bwd")(u, delta, A, B, C, None, None, None, dout, x, None, None,
                                                            False, False)
    leaves = [t.clone().requires_grad_() for t in (u, delta, A)]
    want = torch.autograd.grad(ref(*leaves, B[:, 0], C[:, 0]), leaves, dout)
    for got, w in zip((du, ddelta, dA), want, strict=True):
        torch.testing.assert_close(got, w, rtol=1e-3, atol=1e-4)


def test_selective_scan_fn_with_its_last_state_and_gradients(scan_api):
    torch.manual_seed(0)
    u, delta, z = torch.randn(2, 4, 7), torch.rand(2, 4, 7), torch.randn(2, 4, 7)
    A, B, C, D, bias = -torch.rand(4, 5), torch.randn(2, 5, 7), torch.randn(2, 5, 7), torch.randn(4), torch.rand(4)
    leaves = [t.clone().requires_grad_() for t in (u, delta, A, B, C, D, z, bias)]
    copies = [t.clone().requires_grad_() for t in (u, delta, A, B, C, D, z, bias)]
    out, last = scan_api.selective_scan_fn(*leaves, delta_softplus=True, return_last_state=True)
    expected, want_last = scan_api.selective_scan_ref(*copies, delta_softplus=True, return_last_state=True)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(last, want_last, rtol=1e-5, atol=1e-5)
    dout = torch.randn_like(out)
    for got, want in zip(torch.autograd.grad(out, leaves, dout), torch.autograd.grad(expected, copies, dout),
                         strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_causal_conv1d_fn_with_states_channel_last(conv_api):
    """causal-conv1d's states need the channel-last layout; the initial states get their gradient."""
    torch.manual_seed(0)
    x = torch.randn(2, 11, 8).transpose(1, 2)
    weight, bias, initial = torch.randn(8, 4), torch.randn(8), torch.randn(2, 3, 8).transpose(1, 2)
    leaves = [t.clone().requires_grad_() for t in (x, weight, bias, initial)]
    copies = [t.clone().requires_grad_() for t in (x, weight, bias, initial)]
    out, final = conv_api.causal_conv1d_fn(*leaves[:3], initial_states=leaves[3], return_final_states=True,
                                           activation="silu")
    want, want_final = conv_api.causal_conv1d_ref(*copies[:3], initial_states=copies[3], return_final_states=True,
                                                  activation="silu")
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    assert torch.equal(final, want_final)
    dout = torch.randn_like(out)
    for got, expected in zip(torch.autograd.grad(out, leaves, dout), torch.autograd.grad(want, copies, dout),
                             strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_causal_conv1d_update_one_token(conv_api):
    torch.manual_seed(0)
    x, state, weight = torch.randn(3, 8), torch.randn(3, 8, 4), torch.randn(8, 4)
    mine, theirs = state.clone(), state.clone()
    out = conv_api.causal_conv1d_update(x, mine, weight, None, "silu")
    torch.testing.assert_close(out, conv_api.causal_conv1d_update_ref(x, theirs, weight, None, "silu"))
    assert out.shape == x.shape and torch.equal(mine, theirs)


def test_a_complex_A_is_refused_naming_the_limit(standin):
    u = torch.randn(1, 2, 3)
    A = torch.randn(2, 4, dtype=torch.complex64)
    with pytest.raises(NotImplementedError, match="real A only"):
        standin("selective_scan_cuda.fwd")(u, u, A, torch.randn(1, 1, 4, 6), torch.randn(1, 1, 4, 6), None, None,
                                           None, False)


def test_the_report_counts_each_kernel_by_device(scan_api, conv_api):
    report.reset()
    x = torch.randn(1, 4, 5)
    conv_api.causal_conv1d_fn(x, torch.randn(4, 2), activation="silu")
    scan_api.selective_scan_fn(x, x.abs(), -torch.rand(4, 2), torch.randn(1, 2, 5), torch.randn(1, 2, 5))
    assert torchdevice.report()["standins"] == {"causal_conv1d_cuda.causal_conv1d_fwd": {"cpu": 1},
                                                 "selective_scan_cuda.fwd": {"cpu": 1}}
