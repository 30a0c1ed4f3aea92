"""``torchdevice check PATH... [--target mps|cpu|mps-sim] [--json]``: what will not run on the target, read
from the sources (nothing is imported or executed)."""

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

configuration: [tool.torchdevice] in the pyproject.toml above the given paths (exclude, max-file-size).

exit status:
  0  nothing blocks
  1  something blocks, or a file could not be read or parsed
  2  bad options or configuration, or a path that does not exist
"""


def configure(parser: argparse.ArgumentParser) -> None:
    from torchdevice.records.check import TARGETS

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="files, or directories to search for *.py and *.ipynb files")
    parser.add_argument("--target", choices=TARGETS, default="mps",
                        help="where the program will run (default: mps; mps-sim, cuda-sim: the simulated Mac, the "
                             "simulated NVIDIA GPU)")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument("--show-info", action="store_true", help="print info findings line by line too")
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
    settings = config.settings(args.paths, args.config, "torchdevice check")
    if settings is None:
        return 2
    found = list(discover(args.paths, args.exclude if args.exclude is not None else settings.exclude))
    max_bytes = settings.max_file_size or 1_000_000
    try:
        reports = check_files(found, args.target, max(1, args.jobs), max_bytes)
    except KeyboardInterrupt:
        print("torchdevice check: interrupted", file=sys.stderr)
        return 130
    if args.json:
        print(output.as_json(reports, args.target))
    else:
        show = ("blocker", "warning", "info") if args.show_info else ("blocker", "warning")
        output.print_lines(reports, sys.stdout, sys.stderr, show)
        print(output.summary(reports, args.target, time.perf_counter() - start))
    return output.exit_status(reports)
