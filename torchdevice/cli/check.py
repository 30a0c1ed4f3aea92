"""``torchdevice check PATH... [--target mps|cpu|mps-sim|cuda-sim] [--format text|json|github|sarif]``: what will
not run on the target, read from the sources (nothing is imported or executed).

Without ``--target`` the target is the one ``torchdevice run`` takes on this machine
(:func:`torchdevice.runtime.activation.resolve`: ``$TORCHDEVICE_TARGET``, else MPS where it is, else the simulated
GPU where its compiled backend can be had, else the CPU), said in the closing line; where the machine has real CUDA,
which ``run`` passes through untouched, the question left is whether the code runs elsewhere: the target is ``mps``.
"""

from __future__ import annotations

import argparse
import os
import sys

EPILOG = """\
blockers (exit status 1): imports of CUDA-only packages without a stand-in (cupy, pycuda, triton,
  tensorrt, nvidia.dali, apex beyond amp/normalization/optimizers...), CUDA extension builds
  (CUDAExtension; CppExtension, cpp_extension.load/load_inline, setuptools' Extension given .cu sources,
  cuda_sources=, extra_cuda_cflags= or with_cuda=True), torch.cuda APIs the runtime refuses (CUDA graphs,
  cuBLAS handles, raw pointers). The same under try/except or an `if` not about CUDA: warnings.
warnings and info: packages with a stand-in, torch.cuda calls the runtime emulates, device strings,
  ops the target has no kernel for (they fall back to MLX or the CPU).

target: without --target, the one `torchdevice run` takes on this machine ($TORCHDEVICE_TARGET, else mps on a
  Mac, else cuda-sim, or cpu where the simulated GPU's compiled backend cannot be built; mps where CUDA is real);
  the closing line says which. --target mps: will it run on a Mac.

formats (--format): text (linter lines and a grouped summary), json, github (GitHub Actions annotations:
  ::error/::warning/::notice file=...,line=...,col=...; info only with --show-info), sarif (SARIF 2.1.0,
  every finding, for code scanning). Exit statuses are the same in every format.

configuration: [tool.torchdevice] in the pyproject.toml above the given paths (exclude, max-file-size).

exit status:
  0  nothing blocks
  1  something blocks, or a file could not be read or parsed
  2  bad options or configuration, or a path that does not exist
"""


def configure(parser: argparse.ArgumentParser) -> None:
    from torchdevice.records.check import TARGETS
    from torchdevice.source.formats import FORMATS

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="files, or directories to search for *.py and *.ipynb files")
    parser.add_argument("--target", choices=TARGETS, default=None,
                        help="where the program will run (default: the target `torchdevice run` takes on this "
                             "machine; mps: a Mac; mps-sim, cuda-sim: the simulated Mac, the simulated NVIDIA GPU)")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="text (default), json, github (GitHub Actions annotations) or sarif (SARIF 2.1.0)")
    parser.add_argument("--json", dest="format", action="store_const", const="json", help="the same as --format json")
    parser.add_argument("--show-info", action="store_true",
                        help="print info findings line by line too (text, github; json and sarif hold them always)")
    parser.add_argument("--config", metavar="FILE", help="a pyproject.toml to read [tool.torchdevice] from")
    parser.add_argument("--exclude", action="append", default=None, metavar="GLOB",
                        help="skip files and directories whose name or relative path matches (repeatable)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="parallel processes (default: the number of CPUs)")


def run(args: argparse.Namespace) -> int:
    import time

    from torchdevice.check import output
    from torchdevice.check.scan import check_files
    from torchdevice.source import config
    from torchdevice.source.files import discover

    start = time.perf_counter()
    missing = [p for p in args.paths if not os.path.exists(p)]
    if missing:
        print(f"torchdevice check: error: {missing[0]}: no such file or directory", file=sys.stderr)
        return 2
    target, why = args.target, ""
    if target is None:
        try:
            target, why = machine_target()
        except (ValueError, RuntimeError) as exc:
            print(f"torchdevice check: error: {str(exc).removeprefix('torchdevice: ')}", file=sys.stderr)
            return 2
    settings = config.settings(args.paths, args.config, "torchdevice check")
    if settings is None:
        return 2
    found = list(discover(args.paths, args.exclude if args.exclude is not None else settings.exclude))
    max_bytes = settings.max_file_size or 1_000_000
    from torchdevice.source.progress import Progress

    progress = Progress("check", "checked")
    try:
        reports = check_files(found, target, max(1, args.jobs), max_bytes, progress)
    except KeyboardInterrupt:
        progress.clear()
        print("torchdevice check: interrupted", file=sys.stderr)
        return 130
    progress.clear()
    show = ("blocker", "warning", "info") if args.show_info else ("blocker", "warning")
    if args.format == "json":
        print(output.as_json(reports, target))
    elif args.format == "sarif":
        print(output.as_sarif(reports, target))
    elif args.format == "github":
        sys.stdout.write(output.as_github(reports, show))
        print(output.summary(reports, target, time.perf_counter() - start, why), file=sys.stderr)
    else:
        output.print_lines(reports, sys.stdout, sys.stderr, show)
        print(output.summary(reports, target, time.perf_counter() - start, why))
    return output.exit_status(reports)


def machine_target() -> tuple[str, str]:
    """The target ``torchdevice run`` takes on this machine, as a target of the check, and why (see the module's
    docstring); raises as ``run`` does where ``$TORCHDEVICE_TARGET`` names no target this machine has."""
    from torchdevice.records.check import TARGETS
    from torchdevice.runtime.activation import resolve

    chosen = resolve()
    given = os.environ.get("TORCHDEVICE_TARGET")
    source = f"TORCHDEVICE_TARGET={given}" if given else "this machine's default"
    if chosen in TARGETS:
        return chosen, f"{source}, as torchdevice run; --target mps: a Mac"
    return "mps", "real CUDA here, which torchdevice run passes through: checked for a Mac; --target to choose"
