"""``apex.optimizers``: :class:`FusedAdam` and :class:`FusedSGD`."""

from torchdevice.standins.missing import module_getattr

from .fused_adam import FusedAdam
from .fused_sgd import FusedSGD

__all__ = ["FusedAdam", "FusedSGD"]
__getattr__ = module_getattr(__name__)
