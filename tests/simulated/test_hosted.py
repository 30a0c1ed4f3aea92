"""float64 and complex128 on "cuda" where the device has none (MPS): hosted tensors, the Mac's own code path.

The simulated Mac refuses float64 where MPS does (allocation, conversion), so what makes these programs
work here is what makes them work on a Mac: the runtime's hosted tensors. Each scenario runs under the
CPU target too, whose results (the CPU's float64 kernels, as a GPU's float64 results) are the reference.
"""

from __future__ import annotations

import copy
import io

import numpy as np
import pytest
import torch
from fallback_support import Fallbacks
from mac_runs import on_both

from torchdevice.device.hosted import HostedTensor
from torchdevice.simulated.kernels import SimulatedKernels
from torchdevice.simulated.profile import CHOSEN, NO_FLOAT64, mac


def test_float64_asked_of_float32_device_tensors_is_computed_as_cuda_computes_it(mac):
    """MPS refuses these (its float64 limit); CUDA computes them: the runtime gives CUDA's float64 results, hosted."""
    torch.manual_seed(0)
    x, a = torch.randn(4, 5), torch.randn(5, 3)
    calls = {
        "softmax(dtype=float64)": lambda x, a: torch.softmax(x, 1, dtype=torch.float64),
        "log_softmax(dtype=float64)": lambda x, a: torch.log_softmax(x, 1, dtype=torch.float64),
        "sum(dtype=float64)": lambda x, a: x.sum(dtype=torch.float64),
        "cumsum(dtype=float64)": lambda x, a: x.cumsum(0, dtype=torch.float64),
        "mean(dim, dtype=float64)": lambda x, a: x.mean(1, dtype=torch.float64),
        "float_power": lambda x, a: torch.float_power(x, 2),
        "linalg.pinv": lambda x, a: torch.linalg.pinv(a),
        "linalg.matrix_rank": lambda x, a: torch.linalg.matrix_rank(a),
    }
    for how, call in calls.items():
        on_device = x.cuda()
        got, expected = call(on_device, a.cuda()), call(x, a)
        assert got.device == on_device.device and got.is_cuda, how
        assert got.dtype == expected.dtype, how
        torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-6, msg=how)


def test_float64_asked_of_float32_device_tensors_is_refused_on_the_simulated_mac_as_on_a_mac():
    """Without the runtime's handling the simulated device raises what MPS raises."""
    with SimulatedKernels(mac(CHOSEN), keep_raised=False, in_cpp=True) as target, \
            pytest.raises(TypeError, match=NO_FLOAT64.split(" as ")[0]):
        torch.ones(2, device=target.device).sum(dtype=torch.float64)


def test_float64_on_cuda_is_hosted_and_says_it_is_on_the_device(mac):
    data = np.arange(6.0).reshape(2, 3)
    made = {
        "moved": torch.from_numpy(data).to("cuda"),
        "cuda()": torch.from_numpy(data).cuda(),
        "factory": torch.zeros(2, 3, dtype=torch.float64, device="cuda"),
        "tensor": torch.tensor(data, device="cuda"),
        "double": torch.ones(2, 3, device="cuda").double(),
        "to dtype": torch.ones(2, 3, device="cuda").to(torch.float64),
        "new_zeros": torch.ones(2, device="cuda").new_zeros(2, 3, dtype=torch.float64),
        "complex": torch.ones(2, 3, device="cuda").to(torch.complex128),
        "to(device, dtype, copy=)": torch.ones(2, 3, device="cuda").to(torch.device("cuda"), torch.float64, copy=True),
    }
    made["x.device, x.dtype"] = torch.zeros(2, 3, dtype=made["factory"].dtype, device=made["factory"].device)
    made["explicit mps"] = torch.full((2, 3), 2.0, dtype=torch.float64, device="mps")
    with torch.device("cuda"):
        made["device context"] = torch.zeros(2, 3, dtype=torch.float64)
    made["legacy class"] = torch.cuda.DoubleTensor(2, 3)
    torch.set_default_dtype(torch.float64)
    try:
        made["default dtype"] = torch.nn.Linear(3, 2).cuda().weight
    finally:
        torch.set_default_dtype(torch.float32)
    for how, x in made.items():
        assert type(x) is HostedTensor, how
        assert (x.device, x.is_mps, x.is_cuda, x.is_cpu, x.get_device()) == (torch.device("mps", 0), True, True,
                                                                               False, 0), how
    assert made["moved"].to("cuda") is made["moved"] and made["moved"].cuda() is made["moved"]


