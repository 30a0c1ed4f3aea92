"""``xformers.ops``: memory-efficient attention and its attention biases."""

from torchdevice.standins.missing import module_getattr

from . import fmha
from .fmha import memory_efficient_attention
from .fmha.attn_bias import AttentionBias, LowerTriangularMask, LowerTriangularMaskWithTensorBias

__all__ = ["AttentionBias", "LowerTriangularMask", "LowerTriangularMaskWithTensorBias", "fmha",
           "memory_efficient_attention"]
__getattr__ = module_getattr(__name__)
