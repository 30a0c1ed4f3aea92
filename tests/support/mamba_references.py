"""The stand-ins for ``selective_scan_cuda`` and ``causal_conv1d_cuda`` against mamba-ssm's and causal-conv1d's
own references (``selective_scan_ref``, ``causal_conv1d_ref``, ``causal_conv1d_update_ref``), called on the CPU
the way the packages' Python code calls the kernels; gradients against autograd through the references."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest
import torch
from standin_references import close, dtype_of


def _scan_ref() -> Callable:
    interface = pytest.importorskip("mamba_ssm.ops.selective_scan_interface",
                                    reason="mamba-ssm (or Triton, which it imports) is not installed")
    return interface.selective_scan_ref


def _conv_refs() -> tuple[Callable, Callable]:
    interface = pytest.importorskip("causal_conv1d.causal_conv1d_interface", reason="causal-conv1d is not installed")
    return interface.causal_conv1d_ref, interface.causal_conv1d_update_ref


def scan_inputs(args: dict[str, Any]) -> dict[str, Any]:
    """Inputs as mamba-ssm's tests draw them (positive delta, negative A), B and C of each grid kind."""
    torch.manual_seed(0)
    b, d, length, n = map(int, args["shape"].split(","))
    dtype = dtype_of(args)

    def projection(kind: str) -> torch.Tensor:
        if kind == "constant":
            return torch.randn(d, n)
        return torch.randn(b, n, length).to(dtype) if kind == "variable" else torch.randn(b, 2, n, length).to(dtype)

    return dict(u=torch.randn(b, d, length).to(dtype), delta=(0.5 * torch.rand(b, d, length)).to(dtype),
                A=-0.5 * torch.rand(d, n) - 0.1, B=projection(args["B"]), C=projection(args["C"]),
                D=torch.randn(d) if args.get("D") else None,
                z=torch.randn(b, d, length).to(dtype) if args.get("z") else None,
                delta_bias=0.5 * torch.rand(d) if args.get("delta_bias") else None)


def kernel_layout(x: torch.Tensor) -> torch.Tensor:
    """B or C as ``SelectiveScanFn`` hands them to the kernel: ``(batch, dstate, seqlen)`` gets a group axis."""
    return x[:, None] if x.dim() == 3 else x


def check_selective_scan(function: Callable, name: str, args: dict[str, Any]) -> None:
    i, dtype, softplus = scan_inputs(args), dtype_of(args), bool(args.get("delta_softplus"))
    ref = _scan_ref()
    out, x, *rest = function(i["u"], i["delta"], i["A"], kernel_layout(i["B"]), kernel_layout(i["C"]), i["D"],
                             i["z"], i["delta_bias"], softplus)
    plain = {**i, "z": None}
    expected, last = ref(**plain, delta_softplus=softplus, return_last_state=True)
    assert out.dtype == dtype and x.dtype == torch.float32 and x.shape == (*i["u"].shape[:2], 1, 2 * i["A"].shape[1])
    close(out, expected, dtype, scale=4)
    close(x[:, :, -1, 1::2], last, torch.float32, scale=20 if dtype == torch.float32 else 500)
    if i["z"] is not None:
        (out_z,) = rest
        close(out_z, ref(**i, delta_softplus=softplus), dtype, scale=4)
    else:
        assert not rest


def check_selective_scan_grad(function: Callable, name: str, args: dict[str, Any]) -> None:
    i, dtype = scan_inputs(args), dtype_of(args)
    fwd = importlib.import_module(function.__module__).fwd
    kernel = {**i, "B": kernel_layout(i["B"]), "C": kernel_layout(i["C"])}
    order = ("u", "delta", "A", "B", "C", "D", "z", "delta_bias")
    out, x, *_ = fwd(*(kernel[k] for k in order), True)
    dout = torch.randn(out.shape).to(dtype)
    grads = function(*(kernel[k] for k in order), dout, x, out, None, True, False)
    leaves = {k: v.clone().requires_grad_() for k, v in i.items() if v is not None}
    expected = torch.autograd.grad(_scan_ref()(**{**i, **leaves}, delta_softplus=True), list(leaves.values()), dout)
    got = dict(zip(order[:5] + ("D", "delta_bias", "z"), grads, strict=False))
    got["B"], got["C"] = got["B"].reshape(i["B"].shape), got["C"].reshape(i["C"].shape)
    assert (got["D"] is None) == (i["D"] is None) and (got["delta_bias"] is None) == (i["delta_bias"] is None)
    for key, want in zip(leaves, expected, strict=True):
        assert got[key].dtype == want.dtype, key
        close(got[key], want, dtype, scale=50 if dtype == torch.float32 else 8)