def test_float64_made_below_the_python_methods_is_hosted_as_x_double_is():
    """``x.cdouble()`` is hosted; so is the same conversion made below ``torch.Tensor``'s methods (``torch._C``'s,
    aten's ``_to_copy``) and the float64 statistics batch_norm makes for an empty input (MPS refuses each: the
    runtime routes them, as on a Mac), with the CPU target's dtypes and values."""

    def work():
        torch.manual_seed(0)
        x = torch.randn(3, 4, device="cuda")
        made = {"x.cdouble()": x.cdouble(), "TensorBase.cdouble": torch._C.TensorBase.cdouble(x),
                "TensorBase.double": torch._C.TensorBase.double(x),
                "aten._to_copy(complex128)": torch.ops.aten._to_copy(x, dtype=torch.complex128),
                "aten._to_copy.default(float64)": torch.ops.aten._to_copy.default(x, dtype=torch.float64)}
        empty, stats = torch.randn(0, 3, device="cuda"), (torch.zeros(3, device="cuda"), torch.ones(3, device="cuda"))
        made["batch_norm(empty, training)"] = torch.nn.functional.batch_norm(empty, *stats, training=True)
        made["batch_norm(empty)"] = torch.nn.functional.batch_norm(empty, *stats)
        made["instance_norm(empty)"] = torch.nn.functional.instance_norm(torch.randn(0, 3, 4, device="cuda"))
        made["to host as float64"] = x.to("cpu", torch.float64)
        return made, {how: (type(t) is HostedTensor, t.device.type, t.dtype) for how, t in made.items()}

    (native, _), (mac, kinds) = on_both(work)
    for how, (hosted, device, dtype) in kinds.items():
        assert dtype == native[how].dtype, how
        assert (hosted, device) == ((dtype in (torch.float64, torch.complex128), "mps") if how != "to host as float64"
                                    else (False, "cpu")), how
        torch.testing.assert_close(mac[how], native[how], rtol=0, atol=0, msg=how)


def test_numpy_data_is_copied_not_shared(mac):
    data = np.zeros(3)
    for x in (torch.as_tensor(data, device="cuda"), torch.from_numpy(data).to("cuda")):
        x.add_(1)
        assert data.tolist() == [0.0, 0.0, 0.0]
        assert x.tolist() == [1.0, 1.0, 1.0]


def test_results_leave_float64_for_the_device_and_mixing_promotes():
    def work():
        x64 = torch.linspace(-1, 1, 6, dtype=torch.float64, device="cuda").reshape(2, 3)
        x32 = torch.ones(2, 3, device="cuda") * 0.5
        mixed = x32 * x64 + 1
        back = x64.float()
        flags = x64 > 0
        return {"mixed": (mixed.dtype, mixed.device.type, mixed.cpu()), "back": (back.dtype, back.device.type),
                "flags": (flags.dtype, flags.device.type, flags.cpu()), "sum": (x64.sum() + x32.sum()).item(),
                "argmax": x64.argmax().item(), "scalar": (x64 * torch.tensor(3.0)).cpu()}

    native, mac = on_both(work)
    assert mac["mixed"][:2] == (torch.float64, "mps") and native["mixed"][:2] == (torch.float64, "cpu")
    assert mac["back"] == (torch.float32, "mps")
    assert mac["flags"][:2] == (torch.bool, "mps")
    for key in ("mixed", "flags"):
        torch.testing.assert_close(mac[key][2], native[key][2], rtol=0, atol=0)
    torch.testing.assert_close(mac["scalar"], native["scalar"], rtol=0, atol=0)
    assert (mac["sum"], mac["argmax"]) == (native["sum"], native["argmax"])


