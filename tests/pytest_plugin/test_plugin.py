"""``pytest --torchdevice``: real pytest runs of a small project written as GPU projects write their tests (a
conftest that asks ``torch.cuda.is_available()`` at import, ``skipif(not cuda)``, a model moved with ``.cuda()``
checked against the CPU's numbers, a test marked ``torchdevice_native``), natively and with the plugin: alone, with
pytest-xdist workers, from the ini file; its report and terminal summary; bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes

CONFTEST = '''
import json, os

import pytest
import torch

CUDA = torch.cuda.is_available()  # at import, as projects do: the plugin installed before this file


@pytest.fixture(autouse=True)
def seen(request):
    """Each test's view of CUDA, one JSON line per process in seen/."""
    yield
    os.makedirs("seen", exist_ok=True)
    with open(f"seen/{os.getpid()}.jsonl", "a") as out:
        out.write(json.dumps({"test": request.node.name, "cuda": torch.cuda.is_available(),
                              "worker": os.environ.get("PYTEST_XDIST_WORKER"), "conftest": CUDA,
                              "devices": torch.cuda.device_count() if torch.cuda.is_available() else 0}) + "\\n")


@pytest.fixture
def device():
    return torch.device("cuda" if CUDA else "cpu")
'''

TESTS = '''
import pytest
import torch

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


def model_and_batch():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)), torch.randn(32, 6)


def test_on_the_cpu():
    assert torch.arange(4).sum().item() == 6


def test_on_the_device_fixture(device):
    assert (torch.ones(3, device=device) * 2).sum().item() == 6


@needs_cuda
def test_model_on_the_gpu_gives_the_cpus_numbers():
    model, batch = model_and_batch()
    expected = model(batch)
    got = model.cuda()(batch.cuda())
    assert got.is_cuda and next(model.parameters()).is_cuda
    torch.testing.assert_close(got.cpu(), expected)


@needs_cuda
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_memory_is_counted(n):
    before = torch.cuda.memory_allocated()
    block = torch.empty(n * 1024, device="cuda")
    assert torch.cuda.memory_allocated() >= before + 4 * n * 1024
    del block


@needs_cuda
def test_a_training_step_on_the_gpu():
    model, batch = model_and_batch()
    model.cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(batch.cuda()).square().mean()
    loss.backward()
    optimizer.step()
    torch.cuda.synchronize()
    assert torch.isfinite(loss).item()


@pytest.mark.torchdevice_native
def test_native():
    assert not torch.cuda.is_available()
    with pytest.raises((AssertionError, RuntimeError)):
        torch.zeros(1, device="cuda")
'''
CUDA_TESTS, ALL_TESTS = 6, 9  # of TESTS: the tests that need a GPU (parametrized ones counted), and all of them

ORDER = '''
import pytest
import torch

DRAWN = []


def test_1_picks_the_second_gpu():
    torch.cuda.set_device(1)
    torch.cuda.manual_seed(7)
    DRAWN.append(torch.rand(3, device="cuda").cpu())
    assert torch.zeros(1, device="cuda").device == torch.device("cuda", 1)


@pytest.mark.torchdevice_native
def test_2_native():
    assert not torch.cuda.is_available()


def test_3_still_on_the_second_gpu_its_generator_where_it_was():
    assert torch.cuda.is_available() and torch.cuda.current_device() == 1
    after = torch.rand(3, device="cuda").cpu()
    torch.cuda.manual_seed(7)
    assert torch.equal(torch.rand(3, device="cuda").cpu(), DRAWN[0])
    assert torch.equal(torch.rand(3, device="cuda").cpu(), after)  # the second draw after the seed
'''

FALLBACK = '''
import torch
import torch.nn.functional as F


def test_a_pooling_with_no_mps_kernel_falls_back_with_the_cpus_numbers():
    x = torch.randn(1, 2, 4, 4, 4)
    got = F.adaptive_max_pool3d(x.cuda(), 2)
    assert got.device.type == "mps"
    torch.testing.assert_close(got.cpu(), F.adaptive_max_pool3d(x, 2))
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_model.py").write_text(TESTS)
    return tmp_path


