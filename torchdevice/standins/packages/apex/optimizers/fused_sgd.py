"""``apex.optimizers.fused_sgd``: ``torch.optim.SGD`` with apex's arguments."""

from __future__ import annotations

import torch
from torch.optim.optimizer import required

from torchdevice.reporting.counts import record_standin
from torchdevice.standins.missing import module_getattr


class FusedSGD(torch.optim.SGD):
    """SGD with momentum, dampening, weight decay (applied before momentum) and Nesterov, as torch's SGD."""

    def __init__(self, params, lr=required, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 wd_after_momentum=False, materialize_master_grads=True, set_grad_none=False):
        if wd_after_momentum:
            raise ValueError("FusedSGD(wd_after_momentum=True) is not covered by torchdevice's stand-in; "
                             "torch.optim.SGD applies weight decay before momentum")
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                         nesterov=nesterov)
        self.set_grad_none = set_grad_none

    def zero_grad(self, set_to_none=None):
        super().zero_grad(self.set_grad_none if set_to_none is None else set_to_none)

    def step(self, closure=None):
        first = self.param_groups[0]["params"]
        record_standin("apex.optimizers.FusedSGD", first[0].device.type if first else "cpu")
        return super().step(closure)


__getattr__ = module_getattr(__name__)
