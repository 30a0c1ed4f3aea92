"""install / uninstall: targets, exact restoration, idempotence, thread safety, feature hooks."""

from __future__ import annotations

import threading

import pytest
import torch
import torch.nn.functional as F
import torch.utils._device
from torchdevice_generated import cuda_table, device_wrappers

import torchdevice
from torchdevice.runtime import activation as runtime


def patched_places():
    """Every (owner, attribute) the runtime may replace: generated tables and hand-written entry points."""
    places = [(runtime.resolve_attribute(w.module, w.path), w.attr) for w in device_wrappers.WRAPPERS]
    places += [(runtime.resolve_attribute(e.module, e.path), e.attr) for e in cuda_table.EMULATION]
    places += [(torch.Tensor, n) for n in ("to", "cuda", "cpu", "is_cuda", "is_cpu", "pin_memory", "is_pinned",
                                           "type", "get_device")]
    places += [(torch.UntypedStorage, n) for n in ("cuda", "pin_memory", "is_pinned", "__deepcopy__")]
    places += [(torch.nn.Parameter, "__deepcopy__")]
    places += [(torch, n) for n in ("device", "Generator", "Stream", "Event", "get_default_device")]
    places += [(torch.nn.Module, "to"), (torch.utils._device, "_device_constructors")]
    places += [(torch.utils._device.DeviceContext, n) for n in ("__init__", "__torch_function__")]
    places += [(torch.amp.autocast_mode.autocast, "__init__"), (torch.amp.grad_scaler.GradScaler, "__init__"),
               (torch.serialization, "default_restore_location")]
    return places


def snapshot():
    return {(id(owner), name): vars(owner).get(name, "<absent>") for owner, name in patched_places()}


def test_uninstall_restores_every_attribute_to_the_identical_object():
    before = snapshot()
    torchdevice.install("cpu")
    during = snapshot()
    torchdevice.uninstall()
    after = snapshot()
    assert [k for k in before if during[k] is before[k]] == []
    assert [k for k in before if after[k] is not before[k]] == []


def test_functions_without_device_and_with_a_kernel_are_not_touched(on_cpu):
    native = torch._C._VariableFunctions
    assert torch.add is native.add and torch.matmul is native.matmul
    assert F.gelu is torch._C._nn.gelu
    assert torch.Tensor.add is torch._C.TensorBase.add


def test_target_and_passthrough():
    assert torchdevice.target() == torch.device("cuda")  # not installed: cuda means cuda
    with torchdevice.installed("cpu") as device:
        assert device == torchdevice.target() == torch.device("cpu")
    assert torchdevice.target() == torch.device("cuda")
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        torchdevice.install("cuda")
    with pytest.raises(ValueError, match="unknown target 'tpu'"):
        torchdevice.install("tpu")


def test_targets_are_resolved_against_the_machine_while_the_program_is_told_cuda(monkeypatch):
    """Installed, the program is told CUDA is there; choosing a target still asks the machine (no CUDA here)."""
    monkeypatch.delenv("TORCHDEVICE_TARGET", raising=False)
    best = runtime.resolve()
    with torchdevice.installed("cpu"):
        assert torch.cuda.is_available() and runtime.cuda_devices() == 0
        assert runtime.resolve() == best
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            runtime.resolve("cuda")


def test_install_is_idempotent_and_installed_restores_the_previous_state(on_cpu):
    zeros = torch.zeros
    assert torchdevice.install("cpu") == on_cpu
    assert torch.zeros is zeros  # nothing re-applied
    with torchdevice.installed("cpu", prefer_mlx=True):
        assert runtime.options() == {"target": "cpu", "prefer_mlx": True, "devices": 1}
    assert runtime.options() == {"target": "cpu", "prefer_mlx": False, "devices": 1}
    assert torch.zeros(1, device="cuda").device.type == "cpu"


def test_concurrent_install_and_uninstall_leave_a_consistent_state():
    before = snapshot()
    barrier = threading.Barrier(8)

    def churn(i: int) -> None:
        barrier.wait()
        for _ in range(20):
            torchdevice.install("cpu") if i % 2 else torchdevice.uninstall()

    threads = [threading.Thread(target=churn, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torchdevice.uninstall()
    assert [k for k, v in snapshot().items() if v is not before[k]] == []


def test_features_activate_through_the_same_patcher(monkeypatch):
    """Each feature (the fallback engine, distributed, the stand-ins) activates with the installation's patcher,
    target and options, so uninstall() undoes its patches; a feature that fails fails the install, which then leaves
    nothing behind."""
    import torchdevice.standins

    calls = []

    def activate(patcher, target, options):  # type: ignore[no-untyped-def]
        calls.append((type(patcher).__name__, target.name, target.device, options))
        patcher.set(torch, "td_probe", True)

    monkeypatch.setattr(torchdevice.standins, "activate", activate)
    with torchdevice.installed("cpu", prefer_mlx=True):
        assert calls == [("Patcher", "cpu", torch.device("cpu"), {"target": "cpu", "prefer_mlx": True, "devices": 1})]
        assert torch.td_probe is True
    assert not hasattr(torch, "td_probe")

    def broken(patcher, target, options):  # type: ignore[no-untyped-def]
        raise ModuleNotFoundError("No module named 'td_no_such_dependency'")

    monkeypatch.setattr(torchdevice.standins, "activate", broken)
    with pytest.raises(ModuleNotFoundError, match="td_no_such_dependency"):  # an error, not silence
        torchdevice.install("cpu")
    assert torchdevice.target() == torch.device("cuda")  # a failed install leaves nothing behind


def test_prefer_mlx_from_the_environment(monkeypatch):
    monkeypatch.setenv("TORCHDEVICE_PREFER_MLX", "1")
    with torchdevice.installed("cpu"):
        assert runtime.options() == {"target": "cpu", "prefer_mlx": True, "devices": 1}


@pytest.mark.processes
def test_target_from_the_environment(python):
    code = "import torchdevice; print(torchdevice.install(), torchdevice.target())"
    assert python("-c", code, env={"TORCHDEVICE_TARGET": "cpu"}).stdout.split() == ["cpu", "cpu"]
    failed = python("-c", code, env={"TORCHDEVICE_TARGET": "mps"})
    assert failed.returncode == 1
    assert "target 'mps' requested (TORCHDEVICE_TARGET=mps) but MPS is not available" in failed.stderr


@pytest.mark.processes
@pytest.mark.skipif(torch.cuda.is_available() or torch.backends.mps.is_available(), reason="a machine with a GPU")
def test_without_cuda_or_mps_cuda_is_a_simulated_gpu_by_default(command, tmp_path):
    program = tmp_path / "train.py"  # the bug of a batch left on the host, which a GPU refuses and the CPU runs
    program.write_text("import torch\n"
                       "model = torch.nn.Linear(3, 2).cuda()\n"
                       "print(next(model.parameters()).device, torch.cuda.get_device_name())\n"
                       "print(model(torch.ones(4, 3)).sum().item())\n")
    unset = {"TORCHDEVICE_TARGET": ""}
    default = command("torchdevice", "run", str(program), env=unset)
    assert default.returncode == 1 and default.stdout.split() == ["cuda:0", "Tesla", "T4"], default.stderr
    assert "but got mat1 is on cpu, different from other tensors on cuda:0" in default.stderr
    assert "--target cpu runs the program as the CPU allows" in default.stderr
    cpu = command("torchdevice", "run", "--target", "cpu", str(program), env=unset)
    assert cpu.returncode == 0 and cpu.stdout.split()[0] == "cpu" and "--target cpu" not in cpu.stderr, cpu.stderr
    no_compiler = {**unset, "TORCHDEVICE_BUILD_DIR": str(tmp_path / "build"), "CXX": str(tmp_path / "no-compiler")}
    for level in ("", "info"):  # without a compiler: the cpu target, said at INFO (the default, not a request)
        plain = command("torchdevice", "run", str(program), env={**no_compiler, "TORCHDEVICE_LOG": level})
        assert plain.returncode == 0 and plain.stdout.split()[0] == "cpu", plain.stderr
        said = ("\"cuda\" means the cpu target here: cuda-sim needs the simulated devices' compiled backend, which "
                "cannot be had (its build in ")
        assert (said in plain.stderr) == (level == "info"), plain.stderr


@pytest.mark.processes
def test_importing_torchdevice_imports_neither_torch_nor_yaml(python):
    code = "import sys, torchdevice; print(sorted(m for m in ('torch', 'yaml', 'libcst') if m in sys.modules))"
    assert python("-c", code).stdout.strip() == "[]"


@pytest.mark.processes
def test_installing_on_a_complete_target_imports_no_mlx(python):
    # The CPU runs every op: nothing falls back, so neither MLX nor the 500 MLX shims are loaded.
    code = ("import sys, torchdevice; torchdevice.install('cpu'); "
            "print(sorted(m for m in ('mlx.core', 'torchdevice_generated.mlx_shims') if m in sys.modules))")
    assert python("-c", code).stdout.strip() == "[]"
    prefer = python("-c", code.replace("install('cpu')", "install('cpu', prefer_mlx=True)"))
    assert prefer.stdout.strip() == "['mlx.core', 'torchdevice_generated.mlx_shims']", prefer.stderr
