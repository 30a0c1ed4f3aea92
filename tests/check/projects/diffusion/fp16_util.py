# Mixed precision helpers in the improved-diffusion style.
import torch.nn as nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors


def convert_module_to_f16(module):
    if isinstance(module, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
        module.weight.data = module.weight.data.half()
        module.bias.data = module.bias.data.half()


def make_master_params(model_params):
    master_params = _flatten_dense_tensors([param.detach().float() for param in model_params])
    master_params = nn.Parameter(master_params)
    master_params.requires_grad = True
    return [master_params]


def model_grads_to_master_grads(model_params, master_params):
    master_params[0].grad = _flatten_dense_tensors([param.grad.data.detach().float() for param in model_params])


def master_params_to_model_params(model_params, master_params):
    for param, master_param in zip(model_params, _unflatten_dense_tensors(master_params[0].detach(), model_params)):
        param.detach().copy_(master_param)
