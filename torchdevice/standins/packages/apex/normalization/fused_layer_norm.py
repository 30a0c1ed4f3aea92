"""``apex.normalization.fused_layer_norm``: the modules and functions, as ``F.layer_norm`` / ``F.rms_norm``.

The ``Mixed*`` forms take parameters in another dtype than the input (float32 weights, half inputs) and
return the parameters' dtype, as apex's mixed-dtype kernels do."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from torchdevice.reporting.counts import record_standin
from torchdevice.standins.missing import module_getattr


def _shape(normalized_shape):
    return (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)


def fused_layer_norm_affine(input, weight, bias, normalized_shape, eps=1e-6, memory_efficient=False):
    record_standin("apex.normalization.fused_layer_norm.fused_layer_norm_affine", input.device.type)
    return F.layer_norm(input, _shape(normalized_shape), weight, bias, eps)


def fused_layer_norm(input, normalized_shape, eps=1e-6, memory_efficient=False):
    record_standin("apex.normalization.fused_layer_norm.fused_layer_norm", input.device.type)
    return F.layer_norm(input, _shape(normalized_shape), None, None, eps)


def mixed_dtype_fused_layer_norm_affine(input, weight, bias, normalized_shape, eps=1e-6, memory_efficient=False):
    record_standin("apex.normalization.fused_layer_norm.mixed_dtype_fused_layer_norm_affine", input.device.type)
    out = F.layer_norm(input.to(weight.dtype), _shape(normalized_shape), weight, bias, eps)
    return out


def fused_rms_norm_affine(input, weight, normalized_shape, eps=1e-6, memory_efficient=False):
    record_standin("apex.normalization.fused_layer_norm.fused_rms_norm_affine", input.device.type)
    return F.rms_norm(input, _shape(normalized_shape), weight, eps)


def fused_rms_norm(input, normalized_shape, eps=1e-6, memory_efficient=False):
    record_standin("apex.normalization.fused_layer_norm.fused_rms_norm", input.device.type)
    return F.rms_norm(input, _shape(normalized_shape), None, eps)


def mixed_dtype_fused_rms_norm_affine(input, weight, normalized_shape, eps=1e-6, memory_efficient=False):
    record_standin("apex.normalization.fused_layer_norm.mixed_dtype_fused_rms_norm_affine", input.device.type)
    return F.rms_norm(input.to(weight.dtype), _shape(normalized_shape), weight, eps)


class FusedLayerNorm(torch.nn.LayerNorm):
    """``torch.nn.LayerNorm`` with apex's arguments (``eps`` default 1e-5; ``memory_efficient`` accepted)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, memory_efficient=False):
        super().__init__(normalized_shape, eps=eps, elementwise_affine=elementwise_affine)
        self.memory_efficient = memory_efficient

    def forward(self, input):
        record_standin("apex.normalization.FusedLayerNorm", input.device.type)
        return super().forward(input)


class MixedFusedLayerNorm(FusedLayerNorm):
    """:class:`FusedLayerNorm` whose output has the parameters' dtype."""

    def __init__(self, normalized_shape, eps=1e-5, **kwargs):
        super().__init__(normalized_shape, eps=eps, **kwargs)

    def forward(self, input):
        record_standin("apex.normalization.MixedFusedLayerNorm", input.device.type)
        if self.weight is None:
            return super().forward(input)
        return F.layer_norm(input.to(self.weight.dtype), self.normalized_shape, self.weight, self.bias, self.eps)


class FusedRMSNorm(torch.nn.RMSNorm):
    """``torch.nn.RMSNorm`` with apex's arguments (``eps`` default 1e-5; ``memory_efficient`` accepted)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, memory_efficient=False):
        super().__init__(normalized_shape, eps=eps, elementwise_affine=elementwise_affine)
        self.memory_efficient = memory_efficient

    def forward(self, input):
        record_standin("apex.normalization.FusedRMSNorm", input.device.type)
        return super().forward(input)


class MixedFusedRMSNorm(FusedRMSNorm):
    """:class:`FusedRMSNorm` whose output has the parameters' dtype."""

    def __init__(self, normalized_shape, eps=1e-5, **kwargs):
        super().__init__(normalized_shape, eps=eps, **kwargs)

    def forward(self, input):
        record_standin("apex.normalization.MixedFusedRMSNorm", input.device.type)
        if self.weight is None:
            return super().forward(input)
        return F.rms_norm(input.to(self.weight.dtype), self.normalized_shape, self.weight, self.eps)


__getattr__ = module_getattr(__name__)