def test_mixing_with_a_host_tensor_raises_as_any_device_tensor(mac):
    x64 = torch.ones(3, dtype=torch.float64, device="cuda")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*mps:0 and cpu"):
        x64 + torch.ones(3, dtype=torch.float64)
    assert (x64[torch.tensor([0, 2])] + 1).tolist() == [2.0, 2.0]  # host indices, as on a GPU
    with pytest.raises(TypeError, match="can't convert mps:0 device type tensor to numpy"):
        x64.numpy()
    host = x64.cpu()
    assert type(host) is torch.Tensor and host.device.type == "cpu" and host.numpy().dtype == np.float64


def test_in_place_writes_views_and_out_reach_the_callers_tensors(mac):
    x64 = torch.zeros(2, 3, dtype=torch.float64, device="cuda")
    row = x64[1]
    row.fill_(2.0)
    x64[0, 0] = 5.0
    assert x64.tolist() == [[5.0, 0.0, 0.0], [2.0, 2.0, 2.0]]
    x32 = torch.ones(2, 3, device="cuda")
    same = x32.add_(x64)  # float32 device tensor written with a float64 operand: stays float32 on the device
    assert same is x32 and x32.dtype == torch.float32 and x32.is_mps
    assert x32.tolist() == [[6.0, 1.0, 1.0], [3.0, 3.0, 3.0]]
    out = torch.empty(2, 3, dtype=torch.float64, device="cuda")
    got = torch.mul(x64, 2, out=out)
    assert got is out and out.tolist() == [[10.0, 0.0, 0.0], [4.0, 4.0, 4.0]]
    assert x64.add_(1) is x64 and x64[0, 0].item() == 6.0


