"""``apex.amp`` at ``opt_level`` O0 (float32, nothing changes) and O1 (CUDA autocast to float16 around each
model's forward, dynamic loss scaling by ``torch.amp.GradScaler``, the step skipped after an overflow)."""

from __future__ import annotations

import contextlib
import functools

import torch

from torchdevice.reporting.counts import record_standin
from torchdevice.standins.missing import module_getattr

_scaler: torch.amp.GradScaler | None = None


def initialize(models, optimizers=None, enabled=True, opt_level="O1", cast_model_type=None,
               patch_torch_functions=None, keep_batchnorm_fp32=None, master_weights=None, loss_scale=None,
               cast_model_outputs=None, num_losses=1, verbosity=1, min_loss_scale=None, max_loss_scale=2.0 ** 24):
    """``models`` (and ``optimizers``) back, set up for ``opt_level``; O2 and O3 are refused (use
    ``torch.autocast("cuda")`` and ``torch.amp.GradScaler``)."""
    global _scaler
    record_standin("apex.amp.initialize", opt_level)
    if opt_level not in ("O0", "O1"):
        raise ValueError(f"apex.amp.initialize(opt_level={opt_level!r}) is not covered by torchdevice's stand-in "
                         "(O0 and O1 are); use torch.autocast('cuda') and torch.amp.GradScaler")
    overrides = dict(cast_model_type=cast_model_type, patch_torch_functions=patch_torch_functions,
                     keep_batchnorm_fp32=keep_batchnorm_fp32, master_weights=master_weights)
    given = [name for name, value in overrides.items() if value is not None]
    if given or loss_scale not in (None, "dynamic"):
        raise ValueError(f"apex.amp.initialize: {', '.join(given) or 'a static loss_scale'} is not covered by "
                         "torchdevice's stand-in; use torch.autocast('cuda') and torch.amp.GradScaler")
    _scaler = None
    if enabled and opt_level == "O1":
        _scaler = torch.amp.GradScaler("cuda", init_scale=min(2.0 ** 16, max_loss_scale))
        for model in models if isinstance(models, (list, tuple)) else [models]:
            model.forward = _autocast(model.forward)
        for optimizer in optimizers if isinstance(optimizers, (list, tuple)) else [optimizers]:
            if optimizer is not None:
                optimizer.step = _skippable(optimizer, optimizer.step)
    return models if optimizers is None else (models, optimizers)


def _autocast(forward):
    @functools.wraps(forward)
    def autocast_forward(*args, **kwargs):
        with torch.autocast("cuda", dtype=torch.float16):
            return forward(*args, **kwargs)

    return autocast_forward


def _skippable(optimizer, step):
    @functools.wraps(step)
    def amp_step(*args, **kwargs):
        if getattr(optimizer, "_amp_skip_next_step", False):
            optimizer._amp_skip_next_step = False
            return None
        return step(*args, **kwargs)

    return amp_step


@contextlib.contextmanager
def scale_loss(loss, optimizers, loss_id=0, model=None, delay_unscale=False, delay_overflow_check=False):
    """Yield the loss scaled; on exit unscale the gradients, update the scale and, after an overflow, make
    the next ``optimizer.step()`` do nothing."""
    scaler = _scaler
    if scaler is None:
        yield loss
        return
    yield scaler.scale(loss)
    if delay_unscale:
        return
    optimizers = list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers]
    for optimizer in optimizers:
        scaler.unscale_(optimizer)
    grads = [p.grad for optimizer in optimizers for p in master_params(optimizer) if p.grad is not None]
    overflow = bool(grads) and not bool(torch.stack([g.isfinite().all() for g in grads]).all())
    scaler.update()
    if overflow:
        for optimizer in optimizers:
            optimizer._amp_skip_next_step = True


def master_params(optimizer):
    """The parameters ``optimizer`` updates (at O0/O1, the model's own)."""
    for group in optimizer.param_groups:
        yield from group["params"]


__getattr__ = module_getattr(__name__)
