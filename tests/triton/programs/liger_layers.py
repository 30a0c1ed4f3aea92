"""A program written for an NVIDIA GPU with liger-kernel 0.8.5's Triton kernels: RMSNorm (libdevice's ``rsqrt``, a
float ``eps``), SwiGLU and GeGLU (libdevice's ``tanh``), forward and backward. Their backward kernels write the
gradients into the saved inputs, so the inputs are saved on the host first. ``python liger_layers.py OUT``."""

import sys

import torch
from liger_kernel.ops.geglu import LigerGELUMulFunction
from liger_kernel.ops.rms_norm import LigerRMSNormFunction
from liger_kernel.ops.swiglu import LigerSiLUMulFunction

torch.manual_seed(0)
saved = {}
for name, function, extra in (("rms_norm", LigerRMSNormFunction.apply, (1e-6,)),
                              ("swiglu", LigerSiLUMulFunction.apply, ()), ("geglu", LigerGELUMulFunction.apply, ())):
    a = torch.randn(6, 40, device="cuda", requires_grad=True)
    b = torch.randn(40 if name == "rms_norm" else (6, 40), device="cuda", requires_grad=True)
    upstream = torch.randn(6, 40, device="cuda")
    saved[name] = {"a": a.detach().cpu().clone(), "b": b.detach().cpu().clone(), "upstream": upstream.cpu()}
    out = function(a, b, *extra)
    out.backward(upstream)
    saved[name].update(out=out.detach().cpu(), a_grad=a.grad.cpu(), b_grad=b.grad.cpu())
torch.save(saved, sys.argv[1])