def pytest_run(project: Path, *args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """``python [PREFIX] -m pytest ARGS`` in ``project``, writing ``junit.xml``; the environment without this suite's
    torchdevice settings or xdist worker (the run is a session of its own), one thread per process."""
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("TORCHDEVICE_", "PYTEST_")) or k == "TORCHDEVICE_BUILD_DIR"}
    environment["OMP_NUM_THREADS"] = "1"
    command = [sys.executable, *prefix, "-m", "pytest", "-p", "no:cacheprovider", "--junitxml=junit.xml", *args]
    return subprocess.run(command, cwd=project, env=environment, capture_output=True, text=True, timeout=300)


def outcomes(project: Path) -> dict[str, str]:
    """``{test name: passed|failed|skipped}`` from the run's JUnit XML."""
    found = {}
    for case in ET.parse(project / "junit.xml").iter("testcase"):
        kinds = {child.tag for child in case}
        found[str(case.get("name"))] = "failed" if kinds & {"failure", "error"} else \
            "skipped" if "skipped" in kinds else "passed"
    return found


def counts(project: Path) -> dict[str, int]:
    found = list(outcomes(project).values())
    return {kind: found.count(kind) for kind in ("passed", "failed", "skipped")}


def seen(project: Path) -> list[dict]:
    """What each test saw (the conftest's ``seen`` fixture), the lines of every process."""
    lines = [line for path in sorted((project / "seen").glob("*.jsonl")) for line in path.read_text().splitlines()]
    return [json.loads(line) for line in lines]


def summary_line(done: subprocess.CompletedProcess) -> str:
    return done.stdout.strip().splitlines()[-1]


def test_natively_the_gpu_tests_skip_and_with_the_plugin_they_run_and_pass(project):
    native = pytest_run(project)
    assert native.returncode == 0, native.stdout + native.stderr
    assert counts(project) == {"passed": ALL_TESTS - CUDA_TESTS, "failed": 0, "skipped": CUDA_TESTS}
    assert "torchdevice:" not in native.stdout and "torchdevice report" not in native.stdout  # off unless asked
    assert {r["cuda"] for r in seen(project)} == {False}
    (project / "seen").rename(project / "seen-native")

    done = pytest_run(project, "--torchdevice=cuda-sim")
    assert done.returncode == 0, done.stdout + done.stderr
    assert counts(project) == {"passed": ALL_TESTS, "failed": 0, "skipped": 0}
    assert re.search(rf"\b{ALL_TESTS} passed\b", summary_line(done))
    views = {r["test"]: r for r in seen(project)}
    assert all(r["conftest"] for r in views.values())  # the conftest was imported with the runtime installed
    assert {name for name, r in views.items() if not r["cuda"]} == {"test_native"}  # and only it ran without
    assert '"cuda" is cuda-sim (Tesla T4), 1 device' in done.stdout
    section = done.stdout.split(" torchdevice ", 1)[1]
    assert "torchdevice report: 1 process," in section and "target cuda-sim" in section
    redirected = int(re.search(r"redirected: ([\d,]+) calls", section)[1].replace(",", ""))
    assert redirected >= 4 + 2  # the four empty() blocks, and the model and batch moved (at least)
    assert "fallbacks: none" in section


