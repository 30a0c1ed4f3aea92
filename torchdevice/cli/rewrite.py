"""``torchdevice rewrite PATH... [--check | --diff | --write] [--select CODES] [--ignore CODES]
[--format text|json|github|sarif] ...``."""

from __future__ import annotations

import argparse
import os
import sys

EPILOG = """\
what changes:
  "cuda", "cuda:N", torch.device("cuda"), .cuda(), .to(local_rank)  -> the accelerator present (its
      device N), the CPU where there is none, named once: the program's own device where it has one
      (device = torch.device("cuda" if torch.cuda.is_available() else "cpu") becomes the one-line
      idiom torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")),
      else a helper _DEVICE = <idiom> after the imports. A value the program keeps stays a string:
      device = "cuda" becomes device = _DEVICE.type ("cuda", "mps", "cpu").
  torch.cuda.is_available/synchronize/memory_allocated/...  -> torch.accelerator equivalents,
      guarded (if torch.accelerator.is_available(): ...) unless the code already runs only with one
  torch.cuda.amp.autocast/GradScaler  -> torch.amp with the accelerator's type
  torch.cuda.Event/Stream, with torch.cuda.stream(s) -> torch.Event/Stream, with s
  "nccl" -> torch.distributed.get_default_backend_for_device(<accelerator>)
  DistributedDataParallel(device_ids=[i], output_device=i)  -> kept on CUDA, None elsewhere
  mp.spawn(nprocs=<number of GPUs>)  -> at least one process
  Left as is and reported as PATH:LINE:COLUMN: CODE why: CUDA requirements, version gates, tests
  against "cuda", CUDA-only settings and APIs, seeds of CUDA alone, mixed-precision choices.

rules (codes for --select, --ignore, [tool.torchdevice] and `# torchdevice: ignore[CODE]`):
{rules}

formats (--format): text (diffs on stdout with --diff; what changed and the reports on stderr), json (one
  document on stdout: per file its status, sites, changes, reports, and its diff with --diff), github (GitHub
  Actions annotations: each change an ::error, or a ::notice once written, each report a ::warning), sarif
  (SARIF 2.1.0). The summary stays on stderr; exit statuses are the same in every format.

configuration: [tool.torchdevice] in the pyproject.toml above the given paths (select, ignore,
  exclude, max-file-size, timeout); options given here override it.

exit status:
  0    nothing to change (or, with --write, all changes written)
  1    some files would change (default, --check, --diff)
  2    bad options or configuration
  123  some files could not be read, decoded, parsed or written; the others were processed
"""


def configure(parser: argparse.ArgumentParser) -> None:
    from torchdevice_generated.rewrite_rules import RULES

    from torchdevice.source.formats import FORMATS

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG.format(rules="\n".join(f"  {r.code}  {r.name}" for r in RULES))
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="files, or directories to search for *.py and *.ipynb files")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", dest="mode", action="store_const", const="check",
                      help="report the files that would change (the default)")
    mode.add_argument("--diff", dest="mode", action="store_const", const="diff",
                      help="print a unified diff of the changes")
    mode.add_argument("--write", dest="mode", action="store_const", const="write", help="rewrite files in place")
    parser.set_defaults(mode="check")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="text (default), json, github (GitHub Actions annotations) or sarif (SARIF 2.1.0)")
    parser.add_argument("--select", metavar="CODES", help="comma-separated rule codes or prefixes to apply (TD1,TD205)")
    parser.add_argument("--ignore", metavar="CODES", help="comma-separated rule codes or prefixes not to apply")
    parser.add_argument("--config", metavar="FILE", help="a pyproject.toml to read [tool.torchdevice] from")
    parser.add_argument("-j", "--jobs", type=_positive(int), default=os.cpu_count() or 1, metavar="N",
                        help="parallel processes (default: the number of CPUs)")
    parser.add_argument("--exclude", action="append", default=None, metavar="GLOB",
                        help="skip files and directories whose name or relative path matches (repeatable); "
                             "virtual environments, .git, __pycache__ and site-packages are always skipped")
    parser.add_argument("--max-file-size", type=_positive(int), metavar="BYTES",
                        help="set aside larger files unread (default: 1000000)")
    parser.add_argument("--timeout", type=_positive(float), metavar="SECONDS",
                        help="give up a file still being rewritten after this long (default: 60)")


def run(args: argparse.Namespace) -> int:
    import time

    from torchdevice.rewrite import report
    from torchdevice.rewrite.jobs import Options, rewrite_files
    from torchdevice.rewrite.ruleset import default
    from torchdevice.rewrite.selection import Selection, SelectionError, split_codes
    from torchdevice.source import config
    from torchdevice.source.files import discover

    start = time.perf_counter()
    settings = config.settings(args.paths, args.config, "torchdevice rewrite")
    if settings is None:
        return 2
    try:
        selection = Selection.parse(
            split_codes(args.select) if args.select is not None else settings.select,
            split_codes(args.ignore) if args.ignore is not None else settings.ignore,
            default().by_code,
        )
    except SelectionError as exc:
        given = args.select is not None or args.ignore is not None
        print(f"torchdevice rewrite: error: {'--' if given else f'{settings.path}: '}{exc}", file=sys.stderr)
        return 2
    options = Options(
        mode=args.mode,
        selection=selection,
        max_bytes=args.max_file_size or settings.max_file_size or Options.max_bytes,
        seconds=args.timeout or settings.timeout or Options.seconds,
    )
    found = list(discover(args.paths, args.exclude if args.exclude is not None else settings.exclude))
    from torchdevice.source.progress import Progress

    progress = Progress("rewrite", "parsed")
    try:
        results = rewrite_files(found, options, args.jobs, progress)
    except KeyboardInterrupt:
        progress.clear()
        print("torchdevice rewrite: interrupted; files written so far are complete, the others untouched",
              file=sys.stderr)
        return 130
    progress.clear()
    if args.format == "json":
        print(report.as_json(results, args.mode))
    elif args.format == "sarif":
        print(report.as_sarif(results, args.mode))
    elif args.format == "github":
        for r in results:
            sys.stdout.write(r.diff)
        sys.stdout.write(report.as_github(results, args.mode))
    else:
        report.print_results(results, args.mode, sys.stdout, sys.stderr)
    print(report.summary(results, args.mode, time.perf_counter() - start), file=sys.stderr)
    return report.exit_status(results, args.mode)


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse
