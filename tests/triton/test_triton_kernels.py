"""Triton kernels under the runtime: a CUDA-written program with the tutorials' kernels (``programs/``) run by
``torchdevice run`` on the CPU and on the simulated Mac, its results compared with PyTorch's, its launches in the
report, also added up over a program's processes; liger-kernel's RMSNorm, SwiGLU and GeGLU (libdevice's functions,
float scalars); a kernel the interpreter cannot run named with its file; in this process, kernels decorated before
the installation, and nothing of triton imported or left behind by the runtime."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import torchdevice

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

PROGRAM = Path(__file__).resolve().parent / "programs" / "tutorial_kernels.py"
KERNELS = ("add_kernel", "softmax_kernel", "matmul_kernel", "silu_forward_kernel", "silu_backward_kernel")


def run(*args: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHDEVICE_", "TRITON_"))}
    environment.update(OMP_NUM_THREADS="1", TORCHDEVICE_LOG="info")
    return subprocess.run([sys.executable, *args], env=environment, capture_output=True, text=True, timeout=300)


@pytest.mark.processes
@pytest.mark.parametrize("target", ["cpu", "mps-sim", "cuda-sim"])
def test_the_tutorials_kernels_give_pytorchs_results_and_are_reported(tmp_path, target):
    out, report = tmp_path / "out.pt", tmp_path / "report.json"
    done = run("-m", "torchdevice", "run", "--target", target, "--report", str(report), str(PROGRAM), str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    r = torch.load(out)
    assert r["device"] == {"cpu": "cpu", "mps-sim": "mps:0", "cuda-sim": "cuda:0"}[target] and r["is_cuda"]
    assert r["do_bench_ms"] > 0
    torch.testing.assert_close(r["add"], r["x"] + r["y"])
    torch.testing.assert_close(r["softmax"], torch.softmax(r["s"], dim=1))
    torch.testing.assert_close(r["matmul"], r["a"] @ r["b"])
    torch.testing.assert_close(r["leaky"], F.leaky_relu(r["a"] @ r["b"], 0.01))
    g = r["g"].clone().requires_grad_()
    expected = F.silu(g) * 1.5
    expected.backward(r["upstream"])
    torch.testing.assert_close(r["silu"], expected.detach())
    torch.testing.assert_close(r["silu_grad"], g.grad)
    document = json.loads(report.read_text())
    launched = document["triton"]
    assert set(launched) == {f"__main__.{k}" for k in KERNELS}
    assert launched == document["processes"][0]["triton"]
    assert all(k["launches"] >= 1 and k["seconds"] > 0 for k in launched.values())
    assert launched["__main__.matmul_kernel"]["launches"] == 2 + 2  # each config benchmarked once, then 2 calls
    assert "triton kernel __main__.add_kernel: runs in Triton's interpreter" in done.stderr
    assert "triton kernels: 5, " in done.stderr


@pytest.mark.processes
def test_the_report_adds_up_the_launches_of_every_process(tmp_path):
    report = tmp_path / "report.json"
    done = run("-m", "torchdevice", "run", "--target", "cpu", "--report", str(report),
               str(PROGRAM.parent / "two_processes.py"))
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(report.read_text())
    assert [p["role"] for p in document["processes"]] == ["main", "subprocess"]
    assert [p["triton"]["__main__.double_kernel"]["launches"] for p in document["processes"]] == [2, 2]
    assert document["triton"]["__main__.double_kernel"]["launches"] == 4
    assert document["triton"]["__main__.double_kernel"]["seconds"] == pytest.approx(
        sum(p["triton"]["__main__.double_kernel"]["seconds"] for p in document["processes"]))


@pytest.mark.processes
def test_a_kernel_the_interpreter_cannot_run_is_named_with_its_file_and_reason(tmp_path):
    done = run("-m", "torchdevice", "run", "--target", "mps-sim", str(PROGRAM), str(tmp_path / "out.pt"), "fail")
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("torchdevice.runtime.triton_interpreter.TritonKernelError: Triton kernel "
                           f"__main__.inline_asm_kernel ({PROGRAM}:"), last
    assert "NotImplementedError: inline_asm not supported in interpreter mode" in last
    assert "The above exception was the direct cause" in done.stderr


@pytest.mark.slow
def test_liger_kernels_rms_norm_swiglu_and_geglu_give_pytorchs_results_on_the_simulated_mac(tmp_path):
    pytest.importorskip("liger_kernel")
    out = tmp_path / "out.pt"
    done = run("-m", "torchdevice", "run", "--target", "mps-sim", str(PROGRAM.parent / "liger_layers.py"), str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    references = {"rms_norm": lambda a, w: a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
                  "swiglu": lambda a, b: F.silu(a) * b, "geglu": lambda a, b: F.gelu(a, approximate="tanh") * b}
    for name, r in torch.load(out).items():
        a, b = r["a"].requires_grad_(), r["b"].requires_grad_()
        expected = references[name](a, b)
        expected.backward(r["upstream"])
        torch.testing.assert_close(r["out"], expected.detach(), msg=name)
        torch.testing.assert_close(r["a_grad"], a.grad, msg=name)
        torch.testing.assert_close(r["b_grad"], b.grad, msg=name)
    assert "triton kernel liger_kernel.ops.rms_norm._rms_norm_backward_kernel: runs in" in done.stderr


@pytest.mark.processes
def test_without_the_runtime_the_program_fails_as_on_a_machine_without_a_gpu(tmp_path):
    done = run(str(PROGRAM), str(tmp_path / "out.pt"))
    assert done.returncode != 0 and "active drivers" in done.stderr


@triton.jit
def times(x, factor):
    return x * factor


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, times(tl.load(x_ptr + offsets, mask=mask), factor), mask=mask)


@pytest.mark.parametrize("target", ["cpu", "mps-sim", "cuda-sim"])
def test_a_kernel_decorated_before_the_installation_runs_interpreted_on_the_device_memory(target):
    assert type(scale_kernel).__name__ == type(times).__name__ == "JITFunction"  # it calls times, a device function
    x = torch.randn(100)
    with torchdevice.installed(target):
        assert os.environ["TRITON_INTERPRET"] == "1"
        device_x = x.to("cuda")
        out = torch.zeros(100, device="cuda")
        scale_kernel[(triton.cdiv(100, 32),)](device_x, out, 100, 2.5, BLOCK=32)
        result = out.cpu()
        assert triton.runtime.driver.active.get_active_torch_device() == out.device
    torch.testing.assert_close(result, x * 2.5)
    assert "TRITON_INTERPRET" not in os.environ and triton.runtime.driver._active is None


@pytest.mark.processes
def test_the_runtime_imports_nothing_of_triton_for_a_program_that_does_not(tmp_path):
    program = tmp_path / "plain.py"
    program.write_text("import sys, torch\ntorch.zeros(1, device='cuda')\n"
                       "print(sorted(m for m in sys.modules if m.split('.')[0] == 'triton'))\n")
    done = run("-m", "torchdevice", "run", "--target", "cpu", str(program))
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr
