"""The simulated devices' backend (``backend.cpp``) gives torch's C++ what it asks of a device; where it cannot be
built, a simulated target is the cpu one, said once with why; it refuses a torch lacking an internal it calls."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import weakref
from pathlib import Path

import pytest
import torch

import torchdevice
from torchdevice.simulated import backend

INCLUDE = Path(torch.__file__).parent / "include" / "ATen" / "detail"


def _virtuals(header: Path) -> set[str]:
    return set(re.findall(r"virtual\s+[\w:<>&*\s]+?\b(\w+)\s*\(", header.read_text()))


def test_the_compiled_backend_answers_every_hook_torch_asks_of_a_backend():
    """Every hook of torch's accelerator interface (and the PrivateUse1 one's own) is implemented, so none of them
    raises ``You should register PrivateUse1HooksInterface ... and implement ...`` (a new hook of a new torch fails
    here); the backend is the one this machine loads."""
    asked = (_virtuals(INCLUDE / "AcceleratorHooksInterface.h") | _virtuals(INCLUDE / "PrivateUse1HooksInterface.h"))
    asked -= {"AcceleratorHooksInterface", "init"}  # the destructor; init does nothing by default
    implemented = set(re.findall(r"(\w+)\([^)]*\) const override", backend.SOURCE.read_text()))
    assert asked - implemented == set()
    assert backend.loadable(), backend.why_not()


def test_what_torch_asks_of_the_device_runs(mac):
    """Module.to assigns param.data (the parameter object, its weak references and its optimizer kept), tensors'
    data is assigned across host and device, storages resize, host memory is pinned for the device, the device's
    generators are made, and its memory counts every live storage, as on a Mac."""
    model = torch.nn.Linear(3, 2)
    weight = model.weight
    ref = weakref.ref(weight)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model.to("cuda")
    assert model.weight is weight and ref() is weight and weight.device.type == "mps"
    before = weight.detach().cpu()
    model(torch.ones(4, 3, device="cuda")).sum().backward()
    optimizer.step()
    assert weight.grad.device.type == "mps"
    torch.testing.assert_close(weight.detach().cpu(), before - 0.5 * 4)
    model.cpu()
    assert model.weight is weight and weight.device.type == "cpu"

    host = torch.zeros(3)
    host.data = torch.arange(3.0, device="cuda")
    assert host.device.type == "mps" and host.cpu().tolist() == [0.0, 1.0, 2.0]

    storage = torch.arange(4.0, device="cuda").untyped_storage()
    storage.resize_(32)
    assert storage.nbytes() == 32 and torch.empty(0, device="cuda").set_(storage)[:4].cpu().tolist() == [0, 1, 2, 3]

    pinned = torch._C.TensorBase.pin_memory(torch.ones(4))
    assert torch._C.TensorBase.is_pinned(pinned) and not torch._C.TensorBase.is_pinned(torch.ones(4))
    assert torch.Generator(device="cuda").initial_seed() >= 0

    start = torch.cuda.memory_allocated()
    result = torch.ones(256, device="cuda") * 2  # a kernel's result counts, as any device storage
    assert torch.cuda.memory_allocated() - start >= 1024  # the ones are freed, the product lives
    del result
    assert torch.cuda.memory_allocated() - start < 1024


@pytest.mark.processes
def test_where_the_backend_cannot_be_built_a_simulated_target_is_the_cpu_one_said_once_with_why(tmp_path):
    """A machine whose compiler is missing (``CXX`` names none; a build directory of its own): ``--target mps-sim``
    runs the program on the cpu target with the CPU's numbers, a warning saying why once (the shell's complaint, not
    the build's command line); the failed build is remembered, and the next process says the same without building."""
    program = tmp_path / "train.py"
    program.write_text(
        "import json, sys, torch\n"
        "device = sys.argv[1] if len(sys.argv) > 1 else 'cuda'\n"
        "torch.manual_seed(0)\n"
        "model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).to(device)\n"
        "optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)\n"
        "x = torch.randn(16, 4).to(device)\n"
        "for _ in range(3):\n"
        "    optimizer.zero_grad(); loss = model(x).pow(2).mean(); loss.backward(); optimizer.step()\n"
        "print(json.dumps({'loss': loss.item(), 'on': str(x.device)}))\n")
    native = subprocess.run([sys.executable, str(program), "cpu"], capture_output=True, text=True, timeout=120)
    assert native.returncode == 0, native.stderr
    build = tmp_path / "build"
    env = {**os.environ, backend.BUILD_DIR: str(build), "CXX": str(tmp_path / "no-compiler")}
    said = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "torchdevice", "run", "--target", "mps-sim", str(program)],
                              capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.splitlines()[-1]) == {**json.loads(native.stdout), "on": "cpu"}
        said.append([line for line in done.stderr.splitlines() if "means the cpu target" in line])
    (failed,) = build.glob(f"*/{backend.FAILED}")
    why = failed.read_text().strip()
    assert why.endswith("no-compiler: not found") and "-MMD" not in why
    assert said[0] == said[1] == [f'torchdevice run: UserWarning: "cuda" means the cpu target here: mps-sim needs the '
                                  f"simulated devices' compiled backend, which cannot be had ({why})"]


def test_a_torch_without_an_internal_is_refused_in_one_line_whose_advice_works(monkeypatch):
    """A release is judged by what it has, not by its number: one lacking a private function the simulation calls is
    refused naming the release, the function and the target, and the target the line advises installs there."""
    monkeypatch.delattr(torch._C, "_construct_storage_from_data_pointer")
    monkeypatch.setattr(torch, "__version__", "2.16.0")
    available = torch.cuda.is_available
    with pytest.raises(RuntimeError) as raised:
        torchdevice.install("mps-sim")
    message = str(raised.value)
    assert "\n" not in message
    assert all(part in message for part in ("torch 2.16.0", "torch._C._construct_storage_from_data_pointer",
                                            "mps-sim", "--target cpu"))
    assert torch.cuda.is_available is available  # nothing left installed
    with torchdevice.installed("cpu"):
        assert torch.ones(2, device="cuda").device.type == "cpu"


def test_the_device_has_one_name_for_the_program(mac):
    """What the program reads of the device says ``mps:0`` everywhere (torch's own code gets the backend's name)."""
    x = torch.ones(2, device="cuda")
    assert torchdevice.target() == x.device == x.untyped_storage().device == torch.device("mps", 0)
    assert mac == torch.device("mps", 0)  # what installed() (and install()) returned
    assert torch._C.StorageBase.device.__get__(x.untyped_storage()).type == "simulated"


@pytest.mark.processes
def test_bitsandbytes_int8_parameters_are_quantized_by_module_to(tmp_path):
    """bitsandbytes' ``Int8Params.to`` quantizes and assigns ``self.data`` across host and device: under mps-sim,
    ``Linear8bitLt(...).to("cuda")`` holds int8 weights on the device and computes what the cpu target computes
    (bitsandbytes takes its MPS path there, as on a Mac: the same int8 products, float16 rounding apart)."""
    program = tmp_path / "int8.py"
    program.write_text(
        "import json, torch\n"
        "import bitsandbytes as bnb\n"
        "torch.manual_seed(0)\n"
        "layer = bnb.nn.Linear8bitLt(16, 8, has_fp16_weights=False, threshold=6.0)\n"
        "weight = layer.weight\n"
        "layer = layer.to('cuda')\n"
        "out = layer(torch.randn(4, 16, device='cuda', dtype=torch.float16))\n"
        "print(json.dumps({'kept': layer.weight is weight, 'dtype': str(layer.weight.dtype),"
        " 'on': layer.weight.device.type, 'out': out.float().cpu().tolist()}))\n")
    results = {}
    for target in ("cpu", "mps-sim"):
        done = subprocess.run([sys.executable, "-m", "torchdevice", "run", "--target", target, str(program)],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        results[target] = json.loads(done.stdout.splitlines()[-1])
    mac, cpu = results["mps-sim"], results["cpu"]
    assert (mac["kept"], mac["dtype"], mac["on"]) == (True, "torch.int8", "mps")
    torch.testing.assert_close(torch.tensor(mac["out"]), torch.tensor(cpu["out"]), rtol=1e-2, atol=1e-2)


@pytest.mark.processes
def test_a_failed_build_is_said_with_the_compilers_error_and_not_tried_again(tmp_path):
    """A compiler that fails (here, one that refuses every file): the first process says it is building, then why it
    failed with the compiler's first error, and takes the cpu target; a second process of the same torch, Python and
    source does not build again and says the same."""
    compiler = tmp_path / "c++"
    compiler.write_text("#!/bin/sh\ncase \"$*\" in *--version*|-v) exec c++ \"$@\";; esac\n"
                        "echo 'backend.cpp:1:1: error: this compiler refuses every file' >&2\nexit 1\n")
    compiler.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDEVICE_")}
    env.update(CXX=str(compiler), TORCHDEVICE_BUILD_DIR=str(tmp_path / "build"), TORCHDEVICE_LOG="info")
    code = "import torch, torchdevice; torchdevice.install(); print(torch.ones(1, device='cuda').device)"
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
            for _ in range(2)]
    for done in runs:
        assert done.returncode == 0 and done.stdout.split() == ["cpu"], done.stderr
        assert "this compiler refuses every file" in done.stderr, done.stderr
    assert "building the simulated devices' compiled backend" in runs[0].stderr
    assert "building" not in runs[1].stderr, runs[1].stderr
    assert len(list((tmp_path / "build").glob(f"*/{backend.FAILED}"))) == 1
