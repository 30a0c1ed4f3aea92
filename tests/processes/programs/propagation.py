"""Installs torchdevice from Python, starts a Python process, uninstalls, starts another; prints whether
each child had the start-up hook armed (it would install torchdevice when importing torch)."""

import subprocess
import sys

import torchdevice

PROBE = "import sys; print(any(type(f).__name__ == 'TorchImport' for f in sys.meta_path))"


def child_armed() -> str:
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout.strip()


torchdevice.install("cpu")
print("installed", child_armed())
torchdevice.uninstall()
print("uninstalled", child_armed())
