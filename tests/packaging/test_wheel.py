"""The built wheel is the product: installed (not editable) into a fresh virtual environment, with no
source tree on the path, every command and the runtime with its fallback engine work.

The fresh environment gets its dependencies (torch, libcst, mlx) by a path entry to this test
environment's site-packages, which installs them without copying a gigabyte of torch: ``.pth`` files
there (the editable install of this checkout among them) are not processed for a mere path entry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from catalog_release import unknown_release

ROOT = Path(__file__).resolve().parents[2]

SPAWNING_PROGRAM = """\
import multiprocessing as mp
import torch


def child(queue):
    queue.put((torch.cuda.is_available(), torch.ones(1, device="cuda").device.type))


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    process = ctx.Process(target=child, args=(queue,))
    process.start()
    print(*queue.get(timeout=120))
    process.join()
"""

CUDA_PROGRAM = """\
import torch
x = torch.ones(2, 3, device="cuda").cuda()
torch.cuda.synchronize()
print(x.device.type, torch.cuda.is_available(), torch.cuda.device_count())
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
                    str(ROOT)], check=True, capture_output=True, timeout=300)
    (built,) = out.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed; returns its bin directory."""
    home = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False).create(home)
    bin_dir = home / ("Scripts" if os.name == "nt" else "bin")
    python = bin_dir / "python"
    site = Path(subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                        text=True).strip())
    (site / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True, capture_output=True, timeout=300)
    return bin_dir


def run(bin_dir: Path, *args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHDEVICE_", "PYTHON"))}
    env.update(OMP_NUM_THREADS="1", TORCHDEVICE_CACHE_DIR=str(cwd / "cache"), TORCHDEVICE_TARGET="cpu")
    return subprocess.run([str(bin_dir / args[0]), *args[1:]], cwd=cwd, env=env, input=stdin, capture_output=True,
                          text=True, timeout=300)


def test_wheel_holds_every_subpackage_and_data_file_and_no_dev_tool(wheel: Path):
    names = zipfile.ZipFile(wheel).namelist()
    packages = {n.rpartition("/")[0] for n in names if n.endswith("/__init__.py")}
    in_tree = {p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "torchdevice").rglob("__init__.py")}
    assert in_tree <= packages
    assert {"torchdevice/py.typed", "torchdevice_generated/py.typed", "torchdevice_generated/catalog.jsonl",
            "torchdevice.pth", "_torchdevice_startup.py",
            "torchdevice/simulated/backend.cpp"} <= set(names)  # the default target's backend, built at first use
    assert not [n for n in names if n.split("/")[0] in ("codegen", "tests", "catalog", "bench", "examples")]
    # the toolchain that scans a torch newer than the newest known, beside the runtime (not a top-level package)
    toolchain = {n for n in names if n.startswith("torchdevice/_toolchain/")}
    assert {"torchdevice/_toolchain/codegen/unknown.py", "torchdevice/_toolchain/catalog/scanned/torch.yaml",
            "torchdevice/_toolchain/codegen/templates/torchdevice_generated/releases.py.j2"} <= toolchain
    assert not [n for n in toolchain if "__pycache__" in n]
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    headers = Parser().parsestr(zipfile.ZipFile(wheel).read(metadata).decode())
    assert headers["Name"] == "torchdevice-toolkit"
    assert "torch>=2.10" in headers.get_all("Requires-Dist")  # any release from 2.10: the user's torch is kept


@pytest.mark.processes
def test_installed_commands_work_without_the_source_tree(installed: Path, tmp_path: Path):
    from importlib import metadata

    version = run(installed, "torchdevice", "--version", cwd=tmp_path)
    assert version.stdout.strip() == f"torchdevice {metadata.version('torchdevice-toolkit')}", version.stderr

    program = tmp_path / "train.py"
    program.write_text(CUDA_PROGRAM)
    ran = run(installed, "torchdevice", "run", "--report", "report.json", "train.py", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["cpu", "True", "1"]
    assert json.loads((tmp_path / "report.json").read_text())["processes"][0]["role"] == "main"
    assert "torchdevice report: 1 process" in ran.stderr

    checked = run(installed, "torchdevice", "check", "--json", "train.py", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert {f["name"] for f in json.loads(checked.stdout)["findings"]} >= {"'cuda'", ".cuda()"}

    diff = run(installed, "torchdevice", "rewrite", "--diff", "train.py", cwd=tmp_path)
    assert diff.returncode == 1, diff.stderr
    assert '-x = torch.ones(2, 3, device="cuda").cuda()' in diff.stdout

    stats = run(installed, "torchdevice", "catalog", "stats", "--json", cwd=tmp_path)
    assert stats.returncode == 0, stats.stderr
    generated = (ROOT / "generated" / "torchdevice_generated" / "catalog.jsonl").read_text().count("\n") - 1
    assert json.loads(stats.stdout)["entries"] == generated

    doctor = run(installed, "torchdevice", "doctor", "--json", cwd=tmp_path)
    assert doctor.returncode == 0, doctor.stderr
    assert json.loads(doctor.stdout)["target"] == "cpu"


@pytest.mark.processes
def test_the_installed_wheel_scans_a_release_it_does_not_know_with_the_toolchain_it_carries(installed: Path,
                                                                                            tmp_path: Path):
    env, newest = unknown_release(tmp_path / "unknown")
    program = tmp_path / "train.py"
    program.write_text(CUDA_PROGRAM)
    command = [str(installed / "torchdevice"), "run", "train.py"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env, "TORCHDEVICE_LOG": "info", "TORCHDEVICE_TARGET": "cpu"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["cpu", "True", "1"]
    assert "scanning its own files into" in done.stderr, done.stderr
    assert (f"its entry points, kernel tables and autocast lists are its own (scanned at first use into "
            f"{tmp_path / 'unknown' / 'cache' / 'releases'}") in done.stderr, done.stderr
    assert f"MPS's messages and CUDA's alerts are torch {newest}'s" in done.stderr


@pytest.mark.processes
def test_installed_runtime_loads_its_own_files_and_runs_the_fallback_engine(installed: Path, tmp_path: Path):
    probe = """\
import sys, torch, torchdevice
torchdevice.install("cpu", prefer_mlx=True)
torch.cumsum(torch.arange(6.0), 0)
loaded = {name: getattr(module, "__file__", "") or "" for name, module in sys.modules.items()
          if name.split(".")[0] in ("torchdevice", "torchdevice_generated", "codegen")}
assert not [n for n in loaded if n.split(".")[0] == "codegen"], loaded
assert all("site-packages" in f for f in loaded.values() if f), loaded
assert "torchdevice.fallback" in loaded and "torchdevice.distributed" in loaded
print(torchdevice.report()["fallbacks"])
"""
    done = run(installed, "python", "-c", probe, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "'aten::cumsum': {'mlx': 1}" in done.stdout


@pytest.mark.processes
def test_installed_start_up_hook_follows_the_program_into_a_spawned_child(installed: Path, tmp_path: Path):
    program = tmp_path / "spawns.py"
    program.write_text(SPAWNING_PROGRAM)
    done = run(installed, "torchdevice", "run", "spawns.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "cpu"]


@pytest.mark.processes
@pytest.mark.parametrize("release", [None, "2.10.0", "2.15.0"])
def test_installing_the_wheel_keeps_the_users_torch_and_torchvision(wheel: Path, tmp_path: Path, release: str | None):
    """pip's own resolver, asked to install the wheel beside this environment's torch with its torchvision pinned as
    the user has it, or beside a torch of another release (its metadata first on the path, as a user's install is):
    it installs the wheel and nothing else."""
    from importlib import metadata

    home = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(home)
    python = home / ("Scripts" if os.name == "nt" else "bin") / "python"
    site = Path(subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                        text=True).strip())
    (site / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    pinned = []
    if release is None and _installed("torchvision"):
        pinned = [f"torchvision=={metadata.version('torchvision')}"]  # which pins this torch exactly
    elif release is not None:
        user = site / f"torch-{release}.dist-info"  # the user's torch, found before this environment's
        user.mkdir()
        (user / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {release}\n")
        (user / "INSTALLER").write_text("pip\n")
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--dry-run", "--no-index",
                           "--report", str(report), str(wheel), *pinned],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PIP_CONFIG_FILE": os.devnull})  # no machine-wide pins
    assert done.returncode == 0, done.stderr
    installs = [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]]
    assert installs == ["torchdevice-toolkit"], installs


def _installed(distribution: str) -> bool:
    from importlib import metadata

    try:
        metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True
