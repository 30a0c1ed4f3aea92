"""The mps-sim target places tensors as a Mac does: device tensors are MPS tensors, host tensors stay host
tensors, mixing them raises, and MPS's whole kernel table and float64 refusal are what the engine meets."""

from __future__ import annotations

import pytest
import torch
from fallback_support import Fallbacks
from torchdevice_generated.fallback_table import MISSING_ON_MPS

import torchdevice
from torchdevice.device import limits
from torchdevice.device.aten import overload
from torchdevice.simulated.kernels import SimulatedKernels
from torchdevice.simulated.profile import CHOSEN, NO_FLOAT64, mac

MISSING_KERNEL = next(limit for limit in limits.generic() if limit.name == "missing_kernel")


def test_device_tensors_are_mps_tensors(mac):
    x = torch.ones(2, 3, device="cuda")
    assert (x.device.type, str(x.device), x.is_mps, x.is_cuda, x.get_device()) == ("mps", "mps:0", True, True, 0)
    assert (x + 1).device.type == "mps" and (x @ x.T).is_mps
    assert repr(x[0]) == "tensor([1., 1., 1.], device='mps:0')"
    assert torch.device("cuda", 0) and torch.zeros(1, device="cuda:0").is_mps  # cuda:0 is the one device


def test_legacy_cuda_tensor_classes_make_device_tensors(mac):
    x = torch.cuda.FloatTensor([1.0, 2.0])
    assert x.is_mps and isinstance(x, torch.cuda.FloatTensor) and not isinstance(torch.ones(2), torch.cuda.FloatTensor)
    assert (x + torch.ones(2, device="cuda")).tolist() == [2.0, 3.0]


def test_host_tensors_stay_host_tensors_and_are_no_fallbacks(mac):
    fallbacks = Fallbacks()
    h = torch.arange(6.0).reshape(2, 3)
    y = torch.cumsum(h, 0) * 2 + torch.heaviside(h, torch.tensor(0.5))  # heaviside: no MPS kernel
    assert type(y) is torch.Tensor and y.device.type == "cpu" and not y.is_mps
    assert fallbacks.total() == 0


def test_mixing_a_device_tensor_with_a_host_tensor_raises_as_on_mps(mac):
    x = torch.ones(3, device="cuda")
    # torch's own C++ check names the device as torch knows it: simulated:0 (see docs/targets/mps-sim.md)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*mps(_sim)?:0 and cpu"):
        x + torch.ones(3)
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3) * x
    with pytest.raises(RuntimeError, match="same device"):
        torch.nn.Linear(3, 2)(x)  # the model left on the host: the Mac's most common error
    assert (x * torch.tensor(2.0)).is_mps  # a host scalar tensor is allowed, as on a GPU
    assert x[torch.tensor([0, 2])].is_mps  # host indices too


@pytest.mark.parametrize("layer", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN])
def test_a_recurrent_layer_left_on_the_host_raises_packed_or_not(mac, layer):
    rnn = layer(3, 4, batch_first=True)
    x = torch.randn(2, 5, 3, device="cuda")
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, torch.tensor([5, 3]), batch_first=True)
    for given in (x, packed):
        with pytest.raises(RuntimeError, match="same device"):
            rnn(given)
    rnn.cuda()
    out, _ = rnn(packed)  # the batch sizes stay a host tensor, as on every device
    assert out.data.is_mps and out.batch_sizes.device.type == "cpu"


def test_moves_copy_between_host_and_device(mac):
    h = torch.zeros(3)
    x = h.to("cuda")
    assert x.is_mps and x is not h
    x.add_(1)
    assert h.tolist() == [0.0, 0.0, 0.0]  # a copy, not an alias
    assert x.to("cuda") is x and x.cuda() is x
    back = x.cpu()
    assert type(back) is torch.Tensor and back.device.type == "cpu" and back.tolist() == [1.0, 1.0, 1.0]
    back.add_(1)
    assert x.tolist() == [1.0, 1.0, 1.0]
    assert x.to("cpu", torch.float16).dtype == torch.float16
    with pytest.raises(TypeError, match="can't convert mps:0 device type tensor to numpy"):
        x.numpy()


def test_modules_and_gradients_live_on_the_device(mac):
    model = torch.nn.Linear(3, 2).cuda()
    assert all(p.is_mps and isinstance(p, torch.nn.Parameter) for p in model.parameters())
    model(torch.randn(4, 3, device="cuda"))[:, 0].sum().backward()  # select's backward makes host zeros in C++
    assert all(p.grad.is_mps for p in model.parameters())


def test_every_overload_of_the_table_raises_mps_error():
    """The simulated device lacks every overload the generated table lists (the installed release's), with MPS's own
    message."""
    sim = SimulatedKernels(mac(CHOSEN), keep_raised=False, in_cpp=True)
    checked = 0
    for name in MISSING_ON_MPS:
        op = overload(name)
        if op is None:
            continue
        refused = sim.refusal(op, (), {})
        assert type(refused) is NotImplementedError and MISSING_KERNEL.raised(refused)
        assert str(refused).startswith(f"The operator '{name}' is not currently implemented for the MPS device.")
        checked += 1
    assert checked > 300


