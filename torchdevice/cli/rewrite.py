"""``torchdevice rewrite PATH... [--check | --diff | --write] [--jobs N] [--exclude GLOB]``."""

from __future__ import annotations

import argparse
import os
import sys

EPILOG = """\
what changes:
  "cuda", "cuda:N", torch.device("cuda"), .cuda()  -> the accelerator present, CPU where there is none,
      through one helper added per file:
      _DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
      A value the program keeps stays of its type: device = "cuda" becomes device = _DEVICE.type
      (a string: "cuda", "mps", "cpu"), so tests such as "cuda" in device keep working; such
      tests are left as is (a CUDA-only branch stays CUDA-only) and reported.
  torch.cuda.is_available/synchronize/memory_allocated/...  -> torch.accelerator equivalents,
      guarded where they need an accelerator
  torch.cuda.amp.autocast/GradScaler  -> torch.amp with the accelerator's type
  torch.cuda.Event/Stream -> torch.Event/Stream;  torch.cuda.manual_seed(_all) -> torch.manual_seed
  "nccl" -> torch.distributed.get_default_backend_for_device(_DEVICE)
  DistributedDataParallel(m, device_ids=[i], output_device=i)  -> device_ids=[i] if
      _DEVICE.type == "cuda" else None, the same for output_device: DDP rejects them off CUDA
  What cannot be rewritten safely is left as is and reported as PATH:LINE: message.

exit status:
  0    nothing to change (or, with --write, all changes written)
  1    some files would change (default, --check, --diff)
  123  some files could not be read, decoded as UTF-8 or parsed; the others were processed
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files, or directories to search for *.py files")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", dest="mode", action="store_const", const="check",
                      help="report the files that would change (the default)")
    mode.add_argument("--diff", dest="mode", action="store_const", const="diff",
                      help="print a unified diff of the changes")
    mode.add_argument("--write", dest="mode", action="store_const", const="write", help="rewrite files in place")
    parser.set_defaults(mode="check")
    parser.add_argument("-j", "--jobs", type=_positive, default=os.cpu_count() or 1, metavar="N",
                        help="parallel processes (default: the number of CPUs)")
    parser.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                        help="skip files and directories whose name or relative path matches (repeatable); "
                             "virtual environments, .git, __pycache__ and site-packages are always skipped")


def run(args: argparse.Namespace) -> int:
    import time

    from torchdevice.rewrite import report
    from torchdevice.rewrite.files import discover
    from torchdevice.rewrite.jobs import rewrite_files

    start = time.perf_counter()
    paths = list(discover(args.paths, args.exclude))
    progress = report.Progress(sys.stderr)
    results = rewrite_files(paths, args.mode, args.jobs, progress)
    progress.clear()
    report.print_results(results, args.mode, sys.stdout, sys.stderr)
    print(report.summary(results, args.mode, time.perf_counter() - start), file=sys.stderr)
    return report.exit_status(results, args.mode)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value