def test_gradients_flow_through_float64_to_float32_parameters_and_float64_leaves():
    def work():
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1).cuda()
        w = torch.zeros(3, 1, dtype=torch.float64, device="cuda", requires_grad=True)
        x = torch.from_numpy(np.linspace(0, 1, 12).reshape(4, 3)).to("cuda")
        target = torch.ones(4, 1, dtype=torch.float64, device="cuda")
        loss = ((model(x.float()).double() + x @ w - target) ** 2).mean()
        loss.backward()
        return {"loss": loss.item(), "weight": model.weight.grad.cpu(), "w": w.grad.cpu(),
                "types": (model.weight.grad.dtype, w.grad.dtype, w.grad.device.type)}

    native, mac = on_both(work)
    assert mac["types"] == (torch.float32, torch.float64, "mps")
    # the float32 model's output feeds both: equal up to float32 rounding, should a kernel sum in another order
    assert mac["loss"] == pytest.approx(native["loss"], rel=1e-6)
    torch.testing.assert_close(mac["weight"], native["weight"], rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(mac["w"], native["w"], rtol=1e-6, atol=1e-9)


def test_a_float64_model_trains_on_the_device_as_on_the_cpu():
    def work():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).double().cuda()
        optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
        x = torch.from_numpy(np.linspace(-1, 1, 30).reshape(10, 3)).to("cuda")
        y = x.sum(1, keepdim=True).sin()
        losses = []
        for _ in range(5):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        kept = copy.deepcopy(model)
        buffer = io.BytesIO()
        torch.save(model.state_dict(), buffer)
        buffer.seek(0)
        loaded = torch.load(buffer)
        return {"losses": losses, "params": [p.detach().cpu() for p in model.parameters()],
                "kinds": {type(p).__name__ for p in model.parameters()}, "is_param": all(
                    isinstance(p, torch.nn.Parameter) for p in kept.parameters()),
                "copied": [p.detach().cpu() for p in kept.parameters()],
                "loaded": [v.cpu() for v in loaded.values()]}

    native, mac = on_both(work)
    assert mac["kinds"] == {"HostedTensor"} and mac["is_param"]
    torch.testing.assert_close(mac["losses"], native["losses"], rtol=1e-10, atol=0)  # float64 throughout
    torch.testing.assert_close(mac["params"], native["params"], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(mac["copied"], mac["params"], rtol=0, atol=0)
    torch.testing.assert_close(mac["loaded"], mac["params"], rtol=0, atol=0)


def test_printing_item_tolist_and_formatting_match_the_cpus():
    def work():
        x = torch.tensor([1.0 / 3, 2.5], dtype=torch.float64, device="cuda")
        z = torch.ones(2, device="cuda").to(torch.complex128) * (1 + 2j)
        return {"repr": repr(x), "item": x[0].item(), "list": x.tolist(), "format": f"{x[1]:.3f}",
                "complex": z.tolist(), "grad_repr": repr(x.clone().requires_grad_() * 2)}

    native, mac = on_both(work)
    assert mac["repr"] == "tensor([0.3333, 2.5000], device='mps:0', dtype=torch.float64)"
    assert native["repr"] == "tensor([0.3333, 2.5000], dtype=torch.float64)"
    assert mac["grad_repr"].endswith("device='mps:0', dtype=torch.float64, grad_fn=<MulBackward0>)")
    assert {k: mac[k] for k in ("item", "list", "format", "complex")} == {
        k: native[k] for k in ("item", "list", "format", "complex")}


def test_hosted_memory_counts_and_ops_are_reported_as_fallbacks(mac):
    fallbacks = Fallbacks()
    before = torch.cuda.memory_allocated()
    x = torch.ones(1000, dtype=torch.float64, device="cuda")
    assert torch.cuda.memory_allocated() - before == 8000
    torch.linalg.norm(x)
    assert fallbacks["aten::linalg_vector_norm", "cpu"] == 1
    del x
    assert torch.cuda.memory_allocated() == before


def test_device_memory_counts_live_device_storages_as_mps_does(mac):
    """``torch.mps.current_allocated_memory()`` on a Mac, and what ``torch.cuda.memory_allocated()`` and the peak (which
    MPS does not keep) answer from it: a view adds nothing, the memory is released with its last tensor."""
    before = torch.cuda.memory_allocated()
    x = torch.ones(1000, device="cuda")
    view = x[10:]
    model = torch.nn.Linear(10, 10).cuda()
    held = before + 4000 + 440
    assert (torch.cuda.memory_allocated(), torch.mps.current_allocated_memory()) == (held, held)
    assert torch.cuda.max_memory_allocated() == held
    del x
    assert torch.cuda.memory_allocated() == held
    del view, model
    assert torch.cuda.memory_allocated() == before


def test_a_bad_call_raises_torchs_error_not_a_retry_on_the_host(mac):
    with pytest.raises(TypeError, match="new_zeros"):
        torch.ones(2, device="cuda").new_zeros(2, dtype=torch.float64, bogus=1)


def test_gradcheck_runs_on_the_device():
    """torch's gradient checks (float64 throughout, tensors made with ``device=x.device``) pass as on the CPU."""
    def work():
        x = torch.randn(3, 3, dtype=torch.float64, device="cuda", requires_grad=True)
        f = lambda a: (a.sin() * a).sum()  # noqa: E731
        return torch.autograd.gradcheck(f, (x,)), torch.autograd.gradgradcheck(f, (x,))

    assert on_both(work) == ((True, True), (True, True))


def test_checkpoints_load_onto_the_device_in_every_dtype(tmp_path):
    """``torch.load(map_location="cuda")`` (and a callable moving storages with ``.cuda()``) gives device
    tensors, float64 hosted, which mix with the program's device tensors as on a GPU."""
    path = tmp_path / "checkpoint.pt"
    torch.save({"mean": torch.arange(3.0), "scale": torch.arange(3, dtype=torch.float64) / 7,
                "steps": torch.tensor(5)}, path)

    def work():
        got = {}
        for how, where in (("string", "cuda"), ("callable", lambda storage, location: storage.cuda())):
            loaded = torch.load(path, map_location=where)
            x = torch.ones(3, device="cuda")
            got[how] = {"kinds": {k: (v.device.type, v.dtype) for k, v in loaded.items()},
                        "mixed": ((x - loaded["mean"]) * loaded["scale"] + loaded["steps"]).cpu()}
        return got

    native, mac = on_both(work)
    for how in ("string", "callable"):
        assert mac[how]["kinds"] == {"mean": ("mps", torch.float32), "scale": ("mps", torch.float64),
                                     "steps": ("mps", torch.int64)}
        torch.testing.assert_close(mac[how]["mixed"], native[how]["mixed"], rtol=0, atol=0)


def test_functions_made_of_ops_compute_as_on_the_cpu():
    """Functions whose ops convert intermediate results to float64 (``torch.quantile`` sorts, then converts
    the indices) and the usual float64 statistics give the CPU's values; the first, refused on the device
    midway, runs whole on the host."""
    def work():
        x = torch.from_numpy(np.random.default_rng(0).normal(size=(6, 3))).to("cuda")
        y = torch.from_numpy(np.random.default_rng(1).normal(size=(4, 3))).to("cuda")
        normal = torch.distributions.Normal(x.mean(0), x.std(0))
        values = {"quantile": torch.quantile(x, 0.5, dim=0), "cdist": torch.cdist(x, y),
                  "eigh": torch.linalg.eigh(x.T @ x).eigenvalues, "log_prob": normal.log_prob(y),
                  "unique": torch.unique(torch.round(x), return_counts=True)[1], "sorted": x[:, 0].sort().indices}
        return {k: (v.dtype, v.device.type, v.cpu()) for k, v in values.items()}

    native, mac = on_both(work)
    for key, (dtype, where, value) in mac.items():
        assert (dtype, where) == (native[key][0], "mps"), key
        torch.testing.assert_close(value, native[key][2], rtol=1e-10, atol=1e-12)


def test_complex128_keeps_conjugate_and_negative_views():
    """Conjugate and negative views of hosted complex128 tensors (``mH`` in ``pinv``, ``hfft``) are read as
    such, also in ops that make them midway."""
    def work():
        z = torch.tensor([[1 + 2j, 3 - 1j], [0.5j, 2]], dtype=torch.complex128, device="cuda")
        written = z.clone()
        written.conj().mul_(2)  # through a conjugate view into the tensor
        return {"conj": (z.conj() + 0).imag, "neg": z.conj().imag * 1, "pinv": torch.linalg.pinv(z),
                "hfft": torch.fft.hfft(z[0]),
                "var": torch.masked.var(z[0], 0, mask=torch.tensor([True, True], device="cuda")),
                "written": written}

    native, mac = on_both(work)
    torch.testing.assert_close(mac, native, rtol=1e-10, atol=1e-12)


def test_float64_tensors_changed_in_place_take_their_new_shape(mac):
    """In-place ops that change a tensor's geometry (``unsqueeze_``, ``t_``, ``resize_``, an ``out=`` tensor the
    kernel sizes) give hosted tensors the shape and values the CPU gives."""
    torch.manual_seed(0)
    a, b, v = torch.randn(5, 5, dtype=torch.float64), torch.randn(5, dtype=torch.float64), torch.randn(7).double()

    def changed(device: str) -> list[torch.Tensor]:
        x = a.to(device)
        x.unsqueeze_(0)
        y = a.to(device).t_()
        z = v.to(device)
        z.resize_(3)
        sorted_, solved = (torch.empty(0, dtype=torch.float64, device=device) for _ in range(2))
        torch.msort(v.to(device), out=sorted_)
        torch.linalg.solve(a.to(device), b.to(device), out=solved)
        return [x, y, z, sorted_, solved]

    for got, expected in zip(changed("cuda"), changed("cpu"), strict=True):
        assert got.shape == expected.shape and got.stride() == expected.stride()
        torch.testing.assert_close(got.cpu(), expected)