def test_simulated_kernels_refuse_float64_as_mps():
    with SimulatedKernels(mac(CHOSEN), keep_raised=False, in_cpp=True) as target:
        with pytest.raises(TypeError) as caught:
            torch.ones(2, dtype=torch.float64, device=target.device)  # MPS's allocation refuses it
        assert str(caught.value) == NO_FLOAT64
        with pytest.raises(TypeError) as caught:
            torch.ones(2, device=target.device).exp().to(torch.complex128)
        assert str(caught.value) == NO_FLOAT64


def test_uninstall_restores_torch():
    compatible, registry = torch._has_compatible_shallow_copy_type, list(torch.serialization._package_registry)
    with torchdevice.installed("mps-sim"):
        assert torch.zeros(1, device="cuda").is_mps
    assert torch._has_compatible_shallow_copy_type is compatible
    assert torch.serialization._package_registry == registry
    with pytest.raises(RuntimeError):
        torch.zeros(1, device="mps")  # no simulated device left


@pytest.mark.parametrize("options", [{}, {"foreach": True}, {"fused": True}], ids=["default", "foreach", "fused"])
@pytest.mark.parametrize("optimizer", [torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW])
def test_optimizers_step_as_on_the_cpu_on_every_path(optimizer, options):
    """A Mac runs the single-tensor path by default (torch lists no MPS foreach kernels), and the foreach and
    fused kernels when a program asks for them: each gives the CPU's parameters."""
    def train():
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2).cuda()
        extra = {"momentum": 0.9} if optimizer is torch.optim.SGD else {}
        step = optimizer(model.parameters(), lr=0.1, **extra, **options)
        x = torch.randn(8, 4, device="cuda")
        for _ in range(3):
            step.zero_grad()
            model(x).pow(2).mean().backward()
            step.step()
        return [p.detach().cpu() for p in model.parameters()], {p.is_mps for p in model.parameters()}

    with torchdevice.installed("cpu"):
        native, _ = train()
    with torchdevice.installed("mps-sim"):
        mac, placed = train()
    assert placed == {True}
    torch.testing.assert_close(mac, native, rtol=1e-6, atol=1e-7)


def test_cuda_autocast_casts_device_tensors_as_on_a_mac():
    """``torch.autocast("cuda")`` on the simulated Mac: CUDA's policy on the device tensors (float16 linear
    layers, float32 layer norm and loss), host tensors left alone as MPS's autocast leaves them; a GradScaler
    step gives the CPU target's numbers, which follow the same policy."""
    def train():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4)).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.cuda.amp.GradScaler()
        x, y = torch.randn(32, 8, device="cuda"), torch.randint(0, 4, (32,), device="cuda")
        host = torch.randn(2, 8)
        losses = []
        for _ in range(3):
            optimizer.zero_grad()
            with torch.autocast("cuda"):
                out = model(x)
                loss = torch.nn.functional.cross_entropy(out, y)
                on_host = torch.nn.functional.linear(host, torch.ones(3, 8))
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            losses.append(loss.item())
        return {"dtypes": (out.dtype, loss.dtype, on_host.dtype), "losses": losses,
                "weights": [p.detach().cpu() for p in model.parameters()],
                "after": (torch.is_autocast_enabled("cuda"), torch.is_autocast_enabled("cpu"))}

    with pytest.warns(FutureWarning, match="GradScaler"), torchdevice.installed("cpu"):
        native = train()
    with pytest.warns(FutureWarning, match="GradScaler"), torchdevice.installed("mps-sim"):
        mac = train()
    assert mac["dtypes"] == (torch.float16, torch.float32, torch.float32)
    assert native["dtypes"][:2] == mac["dtypes"][:2] and mac["after"] == (False, False)
    torch.testing.assert_close(mac["losses"], native["losses"], rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(mac["weights"], native["weights"], rtol=1e-3, atol=1e-3)


def test_a_generator_made_for_cuda_draws_device_tensors():
    """``torch.Generator("cuda")`` (MPS has one of its own on a Mac): the simulated device draws from a host
    generator, the numbers the CPU target draws with the same seed."""
    def draw():
        generator = torch.Generator("cuda").manual_seed(0)
        return [torch.randn(3, device="cuda", generator=generator) for _ in range(2)]

    with torchdevice.installed("cpu"):
        native = [x.cpu() for x in draw()]
    with torchdevice.installed("mps-sim"):
        mac = draw()
        assert all(x.is_mps for x in mac) and not torch.equal(mac[0].cpu(), mac[1].cpu())
        torch.testing.assert_close([x.cpu() for x in mac], native, rtol=0, atol=0)
