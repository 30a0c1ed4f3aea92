"""``apex.normalization``: fused layer and RMS norms, computed by ``torch.nn.functional``."""

from torchdevice.standins.missing import module_getattr

from .fused_layer_norm import FusedLayerNorm, FusedRMSNorm, MixedFusedLayerNorm, MixedFusedRMSNorm

__all__ = ["FusedLayerNorm", "FusedRMSNorm", "MixedFusedLayerNorm", "MixedFusedRMSNorm"]
__getattr__ = module_getattr(__name__)
