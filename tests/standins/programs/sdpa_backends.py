"""Pins CUDA's attention backends the way LLM code does; prints what torch says about them."""
import json
import sys
import warnings

import torch
import torch.nn.functional as F
from torch.backends.cuda import SDPAParams, can_use_efficient_attention, can_use_flash_attention
from torch.nn.attention import SDPBackend, sdpa_kernel

torch.manual_seed(0)
q, k, v = (torch.randn(2, 4, 12, 16, device="cuda") for _ in range(3))
out, said = {}, {}
with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
    out["efficient"] = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    said["in_efficient"] = [torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.mem_efficient_sdp_enabled(),
                            torch.backends.cuda.math_sdp_enabled()]
with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION]):
    out["cudnn_flash"] = F.scaled_dot_product_attention(q, k, v, is_causal=True)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)  # sdp_kernel is deprecated, still common
    with torch.backends.cuda.sdp_kernel(enable_flash=False, enable_math=False, enable_mem_efficient=True):
        out["sdp_kernel"] = F.scaled_dot_product_attention(q, k, v, is_causal=True)
with sdpa_kernel(SDPBackend.MATH):
    out["math"] = F.scaled_dot_product_attention(q, k, v, is_causal=True)
params = SDPAParams(q, k, v, None, 0.0, True, False)
said["available"] = torch.backends.cuda.is_flash_attention_available()
said["can_use"] = [can_use_flash_attention(params), can_use_efficient_attention(params)]
said["after"] = [torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.mem_efficient_sdp_enabled(),
                 torch.backends.cuda.math_sdp_enabled()]
torch.save({"q": q.cpu(), "k": k.cpu(), "v": v.cpu(), **{name: t.cpu() for name, t in out.items()}}, sys.argv[1])
print(json.dumps(said))
