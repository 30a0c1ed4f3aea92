"""Notebooks run through real Jupyter kernels: ``torchdevice run NOTEBOOK.ipynb`` (headless, under the runtime), the
kernel ``torchdevice kernel install`` registers (run by nbclient, as JupyterLab would start it) and
``%load_ext torchdevice`` in a plain kernel, each against the same notebook run natively on the CPU; a failing cell
and a bad notebook."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest
import torch
from nbformat.v4 import new_code_cell, new_notebook

from torchdevice.notebooks.execute import execute, load
from torchdevice.runtime.activation import resolve

pytestmark = pytest.mark.processes

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "colab_train.ipynb"


def torchdevice(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchdevice", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env)


def native(path: Path) -> nbformat.NotebookNode:
    """The notebook run by a plain ipykernel on this Python (no runtime), as executed."""
    assert "TORCHDEVICE_INSTALL" not in os.environ
    out = path.with_name(f"{path.stem}.native.ipynb")
    execute(load(path), path, out)
    return nbformat.read(out, as_version=4)


def outputs(notebook: nbformat.NotebookNode) -> list[str]:
    """The text each code cell printed."""
    return ["".join(o.get("text", "") for o in c.outputs) for c in notebook.cells if c.cell_type == "code"]


def losses(notebook: nbformat.NotebookNode) -> torch.Tensor:
    [line] = [line for text in outputs(notebook) for line in text.splitlines() if line.startswith("losses ")]
    return torch.tensor(ast.literal_eval(line.removeprefix("losses ")))


@pytest.fixture(scope="module")
def on_cpu(tmp_path_factory) -> torch.Tensor:
    """The losses of the example with its device spelled "cpu", run natively."""
    text = EXAMPLE.read_text(encoding="utf-8")
    text = text.replace('torch.device(\\"cuda\\")', 'torch.device(\\"cpu\\")').replace(".cuda()", ".to(device)")
    path = tmp_path_factory.mktemp("native") / "cpu.ipynb"
    path.write_text(text.replace("torch.cuda.synchronize()", "torch.cpu.synchronize()"), encoding="utf-8")
    return losses(native(path))


@pytest.mark.release
@pytest.mark.parametrize("target", ["cpu", "mps-sim"])
def test_a_colab_notebook_runs_under_the_runtime_with_the_numbers_of_the_cpu(tmp_path, on_cpu, target):
    path = tmp_path / "colab.ipynb"
    path.write_bytes(EXAMPLE.read_bytes())
    done = torchdevice("run", "--target", target, "--report", tmp_path / "report.json", path)
    assert done.returncode == 0, done.stderr
    executed = nbformat.read(tmp_path / "colab.nbconvert.ipynb", as_version=4)
    torch.testing.assert_close(losses(executed), on_cpu, rtol=1e-5, atol=1e-6)
    smi, _, available, *_ = outputs(executed)
    assert "nvidia-smi" in smi or "NVIDIA-SMI" in smi  # the shell's answer, whatever it is; the cell did not fail
    assert available == "GPU available: True\n"
    assert "image/png" in executed.cells[-1].outputs[0]["data"]  # the matplotlib plot
    report = json.loads((tmp_path / "report.json").read_text())
    [kernel] = [p for p in report["processes"] if p["role"] == "Jupyter kernel"]
    assert kernel["redirects"]["torch.Tensor.cuda"] == {f"cuda->{report['target']}": 4}  # the model's 4 parameters
    assert path.read_bytes() == EXAMPLE.read_bytes()


def test_the_rewritten_notebook_runs_natively_with_the_same_numbers(tmp_path, on_cpu):
    path = tmp_path / "colab.ipynb"
    path.write_bytes(EXAMPLE.read_bytes())
    done = torchdevice("rewrite", "--write", path)
    assert done.returncode == 0, done.stderr
    assert "cuda" not in "".join(c.source for c in nbformat.read(path, as_version=4).cells[3:])
    torch.testing.assert_close(losses(native(path)), on_cpu, rtol=1e-5, atol=1e-6)


def test_the_installed_kernel_runs_notebooks_under_the_runtime(tmp_path, on_cpu, monkeypatch):
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "share" / "jupyter"))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "user"))
    done = torchdevice("kernel", "install", "--prefix", tmp_path, "--target", "cpu", "--name", "td-test")
    assert done.returncode == 0, done.stderr
    listed = torchdevice("kernel", "list")
    assert listed.stdout.startswith("td-test  Python 3 (torchdevice, cpu)  TORCHDEVICE_INSTALL=target=cpu"), listed
    notebook = nbformat.read(EXAMPLE, as_version=4)
    nbclient.NotebookClient(notebook, kernel_name="td-test", resources={"metadata": {"path": str(tmp_path)}}).execute()
    torch.testing.assert_close(losses(notebook), on_cpu, rtol=1e-5, atol=1e-6)
    assert outputs(notebook)[2] == "GPU available: True\n"
    assert torchdevice("kernel", "uninstall", "--name", "td-test").returncode == 0
    assert not (tmp_path / "share" / "jupyter" / "kernels" / "td-test").exists()
    gone = torchdevice("kernel", "uninstall", "--name", "td-test")
    assert gone.returncode == 1 and "no kernelspec 'td-test' of torchdevice's" in gone.stderr


def test_load_ext_installs_the_runtime_in_a_running_kernel(tmp_path):
    path = tmp_path / "ext.ipynb"
    nbformat.write(new_notebook(cells=[
        new_code_cell("import torch\nprint(torch.cuda.is_available())"),
        new_code_cell("%load_ext torchdevice"),
        new_code_cell("x = torch.ones(2, device=\"cuda\")\nprint(torch.cuda.is_available(), x.is_cuda)"),
        new_code_cell("%torchdevice report"),
    ]), path)
    before, loaded, cuda, report = outputs(native(path))
    default = resolve()  # this machine's default target
    assert before == "False\n" and loaded.startswith("torchdevice: \"cuda\" means ") and cuda == "True True\n"
    assert f"target {default}" in report and "redirected: 1 calls (torch.ones 1)" in report


def test_a_failing_cell_stops_the_run_naming_it_with_its_traceback(tmp_path):
    path = tmp_path / "fails.ipynb"
    nbformat.write(new_notebook(cells=[
        new_code_cell("def f():\n    raise ValueError('no such layer')"), new_code_cell("f()"),
        new_code_cell("print('not run')")]), path)
    done = torchdevice("run", "--output", tmp_path / "out.ipynb", path)
    assert done.returncode == 1
    assert f"torchdevice run: {os.path.relpath(path)}: cell 2 failed" in done.stderr
    assert "ValueError: no such layer" in done.stderr and "\x1b[" not in done.stderr
    executed = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert [c.execution_count for c in executed.cells] == [1, 2, None]


def test_a_bad_notebook_is_said_plainly_and_nothing_is_written(tmp_path):
    path = tmp_path / "bad.ipynb"
    path.write_text('{"nbformat": 4, "cells": [', encoding="utf-8")
    done = torchdevice("run", path)
    assert done.returncode == 1 and f"{path}:1: not a notebook: invalid JSON" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and sorted(p.name for p in tmp_path.iterdir()) == ["bad.ipynb"]
