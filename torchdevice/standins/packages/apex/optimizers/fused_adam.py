"""``apex.optimizers.fused_adam``: Adam, by default with decoupled weight decay (AdamW)."""

from __future__ import annotations

import torch

from torchdevice.reporting.counts import record_standin
from torchdevice.standins.missing import module_getattr


class FusedAdam(torch.optim.Optimizer):
    """apex's FusedAdam: ``adam_w_mode=True`` (the default) is AdamW, ``False`` Adam with L2 weight decay;
    ``bias_correction=False`` leaves the moments uncorrected. The step count is per parameter group."""

    def __init__(self, params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-8, adam_w_mode=True,
                 weight_decay=0.0, amsgrad=False, set_grad_none=True, capturable=False, master_weights=False):
        if amsgrad:
            raise RuntimeError("FusedAdam does not support the AMSGrad variant.")
        defaults = dict(lr=lr, bias_correction=bias_correction, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)
        self.adam_w_mode = adam_w_mode
        self.set_grad_none = set_grad_none

    def zero_grad(self, set_to_none=None):
        super().zero_grad(self.set_grad_none if set_to_none is None else set_to_none)

    @torch.no_grad()
    def step(self, closure=None, grads=None, output_params=None, scale=None, grad_norms=None, grad_scaler=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            record_standin("apex.optimizers.FusedAdam", params[0].device.type)
            group["step"] = step = group.get("step", 0) + 1
            beta1, beta2 = group["betas"]
            lr, eps, decay = group["lr"], group["eps"], group["weight_decay"]
            first = 1 - beta1 ** step if group["bias_correction"] else 1.0
            second = 1 - beta2 ** step if group["bias_correction"] else 1.0
            for p in params:
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                grad = p.grad if self.adam_w_mode or not decay else p.grad.add(p, alpha=decay)
                state["exp_avg"].lerp_(grad, 1 - beta1)
                state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                update = (state["exp_avg"] / first) / ((state["exp_avg_sq"] / second).sqrt() + eps)
                if self.adam_w_mode and decay:
                    update.add_(p, alpha=decay)
                p.add_(update, alpha=-lr)
        return loss


__getattr__ = module_getattr(__name__)