def conv_inputs(args: dict[str, Any]) -> dict[str, Any]:
    torch.manual_seed(0)
    b, d, length, width = map(int, args["shape"].split(","))
    dtype = dtype_of(args)
    seq_idx = None
    if args.get("seq_idx"):  # two or three sequences per row, the first positions padding (-1) in row 0
        seq_idx = torch.randint(0, 2, (b, length)).cumsum(-1).to(torch.int32) // 2
        seq_idx[0, : length // 4] = -1
    return dict(x=torch.randn(b, d, length).to(dtype), weight=torch.randn(d, width).to(dtype),
                bias=torch.randn(d).to(dtype) if args.get("bias") else None, seq_idx=seq_idx,
                initial_states=torch.randn(b, d, width - 1).to(dtype) if args.get("initial_states") else None)


def check_causal_conv1d(function: Callable, name: str, args: dict[str, Any]) -> None:
    i, dtype = conv_inputs(args), dtype_of(args)
    b, d, _, width = map(int, args["shape"].split(","))
    silu = bool(args.get("silu_activation"))
    out = torch.empty_like(i["x"])
    final = None if i["seq_idx"] is not None else torch.empty(b, width - 1, d, dtype=dtype).transpose(1, 2)
    function(i["x"], i["weight"], i["bias"], i["seq_idx"], i["initial_states"], out, final, silu)
    expected = _conv_refs()[0](**i, return_final_states=final is not None, activation="silu" if silu else None)
    if final is None:
        close(out, expected, dtype, scale=2)
    else:
        close(out, expected[0], dtype, scale=2)
        assert torch.equal(final, expected[1])


def check_causal_conv1d_grad(function: Callable, name: str, args: dict[str, Any]) -> None:
    i, dtype = conv_inputs(args), dtype_of(args)
    b, d, length, width = map(int, args["shape"].split(","))
    silu = bool(args.get("silu_activation"))
    dout = torch.randn(b, d, length).to(dtype)
    dfinal = torch.randn(b, d, width - 1).to(dtype) if args.get("dfinal_states") else None
    dx, dweight = torch.empty_like(i["x"]), torch.zeros(d, width)
    dbias = None if i["bias"] is None else torch.zeros(d)
    dinitial = None if i["initial_states"] is None else torch.empty(b, width - 1, d, dtype=dtype).transpose(1, 2)
    function(i["x"], i["weight"], i["bias"], dout, None, i["initial_states"], dfinal, dx, dweight, dbias, dinitial,
             silu)
    leaves = {k: v.clone().requires_grad_() for k, v in i.items() if v is not None}
    out, final = _conv_refs()[0](**{**i, **leaves}, return_final_states=True, activation="silu" if silu else None)
    outputs, upstream = [out], [dout]
    if dfinal is not None:
        outputs.append(final)
        upstream.append(dfinal)
    expected = dict(zip(leaves, torch.autograd.grad(outputs, list(leaves.values()), upstream), strict=True))
    got = {"x": dx, "weight": dweight, "bias": dbias, "initial_states": dinitial}
    for key, want in expected.items():
        close(got[key], want, dtype, scale=4)


def check_causal_conv1d_update(function: Callable, name: str, args: dict[str, Any]) -> None:
    torch.manual_seed(0)
    b, d, length, width, state_len = map(int, args["shape"].split(","))
    dtype, silu = dtype_of(args), bool(args.get("silu_activation"))
    entries = b + 2 if args.get("conv_state_indices") else b
    x, state = torch.randn(b, d, length).to(dtype), torch.randn(entries, d, state_len).to(dtype)
    weight = torch.randn(d, width).to(dtype)
    bias = torch.randn(d).to(dtype) if args.get("bias") else None
    seqlens = torch.randint(0, 9, (b,), dtype=torch.int32) if args.get("cache_seqlens") else None
    rows = torch.arange(b, dtype=torch.int32)
    if args.get("conv_state_indices"):
        rows = torch.randperm(entries)[:b].to(torch.int32)
        rows[-1] = -1 if b > 1 else rows[-1]  # a padding row
    indices = rows if args.get("conv_state_indices") else None
    mine, out = state.clone(), torch.empty_like(x)
    function(x, mine, weight, bias, out, silu, seqlens, indices)
    valid = rows >= 0
    picked = state[rows[valid].long()].clone()
    expected = _conv_refs()[1](x[valid], picked, weight, bias, "silu" if silu else None,
                               None if seqlens is None else seqlens[valid])
    state[rows[valid].long()] = picked
    assert torch.equal(mine, state)
    close(out[valid], expected, dtype, scale=2)
    assert not out[~valid].any()


CHECKS = {name.removeprefix("check_"): f for name, f in globals().items() if name.startswith("check_")}
