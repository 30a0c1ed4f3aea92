"""Programs that launch other Python programs: ``subprocess`` and ``ProcessPoolExecutor``, pytest-xdist
workers, torchrun workers; several emulated devices seen alike by parent and child; the start-up hook."""

from __future__ import annotations

import re
import shutil

import dist_jobs
import pytest
import torch
from program_runs import PROGRAMS, json_lines, python, torchdevice_run

pytestmark = pytest.mark.processes


def test_subprocess_and_process_pool_children_are_redirected():
    got = json_lines(torchdevice_run("launcher.py", "train_cuda.py"))
    expected = json_lines(python("launcher_cpu.py", "train_cpu.py"))
    assert [r.get("device") for r in got[1:]] == ["cpu", "cpu"] and [r["gpus"] for r in got[1:]] == [1, 1]
    # The same float32 kernels on the same inputs, in processes with the same thread count: equal up to
    # float32 rounding (assert_close's float32 defaults).
    for mine, theirs in zip(got[0]["trained"]["params"], expected[0]["trained"]["params"], strict=True):
        torch.testing.assert_close(torch.tensor(mine), torch.tensor(theirs))
    for mine, theirs in zip(got[1:], expected[1:], strict=True):
        assert mine["seed"] == theirs["seed"]
        torch.testing.assert_close(torch.tensor(mine["value"]), torch.tensor(theirs["value"]))


def test_a_test_suite_run_with_xdist_workers(tmp_path):
    shutil.copy(PROGRAMS / "pooling_suite.py", tmp_path / "test_pooling.py")
    args = ("-m", "pytest", "-n", "2", "-v", "-p", "no:cacheprovider", str(tmp_path))
    done = torchdevice_run(*args, env={"TORCH_DEVICE": "cuda"})
    assert done.returncode == 0, done.output
    assert re.search(r"\b10 passed\b", done.stdout), done.output
    assert {"gw0", "gw1"} <= set(re.findall(r"\[(gw\d)\] .*PASSED", done.stdout)), done.output  # fresh interpreters


def test_torchrun_launched_under_torchdevice_run_redirects_its_workers():
    collectives = str(dist_jobs.PROGRAMS / "collectives.py")
    launcher = ("-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
                f"--master_port={dist_jobs.free_port()}")
    done = torchdevice_run(*launcher, collectives, timeout=90)
    assert done.returncode == 0, done.output
    assert sorted(re.findall(r"rank \d ok", done.stdout)) == ["rank 0 ok", "rank 1 ok"]


def test_devices_option_parent_and_spawned_child_agree():
    (seen,) = json_lines(torchdevice_run("--devices", "3", "devices.py"))
    assert seen["parent"] == seen["child"] == {
        "count": 3, "current": [0, 1, 2], "devices": ["cpu"] * 3,
        "beyond": "AcceleratorError: CUDA error: invalid device ordinal"}


def test_uninstall_stops_propagation_and_install_0_turns_it_off():
    assert python("propagation.py").stdout.split() == ["installed", "True", "uninstalled", "False"]
    off = python("propagation.py", env={"TORCHDEVICE_INSTALL": "0"})
    assert off.stdout.split() == ["installed", "False", "uninstalled", "False"], off.output


def test_a_process_that_never_imports_torch_loads_neither_torch_nor_torchdevice():
    code = ("import sys; print(sorted(m for m in sys.modules if m.startswith(('torch', '_torchdevice'))), "
            "[type(f).__name__ for f in sys.meta_path][0])")
    done = python("-c", code, env={"TORCHDEVICE_INSTALL": "target=cpu"})
    assert done.stdout.split("\n")[0] == "['_torchdevice_startup'] TorchImport", done.output


def test_asking_whether_torch_is_there_does_not_use_up_the_hook():
    code = ("import importlib.util; assert importlib.util.find_spec('torch'); "
            "from torch import zeros; import torch; print(torch.cuda.is_available(), zeros(1, device='cuda').device)")
    done = python("-c", code, env={"TORCHDEVICE_INSTALL": "target=cpu"})
    assert done.stdout.split() == ["True", "cpu"], done.output


def test_a_child_that_installs_through_the_api_before_importing_torch_is_installed_once():
    """``import torchdevice; torchdevice.install()`` first, in a process that inherited an installation: torch is
    imported while the runtime's module loads, and the installation waits for it (no circular import)."""
    code = ("import torchdevice; print(torchdevice.install('cpu'), torchdevice.target()); import torch; "
            "print(torch.ones(1, device='cuda').device)")
    done = python("-c", code, env={"TORCHDEVICE_INSTALL": "target=cpu"})
    assert done.returncode == 0 and done.stdout.split() == ["cpu", "cpu", "cpu"], done.output


def test_a_malformed_install_variable_is_warned_about_and_installs_the_defaults():
    code = "import torch; print(torch.cuda.is_available())"
    done = python("-c", code, env={"TORCHDEVICE_INSTALL": "target=cpu,gpus=2", "TORCHDEVICE_TARGET": "cpu"})
    assert done.returncode == 0 and done.stdout.split() == ["True"], done.output
    assert "TORCHDEVICE_INSTALL='target=cpu,gpus=2'" in done.stderr and "installing with the defaults" in done.stderr


def test_a_target_this_process_cannot_have_stops_it_naming_the_variable():
    done = python("-c", "import torch; print('ran')", env={"TORCHDEVICE_INSTALL": "target=tpu"})
    assert done.returncode == 1 and "ran" not in done.stdout, done.output  # never a silent run on another device
    assert done.stderr.splitlines()[-1] == ("ValueError: torchdevice: unknown target 'tpu'; expected one of cpu, "
                                            "mps, mps-sim, cuda-sim, cuda (TORCHDEVICE_INSTALL=target=tpu)")
