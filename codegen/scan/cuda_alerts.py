"""CUDA's determinism alerts, read from torch's own CUDA wheel for Linux x86-64 (``catalog/scanned/cuda_alerts.yaml``).

Every place torch's kernels call ``at::Context::alertNotDeterministic(std::string_view const&)`` is a call
instruction in the x86-64 code of ``libtorch_cuda.so`` (CUDA's kernels) or ``libtorch_cpu.so`` (code shared by
every device, such as ``put_``). The disassembly (binutils' ``objdump``) names the function making each call; the
name handed over is a ``std::string_view`` built just before it, from a RIP-relative ``lea`` of the characters and
an immediate ``movq`` of their length, read back from the library's file. ``catalog/overlays/cuda_kernels.yaml``
curates these calls into records (overloads, conditions); the loader checks each record's name and function
against this file.

``python -m codegen.scan.cuda_alerts [WHEEL]`` scans the wheel (default: the one ``make cuda-alerts`` downloads
into ``.cache/wheels``) and writes the file; the build reads only the committed file.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

from codegen.files import CUDA_ALERTS, ROOT, SCANNED_DIR, WHEELS
from codegen.scan.write import scalar
from torchdevice import atomic

OUT = SCANNED_DIR / f"{CUDA_ALERTS}.yaml"
LIBRARIES = ("torch/lib/libtorch_cuda.so", "torch/lib/libtorch_cpu.so")
CALLEE = "alertNotDeterministic"

_HEADER = re.compile(r"^[0-9a-f]+ <(.*)>:$")
_LEA = re.compile(r"\blea\s+-?0x[0-9a-f]+\(%rip\),%\w+\s+# ([0-9a-f]+)")
_LENGTH = re.compile(r"\bmovq?\s+\$0x([0-9a-f]+),")


class ScanError(RuntimeError):
    """The wheel, a library or the disassembler is not what the scanner reads."""


def sections(data: bytes) -> list[tuple[int, int, int]]:
    """An ELF64 little-endian image's sections as ``(address, file offset, size)``, those loaded in memory."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ScanError("not a 64-bit little-endian ELF image")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    out = []
    for i in range(shnum):
        _, kind, _, address, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        if address and kind != 8:  # SHT_NOBITS has no bytes in the file
            out.append((address, offset, size))
    return out


def read(data: bytes, layout: list[tuple[int, int, int]], address: int, length: int) -> str:
    """``length`` bytes at virtual ``address``, as text."""
    for start, offset, size in layout:
        if start <= address < start + size:
            at = offset + address - start
            return data[at:at + length].decode("utf-8", "replace")
    raise ScanError(f"address {address:#x} is in no section of the image")


def function_name(demangled: str) -> str:
    """``at::native::put_(at::Tensor&, ...)`` -> ``at::native::put_``; a leading return type goes."""
    name = demangled.replace("(anonymous namespace)", "{anonymous}").split("(")[0]
    return name.rpartition(" ")[2] if " " in name.split("<")[0] else name


def calls(disassembly: Iterable[str], data: bytes) -> list[tuple[str, str]]:
    """``(function, name)`` of each call of ``alertNotDeterministic`` in ``disassembly`` (objdump's lines)."""
    layout = sections(data)
    found: list[tuple[str, str]] = []
    function, address, length = "", None, None
    for line in disassembly:
        header = _HEADER.match(line)
        if header:
            function, address, length = function_name(header[1]), None, None
            continue
        lea, move = _LEA.search(line), _LENGTH.search(line)
        if lea:
            address = int(lea[1], 16)
        elif move:
            length = int(move[1], 16)
        elif "call" in line and CALLEE in line:
            if address is None or length is None:
                raise ScanError(f"{function}: a call of {CALLEE} without its string before it")
            found.append((function, read(data, layout, address, length)))
    return found


_KEPT = r">:$|lea[[:space:]].*\(%rip\)|movq?[[:space:]]+\$0x|" + CALLEE
"""The lines :func:`calls` reads (function headers, string addresses and lengths, the calls), picked by grep from
objdump's output before Python reads it: a tenth of the lines, and the scan several times as fast."""


def scan_library(path: Path) -> list[tuple[str, str]]:
    for tool in ("objdump", "grep"):
        if shutil.which(tool) is None:
            raise ScanError(f"{tool} is needed to read the libraries' code (objdump: GNU binutils)")
    data = path.read_bytes()
    with subprocess.Popen(["objdump", "-d", "-C", "--no-show-raw-insn", "-j", ".text", str(path)],
                          stdout=subprocess.PIPE) as dump, \
            subprocess.Popen(["grep", "-E", _KEPT], stdin=dump.stdout, stdout=subprocess.PIPE, text=True,
                             errors="replace") as kept:
        if dump.stdout is not None:
            dump.stdout.close()  # grep holds it: objdump sees a closed pipe if grep ends first
        found = calls(kept.stdout or (), data)
    if dump.returncode:
        raise ScanError(f"objdump failed on {path.name} ({dump.returncode})")
    if kept.returncode > 1:  # 1: no line matched
        raise ScanError(f"grep failed on objdump's output of {path.name} ({kept.returncode})")
    return found


def scan(wheel: Path, out: Path = OUT) -> int:
    """Write ``out`` from ``wheel``; the number of calls found."""
    records = []
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as archive:
        for library in LIBRARIES:
            path = Path(archive.extract(library, tmp))
            records += [(library.rpartition("/")[2], function, name) for function, name in scan_library(path)]
            path.unlink()
    records = sorted(set(records))
    atomic.write(out, render(wheel_version(wheel), wheel.name, records))
    return len(records)


def render(version: str, wheel: str, records: list[tuple[str, str, str]]) -> str:
    lines = [f"# @generated by `make cuda-alerts` from {wheel}. Do not edit: the records are in "
             "catalog/overlays/cuda_kernels.yaml.", f"torch_version: {scalar(version)}", f"group: {CUDA_ALERTS}",
             f"wheel: {scalar(wheel)}", "calls:"]
    lines += [f"- {{library: {scalar(lib)}, function: {scalar(fn)}, alert: {scalar(name)}}}"
              for lib, fn, name in records]
    return "\n".join(lines) + "\n"


def wheel_version(wheel: Path) -> str:
    """``torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl`` -> ``2.13.0`` (a CPU build's ``+cpu`` is refused)."""
    parts = wheel.name.split("-")
    if len(parts) < 5 or parts[0] != "torch" or "x86_64" not in parts[-1] or "+cpu" in parts[1]:
        raise ScanError(f"{wheel.name}: not a torch CUDA wheel for Linux x86-64")
    return parts[1].split("+")[0]


def main(argv: list[str]) -> int:
    import torch

    version = torch.__version__.split("+")[0]
    wheels = [Path(argv[0])] if argv else sorted(
        p for p in WHEELS.glob(f"torch-{version}*-manylinux_*x86_64.whl") if "+cpu" not in p.name)
    if not wheels or not wheels[0].is_file():
        print(f"error: no torch {version} CUDA wheel {'at ' + argv[0] if argv else 'in ' + str(WHEELS)}; "
              "`make cuda-alerts` downloads it", file=sys.stderr)
        return 2
    try:
        count = scan(wheels[0])
    except (ScanError, OSError, KeyError, zipfile.BadZipFile) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{OUT.relative_to(ROOT)}: {count} calls from {wheels[0].name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