def test_xdist_workers_each_install_and_report_into_the_sessions_report(project):
    done = pytest_run(project, "--torchdevice=cuda-sim", "-n", "2", "--torchdevice-report", "report.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert counts(project) == {"passed": ALL_TESTS, "failed": 0, "skipped": 0}
    views = seen(project)
    assert {r["worker"] for r in views} == {"gw0", "gw1"}  # both workers ran tests, every test saw what it should
    assert all(r["conftest"] and r["cuda"] == (r["test"] != "test_native") for r in views), views
    document = json.loads((project / "report.json").read_text())
    roles = sorted(p["role"] for p in document["processes"])
    assert roles == ["main", "pytest-xdist worker gw0", "pytest-xdist worker gw1"]
    assert document["target"] == "cuda-sim"
    total = sum(sum(routes.values()) for routes in document["redirects"].values())
    workers = sum(sum(routes.values()) for p in document["processes"] for routes in p["redirects"].values()
                  if p["role"] != "main")
    assert total == workers > 0  # the tests' calls, all made in the workers
    assert document["redirects"]["torch.empty"] == {"cuda->cuda-sim": 4}
    assert f"redirected: {total:,} calls" in done.stdout and "torchdevice report: 3 processes" in done.stdout
    assert f"written to {project / 'report.json'}" in done.stdout


def test_the_ini_file_turns_it_on_with_its_options_and_o_turns_it_off(project):
    (project / "test_order.py").write_text(ORDER)
    (project / "pytest.ini").write_text("[pytest]\ntorchdevice = cuda-sim\ntorchdevice_devices = 2\n"
                                        "torchdevice_gpu = A100-40GB\ntorchdevice_report = out/report.html\n")
    (project / "out").mkdir()
    done = pytest_run(project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert counts(project) == {"passed": ALL_TESTS + 3, "failed": 0, "skipped": 0}
    assert '"cuda" is cuda-sim (NVIDIA A100-SXM4-40GB), 2 devices' in done.stdout, done.stdout
    assert {r["devices"] for r in seen(project) if r["cuda"]} == {2}
    page = (project / "out" / "report.html").read_text()
    document = json.loads(re.search(r'<script type="application/json" id="torchdevice-report">(.*?)</script>',
                                    page, re.S)[1])
    assert document["target"] == "cuda-sim" and document["processes"][0]["role"] == "main"
    assert document["redirects"]["torch.empty"]["cuda->cuda-sim"] == 4

    off = pytest_run(project, "-o", "torchdevice=off", "test_model.py")
    assert off.returncode == 0, off.stdout + off.stderr
    assert counts(project) == {"passed": ALL_TESTS - CUDA_TESTS, "failed": 0, "skipped": CUDA_TESTS}


def test_fallbacks_are_in_the_summary_and_the_report(project):
    (project / "test_model.py").write_text(FALLBACK)
    done = pytest_run(project, "--torchdevice=mps-sim", "--torchdevice-report=report.json")
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads((project / "report.json").read_text())
    rows = {r["op"]: r for r in document["fallbacks"]}
    assert rows["aten::adaptive_max_pool3d"]["count"] == 1 and rows["aten::adaptive_max_pool3d"]["route"] == "cpu"
    calls = sum(r["count"] for r in document["fallbacks"])
    assert f"fallbacks: {calls:,} calls" in done.stdout
    assert re.search(r"aten::adaptive_max_pool3d  cpu  1 calls  [\d.]+ s", done.stdout)


def test_the_marker_also_holds_under_torchdevice_run(project):
    done = pytest_run(project, prefix=("-m", "torchdevice", "run", "--target", "cuda-sim"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert counts(project) == {"passed": ALL_TESTS, "failed": 0, "skipped": 0}
    assert {r["test"] for r in seen(project) if not r["cuda"]} == {"test_native"}


@pytest.mark.parametrize(("args", "message"), [
    (("--torchdevice=tpu",), "torchdevice: unknown target 'tpu'; expected one of cpu, mps, mps-sim, cuda-sim, cuda"),
    (("--torchdevice", "test_model.py"), "torchdevice: unknown target 'test_model.py'"),
    (("--torchdevice=cpu", "--torchdevice-gpu", "T4"), "--torchdevice-gpu and --torchdevice-gpu-memory are for the "
                                                      "cuda-sim target, not cpu"),
    (("--torchdevice=cuda-sim", "--torchdevice-devices", "none"), "--torchdevice-devices must be a positive whole "
                                                                  "number, not 'none'"),
    (("--torchdevice=cuda-sim", "--torchdevice-gpu", "X1"), "torchdevice: unknown GPU 'X1'"),
])
def test_bad_input_is_a_usage_error_of_one_line(project, args, message):
    done = pytest_run(project, *args)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("ERROR: ") and message in errors[0], done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_the_marker_is_registered(project):
    done = pytest_run(project, "--markers")
    assert done.returncode == 0 and "@pytest.mark.torchdevice_native: run this test with torchdevice uninstalled" \
        in done.stdout, done.stdout + done.stderr


def test_the_ci_recipes_test_step_runs_the_cuda_tests_and_writes_the_page(project):
    """``examples/ci/github-actions.yml``'s test step, as the workflow runs it, in a project's folder."""
    import shlex

    import yaml

    workflow = yaml.safe_load((Path(__file__).parents[2] / "examples/ci/github-actions.yml").read_text())
    (step,) = [s for s in workflow["jobs"]["cuda-sim"]["steps"] if s.get("name") == "test"]
    program, *args = shlex.split(step["run"])
    assert program == "pytest"
    done = pytest_run(project, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert counts(project) == {"passed": ALL_TESTS, "failed": 0, "skipped": 0}
    (upload,) = [s for s in workflow["jobs"]["cuda-sim"]["steps"] if "upload-artifact" in s.get("uses", "")]
    assert "<html" in (project / upload["with"]["path"]).read_text().lower()
