"""PyTorch keeps working with the runtime installed: types, pickling, compilers, optimizers, AMP."""

from __future__ import annotations

import pickle

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

import torchdevice


def test_torch_device_stays_a_type_that_builds_the_real_type(on_cpu):
    """The stand-in (see torchdevice.runtime.device_classes) is a class; what it builds is the C type's instance."""
    assert isinstance(torch.device, type) and torch.device == torch._C.device
    device = torch.device("cuda", 0)
    assert type(device) is torch._C.device and isinstance(device, torch.device) and device.type == "cuda"
    assert pickle.loads(pickle.dumps(device)) == device
    torchdevice.uninstall()
    assert torch.device is torch._C.device


def test_pickling_tensors_and_generators(on_cpu):
    x = torch.randn(3, device="cuda")
    assert pickle.loads(pickle.dumps(x)).equal(x)
    generator = torch.Generator(device="cuda").manual_seed(5)
    payload = pickle.dumps(generator)
    torchdevice.uninstall()
    restored = pickle.loads(payload)  # names torch.Generator, the original once uninstalled
    assert type(restored) is torch._C.Generator and restored.initial_seed() == 5


def test_dynamo_and_compile_trace_through_the_wrappers(on_cpu):
    import torch._dynamo

    def step(a: torch.Tensor) -> torch.Tensor:
        return torch.sin(a) + torch.ones(3, device="cuda") + torch.zeros_like(a, device=a.device)

    compiled = torch.compile(step, fullgraph=True, backend="eager")
    a = torch.randn(3, device="cuda")
    assert compiled(a).equal(step(a))
    torch._dynamo.reset()


COMPILE_AFTER_LATE_DYNAMO_IMPORT = """
import sys
import torch
import torchdevice

def step(a):
    return torch.sin(a) + torch.ones(3, device="cuda")

torchdevice.install("cpu")
torch.optim.Adam([torch.zeros(1, requires_grad=True)])  # imports torch._dynamo: its rule map is built now
assert "torch._dynamo" in sys.modules
a = torch.randn(3)
print(torch.compile(step, fullgraph=True, backend="eager")(a).equal(step(a)))
torch.distributed.init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)
torch._dynamo.reset()  # init_process_group cleared the rule map: rebuilt while installed
print(torch.compile(lambda a: torch.zeros(3, device="cuda") + a, fullgraph=True, backend="eager")(a).equal(a))
torch.distributed.destroy_process_group()
torchdevice.uninstall()
torch._dynamo.reset()
print(torch.compile(lambda a: torch.ones(3) + a, fullgraph=True, backend="eager")(a).equal(a + 1))
"""


@pytest.mark.processes
def test_compile_when_dynamo_is_first_imported_while_installed(python):
    # A fresh interpreter: torch._dynamo must not be imported before the runtime is installed.
    done = python("-c", COMPILE_AFTER_LATE_DYNAMO_IMPORT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True"]


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_torchscript_resolves_wrapped_factories(on_cpu):
    def f(a: torch.Tensor) -> torch.Tensor:
        return a + torch.zeros(3) + torch.ones_like(a)

    scripted = torch.jit.script(f)
    assert scripted(torch.ones(3)).equal(torch.full((3,), 2.0))
    assert "aten::zeros" in str(scripted.graph)


def train_steps(device: str, *, fused: bool, scaler: torch.amp.GradScaler | None = None) -> list[float]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 1)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=fused)
    losses = []
    for _ in range(3):
        x = torch.randn(4, 8)
        x = x.pin_memory().to(device, non_blocking=True) if device == "cuda" else x
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        losses.append(loss.item())
    return losses


def test_fused_and_foreach_optimizers_and_grad_scaler_match_the_cpu():
    native_fused, native_foreach = train_steps("cpu", fused=True), train_steps("cpu", fused=False)
    with torchdevice.installed("cpu"):
        assert train_steps("cuda", fused=True) == native_fused
        assert train_steps("cuda", fused=False) == native_foreach
        assert train_steps("cuda", fused=True, scaler=torch.amp.GradScaler("cuda")) == native_fused


def test_activation_checkpointing_keeps_rng_state(on_cpu):
    layer = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)).cuda()
    x = torch.randn(2, 4, device="cuda", requires_grad=True)
    checkpoint(layer, x, use_reentrant=False).sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape
